#!/usr/bin/env python3
"""check_threads.py - the threads the comments name against the threads
tallyd has.

server/tallyd.c's header names every kind of thread tallyd runs, once,
in its "Threading model" list ("Eight kinds of threads, ..."). This checks
that the list's count word matches its entries, and that every "Threading:"
paragraph of a comment in server/ names threads only from that list: each
"<word> thread(s)" there must be a word of a listed kind ("loop thread",
"HTTP threads", "tick thread", ...) or a word that names no thread of its
own ("any thread", "one thread", "the door's thread", ...). A name that is
neither ("the main thread", "the reader thread") fails, with the file and
the line. Fails (exit 1, one line per problem).

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
           "its", "own", "calling", "caller's", "submitter's", "door's", "request's",
           "whatever", "of", "across", "and", "a", "no", "two", "many", "several", "number",
           "single", "given", "current", "some", "which", "what", "all"}

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


def thread_words(names):
    """The words that name a listed kind: each entry's words, singular too
    ("device workers": device, worker, workers)."""
    words = set()
    for n in names:
        for w in re.findall(r"[A-Za-z'-]+", n.replace("(main)", "")):
            words.add(w)
            words.add(w.rstrip("s"))
            words.add(w.lower())
            words.add(w.lower().rstrip("s"))
    words -= {"the", "a", "of"}
    return words


def paragraphs(text):
    """(line number, text) of each "Threading:" paragraph in a comment: from
    the word to the next blank comment line or the comment's end."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "Threading:" not in line:
            continue
        out, j = [line[line.index("Threading:"):]], i + 1
        while j < len(lines):
            s = lines[j].strip()
            if s in ("*", "*/", "") or s.startswith("*/") or not s.startswith("*"):
                break
            out.append(s.lstrip("* "))
            j += 1
        yield i + 1, " ".join(out)


def problems_in(files, list_text, list_name=LIST_FILE):
    """files: {path: text}. Returns the problems, one line each."""
    out = []
    count, names = thread_list(list_text)
    if not names:
        return ["%s: no \"Threading model. N kinds of threads\" list" % list_name]
    if count != len(names):
        out.append("%s: the list says %s kinds of threads and names %d: %s" % (
            list_name, count, len(names), ", ".join(names)))
    known = thread_words(names)
    for path, text in sorted(files.items()):
        for lineno, para in paragraphs(text):
            for m in re.finditer(r"\b([A-Za-z'-]+)\s+threads?\b(?!-)", para):
                w = m.group(1)
                if w in known or w.lower() in known or w.lower() in GENERIC:
                    continue
                out.append("%s:%d: \"%s\" names a thread tallyd does not have (%s lists "
                           "them: %s)" % (path, lineno, m.group(0), list_name, ", ".join(names)))
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
                   " * read it.\n */\n"}
    bad = {"b.h": "/*\n * Threading: the main or the reader thread.\n */\n"}
    assert problems_in(good, lst) == [], problems_in(good, lst)
    p = problems_in(bad, lst)
    assert len(p) == 1 and "reader thread" in p[0], p
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
    print("check_threads: %d kinds of threads, %d Threading paragraphs, %d problems" % (
        len(names), sum(1 for t in files.values() for _ in paragraphs(t)), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
