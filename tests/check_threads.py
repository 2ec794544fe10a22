#!/usr/bin/env python3
"""check_threads.py - the threads the comments name against the threads
tallyd has.

server/tallyd.c's header names every kind of thread tallyd runs, once,
in its "Threading model" list ("Eight kinds of threads, ..."). This checks
that the list's count word matches its entries, and that every comment in
server/ (a "Threading:" paragraph or any other) names threads only from
that list: each "... thread(s)" must end with a whole listed name ("loop
thread", "gRPC loop threads", "store's thread", ...; "gRPC thread" is not
one), or be a role that names no thread of its own: a count or a pronoun
("any thread", "one thread", "each thread"), or whose thread ("the
door's thread", "that loop's thread", "the caller's thread"). A name that
is neither ("the main thread", "the writer thread") fails, with the file
and the line. Fails (exit 1, one line per problem).

    python3 tests/check_threads.py              check the tree
    python3 tests/check_threads.py --self-test  check that the checker
                                                catches an unknown thread and
                                                a wrong count
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST_FILE = os.path.join("server", "tallyd.c")
NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
# words before "thread" that name no thread of their own: a role or a count
GENERIC = {"any", "one", "same", "another", "other", "the", "this", "that", "each", "every",
           "its", "own", "calling", "whatever", "of", "across", "and", "a", "no", "two",
           "many", "several", "number", "single", "given", "current", "some", "which", "what",
           "all", "on", "between", "different", "whichever", "recorded", "interrupted",
           "when", "before", "its", "their", "cannot", "owning"}

ENTRY = re.compile(r"^ \*   (\S.*?\S)\s{2,}\S")


def thread_list(text):
    """(count word's value, [names]) from tallyd.c's Threading model block."""
    m = re.search(r"Threading model\. (\w+) kinds of threads", text)
    if not m:
        return None, []
    count = NUMBERS.get(m.group(1).lower())
    block = text[m.end():text.index("*/", m.end())]
    names = []
    for line in block.splitlines():
        e = ENTRY.match(line)
        if e and not e.group(1).startswith(("A ", "Shutdown")):
            names.append(e.group(1))
    return count, names


def full_names(names):
    """The listed names as a comment may end a phrase with them: lower case,
    without "the" and "(main)", each in the singular and the plural."""
    out = set()
    for n in names:
        n = re.sub(r"^the ", "", n.replace("(main)", "").strip().lower())
        out.add(n)
        out.add(n[:-1] if n.endswith("s") else n + "s")
    return out


def comments(text):
    """(line number, text) of each comment, its lines joined."""
    for m in re.finditer(r"/\*.*?\*/", text, re.S):
        flat = re.sub(r"\s*\n\s*\*?\s*", " ", m.group(0))
        yield text.count("\n", 0, m.start()) + 1, flat


# "thread(s)" after a few words; not "thread pool", nor "thread-safe"
PHRASE = re.compile(r"((?:[A-Za-z_'-]+\s+){1,4})(threads?)\b(?!-| pool)")


def named(words, full):
    """Whether the words before "thread(s)" end in a listed name, or are a
    role: a count, a pronoun, or a possessive (whose thread)."""
    phrase = " ".join(words)
    if any((phrase + " ").endswith(" " + f + " ") or phrase == f for f in full):
        return True
    last = words[-2] if len(words) > 1 else ""
    # a count's variable ("host_threads threads") names none either
    return last in GENERIC or last.endswith(("'s", "s'")) or "_" in last


def problems_in(files, list_text, list_name=LIST_FILE):
    """files: {path: text}. Returns the problems, one line each."""
    out = []
    count, names = thread_list(list_text)
    if not names:
        return ["%s: no \"Threading model. N kinds of threads\" list" % list_name]
    if count != len(names):
        out.append("%s: the list says %s kinds of threads and names %d: %s" % (
            list_name, count, len(names), ", ".join(names)))
    full = full_names(names)
    for path, text in sorted(files.items()):
        for lineno, com in comments(text):
            for m in PHRASE.finditer(com):
                words = m.group(1).lower().split() + [m.group(2).lower()]
                if named(words, full):
                    continue
                out.append("%s:%d: \"%s\" names a thread tallyd does not have (%s lists "
                           "them: %s)" % (path, lineno, m.group(0).strip(), list_name,
                                          ", ".join(names)))
    return out


def tree_files():
    files = {}
    for d, _, fs in os.walk(os.path.join(ROOT, "server")):
        for f in fs:
            if f.endswith((".c", ".h")):
                p = os.path.join(d, f)
                files[os.path.relpath(p, ROOT)] = open(p, encoding="utf-8").read()
    return files


def self_test():
    lst = ("/*\n * Threading model. Two kinds of threads, and more:\n *\n"
           " *   the loop thread (main)  runs the loop\n"
           " *   HTTP threads            serve requests\n */\n")
    good = {"a.h": "/*\n * Threading: any thread; the loop thread frees it. HTTP threads\n"
                   " * read it, on the door's thread.\n */\n"}
    bad = {"b.h": "/*\n * Threading: the main or the reader thread.\n */\n",
           "c.c": "/* the gRPC thread answers it */\n"}
    assert problems_in(good, lst) == [], problems_in(good, lst)
    p = problems_in(bad, lst)
    assert len(p) == 2 and "reader thread" in p[0] and "gRPC thread" in p[1], p
    wrong = lst.replace("Two kinds", "Three kinds")
    p = problems_in(good, wrong)
    assert len(p) == 1 and "says 3 kinds" in p[0], p
    print("check_threads self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    files = tree_files()
    problems = problems_in(files, files[LIST_FILE])
    for p in problems:
        print(p)
    _, names = thread_list(files[LIST_FILE])
    print("check_threads: %d kinds of threads, %d comments, %d problems" % (
        len(names), sum(1 for t in files.values() for _ in comments(t)), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
