"""bench_serve.py - the service under load: throughput and latency of
float32 [1, N] cumulative sums, N in {16, 4096, 65536, 1048576}, at
concurrency 1, 16 and 64, sent as binary and as JSON, against a tallyd
with --max-batch 1 and one with the default (dynamic batching).

Binary requests are driven by tally's own load client (`tally bench`:
raw bytes on POST /v1/cumsum over kept-alive connections); JSON requests
(KServe v2 JSON in and out) by Triton's perf_analyzer 2.51 where it keeps
up, N from 4096 on, and by `tally bench --format json` at N=16, where
tallyd answers 30,000 requests a second and perf_analyzer on two cores
never finishes a measurement. The script fetches perf_analyzer from PyPI
into build/perf_analyzer on first use (the tritonclient 2.51.0 wheel
carries the binary; it needs libcudart.so.12 from the
nvidia-cuda-runtime-cu12 wheel and Debian's libb64-0d, no GPU).

It prints one table, and then the issue's targets checked against it:
throughput at concurrency 16 and 64 at least that at 1 (every N, each
format); at N=65536 and concurrency 64, the default at least 1.5x
--max-batch 1; no cell losing more than 5% to --max-batch 1; and p99 at
most 3x p50 in every `tally bench` cell.

A third table puts gRPC beside REST binary, both driven by perf_analyzer
in one run against one tallyd (default batching): perf_analyzer -i http
(KServe binary tensors) and -i grpc, float32 [N] for N in {16, 65536,
1048576}, concurrency 1 and 16, the two protocols alternating cell by
cell. Its targets: gRPC at least 0.9 of REST binary's throughput in every
cell, and gRPC's p99 at most 3x its p50 at concurrency 1.

A fourth table is the shared-memory column: float32 [N], N in {65536,
1048576, 16777216}, concurrency 1, perf_analyzer with REST binary tensors
beside perf_analyzer --shared-memory system over REST and over gRPC, one
tallyd with --allow-shared-memory, and the engine's own time for the same
tensors (bench_engine --serve). Its targets, at N=16M: a shared-memory
round trip (p50) at most 1.5x the engine's scan, and at least 5x REST
binary's throughput.

A fifth table (--only sequence) is Triton's sequence extension: float32
[N], N in {16, 65536}, concurrency 1 and 16, over REST binary and gRPC,
perf_analyzer's sequence mode (20 chunks a sequence, against a tallyd
with --model-sequence-batching) beside its plain mode, and the same
sequences made durable (--state-dir, --state-fsync everysec and always)
beside the machine's own fdatasync (build/bin/fsync_latency), and kept
in Redis (--state-store, a redis-server the bench starts) beside
redis-benchmark's PING, tally's write script alone, and one loop that
answers each request after one call of that script
(build/bin/store_floor: the least such a chunk can add). At concurrency
16 over REST the same perf_analyzer runs also go against store_floor's
serve mode, the smallest server that does a chunk's work, in memory and
through Redis: what the machine allows the ratio to be; and through
Redis with libmicrohttpd's three calls around each suspended request:
what tallyd's HTTP library takes of it. Over gRPC, and at concurrency 1
over both doors, the same runs go against the smallest server in memory
and through Redis too (build/bin/grpc_floor for gRPC), so that each cell
has what the machine allows under perf_analyzer's own client beside it.
perf_analyzer enters its sequence mode whenever the model config has
sequence_batching, which tallyd's is without only by default. Its target: a chunk costs what
the same request costs alone, 0.9 of the plain throughput or more. Its
N=16 c=16 cells take 0.5 s windows, every mode alike (SEQ_FAST_CELLS):
perf_analyzer does not finish longer ones at that rate on two cores.
They run three rounds of every mode in turn, and the table takes each
mode's median (SEQ_FAST_ROUNDS).

A sixth table (--only placement) is the default pool's placement by
cost beside its two halves: float32 [1,N], N in {65536, 1048576},
concurrency 1 and 16, `tally bench` raw binary, against three tallyds
started in turn for each of two rounds: `--device host`, the OpenCL
device alone (`--device cpu --placement device`: PoCL here) and the
default pool (`--placement cost`), with the placements each counted
(tally_placements_total). Its target, the issue's for a GPU node taken
here with PoCL: the default at least 0.9 of the better of the other two
(0.9, not 1: a cell moves 10% between runs on two cores).

Each perf_analyzer call gets about three times what its windows take; a
call that has not finished by then is named on stderr, and its cell says
"no measurement" (the table goes on).

With --only sequence --compare TALLYD, the sequence table's cells are
run against another tallyd (the one before a change) and this one in
turn, three rounds each, each mode's two runs next to each other (the
one before first in the first and third rounds, second in the second); a
cell's ratio is the median of its three rounds' ratios, each taken
between two runs seconds apart, so that the machine's drift over the
run moves both sides of it (target: within 10 %).

With --compare TALLYD and no --only (or --only binary or json), the
first table's cells are run the same way: the tallyd before a change
and this one, each with --max-batch 1 and with the default, in turn,
three rounds a cell, the two runs of a pair next to each other and
their order swapped each round; a cell's ratio is the median of its
rounds' after / before (target: within 5 %). The other tables are left
out; --only sequence --compare is theirs.

A seventh table (--only small) is a small request against the floor:
tallyd's CPU per request and requests a second beside nginx's and the
smallest libmicrohttpd server's (tests/bench/bench_small.py says how).

usage: python3 tests/bench/bench_serve.py [--seconds S]
           [--only binary|json|grpc|shm|sequence|placement|small] [--sync]
           [--compare TALLYD]
"""
import argparse
import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tempfile
import urllib.request

from bench_small import small_table
from benchlib import BIN, ROOT, start_tallyd

PA_DIR = os.path.join(ROOT, "build", "perf_analyzer")
SIZES = (16, 4096, 65536, 1 << 20)
CONCURRENCY = (1, 16, 64)
GRPC_SIZES = (16, 65536, 1 << 20)
GRPC_CONCURRENCY = (1, 16)


