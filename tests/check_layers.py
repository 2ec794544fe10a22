#!/usr/bin/env python3
"""check_layers.py - the #include lines of common/, server/ and client/
against the layers the README names.

Fails (exit 1, one line per problem) when a file includes a header of a
layer its own layer may not use (an include that points up, or sideways
between peers), when an include names no file of the project, when two
headers share a name, or when files include each other in a cycle.

    python3 tests/check_layers.py            check the tree
    python3 tests/check_layers.py --self-test
                                             check that the checker catches
                                             an upward include and a cycle
"""
import os
import re
import sys

# Each layer, the directory (or file) that holds it, and the layers it may
# include: only lower ones. The order is the README's, bottom up.
LAYERS = [
    ("common", "common", []),
    ("engine", "server/engine", ["common"]),
    ("codec", "server/codec", ["engine", "common"]),
    ("core", "server/core", ["engine", "common"]),
    ("http", "server/http", ["core", "codec", "engine", "common"]),
    ("dispatch", "server/dispatch", ["http", "core", "codec", "engine", "common"]),
    ("api", "server/api", ["dispatch", "http", "core", "codec", "engine", "common"]),
    ("tallyd", "server/tallyd.c",
     ["api", "dispatch", "http", "core", "codec", "engine", "common"]),
    ("public", "client/include", []),
    ("libtally", "client/lib", ["public", "common"]),
    ("cli", "client/cli", ["public", "common"]),
    ("examples", "client/examples", ["public"]),
]
ROOTS = ["common", "server", "client"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    for name, where, _ in LAYERS:
        if path == where or path.startswith(where + "/"):
            return name
    return None


def check(files):
    """files: {relative path: [included names]}; returns a list of problems."""
    problems = []
    allowed = {name: set(deps) | {name} for name, _, deps in LAYERS}
    headers = {}
    for path in files:
        if path.endswith(".h"):
            headers.setdefault(os.path.basename(path), []).append(path)
    for base, paths in sorted(headers.items()):
        if len(paths) > 1:
            problems.append("two headers named %s: %s" % (base, ", ".join(sorted(paths))))
    graph = {}
    for path, names in sorted(files.items()):
        mine = layer_of(path)
        if mine is None:
            problems.append("%s: in no layer (add it to tests/check_layers.py)" % path)
            continue
        graph[path] = []
        for name in names:
            # as the compiler does: beside the file first, then by name
            here = os.path.normpath(os.path.join(os.path.dirname(path), name))
            target = here if here in files else None
            if target is None:
                found = headers.get(os.path.basename(name), [])
                target = found[0] if len(found) == 1 else None
            if target is None:
                problems.append("%s: includes \"%s\", which is no header of the project" % (path, name))
                continue
            theirs = layer_of(target)
            if theirs not in allowed[mine]:
                problems.append("%s (%s) includes %s (%s): layer %s may use only %s" % (
                    path, mine, target, theirs, mine, ", ".join(sorted(allowed[mine] - {mine})) or "itself"))
            graph[path].append(target)
    problems += cycles(graph)
    return problems


def cycles(graph):
    """Every cycle of the include graph, once each, found by depth-first search."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                found.append("include cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def scan(top):
    files = {}
    for root in ROOTS:
        for dirpath, _, names in os.walk(os.path.join(top, root)):
            for n in names:
                if n.endswith((".c", ".h")):
                    full = os.path.join(dirpath, n)
                    rel = os.path.relpath(full, top)
                    with open(full, encoding="utf-8", errors="replace") as f:
                        files[rel] = INCLUDE.findall(f.read())
    return files


def self_test(top):
    """The checker must pass the tree, then fail it with an upward include
    and with a cycle added."""
    files = scan(top)
    ok = True
    if check(files):
        print("self-test: the tree itself fails")
        ok = False
    up = dict(files)
    up["server/engine/engine.c"] = files["server/engine/engine.c"] + ["request.h"]
    if not any("layer engine may use only" in p for p in check(up)):
        print("self-test: an engine file including request.h was not caught")
        ok = False
    loop = dict(files)
    loop["server/codec/json.h"] = files["server/codec/json.h"] + ["native.h"]
    if not any(p.startswith("include cycle") for p in check(loop)):
        print("self-test: json.h <-> native.h was not caught")
        ok = False
    print("check_layers self-test: %s" % ("ok" if ok else "FAILED"))
    return ok


def main():
    top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if "--self-test" in sys.argv[1:]:
        return 0 if self_test(top) else 1
    files = scan(top)
    problems = check(files)
    for p in problems:
        print("check_layers: " + p)
    print("check_layers: %d files, %d problems" % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
