#!/usr/bin/env python3
"""check_layers.py - the #include lines and the calls of common/, server/
and client/ against the layers docs/design.md names.

A file depends on another when it includes it, or when it calls a
function that only the other defines (a function defined in one .c file,
not static: the other files reach it through its header). Also fails when a
comment in server/ names a file of the daemon that does not exist, and when
docs/tour.md, the tour of the files, misses a source file or names one
that is not there. Fails (exit 1,
one line per problem) when a file depends on a file of a layer its own
layer may not use (an include or a call that points up, or sideways
between peers: the scheduler never reaches the transport), when an
include names no file of the project, when two headers share a name, or
when files depend on each other in a circle (an include cycle, or .c files
that call each other round).

    python3 tests/check_layers.py            check the tree
    python3 tests/check_layers.py --self-test
                                             check that the checker catches
                                             an upward include, an include
                                             cycle, a call from the
                                             scheduler into the transport
                                             and a circle of calls
"""
import os
import re
import sys

# Each layer, the directory (or file) that holds it, and the layers it may
# include: only lower ones. The order is docs/design.md's, bottom up.
LAYERS = [
    ("common", "common", []),
    ("engine", "server/engine", ["common"]),
    ("core", "server/core", ["engine", "common"]),
    # data formats, then the protocols written in them; no transport sees
    # either (a transport that parsed a protocol would be a second adapter)
    ("format", "server/format", ["core", "engine", "common"]),
    ("protocol", "server/protocol", ["format", "core", "engine", "common"]),
    ("sched", "server/sched", ["core", "engine", "common"]),
    # the stores know nothing of sequences (the Redis client, and this
    # tallyd's own: memory and the log); the sequences' engine (its lines,
    # rules and record) knows no store but core/kv.h: they meet there, and
    # api/ joins them. None sees the scheduler (nor it them)
    ("redis", "server/redis", ["core", "engine", "common"]),
    ("store", "server/store", ["core", "engine", "common"]),
    ("seq", "server/seq", ["core", "engine", "common"]),
    ("http", "server/http", ["core", "engine", "common"]),
    ("grpc", "server/grpc", ["core", "engine", "common"]),
    ("telemetry", "server/telemetry", ["core", "engine", "common"]),
    ("api", "server/api",
     ["telemetry", "sched", "seq", "store", "redis", "http", "grpc", "protocol", "format",
      "core", "engine", "common"]),
    ("tallyd", "server/tallyd.c",
     ["api", "telemetry", "sched", "seq", "store", "redis", "http", "grpc", "protocol",
      "format", "core", "engine", "common"]),
    ("public", "client/include", []),
    ("libtally", "client/lib", ["public", "common"]),
    ("cli", "client/cli", ["public", "common"]),
    ("examples", "client/examples", ["public"]),
]
ROOTS = ["common", "server", "client"]
# Headers the build generates (into build/gen), and the directory whose
# layer they belong to: protobuf-c's code for proto/grpc_service.proto is
# the protocols', proto/otlp_trace.proto's the telemetry's.
GENERATED = {"grpc_service.pb-c.h": "server/protocol",
             "otlp_trace.pb-c.h": "server/telemetry"}
SYSTEM_INCLUDE = ["/usr/include", "/usr/include/x86_64-linux-gnu",
                  "/usr/include/aarch64-linux-gnu"]
HEADERS = {}  # relative path of each header: its text (scan fills it)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A function definition: at the start of a line, a return type and a name,
# the parameters, then the body's brace (attributes allowed between).
DEFINITION = re.compile(
    r'^(?!static\b|typedef\b|extern\b|#)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*'
    r'\(([^;{}()]|\([^;{}()]*\))*\)\s*(__attribute__\s*\(\(.*?\)\)\s*)?\{', re.M | re.S)
CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')
NOT_CALLS = {"if", "for", "while", "switch", "return", "sizeof", "defined",
             "_Static_assert", "__attribute__", "_Alignof", "alignof"}