def perf_analyzer():
    """The perf_analyzer binary and its environment, fetched once; a lock
    file keeps two processes (xdist's workers) from fetching at once."""
    os.makedirs(PA_DIR, exist_ok=True)
    with open(os.path.join(PA_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return fetch_perf_analyzer()


def fetch_perf_analyzer():
    exe = glob.glob(os.path.join(PA_DIR, "tritonclient-*.data", "data", "bin", "perf_analyzer"))
    if not exe:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--disable-pip-version-check", "-d", PA_DIR, "tritonclient==2.51.0",
                        "nvidia-cuda-runtime-cu12"], check=True)
        for whl in glob.glob(os.path.join(PA_DIR, "*.whl")):
            subprocess.run([sys.executable, "-m", "zipfile", "-e", whl, PA_DIR], check=True)
        exe = glob.glob(os.path.join(PA_DIR, "tritonclient-*.data", "data", "bin",
                                     "perf_analyzer"))
        os.chmod(exe[0], 0o755)
    if subprocess.run(["dpkg-query", "-W", "libb64-0d"], capture_output=True).returncode:
        subprocess.run(["apt-get", "install", "-y", "-qq", "libb64-0d"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                       capture_output=True)
    env = dict(os.environ)
    lib = glob.glob(os.path.join(PA_DIR, "nvidia", "cuda_runtime", "lib"))[0]
    env["LD_LIBRARY_PATH"] = lib + ":" + env.get("LD_LIBRARY_PATH", "")
    return exe[0], env


def tally_bench(url, n, c, seconds, fmt="raw"):
    out = subprocess.run([os.path.join(BIN, "tally"), "bench", "--url", url, "--concurrency",
                          str(c), "--duration", str(seconds), "--shape", "1,%d" % n, "--quiet",
                          "--format", fmt], capture_output=True, text=True)
    text = out.stdout + out.stderr
    if re.search(r"requests/s\s+([\d.]+)", text) is None:
        sys.exit("bench_serve: tally bench said:\n" + text)
    rps = float(re.search(r"requests/s\s+([\d.]+)", text).group(1))
    m = re.search(r"p50 ([\d.]+)\s+p90 [\d.]+\s+p99 ([\d.]+)", text)
    errors = int(re.search(r"errors\s+(\d+)", text).group(1))
    return rps, float(m.group(1)), float(m.group(2)), errors


@contextlib.contextmanager
def shm_lock():
    """Held around every perf_analyzer run with --shared-memory system.
    perf_analyzer names its POSIX shared-memory objects after the tensors
    (/x_0_0, /y) whatever the run, and unlinks them when it exits, so two
    such runs on one machine unlink each other's mid-request, whichever
    clone, test worker or benchmark started them. The lock file lives in
    /dev/shm itself: whoever shares those names shares the lock."""
    with open("/dev/shm/.tally-perf-analyzer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_pa(cmd, env, windows_s, cell):
    """perf_analyzer's output, or None when it did not finish within about
    three times what its windows take (then the cell is named on stderr):
    perf_analyzer's own processing can outgrow its windows (docs/kserve.md,
    "perf_analyzer"), and one stuck call must not hold the whole table.
    A shared-memory run waits for shm_lock() first."""
    limit = int(3 * windows_s) + 20
    try:
        with shm_lock() if "--shared-memory" in cmd else contextlib.nullcontext():
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit)
    except subprocess.TimeoutExpired:
        print("bench_serve: perf_analyzer did not finish %s in %d s (three times its "
              "windows): %s" % (cell, limit, " ".join(cmd[1:])), file=sys.stderr, flush=True)
        return None
    return out.stdout + out.stderr


def perf_json(pa, url, n, c, seconds):
    exe, env = pa
    text = run_pa([exe, "-m", "cumsum", "-u", url.replace("http://", ""), "-i", "http",
                   "--shape", "x:1,%d" % n, "--concurrency-range", str(c),
                   "--input-tensor-format", "json", "--output-tensor-format", "json",
                   "--measurement-interval", str(int(seconds * 1000)),
                   "--max-trials", "4", "--stability-percentage", "25"],
                  env, 4 * 1.2 * seconds + 5, "json N=%d c=%d" % (n, c))
    if text is None:
        return None
    m = re.search(r"Throughput: ([\d.]+) infer/sec", text)
    if m is None:
        return None
    p50 = float(re.search(r"p50 latency: (\d+) usec", text).group(1)) / 1e3
    p99 = float(re.search(r"p99 latency: (\d+) usec", text).group(1)) / 1e3
    return float(m.group(1)), p50, p99, 0


def perf_binary(pa, address, protocol, n, c, seconds, mode="--async", extra=()):
    """perf_analyzer with binary tensors over protocol (http or grpc):
    (req/s, p50 ms, p99 ms, 0), or None. Stability is not waited for (on
    two shared cores it may never come): three windows are taken, whatever
    their spread (--stability-percentage 1000; at 100, windows that spread
    further than that failed the whole cell, seen at REST 64K c=1 on
    machine F).

    Both protocols run in perf_analyzer's --async mode: its default
    synchronous mode adds tails of its own, at concurrency 1 a p99 of 6-8
    times p50 with 4 MiB tensors over either protocol, where --async,
    --streaming, tritonclient.grpc and a plain loopback echo all stay
    under 2-3x against the same server (BENCHMARKS.md, "gRPC beside REST
    binary"). mode="--sync" measures it that way."""
    exe, env = pa
    text = run_pa([exe, "-m", "cumsum", "-u", address, "-i", protocol,
                   "--shape", "x:%d" % n, "--concurrency-range", str(c),
                   "--measurement-interval", str(int(seconds * 1000)),
                   "--max-trials", "3", "--stability-percentage", "1000"]
                  + ([mode] if mode == "--async" else []) + list(extra),
                  env, 3 * 1.2 * seconds + 5,
                  "%s N=%d c=%d%s" % (protocol, n, c, " " + " ".join(extra) if extra else ""))
    if text is None:
        return None
    m = re.search(r"Throughput: ([\d.]+) infer/sec", text)
    if m is None:
        print(text[-2000:], file=sys.stderr)
        return None
    p50 = float(re.search(r"p50 latency: (\d+) usec", text).group(1)) / 1e3
    p99 = float(re.search(r"p99 latency: (\d+) usec", text).group(1)) / 1e3
    return float(m.group(1)), p50, p99, 0


def grpc_table(pa, seconds, mode="--async"):
    """REST binary and gRPC through perf_analyzer, one tallyd; the table
    and the targets it misses."""
    from benchlib import free_port
    log = open(os.path.join(tempfile.gettempdir(), "bench_serve_grpc_tallyd.log"), "wb")
    gport = free_port()
    proc, url = start_tallyd("bench-serve", log, ["--access-log=off", "--grpc-listen",
                                                  "127.0.0.1:%d" % gport,
                                                  "--max-sequences", "0"])
    results = {}
    try:
        for n in GRPC_SIZES:
            for c in GRPC_CONCURRENCY:
                for proto, address in (("http", url.replace("http://", "")),
                                       ("grpc", "127.0.0.1:%d" % gport)):
                    r = perf_binary(pa, address, proto, n, c, seconds, mode)
                    results[(proto, n, c)] = r
                    if r is not None:
                        print("  %-4s N=%-8d c=%-3d %9.1f req/s p50 %8.3f ms p99 %8.3f ms" % (
                            proto, n, c, r[0], r[1], r[2]), file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait()
    print("float32 [N], binary tensors; perf_analyzer %s -i http (REST) and -i grpc, one "
          "tallyd; %d s windows" % (mode, seconds))
    print("%-8s %-4s %12s %8s %8s %12s %8s %8s %6s" % (
        "N", "c", "REST req/s", "p50 ms", "p99 ms", "gRPC req/s", "p50 ms", "p99 ms", "ratio"))
    fails = []
    for n in GRPC_SIZES:
        for c in GRPC_CONCURRENCY:
            a, b = results[("http", n, c)], results[("grpc", n, c)]
            if a is None or b is None:
                print("%-8d %-4d  (no measurement)" % (n, c))
                fails.append("grpc N=%d c=%d: no measurement" % (n, c))
                continue
            print("%-8d %-4d %12.1f %8.3f %8.3f %12.1f %8.3f %8.3f %6.2f" % (
                n, c, a[0], a[1], a[2], b[0], b[1], b[2], b[0] / a[0]))
            if b[0] < 0.9 * a[0]:
                fails.append("grpc N=%d c=%d: %.0f < 0.9 x REST binary %.0f" % (n, c, b[0], a[0]))
            if c == 1 and b[2] > 3 * b[1]:
                fails.append("grpc N=%d c=1: p99 %.3f > 3 x p50 %.3f" % (n, b[2], b[1]))
    return fails


SHM_SIZES = (65536, 1 << 20, 16 << 20)


def perf_shm(pa, address, protocol, n, seconds):
    """perf_analyzer --shared-memory system at concurrency 1: x and y in
    regions it registers (as perf_binary's tuple), or None."""
    return perf_binary(pa, address, protocol, n, 1, seconds,
                       extra=("--shared-memory", "system",
                              "--output-shared-memory-size", str(4 * n)))


def engine_times():
    """bench_engine --serve: the engine's own ms for SHM_SIZES."""
    env = dict(os.environ, POCL_CACHE_DIR=os.path.join(ROOT, "build", "pocl-bench-serve"))
    out = subprocess.run([os.path.join(BIN, "bench_engine"), "--serve"], capture_output=True,
                         text=True, env=env, timeout=600, check=True).stdout
    return {int(n): float(ms) for n, ms in re.findall(r"engine N=(\d+) ms=([\d.]+)", out)}


def shm_table(pa, seconds):
    """REST binary beside system shared memory (over REST and gRPC), float32
    [N] at concurrency 1, one tallyd, with the engine's own time for the
    same tensors; the table and the targets it misses."""
    from benchlib import free_port
    log = open(os.path.join(tempfile.gettempdir(), "bench_serve_shm_tallyd.log"), "wb")
    gport = free_port()
    proc, url = start_tallyd("bench-serve", log, ["--access-log=off", "--max-sequences", "0",
                                                  "--allow-shared-memory",
                                                  "--grpc-listen", "127.0.0.1:%d" % gport])
    http = url.replace("http://", "")
    results = {}
    try:
        for n in SHM_SIZES:
            for name, fn in (("rest", lambda: perf_binary(pa, http, "http", n, 1, seconds)),
                             ("shm-http", lambda: perf_shm(pa, http, "http", n, seconds)),
                             ("shm-grpc", lambda: perf_shm(pa, "127.0.0.1:%d" % gport, "grpc",
                                                           n, seconds)),
                             ("tally-shm", lambda: tally_bench(url, n, 1, seconds, "shm"))):
                r = fn()
                results[(name, n)] = r
                if r is not None:
                    print("  %-8s N=%-8d %9.1f req/s p50 %8.3f ms p99 %8.3f ms" % (
                        name, n, r[0], r[1], r[2]), file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait()
    engine = engine_times()
    print("float32 [N], concurrency 1, perf_analyzer --async: REST binary tensors, and x and y "
          "in system shared memory (--shared-memory system) over REST and gRPC; one tallyd; "
          "%d s windows; engine: bench_engine --serve, the scan alone" % seconds)
    print("(shm: perf_analyzer over REST; shm-gRPC: over gRPC; tally: `tally bench --format "
          "shm`, libtally over REST)")
    print("%-9s %10s %7s %10s %7s %7s %10s %7s %10s %7s %8s %7s" % (
        "N", "REST req/s", "p50 ms", "shm req/s", "p50 ms", "p99 ms", "gRPC req/s", "p50 ms",
        "tally req/s", "p50 ms", "engine", "shm/eng"))
    fails = []
    for n in SHM_SIZES:
        a, b, g, t = (results[("rest", n)], results[("shm-http", n)], results[("shm-grpc", n)],
                      results[("tally-shm", n)])
        if a is None or b is None or g is None or t is None:
            print("%-9d (no measurement)" % n)
            fails.append("shm N=%d: no measurement" % n)
            continue
        e = engine.get(n)
        print("%-9d %10.1f %7.3f %10.1f %7.3f %7.3f %10.1f %7.3f %10.1f %7.3f %8.3f %7.2f" % (
            n, a[0], a[1], b[0], b[1], b[2], g[0], g[1], t[0], t[1], e, b[1] / e))
        if t[3]:
            fails.append("tally bench --format shm N=%d: errors" % n)
        if n == 16 << 20:
            for name, r in (("perf_analyzer REST", b), ("perf_analyzer gRPC", g),
                            ("tally bench", t)):
                if r[1] > 1.5 * e:
                    fails.append("shm over %s N=%d: p50 %.3f ms > 1.5 x the engine's %.3f ms"
                                 % (name, n, r[1], e))
                if r[0] < 5 * a[0]:
                    fails.append("shm over %s N=%d: %.1f req/s < 5 x REST binary's %.1f"
                                 % (name, n, r[0], a[0]))
    return fails


SEQ_SIZES = (16, 65536)
SEQ_CONCURRENCY = (1, 16)
# perf_analyzer sums a window up in a time that grows much faster than the
# requests the window holds: at N=16 c=16 on machine G (about 20,000 a
# second) three 1 s windows took it 96 s and 4 s ones never ended, where
# 0.5 s ones took 4 s (BENCHMARKS.md, "Sequences in Redis: a connection on
# each door's loop"). Those cells take windows this long, every mode
# alike, so that their ratios stay like for like.
SEQ_FAST_CELLS = {(16, 16)}
SEQ_FAST_WINDOW_S = 0.5
# Those cells' ratios moved 0.59-0.72 from run to run with nothing
# changed (docs/performance.md, runs 8 to 12): each mode runs this many
# times, in turn, and the table takes the median of each.
SEQ_FAST_ROUNDS = 3


def median_run(runs):
    """The run of median throughput among runs (perf_binary's tuples; a
    None, a run that did not end, is left out), or None if none ended."""
    done = sorted((r for r in runs if r is not None), key=lambda r: r[0])
    return done[(len(done) - 1) // 2] if done else None


def round_ratios(rounds, num, den):
    """The throughput of mode num over mode den in each round (dicts of
    mode to perf_binary's tuple or None), as text: "-" where either run
    did not end."""
    return ", ".join("%.2f" % (g[num][0] / g[den][0])
                     if g.get(num) is not None and g.get(den) is not None else "-"
                     for g in rounds)


SEQ_MODES = ("plain", "sequence", "everysec", "always", "redis", "wait")


def start_redis(where, replica_of=None):
    """Debian's redis-server on a free port, for --state-store: its append-
    only file on, flushed once a second (durability.md says what appendfsync
    always changes); with replica_of (a port), a replica of that one, once
    its link is up. (process, port)."""
    from benchlib import free_port
    port = free_port()
    extra = ["--replicaof", "127.0.0.1", str(replica_of)] if replica_of else []
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                             "--dir", where, "--logfile", os.path.join(where, "redis.log")]
                            + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        out = subprocess.run(["redis-cli", "-p", str(port), "info", "replication"]
                             if replica_of else ["redis-cli", "-p", str(port), "ping"],
                             capture_output=True, text=True).stdout
        if ("master_link_status:up" in out) if replica_of else out.strip() == "PONG":
            return proc, port
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def redis_floor(port, clients=1, n=20000, command=()):
    """redis-benchmark against the bench's Redis: PING (or command) from
    `clients` connections, one at a time each: (requests/s, p50 ms)."""
    args = ["redis-benchmark", "-p", str(port), "-c", str(clients), "-n", str(n), "--csv"]
    args += list(command) if command else ["-t", "ping"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    rows = [line.split('","') for line in out.strip().splitlines()]
    head = [h.strip('"') for h in rows[0]]
    last = [v.strip('"') for v in rows[-1]]
    row = dict(zip(head, last))
    return float(row["rps"]), float(row["p50_latency_ms"])


def tally_script():
    """redis_store.c's SCRIPT, the write tally's script does, read from the
    C source (one text for both)."""
    src = open(os.path.join(ROOT, "server", "redis", "redis_store.c")).read()
    macros = open(os.path.join(ROOT, "server", "redis", "redis_int.h")).read() + src
    body = src[src.index("const char redis_script[] ="):]
    body = body[:body.index(";\n")]
    # the string macros it splices in (SCRIPT_LAST)
    for name, value in re.findall(r'#define (\w+) "([^"]*)"', macros):
        body = body.replace('" %s "' % name, value)
    return "".join(bytes(m, "ascii").decode("unicode_escape")
                   for m in re.findall(r'"((?:[^"\\]|\\.)*)"', body))


def load_script(port):
    """tally_script() loaded into the Redis on port: its SHA-1."""
    return subprocess.run(["redis-cli", "-p", str(port), "SCRIPT", "LOAD", tally_script()],
                          capture_output=True, text=True, check=True).stdout.strip()


def script_floor(port, clients, n):
    """tally's write script alone (EVALSHA, as tallyd sends it), from
    `clients` connections, for the sizing figure and the c=1 floor: a new
    random key among a million each time, and a value as long as a
    float32 [N] chunk's (a 32-byte version and a 131-byte record: one
    carry). (requests/s, p50 ms)."""
    sha = load_script(port)
    return redis_floor(port, clients, n, (
        "-r", "1000000", "evalsha", sha, "1", "seq:__rand_int__", "", "60000", "put",
        "0" * 15 + "1" + "0" * 12 + "7a11" + "r" * 131))


def store_floor(port, nbytes):
    """What one write of tally's script adds to a request at concurrency
    1 when nothing else is in the way (tests/bench/store_floor.c): a
    one-loop server answering nbytes for nbytes, with and without the
    script's round trip on its own loop. Its JSON (plain_p50_us,
    store_p50_us, added_us)."""
    out = subprocess.run([os.path.join(BIN, "store_floor"), str(port), load_script(port),
                          str(nbytes), "3000", "4"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# serve_floor()'s kinds for each door, and the program behind them
FLOOR_PREFIX = {"http": "", "grpc": "grpc-"}
FLOOR_NAME = {"http": "store_floor serve", "grpc": "grpc_floor"}


def serve_floor(rport, procs):
    """The same chunks at concurrency 16 against the smallest server that
    does their work (store_floor serve: one epoll loop that speaks just
    enough KServe v2 for perf_analyzer's sequence mode over REST binary),
    three times: with the running sums in memory ("mem"), with each
    chunk's new state written to the Redis on rport by tally's script
    before its answer leaves ("store"), and the same with the three calls
    libmicrohttpd makes around a suspended request ("suspend": the
    socket out of the epoll set while Redis has the chunk, and back after
    a read that finds nothing); and the first two over gRPC ("grpc-mem",
    "grpc-store": build/bin/grpc_floor, one epoll loop with nghttp2's
    server session). Started here, each appended to procs as it starts
    (terminate() stops it). A dict of those kinds to (Popen, address)."""
    sha = load_script(rport)
    out = {}
    for kind, args in (("mem", ["store_floor", "serve", "0", str(rport), "-", "1"]),
                       ("store", ["store_floor", "serve", "0", str(rport), sha, "1"]),
                       ("suspend", ["store_floor", "serve", "0", str(rport), sha, "1",
                                    "suspend"]),
                       ("grpc-mem", ["grpc_floor", "0", str(rport), "-"]),
                       ("grpc-store", ["grpc_floor", "0", str(rport), sha])):
        p = subprocess.Popen([os.path.join(BIN, args[0])] + args[1:],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        line = p.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            raise RuntimeError("%s did not start" % args[0])
        out[kind] = (p, "127.0.0.1:" + line[1])
    return out


def fsync_floor(where, n=2000, gap_us=200):
    """The machine's own durable write (tests/bench/fsync_latency.c: 64
    bytes and fdatasync, n times, in the directory the logs are in, into
    room allocated ahead as the log writes, then appended, then into room
    again after gap_us of sleep each): its JSON; p50_us and the like are
    the first way, paced_p50_us the last."""
    exe = os.path.join(BIN, "fsync_latency")
    out = subprocess.run([exe, where, str(n), str(int(gap_us))], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def hop_floor(where):
    """A record's hop from a loop thread to a writer thread (pwrite, no
    flush) and back, 5000 times after 150 us of sleep each
    (tests/bench/hop_latency.c): the least --state-fsync everysec adds to
    a chunk at concurrency 1. Its JSON."""
    exe = os.path.join(BIN, "hop_latency")
    out = subprocess.run([exe, where, "5000", "150"], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def seq_table(pa, seconds, before=None):
    """perf_analyzer in its sequence mode beside its plain mode, over REST
    binary and gRPC, and the sequences made durable: four tallyds, one with
    the defaults (the model config has no sequence_batching, so
    perf_analyzer sends plain requests), one with --model-sequence-batching
    (perf_analyzer sees it and sends sequences of 20 chunks, as many at
    once as its concurrency), and two more with --state-dir, one for each
    --state-fsync (every applied chunk logged before its answer), each
    cell's four runs back to back, over the same time windows. (A run
    bounded by --request-count can wait forever on a busy machine, and
    its one clamped window gave the sequence runs rates that differ from
    the windows' by a constant factor (BENCHMARKS.md, "--request-count
    runs that never ended"), so the table keeps the windows; a run that
    does not end is named.) Targets: a chunk costs what the same request
    costs alone, 0.9 of the plain throughput at least; everysec 0.9 of the
    sequence's in every cell; always 0.7 of it at concurrency 16, and at
    concurrency 1 a p50 within the sequence's plus 1.5 fdatasync latencies
    of this machine (fsync_latency, measured in the same directory before
    and after)."""
    from benchlib import free_port
    procs, addr = [], {}
    state = tempfile.mkdtemp(prefix="bench-serve-state-")
    floor = fsync_floor(state)
    hop = hop_floor(state)
    print("fdatasync of 64 bytes in %s: p50 %.1f us, p90 %.1f us, p99 %.1f us; after %d us "
          "of sleep each: p50 %.1f us; a hop to a writer thread and back: p50 %.1f us" % (
              state, floor["p50_us"], floor["p90_us"], floor["p99_us"], floor["gap_us"],
              floor["paced_p50_us"], hop["p50_us"]), file=sys.stderr, flush=True)
    rdir = os.path.join(state, "redis")
    os.makedirs(rdir)
    redis, rport = start_redis(rdir)
    procs.append(redis)
    # a replica, for --state-store-wait 1 (the "wait" mode): every mode
    # through Redis runs with it there, so the two compare alike
    rdir2 = os.path.join(state, "redis-replica")
    os.makedirs(rdir2)
    procs.append(start_redis(rdir2, replica_of=rport)[0])
    try:
        floors = serve_floor(rport, procs)
        for mode in SEQ_MODES:
            extra = [] if mode == "plain" else ["--model-sequence-batching"]
            if mode in ("everysec", "always"):
                d = os.path.join(state, mode)
                os.makedirs(d)
                extra += ["--state-dir", d, "--state-fsync", mode]
            if mode in ("redis", "wait"):
                extra += ["--state-store", "redis://127.0.0.1:%d" % rport]
            if mode == "wait":
                extra += ["--state-store-wait", "1"]
            for tag, binary in (("", None),) + ((("before-", before),) if before else ()):
                if tag and mode in ("everysec", "always"):
                    d = os.path.join(state, tag + mode)
                    os.makedirs(d)
                    extra = extra[:-4] + ["--state-dir", d, "--state-fsync", mode]
                if tag and mode in ("redis", "wait"):
                    # its own keys: the two tallyds' versions differ
                    extra = extra + ["--state-store-prefix", "before:"]
                log = open(os.path.join(tempfile.gettempdir(),
                                        "bench_serve_%s%s_tallyd.log" % (tag, mode)), "wb")
                gport = free_port()
                # a PoCL cache each: they run at once
                proc, url = start_tallyd("bench-serve-" + tag + mode, log,
                                         ["--access-log=off", "--grpc-listen",
                                          "127.0.0.1:%d" % gport] + extra, binary=binary)
                procs.append(proc)
                addr[(tag + mode, "http")] = url.replace("http://", "")
                addr[(tag + mode, "grpc")] = "127.0.0.1:%d" % gport
        results = {}
        for proto in ("http", "grpc"):
            for n in SEQ_SIZES:
                for c in SEQ_CONCURRENCY:
                    fast = (n, c) in SEQ_FAST_CELLS
                    win = SEQ_FAST_WINDOW_S if fast else seconds
                    # every mode in turn, then again: the rounds see the
                    # same drift of the machine
                    targets = [(mode, addr[(mode, proto)]) for mode in SEQ_MODES]
                    if before:  # each mode's two tallyds in turn
                        targets = [t for mode in SEQ_MODES for t in (
                            ("before-" + mode, addr[("before-" + mode, proto)]),
                            (mode, addr[(mode, proto)]))]
                    # the same chunks against the smallest server that does
                    # their work, in memory and through Redis; over REST at
                    # c=16 also through Redis with libmicrohttpd's suspend
                    kinds = () if before else ("mem", "store") + (
                        ("suspend",) if proto == "http" and c >= 16 else ())
                    targets += [("floor-" + k, floors[FLOOR_PREFIX[proto] + k][1])
                                for k in kinds]
                    rounds = []
                    for rnd in range(SEQ_FAST_ROUNDS if fast or before else 1):
                        got = {}
                        # the two tallyds swap places each round, so that
                        # neither always runs second
                        order = targets
                        if before and rnd % 2 == 1:
                            order = [t for k in range(0, 2 * len(SEQ_MODES), 2)
                                     for t in (targets[k + 1], targets[k])] \
                                + targets[2 * len(SEQ_MODES):]
                        for mode, address in order:
                            extra = (("--sequence-length", "20", "--sequence-id-range",
                                      "1:100000") if not mode.endswith("plain") else ())
                            r = perf_binary(pa, address, proto, n, c, win, extra=extra)
                            got[mode] = r
                            if r is not None:
                                print("  %-11s %-4s N=%-6d c=%-3d %9.1f req/s p50 %8.3f ms" % (
                                    mode, proto, n, c, r[0], r[1]), file=sys.stderr,
                                      flush=True)
                        rounds.append(got)
                    for mode, _ in targets:
                        results[(mode, proto, n, c)] = median_run(
                            [g[mode] for g in rounds])
                    results[("rounds", proto, n, c)] = rounds
        # Redis alone, after the runs: a PING's round trip from one client
        # (the c=1 target's unit), and tally's write script from 16
        ping = redis_floor(rport)
        script = script_floor(rport, 16, 200000)
        script1 = script_floor(rport, 1, 20000)
        # the same work on one loop, the tensors' sizes: the least a
        # chunk through Redis can add here at concurrency 1
        loop_floor = {n: store_floor(rport, 4 * n) for n in SEQ_SIZES}
    finally:
        # the last started first: Redis after the servers that use it,
        # so that none of them reports it gone
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if before:
        return compare_table(results, before)
    print("redis-benchmark against the bench's Redis (appendonly yes, appendfsync everysec): "
          "PING from 1 client p50 %.3f ms (%.0f/s); tally's write script (a 131-byte "
          "record, random keys) from 16 clients %.0f/s (p50 %.3f ms), from 1 client "
          "%.0f/s (p50 %.3f ms)" % (ping[1], ping[0], script[0], script[1], script1[0],
                                   script1[1]),
          file=sys.stderr, flush=True)
    for n in SEQ_SIZES:
        lf = loop_floor[n]
        print("one loop, %d bytes each way (store_floor): p50 %.1f us answered at once, "
              "%.1f us after the script's round trip: +%.1f us" % (
                  4 * n, lf["plain_p50_us"], lf["store_p50_us"], lf["added_us"]),
              file=sys.stderr, flush=True)
    after = fsync_floor(state)
    hop_after = hop_floor(state)
    # at concurrency 1 the log flushes once a request, a request's own
    # time apart: fdatasync measured at that pace, cell by cell
    paced = {}
    for proto in ("http", "grpc"):
        for n in SEQ_SIZES:
            b = results.get(("sequence", proto, n, 1))
            if b is not None:
                paced[(proto, n)] = fsync_floor(state, 500, b[1] * 1000)["paced_p50_us"] / 1e3
    shutil.rmtree(state, ignore_errors=True)
    fsync_ms = max(floor["p50_us"], after["p50_us"]) / 1000.0
    paced_ms = max(floor["paced_p50_us"], after["paced_p50_us"]) / 1000.0
    hop_ms = max(hop["p50_us"], hop_after["p50_us"]) / 1000.0
    write_sequence_json(seconds, results, floor, after, hop, hop_after, paced, ping, script,
                        script1, loop_floor)
    print("float32 [N], binary tensors, perf_analyzer --async; plain: tallyd's defaults; "
          "sequence: perf_analyzer's sequence mode (20 chunks a sequence) against a tallyd "
          "with --model-sequence-batching; everysec, always: the same with --state-dir "
          "and --state-fsync; %g s windows (%g s at N=16 c=16); fdatasync of 64 bytes "
          "alone (fsync_latency): "
          "p50 %.1f us before, %.1f us after, back to back; %.1f and %.1f us after %d us of "
          "sleep each; a hop to a writer thread and back alone (hop_latency): p50 %.1f us "
          "before, %.1f us after" % (
              seconds, SEQ_FAST_WINDOW_S, floor["p50_us"], after["p50_us"], floor["paced_p50_us"],
              after["paced_p50_us"], floor["gap_us"], hop["p50_us"], hop_after["p50_us"]))
    print("redis: the same with --state-store (Redis on this machine: appendonly yes, "
          "appendfsync everysec); redis-benchmark: PING from 1 client p50 %.3f ms; tally's "
          "write script alone from 16 clients %.0f/s, from 1 %.0f/s (p50 %.3f ms)" % (
              ping[1], script[0], script1[0], script1[1]))
    print("wait: the same as redis with --state-store-wait 1 (Redis with one replica, on "
          "this machine, for both; its ratio is to redis)")
    print("%-4s %-6s %-4s %11s %7s %11s %7s %5s %11s %7s %5s %11s %7s %5s %11s %7s %5s "
          "%11s %7s %5s" % (
              "", "N", "c", "plain/s", "p50 ms", "sequence/s", "p50 ms", "ratio",
              "everysec/s", "p50 ms", "ratio", "always/s", "p50 ms", "ratio",
              "redis/s", "p50 ms", "ratio", "wait/s", "p50 ms", "ratio"))
    fails = []
    for proto in ("http", "grpc"):
        for n in SEQ_SIZES:
            for c in SEQ_CONCURRENCY:
                got = {m: results[(m, proto, n, c)] for m in SEQ_MODES}
                missing = [m for m in SEQ_MODES if got[m] is None]
                if missing:
                    print("%-4s %-6d %-4d  (%s: no measurement)" % (proto, n, c,
                                                                    ", ".join(missing)))
                    fails.append("sequence table, %s N=%d c=%d: the %s run did not finish" % (
                        proto, n, c, ", ".join(missing)))
                    continue
                a, b, e, w, rd, wt = (got[m] for m in SEQ_MODES)
                print("%-4s %-6d %-4d %11.1f %7.3f %11.1f %7.3f %5.2f %11.1f %7.3f %5.2f "
                      "%11.1f %7.3f %5.2f %11.1f %7.3f %5.2f %11.1f %7.3f %5.2f" % (
                          proto, n, c, a[0], a[1], b[0], b[1], b[0] / a[0], e[0], e[1],
                          e[0] / b[0], w[0], w[1], w[0] / b[0], rd[0], rd[1], rd[0] / b[0],
                          wt[0], wt[1], wt[0] / rd[0]))
                fm, fs, fu = (results.get(("floor-" + k, proto, n, c))
                              for k in ("mem", "store", "suspend"))
                if fm is not None and fs is not None:
                    print("%-4s %-6d %-4d the smallest server doing the same (%s, "
                          "one loop): in memory %.1f/s (p50 %.3f ms), through Redis %.1f/s "
                          "(p50 %.3f ms): %.2f%s, tallyd %.2f" % (
                              proto, n, c, FLOOR_NAME[proto], fm[0], fm[1], fs[0], fs[1], fs[0] / fm[0],
                              "; with libmicrohttpd's suspend and resume %.1f/s: %.2f" % (
                                  fu[0], fu[0] / fm[0]) if fu is not None else "",
                              rd[0] / b[0]))
                elif ("floor-mem", proto, n, c) in results:
                    print("%-4s %-6d %-4d the smallest server doing the same: no measurement" % (
                        proto, n, c))
                rounds = results[("rounds", proto, n, c)]
                if len(rounds) > 1:
                    print("%-4s %-6d %-4d %d rounds, the medians above; redis/sequence by round: "
                          "%s%s" % (proto, n, c, len(rounds),
                                    round_ratios(rounds, "redis", "sequence"),
                                    "; the smallest server's: "
                                    + round_ratios(rounds, "floor-store", "floor-mem")
                                    + ("; with suspend and resume: "
                                       + round_ratios(rounds, "floor-suspend", "floor-mem")
                                       if "floor-suspend" in rounds[0] else "")
                                    if "floor-mem" in rounds[0] else ""))
                if c >= 16 and rd[0] < 0.7 * b[0]:
                    fails.append("redis %s N=%d c=%d: %.0f < 0.7 x sequence %.0f" % (
                        proto, n, c, rd[0], b[0]))
                if c == 1:
                    lf = loop_floor[n]
                    print("%-4s %-6d %-4d redis p50 %.3f ms; sequence's %.3f + 1.5 x PING "
                          "%.3f ms = %.3f ms; it adds %.3f ms, one loop doing the same "
                          "(store_floor, %d bytes each way) %.3f ms%s" % (
                              proto, n, c, rd[1], b[1], ping[1], b[1] + 1.5 * ping[1],
                              rd[1] - b[1], 4 * n, lf["added_us"] / 1e3,
                              ", the smallest server under perf_analyzer (%s) %.3f ms" % (
                                  FLOOR_NAME[proto], fs[1] - fm[1])
                              if fm is not None and fs is not None
                              else ""))
                    if rd[1] > b[1] + 1.5 * ping[1]:
                        fails.append("redis %s N=%d c=1: p50 %.3f ms > sequence's %.3f + "
                                     "1.5 x PING %.3f ms" % (proto, n, rd[1], b[1], ping[1]))
                if b[0] < 0.9 * a[0]:
                    fails.append("sequence %s N=%d c=%d: %.0f < 0.9 x plain %.0f" % (
                        proto, n, c, b[0], a[0]))
                if e[0] < 0.9 * b[0]:
                    fails.append("everysec %s N=%d c=%d: %.0f < 0.9 x sequence %.0f%s" % (
                        proto, n, c, e[0], b[0],
                        " (0.9 leaves %.3f ms a chunk; a hop alone takes %.3f ms)" % (
                            1 / (0.9 * b[0]) * 1e3 - 1 / b[0] * 1e3, hop_ms) if c == 1 else ""))
                if c >= 16 and w[0] < 0.7 * b[0]:
                    fails.append("always %s N=%d c=%d: %.0f < 0.7 x sequence %.0f" % (
                        proto, n, c, w[0], b[0]))
                if c == 1:
                    pm = paced.get((proto, n), paced_ms)
                    print("%-4s %-6d %-4d always p50 %.3f ms; sequence's %.3f + 1.5 x "
                          "fdatasync: %.3f ms back to back, %.3f ms at the request's pace "
                          "(%.3f ms after %.0f us of sleep)" % (
                              proto, n, c, w[1], b[1], b[1] + 1.5 * fsync_ms,
                              b[1] + 1.5 * pm, pm, b[1] * 1000))
                    if w[1] > b[1] + 1.5 * fsync_ms:
                        fails.append("always %s N=%d c=1: p50 %.3f ms > sequence's %.3f + "
                                     "1.5 x fdatasync %.3f ms (%s 1.5 x fdatasync at the "
                                     "request's pace, %.3f ms)" % (
                                         proto, n, w[1], b[1], fsync_ms,
                                         "within" if w[1] <= b[1] + 1.5 * pm else "beyond",
                                         pm))
    return fails


def write_sequence_json(seconds, results, floor, after, hop, hop_after, paced, ping, script,
                        script1, loop_floor):
    """The sequence table's figures, for docs/performance.md's sequence,
    durable and store tables (tools/perf_page.py): build/bench/sequence.json."""
    import json
    from bench_peers import commit, cpu
    cells = []
    for proto in ("http", "grpc"):
        for n in SEQ_SIZES:
            for c in SEQ_CONCURRENCY:
                row = {"proto": proto, "n": n, "c": c}
                for mode in SEQ_MODES + ("floor-mem", "floor-store"):
                    r = results.get((mode, proto, n, c))
                    row[mode] = None if r is None else {"rps": r[0], "p50_ms": r[1]}
                cells.append(row)
    data = {"part": "sequence", "machine": cpu(), "commit": commit(),
            "date": time.strftime("%Y-%m-%d"),
            "command": "make bench-serve BENCH_ARGS=\"--only sequence\"",
            "seconds": seconds, "cells": cells,
            "fast_cells": sorted(list(k) for k in SEQ_FAST_CELLS),
            "fast_window_s": SEQ_FAST_WINDOW_S, "fast_rounds": SEQ_FAST_ROUNDS,
            "fsync_p50_us": max(floor["p50_us"], after["p50_us"]),
            "hop_p50_us": max(hop["p50_us"], hop_after["p50_us"]),
            "paced_fsync_ms": {"%s %d" % k: v for k, v in paced.items()},
            "ping_p50_ms": ping[1], "script_rps_16": script[0], "script_p50_ms_1": script1[1],
            "store_floor_added_us": {str(n): loop_floor[n]["added_us"] for n in SEQ_SIZES}}
    out = os.path.join(ROOT, "build", "bench")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "sequence.json"), "w") as f:
        json.dump(data, f, indent=1)
    print("bench-serve: wrote build/bench/sequence.json", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "perf_page.py"), "--only",
                    "sequence"], check=True)


def paired_ratio(rounds, mode):
    """The median, over the rounds, of this tallyd's throughput over the
    one before's in the same round (their runs are next to each other, so
    a drift of the machine moves both), and the rounds' ratios as text;
    (None, text) when no round has both."""
    got = [g[mode][0] / g["before-" + mode][0] for g in rounds
           if g.get(mode) is not None and g.get("before-" + mode) is not None]
    text = round_ratios(rounds, mode, "before-" + mode)
    return (sorted(got)[(len(got) - 1) // 2] if got else None), text


def compare_table(results, before):
    """The sequence table's cells, the tallyd before a change (binary
    `before`) and this one, run next to each other in each of three
    rounds: this one's throughput over the other's in each round, and the
    median of those (the cell's ratio); the medians of each side's
    throughput and p50 beside it. Target: within 10 % in every cell."""
    print("sequence table, two tallyds in turn: before %s, after %s; three rounds, "
          "each mode's two runs next to each other; ratio: the median of the rounds' "
          "after / before" % (before, os.path.join(BIN, "tallyd")))
    print("%-4s %-6s %-4s %-9s %11s %11s %6s %9s %9s %6s  %s" % (
        "", "N", "c", "mode", "before/s", "after/s", "ratio", "p50 ms", "p50 ms", "ratio",
        "rounds"))
    fails = []
    for proto in ("http", "grpc"):
        for n in SEQ_SIZES:
            for c in SEQ_CONCURRENCY:
                for mode in SEQ_MODES:
                    a, b = results[("before-" + mode, proto, n, c)], results[(mode, proto, n, c)]
                    if a is None or b is None:
                        print("%-4s %-6d %-4d %-9s (no measurement)" % (proto, n, c, mode))
                        fails.append("compare %s %s N=%d c=%d: no measurement" % (
                            mode, proto, n, c))
                        continue
                    r, by_round = paired_ratio(results[("rounds", proto, n, c)], mode)
                    print("%-4s %-6d %-4d %-9s %11.1f %11.1f %6.2f %9.3f %9.3f %6.2f  %s" % (
                        proto, n, c, mode, a[0], b[0], r, a[1], b[1], b[1] / a[1], by_round))
                    if abs(r - 1) > 0.10:
                        fails.append("compare %s %s N=%d c=%d: after %.0f/s, %.2f x before "
                                     "%.0f/s" % (mode, proto, n, c, b[0], r, a[0]))
    return fails


def first_cell(pa, url, fmt, n, c, seconds):
    """One cell of the first table against the tallyd at url."""
    return (tally_bench(url, n, c, seconds) if fmt == "binary"
            else tally_bench(url, n, c, seconds, "json") if n < 4096
            else perf_json(pa, url, n, c, seconds))


def first_compare(pa, formats, seconds, before):
    """The first table's cells against two tallyds, the one before a
    change (binary `before`) and this one, each with --max-batch 1 and
    with the default, all four started at once and run in turn: in each
    of three rounds a cell's before and after runs are next to each other
    (before first in rounds 1 and 3, second in round 2). A cell's ratio
    is the median of its rounds' after / before throughput. Target:
    within 5 % in every cell."""
    log = open(os.path.join(tempfile.gettempdir(), "bench_serve_tallyd.log"), "wb")
    flags = ["--access-log=off", "--max-sequences", "0"]
    procs, urls = [], {}
    try:
        for side, binary in (("before", before), ("after", None)):
            for batch in ("1", "default"):
                proc, url = start_tallyd(
                    "bench-serve-%s%s" % ("before-" if side == "before" else "", batch), log,
                    flags + (["--max-batch", "1"] if batch == "1" else []), binary)
                procs.append(proc)
                urls[(side, batch)] = url
        results = {}
        for fmt in formats:
            for n in SIZES:
                for c in CONCURRENCY:
                    for batch in ("1", "default"):
                        rounds = []
                        for k in range(3):
                            got = {}
                            for side in (("before", "after") if k % 2 == 0
                                         else ("after", "before")):
                                got[side] = first_cell(pa, urls[(side, batch)], fmt, n, c,
                                                       seconds)
                            rounds.append(got)
                            print("  %-7s %-6s N=%-8d c=%-3d round %d: before %s, after %s" % (
                                batch, fmt, n, c, k + 1,
                                "%.1f/s" % got["before"][0] if got["before"] else "-",
                                "%.1f/s" % got["after"][0] if got["after"] else "-"),
                                file=sys.stderr, flush=True)
                        results[(fmt, n, c, batch)] = rounds
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
    print("float32 [1,N], the first table's cells, two tallyds in turn: before %s, after %s; "
          "%d s a run, three rounds, each pair's runs next to each other; ratio: the median "
          "of the rounds' after / before" % (before, os.path.join(BIN, "tallyd"), seconds))
    print("%-6s %-8s %-4s %-7s %11s %11s %6s %9s %9s  %s" % (
        "format", "N", "c", "batch", "before/s", "after/s", "ratio", "p50 ms", "p50 ms",
        "rounds"))
    fails = []
    for fmt in formats:
        for n in SIZES:
            for c in CONCURRENCY:
                for batch in ("1", "default"):
                    rounds = results[(fmt, n, c, batch)]
                    a = median_run([g["before"] for g in rounds])
                    b = median_run([g["after"] for g in rounds])
                    r, by_round = paired_ratio(
                        [{"x": g["after"], "before-x": g["before"]} for g in rounds], "x")
                    name = "mb=1" if batch == "1" else "default"
                    if a is None or b is None or r is None:
                        print("%-6s %-8d %-4d %-7s (no measurement)" % (fmt, n, c, name))
                        fails.append("compare %s %s N=%d c=%d: no measurement" % (
                            fmt, name, n, c))
                        continue
                    print("%-6s %-8d %-4d %-7s %11.1f %11.1f %6.2f %9.3f %9.3f  %s" % (
                        fmt, n, c, name, a[0], b[0], r, a[1], b[1], by_round))
                    if a[3] or b[3]:
                        fails.append("compare %s %s N=%d c=%d: errors" % (fmt, name, n, c))
                    if abs(r - 1) > 0.05:
                        fails.append("compare %s %s N=%d c=%d: after %.0f/s, %.2f x before "
                                     "%.0f/s" % (fmt, name, n, c, b[0], r, a[0]))
    return fails


def placements(url):
    """{"backend reason": jobs} from tally_placements_total, non-zero only."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {"%s %s" % (b, why): int(float(v)) for b, why, v in re.findall(
        r'^tally_placements_total\{backend="([^"]*)",reason="([^"]*)"\} (\S+)$', text, re.M)
        if float(v) > 0}


def place_table(seconds, rounds=2):
    configs = (("host", ["--device", "host"]),
               ("device", ["--device", "cpu", "--placement", "device"]),
               ("cost", []))
    cells = [(n, c) for n in (65536, 1048576) for c in (1, 16)]
    got = {}  # (config, n, c): [req/s of each round]
    where = {}
    log = open(os.path.join(tempfile.gettempdir(), "bench_serve_place.log"), "wb")
    for rnd in range(rounds):
        for name, args in configs:
            proc, url = start_tallyd("bench-serve-place", log,
                                     ["--access-log=off", "--max-sequences", "0"] + args)
            try:
                for n, c in cells:
                    r = tally_bench(url, n, c, seconds)
                    got.setdefault((name, n, c), []).append(r[0])
                    print("  round %d %-6s N=%-8d c=%-3d %9.1f req/s" % (rnd + 1, name, n, c, r[0]),
                          file=sys.stderr, flush=True)
                if name == "cost":
                    where[rnd] = placements(url)
            finally:
                proc.terminate()
                proc.wait()
    print("placement by cost: float32 [1,N], tally bench raw binary, %d s a cell, the mean of "
          "%d rounds (req/s)" % (seconds, rounds))
    print("%-8s %-4s %10s %10s %10s %12s" % ("N", "c", "host", "device", "cost", "cost / best"))
    fails = []
    for n, c in cells:
        m = {name: sum(got[(name, n, c)]) / rounds for name, _ in configs}
        ratio = m["cost"] / max(m["host"], m["device"])
        print("%-8d %-4d %10.1f %10.1f %10.1f %12.2f" % (n, c, m["host"], m["device"],
                                                         m["cost"], ratio))
        if ratio < 0.9:
            fails.append("placement N=%d c=%d: cost %.0f < 0.9 x best %.0f" % (
                n, c, m["cost"], max(m["host"], m["device"])))
    for rnd, w in sorted(where.items()):
        print("placements, round %d: %s" % (rnd + 1, ", ".join(
            "%s %d" % kv for kv in sorted(w.items()))))
    return fails


def report(fails):
    """The targets' verdict, and each one missed."""
    print("targets: %s" % ("all met" if not fails else "%d missed" % len(fails)))
    for f in fails:
        print("  missed: " + f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--only", choices=("binary", "json", "grpc", "shm", "sequence",
                                       "placement", "small"))
    ap.add_argument("--compare", metavar="TALLYD",
                    help="another tallyd binary (the one before a change) run in turn "
                         "with this one, three rounds a cell: the sequence table's "
                         "(--only sequence) or the first table's (no --only, binary, json)")
    ap.add_argument("--sync", action="store_true",
                    help="the gRPC table with perf_analyzer's synchronous mode")
    args = ap.parse_args()
    if args.only in ("grpc", "shm", "sequence", "placement", "small"):
        fails = (place_table(args.seconds) if args.only == "placement"
                 else small_table(args.seconds) if args.only == "small"
                 else grpc_table(perf_analyzer(), args.seconds,
                                 "--sync" if args.sync else "--async")
                 if args.only == "grpc"
                 else seq_table(perf_analyzer(), args.seconds, args.compare)
                 if args.only == "sequence"
                 else shm_table(perf_analyzer(), args.seconds))
        report(fails)
        return
    formats = [args.only] if args.only else ["binary", "json"]
    pa = perf_analyzer() if "json" in formats else None
    if args.compare:
        fails = first_compare(pa, formats, args.seconds, args.compare)
        report(fails)
        return
    results = {}
    log = open(os.path.join(tempfile.gettempdir(), "bench_serve_tallyd.log"), "wb")
    for batch in ("1", "default"):
        proc, url = start_tallyd("bench-serve", log, ["--access-log=off", "--max-sequences", "0"]
                                 + (["--max-batch", "1"] if batch == "1" else []))
        try:
            for fmt in formats:
                for n in SIZES:
                    for c in CONCURRENCY:
                        r = first_cell(pa, url, fmt, n, c, args.seconds)
                        results[(batch, fmt, n, c)] = r
                        if r is not None:
                            print("  %-7s %-6s N=%-8d c=%-3d %9.1f req/s p50 %8.3f ms p99 %8.3f"
                                  " ms" % (batch, fmt, n, c, r[0], r[1], r[2]),
                                  file=sys.stderr, flush=True)
        finally:
            proc.terminate()
            proc.wait()
    print("float32 [1,N]; binary: tally bench (raw bytes, /v1/cumsum); json (KServe): "
          "perf_analyzer, tally bench at N=16; %d s a cell" % args.seconds)
    print("%-6s %-8s %-4s %12s %8s %8s %12s %8s %8s %6s" % (
        "format", "N", "c", "mb=1 req/s", "p50 ms", "p99 ms", "default", "p50 ms", "p99 ms",
        "ratio"))
    fails = []
    for fmt in formats:
        for n in SIZES:
            for c in CONCURRENCY:
                a, b = results[("1", fmt, n, c)], results[("default", fmt, n, c)]
                if a is None or b is None:
                    print("%-6s %-8d %-4d  (no measurement)" % (fmt, n, c))
                    fails.append("%s N=%d c=%d: no measurement" % (fmt, n, c))
                    continue
                print("%-6s %-8d %-4d %12.1f %8.3f %8.3f %12.1f %8.3f %8.3f %6.2f" % (
                    fmt, n, c, a[0], a[1], a[2], b[0], b[1], b[2], b[0] / a[0]))
                if a[3] or b[3]:
                    fails.append("%s N=%d c=%d: errors" % (fmt, n, c))
                if b[0] < 0.95 * a[0]:
                    fails.append("%s N=%d c=%d: default %.0f < 0.95 x mb=1 %.0f" % (
                        fmt, n, c, b[0], a[0]))
                for batch, r in (("mb=1", a), ("default", b)):
                    one = results[("1" if batch == "mb=1" else "default", fmt, n, 1)]
                    if c > 1 and r[0] < one[0]:
                        fails.append("%s %s N=%d: c=%d %.0f < c=1 %.0f" % (
                            fmt, batch, n, c, r[0], one[0]))
                    if (fmt == "binary" or n < 4096) and r[2] > 3 * r[1]:
                        fails.append("%s %s N=%d c=%d: p99 %.2f > 3 x p50 %.2f" % (
                            fmt, batch, n, c, r[2], r[1]))
    for fmt in formats:
        a, b = results[("1", fmt, 65536, 64)], results[("default", fmt, 65536, 64)]
        if a and b and b[0] < 1.5 * a[0]:
            fails.append("%s N=65536 c=64: default %.0f < 1.5 x mb=1 %.0f" % (fmt, b[0], a[0]))
    if args.only is None:
        print()
        fails += grpc_table(pa, args.seconds)
        print()
        fails += shm_table(pa, args.seconds)
    report(fails)


if __name__ == "__main__":
    main()
