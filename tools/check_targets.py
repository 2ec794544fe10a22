#!/usr/bin/env python3
"""make check-targets: every target `make help` lists is started, each the
quickest way that still runs its recipe, so that a target which fails to
start is found by CI (.ci/run, stage targets) and not by a user (`make
bench-engine` once failed with "deps-bench: not found" and nothing
noticed).

Each target has one way here, and the table must name exactly the targets
`make help` lists (a new one fails the check until it is given a way):

  run    run to its end, in a quick form (a scratch DESTDIR, a docs
         generator whose output must not change the tree), exit 0;
  serve  `make run` on a free port: passes once /v2/health/live answers,
         then it is stopped with SIGINT, as a user stops it;
  start  benchmarks and long suites: started, and passes when it is still
         running after WINDOW seconds (its own recipe under way) or ended
         with 0 before; then SIGINT to its
         whole process group (so Python's and bash's clean-ups run), and
         SIGKILL after GRACE seconds;
  dry    `make -n`: targets that would change the tree or the machine for
         good (clean, format) and those `make test` or CI run whole
         anyway (the table says where); the recipe must expand;
  self   this check itself.

START_JOBS starts run at once. Nothing is installed: the deps targets'
recipes are skipped (make -o), `make deps` and `make deps-test` only
expand here (`make test` runs them first, whole), and when the packages
the benchmarks need are missing the check says so (`make deps-bench`
once) instead of starting them.

    python3 tools/check_targets.py [--only NAME ...] [--window S]
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW = 10
# the deps targets' recipes are not run (they would install what is
# missing): make takes them as done
NO_DEPS = ["-o", "deps", "-o", "deps-venv", "-o", "deps-test", "-o", "deps-bench"]
GRACE = 15
START_JOBS = 5

# target: (way, make arguments, where it runs whole when the way is dry)
TABLE = {
    "run": ("serve", [], ""),
    "make": ("run", [], ""),
    "install": ("run", ["DESTDIR={tmp}/install"], ""),
    "uninstall": ("run", ["DESTDIR={tmp}/install"], ""),
    "image": ("dry", [], "make test (test-container builds it)"),
    "deps": ("dry", [], "make test and make run, first"),
    "clean": ("dry", [], "never: it removes build/"),
    "check": ("dry", [], "make test runs each of its steps (CI, stage test)"),
    "check-targets": ("self", [], "this is it (CI, stage targets)"),
    "test": ("dry", [], "CI (.ci/run, stage test)"),
    "test-c": ("dry", [], "make test (CI, stage test)"),
    "test-kernels": ("start", [], "CI (.ci/run, stage asan)"),
    "test-sim": ("run", ["SIM_SECONDS=1"], ""),
    "test-integration": ("dry", [], "make test (CI, stage test)"),
    "test-asan": ("start", [], "CI (.ci/run, stage asan)"),
    "test-tsan": ("start", [], "CI (.ci/run, stage tsan)"),
    "fuzz": ("start", ["FUZZ_SECONDS=1"], "CI (.ci/run, stage fuzz)"),
    "test-container": ("dry", [], "make test"),
    "test-bare": ("dry", [], "make test"),
    "test-install": ("run", [], ""),
    "check-layers": ("dry", [], "make test (CI, stage test)"),
    "check-docs": ("dry", [], "make test (CI, stage test)"),
    "docs-config": ("run", [], ""),
    "docs-errors": ("run", [], ""),
    # long enough to be under way at the window: a run shorter than its
    # warm-up (15 s) has no sample after it, and fails
    "soak": ("start", ["SOAK_SECONDS=60"], "CI (.ci/run, stage soak)"),
    "deps-test": ("dry", [], "make test, first"),
    "format": ("dry", [], "never: it rewrites every C file"),
    "openapi-json": ("run", [], ""),
    "bench-report": ("start", [], ""),
    "bench-peers": ("start", [], ""),
    "bench-engine": ("start", [], ""),
    "bench-transpose": ("start", [], ""),
    "bench-lines": ("start", [], ""),
    "bench-numbers": ("start", [], ""),
    "bench-sched": ("start", [], ""),
    "bench-json": ("start", [], ""),
    "bench-serve": ("start", ["BENCH_ARGS=--seconds 1"], ""),
    "bench-loop": ("start", [], ""),
    "bench-start": ("start", [], ""),
    "bench-node": ("start", [], ""),
    "bench-node-bundle": ("start", [], ""),
    "bench-client": ("start", [], ""),
    "load": ("start", [], ""),
}

# the generated files a "run" target may rewrite, which must come out the
# same as they are in the tree
GENERATED = {
    "docs-config": ["docs/configuration.md"],
    "docs-errors": ["docs/errors.md"],
    "openapi-json": ["proto/openapi.json"],
}


def help_targets():
    out = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    names = []
    for line in out.splitlines():
        # "  make NAME description", or "  make   description" for the
        # default target: a name follows "make" after exactly one space
        m = re.match(r"^  make(?: ([a-z][a-z0-9-]*))?(?: |$)", line)
        if m:
            names.append(m.group(1) or "make")
    return names


def make_cmd(name, args, tmp):
    cmd = ["make", "--no-print-directory"] + NO_DEPS
    if name != "make":
        cmd.append(name)
    return cmd + [a.format(tmp=tmp) for a in args]


def tail(text, n=15):
    return "\n".join(text.splitlines()[-n:])


def stop(p):
    """SIGINT to the whole group, then SIGKILL after GRACE seconds; its
    output."""
    try:
        os.killpg(p.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    try:
        out, _ = p.communicate(timeout=GRACE)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = p.communicate()
    return out


def popen(cmd):
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)


def way_run(name, args, tmp):
    before = {f: open(os.path.join(ROOT, f), "rb").read() for f in GENERATED.get(name, [])}
    r = subprocess.run(make_cmd(name, args, tmp), cwd=ROOT, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=600)
    if r.returncode != 0:
        return "exit %d\n%s" % (r.returncode, tail(r.stdout + r.stderr))
    for f, b in before.items():
        if open(os.path.join(ROOT, f), "rb").read() != b:
            return "%s changed: the tree's copy was not regenerated" % f
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def way_serve(name, args, tmp, window):
    port = free_port()
    p = popen(make_cmd(name, args + ["LISTEN=127.0.0.1:%d" % port, "ARGS=--grpc-listen="],
                       tmp))
    deadline = time.monotonic() + max(window, 90)
    while time.monotonic() < deadline:
        if p.poll() is not None:
            return "ended (%d) before it answered\n%s" % (p.returncode, tail(p.stdout.read()))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/v2/health/live" % port,
                                        timeout=2) as r:
                if r.status == 200:
                    stop(p)
                    return None
        except OSError:
            pass
        time.sleep(0.3)
    return "no answer on port %d in %d s\n%s" % (port, max(window, 90), tail(stop(p)))


def way_start(name, args, tmp, window):
    p = popen(make_cmd(name, args, tmp))
    try:
        p.wait(timeout=window)
    except subprocess.TimeoutExpired:
        stop(p)
        return None  # still running: it started
    out = p.stdout.read()
    if p.returncode != 0:
        return "exit %d within %d s\n%s" % (p.returncode, window, tail(out))
    return None


def way_dry(name, args, tmp):
    r = subprocess.run(["make", "-n", "--no-print-directory", name]
                       + [a.format(tmp=tmp) for a in args],
                       cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        return "make -n: exit %d\n%s" % (r.returncode, tail(r.stdout + r.stderr))
    return None


def check(name, tmp, window):
    way, args, _ = TABLE[name]
    t0 = time.monotonic()
    if way == "run":
        err = way_run(name, args, tmp)
    elif way == "serve":
        err = way_serve(name, args, tmp, window)
    elif way == "start":
        err = way_start(name, args, tmp, window)
    elif way == "dry":
        err = way_dry(name, args, tmp)
    else:
        err = None
    return name, way, err, time.monotonic() - t0


def self_test():
    """The table's ways catch what they are for: a recipe that fails at
    once (the bench-engine bug), and one that cannot expand."""
    with tempfile.TemporaryDirectory() as d:
        mk = os.path.join(d, "Makefile")
        with open(mk, "w") as f:
            f.write("ok:\n\tsleep 30\nbroken: ok2\n\t$<\nok2:\n\t@true\n"
                    "nope: missing-file\n\t@true\n")
        global ROOT
        saved = ROOT
        ROOT = d
        try:
            assert way_start("ok", [], d, 1) is None, "a running target passes"
            assert way_start("broken", [], d, 5) is not None, "a failing start fails"
            assert way_dry("nope", [], d) is not None, "a recipe that cannot expand fails"
        finally:
            ROOT = saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--window", type=int, default=WINDOW)
    opts = ap.parse_args()
    self_test()
    listed = help_targets()
    missing = [t for t in listed if t not in TABLE]
    stale = [t for t in TABLE if t not in listed]
    problems = []
    if missing:
        problems.append("make help lists targets this table has no way for: %s "
                        "(tools/check_targets.py)" % ", ".join(missing))
    if stale:
        problems.append("the table names targets make help does not list: %s"
                        % ", ".join(stale))
    names = [t for t in listed if t in TABLE and (not opts.only or t in opts.only)]
    have = subprocess.run(["sh", "deploy/install-deps.sh", "--test", "--bench", "--venv",
                           os.environ.get("VENV", "build/venv"), "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    if have.returncode != 0:
        skipped = [t for t in names if TABLE[t][0] in ("start", "serve")]
        names = [t for t in names if t not in skipped]
        problems.append("not started, for want of the packages they need (run `make "
                        "deps-bench` once): %s\n%s" % (" ".join(skipped), have.stdout.strip()))
    results = []
    with tempfile.TemporaryDirectory(prefix="check-targets-") as tmp:
        # one after another: those that build or install (uninstall after
        # install); then the starts, a few at a time
        for n in [t for t in names if TABLE[t][0] != "start"]:
            if n == "uninstall" and "install" not in names:
                continue
            results.append(check(n, tmp, opts.window))
        if "uninstall" in names and "install" not in names:
            results.append(check("install", tmp, opts.window))
            results.append(check("uninstall", tmp, opts.window))
        # everything built once, so that the starts at once find nothing
        # of the tree to build (two makes writing one file race)
        if any(TABLE[t][0] == "start" for t in names):
            subprocess.run(["make", "--no-print-directory"] + NO_DEPS, cwd=ROOT,
                           capture_output=True, stdin=subprocess.DEVNULL)
        starts = [t for t in names if TABLE[t][0] == "start"]
        with ThreadPoolExecutor(START_JOBS) as ex:
            results += list(ex.map(lambda n: check(n, tmp, opts.window), starts))
    for name, way, err, secs in results:
        where = TABLE[name][2]
        print("  %-5s %-18s %5.1f s  %s%s" % (way, name, secs, "FAILED" if err else "ok",
                                           " (whole: %s)" % where if where and way != "run"
                                           else ""))
        if err:
            problems.append("make %s (%s): %s" % (name, way, err))
    for p in problems:
        print("check_targets: " + p, file=sys.stderr)
    print("check_targets: %d targets, %d problems" % (len(results), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