def strip(text):
    """text without comments, string and character literals, and
    preprocessor lines (whose macros are not calls of the file's own)."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    text = re.sub(r'^\s*#(.*\\\n)*.*$', ' ', text, flags=re.M)
    return text


def layer_of(path):
    for name, where, _ in LAYERS:
        if path == where or path.startswith(where + "/"):
            return name
    return None


def check(files, sources=None):
    """files: {relative path: [included names]}; sources: {relative path of
    a .c file: its text}, for the calls. Returns a list of problems."""
    problems = []
    sources = sources or {}
    allowed = {name: set(deps) | {name} for name, _, deps in LAYERS}
    headers = {}
    for path in files:
        if path.endswith(".h"):
            headers.setdefault(os.path.basename(path), []).append(path)
    for base, paths in sorted(headers.items()):
        if len(paths) > 1:
            problems.append("two headers named %s: %s" % (base, ", ".join(sorted(paths))))
        # the -I paths put the project's headers first: one named like a
        # system header would hide it from every system header that
        # includes it (<pthread.h> includes <sched.h>, for one)
        for sysdir in SYSTEM_INCLUDE:
            if os.path.exists(os.path.join(sysdir, base)):
                problems.append("%s hides the system header <%s> (%s): rename it" % (
                    paths[0], base, sysdir))
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
            if target is None and name in GENERATED:
                target = os.path.join(GENERATED[name], name)
                theirs = layer_of(target)
                if theirs not in allowed[mine]:
                    problems.append("%s (%s) includes %s (%s): layer %s may use only %s" % (
                        path, mine, name, theirs, mine, ", ".join(sorted(allowed[mine] - {mine}))))
                continue
            if target is None:
                problems.append("%s: includes \"%s\", which is no header of the project" % (path, name))
                continue
            theirs = layer_of(target)
            if theirs not in allowed[mine]:
                problems.append("%s (%s) includes %s (%s): layer %s may use only %s" % (
                    path, mine, target, theirs, mine, ", ".join(sorted(allowed[mine] - {mine})) or "itself"))
            graph[path].append(target)
    problems += calls(files, sources, allowed, graph)
    problems += cycles(components(files, graph))
    return problems


def components(files, graph):
    """graph with the .c files of one component as one node. A component
    is a module split into files that share its private header, named
    *_int.h (grpc/grpc_int.h: the gRPC door's connection, session, calls
    and writes call each other as nghttp2's callbacks and libuv's
    completions go round, as h2o's lib/http2 files do). Its header says
    which file does what; between components, and within a layer, circles
    still fail."""
    unit = {}
    for path, names in files.items():
        if path.endswith(".c"):
            for name in names:
                if os.path.basename(name).endswith("_int.h"):
                    unit[path] = os.path.join(os.path.dirname(path), os.path.basename(name))
    merged = {}
    for node, targets in graph.items():
        n = unit.get(node, node)
        merged.setdefault(n, [])
        for t in targets:
            t = unit.get(t, t)
            if t != n and t not in merged[n]:
                merged[n].append(t)
    return merged


def calls(files, sources, allowed, graph):
    files_text = HEADERS
    """Adds an edge to graph for every call from a .c file to a function
    that only another file defines; returns the calls that cross layers
    the wrong way."""
    problems = []
    defined, own, declared = {}, {}, {}
    for path, text in files_text.items():
        if path.endswith(".h"):
            for name in set(CALL.findall(strip(text))):
                declared.setdefault(name, []).append(path)
    for path, text in sources.items():
        names = set(m.group(1) for m in DEFINITION.finditer(strip(text)))
        names -= NOT_CALLS
        own[path] = names | set(re.findall(r'^static\b[^;{}=]*?\b(\w+)\s*\(', text, re.M))
        for name in names:
            defined.setdefault(name, []).append(path)
    for path, text in sorted(sources.items()):
        mine = layer_of(path)
        if mine is None or path not in graph:
            continue
        seen = set()
        for name in CALL.findall(strip(text)):
            if name in NOT_CALLS or name in own[path] or name in seen:
                continue
            seen.add(name)
            where = defined.get(name, [])
            if len(where) != 1:
                continue  # a library's, a macro, or main()
            target = where[0]
            theirs = layer_of(target)
            # a function a public header declares is that header's layer's
            # to offer (libtally's, through client/include)
            offered = any(layer_of(h) in allowed[mine] and layer_of(h) != theirs
                          and layer_of(h) == "public" for h in declared.get(name, []))
            if theirs not in allowed[mine] and not offered:
                problems.append("%s (%s) calls %s() of %s (%s): layer %s may use only %s" % (
                    path, mine, name, target, theirs, mine,
                    ", ".join(sorted(allowed[mine] - {mine})) or "itself"))
            if target not in graph[path]:
                graph[path].append(target)
    return problems


def cycles(graph):
    """Every cycle of the include graph, once each, found by depth-first search."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                kind = "include" if all(n.endswith(".h") for n in stack[stack.index(nxt):]) else "dependency"
                found.append("%s cycle: %s" % (kind, " -> ".join(stack[stack.index(nxt):] + [nxt])))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


# A file of the daemon's named in a comment: a path under server/, with or
# without the "server/" (api/submit.c, core/reqlog.h).
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
NAMED = re.compile(r'(?<![\w/.])((?:server/)?(?:api|core|engine|format|grpc|http'
                   r'|protocol|sched|telemetry|web)/[\w/]+\.(?:c|h|cc|cl))\b')


def comment_names(texts, exists):
    """texts: {relative path: text}; exists(path) says whether a file is
    there. Returns a problem for every comment that names a file under
    server/ that does not exist (a comment left behind by a move)."""
    problems = []
    for path, text in sorted(texts.items()):
        for c in COMMENT.finditer(text):
            for name in NAMED.findall(c.group(0)):
                full = name if name.startswith("server/") else "server/" + name
                if not exists(full):
                    line = text.count("\n", 0, c.start()) + 1
                    problems.append("%s:%d: a comment names %s, which does not exist" % (
                        path, line, name))
    return problems


# docs/tour.md, the tour of the files: every source file of the daemon,
# the shared code and the client has its line there, and every file it
# names exists. Headers go with their .c file.
TOUR_FILE = "docs/tour.md"
TOUR_ROOTS = ["server", "common", "client/lib", "client/cli", "client/examples",
              "client/include", "kernels"]
TOUR_NAMED = re.compile(r'`((?:server|common|client|kernels|tests|proto)/[\w/.-]*\w)`')


def tour_section(text):
    """The tour's text: the whole page."""
    return text


def tour_problems(tour, sources, exists):
    """tour: the section's text (None when missing); sources: the source
    files that need a line; exists(path): whether a named path is there."""
    if tour is None:
        return ["%s is missing" % TOUR_FILE]
    named = set(TOUR_NAMED.findall(tour))
    problems = ["%s's tour has no line for %s" % (TOUR_FILE, f)
                for f in sorted(sources) if f not in named]
    problems += ["%s's tour names %s, which does not exist" % (TOUR_FILE, n)
                 for n in sorted(named) if not exists(n)]
    return problems


def tour_sources(top):
    out = []
    for root in TOUR_ROOTS:
        for dirpath, _, names in os.walk(os.path.join(top, root)):
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), top)
                if n.endswith((".c", ".cc", ".cl", ".html")) or (
                        n.endswith(".h") and not os.path.exists(
                            os.path.join(top, rel[:-2] + ".c"))
                        and not os.path.exists(os.path.join(top, rel[:-2] + ".cc"))
                        and not rel.startswith("client/include")):
                    out.append(rel)
    return out


