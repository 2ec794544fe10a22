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
and the line. And a function whose comment (at its definition, or at its
declaration in a header) says which listed thread calls it ("On the loop
thread.", "HTTP thread.", "The log writer, no lock held.") must assert
it in its body: OWNER_ASSERT, OWNER_CLAIM or LOCK_HELD, which the test
builds check (core/loop_owner.h, core/mutex.h). Fails (exit 1, one line
per problem).

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


# what holds a claim in a test build (core/loop_owner.h, core/mutex.h)
HELD = re.compile(r"OWNER_ASSERT|OWNER_CLAIM|LOCK_HELD|loop_owner_is_me|mailbox_on_loop")
FUNC = re.compile(r"^[a-zA-Z_][\w \*]*?\b(\w+)\(")


def leading_comment(lines, i):
    """The comment that ends on the line above lines[i], flat; "" if none."""
    j = i - 1
    if j < 0 or not lines[j].rstrip().endswith("*/"):
        return ""
    com = []
    while j >= 0:
        com.insert(0, lines[j].strip().lstrip("/*").rstrip("*/").strip())
        if lines[j].lstrip().startswith("/*"):
            break
        j -= 1
    return " ".join(com)


def definitions(files):
    """{function: (path, line, body)} of the functions the .c files define."""
    out = {}
    for path, text in files.items():
        if not path.endswith(".c"):
            continue
        lines = text.split("\n")
        for i, line in enumerate(lines):
            m = FUNC.match(line)
            if not m or line.rstrip().endswith(";"):
                continue
            k = i
            while k < len(lines) and not lines[k].startswith("{") \
                    and not lines[k].rstrip().endswith(";"):
                k += 1
            if k >= len(lines) or not lines[k].startswith("{"):
                continue
            e = k + 1
            while e < len(lines) and not lines[e].startswith("}"):
                e += 1
            out.setdefault(m.group(1), (path, i + 1, "\n".join(lines[k:e])))
    return out


def claims_unheld(files, names):
    """A function whose comment (above its definition, or above its
    declaration in a header) says which listed thread calls it ("On the
    loop thread", "HTTP thread.", "The log writer, ...") must assert it:
    its body holds an owner or a lock assert. One line per function that
    does not."""
    alt = "|".join(sorted((re.escape(n) for n in full_names(names)), key=len,
                          reverse=True))
    claim = re.compile(r"(?:\bon (?:the|an|a|its|one of the) (?:%s)\b)|"
                       r"(?:(?:^|[.:;] )(?:the |an? )?(?:%s)(?:[.,;]|$| \())" % (alt, alt),
                       re.I)
    defs = definitions(files)
    out, seen = [], set()
    for path, text in sorted(files.items()):
        lines = text.split("\n")
        for i, line in enumerate(lines):
            m = FUNC.match(line)
            if not m or line.startswith(("typedef", "#", "static inline")):
                continue
            c = claim.search(leading_comment(lines, i))
            if not c or m.group(1) not in defs or m.group(1) in seen:
                continue
            where, at, body = defs[m.group(1)]
            if HELD.search(body):
                continue
            seen.add(m.group(1))
            out.append("%s:%d: %s says \"%s\" and asserts nothing of it (%s:%d: an "
                       "OWNER_ASSERT or LOCK_HELD, core/loop_owner.h, core/mutex.h)" % (
                           path, i + 1, m.group(1), c.group(0).strip(" .:;"), where, at))
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
    names = ["the loop thread (main)", "HTTP threads", "the log writer"]
    held = {"d.h": "/* Does it. HTTP thread. */\nvoid d_do(int x);\n",
            "d.c": "void d_do(int x)\n{\n    OWNER_ASSERT(&o);\n}\n"
                   "/* One batch. The log writer, no lock held. */\n"
                   "static void d_batch(void)\n{\n    LOCK_HELD(&mu);\n}\n"}
    assert claims_unheld(held, names) == [], claims_unheld(held, names)
    unheld = {"e.h": "/* Stops it. Loop thread. */\nvoid e_stop(int x);\n",
              "e.c": "void e_stop(int x)\n{\n    (void)x;\n}\n"
                     "/* The reply, on an HTTP thread once resumed. */\n"
                     "static void e_after(void)\n{\n}\n"
                     "/* Any thread. */\nstatic void e_any(void)\n{\n}\n"}
    p = claims_unheld(unheld, names)
    assert len(p) == 2 and "e_after" in p[0] and "e_stop" in p[1], p
    print("check_threads self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    files = tree_files()
    problems = problems_in(files, files[LIST_FILE])
    problems += claims_unheld(files, thread_list(files[LIST_FILE])[1])
    for p in problems:
        print(p)
    _, names = thread_list(files[LIST_FILE])
    print("check_threads: %d kinds of threads, %d comments, %d problems" % (
        len(names), sum(1 for t in files.values() for _ in comments(t)), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