def check_tour(top):
    with open(os.path.join(top, TOUR_FILE), encoding="utf-8") as f:
        tour = tour_section(f.read())
    return tour_problems(tour, tour_sources(top),
                         lambda p: os.path.exists(os.path.join(top, p)))


def server_texts(top):
    texts = {}
    for dirpath, _, names in os.walk(os.path.join(top, "server")):
        for n in names:
            if n.endswith((".c", ".h", ".cc")):
                full = os.path.join(dirpath, n)
                with open(full, encoding="utf-8", errors="replace") as f:
                    texts[os.path.relpath(full, top)] = f.read()
    return texts


# A list's links are set in core/list.h alone (its intrusive list and
# fifo_push). Aside: the key map's hash chains, and fields named next or
# prev that are no links (a JSON walk's next index, a sequence's previous
# carries, the gRPC door's next loop).
LINKS = re.compile(r"(?:->|\w\.)(?:next|prev)\s*=[^=]")
LINKS_ASIDE = {"server/core/list.h", "server/core/keymap.c",
               "server/format/json_tensor_in.c", "server/seq/sequence_file.c",
               "server/grpc/loops.c"}


def hand_lists(texts):
    """The places in server/ that set a list's links by hand."""
    problems = []
    for path, text in sorted(texts.items()):
        if path in LINKS_ASIDE:
            continue
        # comments blanked, their lines kept, so that the numbers hold
        code = re.sub(r"/\*.*?\*/|//[^\n]*",
                      lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for i, line in enumerate(code.split("\n"), 1):
            if LINKS.search(line):
                problems.append("%s:%d: a list linked by hand (core/list.h has "
                                "the one list and fifo_push): %s" % (path, i, line.strip()))
    return problems


def scan(top, sources=None):
    files = {}
    for root in ROOTS:
        for dirpath, _, names in os.walk(os.path.join(top, root)):
            for n in names:
                if n.endswith((".c", ".h")):
                    full = os.path.join(dirpath, n)
                    rel = os.path.relpath(full, top)
                    with open(full, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    files[rel] = INCLUDE.findall(text)
                    if sources is not None and n.endswith(".c"):
                        sources[rel] = text
                    if n.endswith(".h"):
                        HEADERS[rel] = text
    return files


def self_test(top):
    """The checker must pass the tree, then fail it with an upward include
    and with a cycle added."""
    sources = {}
    files = scan(top, sources)
    ok = True
    if check(files, sources):
        print("self-test: the tree itself fails")
        ok = False
    up = dict(files)
    up["server/engine/engine.c"] = files["server/engine/engine.c"] + ["request.h"]
    if not any("layer engine may use only" in p for p in check(up)):
        print("self-test: an engine file including request.h was not caught")
        ok = False
    loop = dict(files)
    loop["server/format/json.h"] = files["server/format/json.h"] + ["native.h"]
    if not any(p.startswith("include cycle") for p in check(loop)):
        print("self-test: json.h <-> native.h was not caught")
        ok = False
    # the scheduler calling into the transport
    up_call = dict(sources)
    up_call["server/sched/scheduler.c"] = sources["server/sched/scheduler.c"] + \
        "\nstatic void deliberate(void *r) { http_resume(r); }\n"
    found = check(files, up_call)
    if not any("scheduler.c (sched) calls http_resume()" in p for p in found):
        print("self-test: the scheduler calling http_resume() was not caught")
        ok = False
    # a circle of calls: body.c answering errors itself (reply.c -> request.c
    # -> body.c -> reply.c)
    circle = dict(sources)
    circle["server/http/body.c"] = sources["server/http/body.c"] + \
        "\nstatic void deliberate(request *r) { http_error(r, STATUS_OK, \"x\"); }\n"
    if not any(p.startswith("dependency cycle") and "body.c" in p
               for p in check(files, circle)):
        print("self-test: body.c -> reply.c -> ... -> body.c was not caught")
        ok = False
    # a comment naming a file that moved
    texts = server_texts(top)
    exists = lambda p: os.path.exists(os.path.join(top, p))
    if comment_names(texts, exists):
        print("self-test: the tree's comments fail")
        ok = False
    texts["server/tallyd.c"] += "\n/* workers: sched/sched.c */\n"
    if not any("names sched/sched.c" in p for p in comment_names(texts, exists)):
        print("self-test: a comment naming sched/sched.c was not caught")
        ok = False
    # a list linked by hand
    if hand_lists(server_texts(top)):
        print("self-test: the tree has a list linked by hand")
        ok = False
    texts = server_texts(top)
    texts["server/api/submit.c"] += "\nstatic void deliberate(job *a, job *b) { a->next = b; }\n"
    if not any(p.startswith("server/api/submit.c:") for p in hand_lists(texts)):
        print("self-test: a list linked by hand in submit.c was not caught")
        ok = False
    # the tour: a file without its line, a line without its file
    if check_tour(top):
        print("self-test: the tree's tour fails")
        ok = False
    with open(os.path.join(top, TOUR_FILE), encoding="utf-8") as f:
        tour = tour_section(f.read())
    exists = lambda p: os.path.exists(os.path.join(top, p))
    found = tour_problems(tour, tour_sources(top) + ["server/api/new_thing.c"], exists)
    if not any("no line for server/api/new_thing.c" in p for p in found):
        print("self-test: a file missing from the tour was not caught")
        ok = False
    found = tour_problems(tour.replace("`server/api/submit.c`", "`server/api/submit2.c`"),
                          [], exists)
    if not any("names server/api/submit2.c" in p for p in found):
        print("self-test: a tour line naming a missing file was not caught")
        ok = False
    print("check_layers self-test: %s" % ("ok" if ok else "FAILED"))
    return ok


def main():
    top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if "--self-test" in sys.argv[1:]:
        return 0 if self_test(top) else 1
    sources = {}
    files = scan(top, sources)
    problems = check(files, sources)
    texts = server_texts(top)
    problems += comment_names(texts, lambda p: os.path.exists(os.path.join(top, p)))
    problems += hand_lists(texts)
    problems += check_tour(top)
    for p in problems:
        print("check_layers: " + p)
    print("check_layers: %d files, %d problems" % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
