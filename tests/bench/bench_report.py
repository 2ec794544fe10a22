"""bench_report.py - the measurements behind docs/performance.md, written
as JSON for tools/perf_page.py, which draws the pictures and fills the
page's tables (`make bench-report` runs both).

Four parts, each into build/bench/PART.json with the machine, the commit,
the date and the command:

  service    float32 [N], N = 16, 256, 4K, 64K, 1M, 16M, concurrency 1 and
             16, through each door of one tallyd (default settings):
             REST JSON (KServe v2 JSON, `tally bench --format json`: perf_
             analyzer's JSON mode cannot drive a model without a batch
             dimension, docs/kserve.md; N up to 1M), REST binary (perf_
             analyzer -i http --async, binary tensors), gRPC (-i grpc) and
             system shared memory (-i http --shared-memory system):
             requests a second, p50 and p99; windows of --seconds (16M:
             four times that).
  breakdown  where a request's time goes: the same doors through
             tritonclient, one request at a time, 20 a cell, against a
             tallyd that samples every request and sends its spans to a
             collector here (OTLP over HTTP); the median of each step
             (receive, decode, parse, queue, compute, render, send) and of
             the whole request span.
  engine     bench_engine --packed: the engine, the plain copy and the host
             backend in GB/s, per shape and axis (1M, 16M, 64M elements);
             and bench_engine --serve: the scan's own time for float32
             [N], N = 64K, 1M, 16M.
  floors     the service beside what the machine allows for the same
             traffic: tally's small JSON request (16 float32, POST
             /v1/cumsum) beside nginx answering a fixed body of the same
             size (`return 200`), wrk at concurrency 1 and 32, with each
             server's CPU time a request (/proc: tallyd's threads; nginx's
             master and workers); and a .npy round trip through tally at
             1M and 16M float32 beside curl moving the same bytes up to
             nginx (a POST it discards) and down from it (the same file
             served), the median of 5 curl runs each.
  accuracy   the largest relative error of a float32 cumulative sum of n
             uniform [0, 1) values against a float64 one, n = 2^10 to
             2^26: numpy.cumsum, a sequential float32 loop (a Python loop
             on numpy.float32 scalars, up to 2^20: it takes seconds a
             million), and tallyd (REST raw bytes, as the service picks its
             backend).

usage: python3 tests/bench/bench_report.py [--seconds S] [--only PART,...]
(the floors' wrk runs take 5 x S seconds each)
"""
import argparse
import http.server
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

from benchlib import BIN, ROOT, free_port, start_tallyd, wrk
from bench_peers import commit, cpu, tally_bench_json
from bench_serve import perf_analyzer, perf_binary

OUT = os.path.join(ROOT, "build", "bench")
SIZES = (16, 256, 4096, 65536, 1 << 20, 16 << 20)
JSON_MAX = 1 << 20
CONCURRENCY = (1, 16)
DOORS = ("rest-json", "rest-binary", "grpc", "shm")
BREAKDOWN_SIZES = (16, 65536, 1 << 20, 16 << 20)
STEPS = ("receive", "decode", "parse", "queue", "compute", "render", "send")
SEED = 20261125


def header(part, command):
    return {"part": part, "machine": cpu(), "commit": commit(), "date": time.strftime("%Y-%m-%d"),
            "command": command}


def write(part, data):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, part + ".json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    print("bench-report: wrote %s" % os.path.relpath(path, ROOT), file=sys.stderr, flush=True)


def log_file(name):
    return open(os.path.join(tempfile.gettempdir(), "bench_report_%s.log" % name), "wb")


# ---------------------------------------------------------------- service

def service(seconds):
    pa = perf_analyzer()
    gport = free_port()
    # --max-sequences 0: perf_analyzer sends plain requests (it enters its
    # sequence mode when the model config has sequence_batching)
    proc, url = start_tallyd("bench-report", log_file("service"),
                             ["--access-log=off", "--allow-shared-memory", "--max-sequences", "0",
                              "--grpc-listen", "127.0.0.1:%d" % gport])
    rest = url.replace("http://", "")
    data = header("service", "make bench-report (tests/bench/bench_report.py --only service)")
    data["seconds"] = seconds
    data["cells"] = []
    try:
        for n in SIZES:
            # windows long enough to hold several 64 MiB requests at once
            # (perf_analyzer gives up on a window that holds one)
            sec = seconds if n < (16 << 20) else 4 * seconds
            for c in CONCURRENCY:
                for door in DOORS:
                    if door == "rest-json":
                        r = tally_bench_json(url, n, c, sec, str(n)) if n <= JSON_MAX else None
                    elif door == "rest-binary":
                        r = perf_binary(pa, rest, "http", n, c, sec)
                    elif door == "grpc":
                        r = perf_binary(pa, "127.0.0.1:%d" % gport, "grpc", n, c, sec)
                    else:
                        r = perf_binary(pa, rest, "http", n, c, sec, extra=(
                            "--shared-memory", "system", "--output-shared-memory-size",
                            str(4 * n)))
                    cell = {"door": door, "n": n, "concurrency": c}
                    if r is None:
                        cell["error"] = ("JSON is measured up to %d elements" % JSON_MAX
                                         if door == "rest-json" and n > JSON_MAX
                                         else "no measurement")
                    else:
                        cell.update(rps=r[0], p50_ms=r[1], p99_ms=r[2])
                        print("  %-11s N=%-9d c=%-3d %9.1f req/s p50 %8.3f ms p99 %8.3f ms"
                              % (door, n, c, r[0], r[1], r[2]), file=sys.stderr, flush=True)
                    data["cells"].append(cell)
    finally:
        proc.terminate()
        proc.wait()
    write("service", data)


# ---------------------------------------------------------------- breakdown

class Collector:
    """An OTLP/HTTP trace receiver on loopback: keeps every span it is
    sent, as (trace id, span id, parent id, name, start ns, end ns)."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        self.spans = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                got = []
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            got.append((s.trace_id.hex(), s.span_id.hex(),
                                        s.parent_span_id.hex(), s.name,
                                        s.start_time_unix_nano, s.end_time_unix_nano))
                with outer.lock:
                    outer.spans += got
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, requests, timeout=20):
        """Waits until `requests` request spans (those without a parent
        here) have arrived with their steps; returns and forgets them, as
        {trace id: {name: duration ns}}."""
        end = time.time() + timeout
        while True:
            with self.lock:
                roots = [s for s in self.spans if s[3] not in STEPS]
                if len(roots) >= requests or time.time() > end:
                    spans, self.spans = self.spans, []
                    break
            time.sleep(0.2)
        by_trace = {}
        for trace, _, _, name, t0, t1 in spans:
            key = "request" if name not in STEPS else name
            by_trace.setdefault(trace, {})
            by_trace[trace][key] = by_trace[trace].get(key, 0) + (t1 - t0)
        return by_trace


def breakdown(count=20):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm
    col = Collector()
    gport = free_port()
    proc, url = start_tallyd("bench-report", log_file("breakdown"),
                             ["--access-log=off", "--allow-shared-memory", "--max-sequences", "0",
                              "--grpc-listen", "127.0.0.1:%d" % gport,
                              "--otlp-endpoint", "http://127.0.0.1:%d" % col.port,
                              "--trace-ratio", "1"])
    rest = url.replace("http://", "")
    data = header("breakdown", "make bench-report (tests/bench/bench_report.py --only breakdown)")
    data["requests"] = count
    data["cells"] = []
    rng = np.random.default_rng(SEED)
    try:
        h = httpclient.InferenceServerClient(rest, network_timeout=300)
        g = grpcclient.InferenceServerClient("127.0.0.1:%d" % gport)
        for n in BREAKDOWN_SIZES:
            x = rng.random(n, dtype=np.float32)
            ref = np.cumsum(x.astype(np.float64))
            for door in DOORS:
                if door == "rest-json" and n > JSON_MAX:
                    continue
                col.take(0, timeout=0)  # forget anything left
                region = None
                if door == "shm":
                    region = ("tally-report-x-%d" % os.getpid(), "tally-report-y-%d" % os.getpid())
                    hx = shm.create_shared_memory_region(region[0], "/" + region[0], x.nbytes)
                    hy = shm.create_shared_memory_region(region[1], "/" + region[1], x.nbytes)
                    shm.set_shared_memory_region(hx, [x])
                    h.register_system_shared_memory(region[0], "/" + region[0], x.nbytes)
                    h.register_system_shared_memory(region[1], "/" + region[1], x.nbytes)
                for _ in range(count):
                    if door == "grpc":
                        inp = grpcclient.InferInput("x", [n], "FP32")
                        inp.set_data_from_numpy(x)
                        y = g.infer("cumsum", [inp]).as_numpy("y")
                    else:
                        inp = httpclient.InferInput("x", [n], "FP32")
                        out = httpclient.InferRequestedOutput("y",
                                                              binary_data=door != "rest-json")
                        if door == "shm":
                            inp.set_shared_memory(region[0], x.nbytes)
                            out.set_shared_memory(region[1], x.nbytes)
                        else:
                            inp.set_data_from_numpy(x, binary_data=door != "rest-json")
                        r = h.infer("cumsum", [inp], outputs=[out])
                        y = (shm.get_contents_as_numpy(hy, np.float32, [n]) if door == "shm"
                             else r.as_numpy("y"))
                    if np.max(np.abs(y - ref) - ref * 2.0 ** -19 - 1e-6) > 0:
                        sys.exit("bench-report: a wrong answer through %s at N=%d" % (door, n))
                if region is not None:
                    h.unregister_system_shared_memory(region[0])
                    h.unregister_system_shared_memory(region[1])
                    shm.destroy_shared_memory_region(hx)
                    shm.destroy_shared_memory_region(hy)
                traces = col.take(count)
                cell = {"door": door, "n": n, "traced": len(traces)}
                for key in ("request",) + STEPS:
                    v = [t.get(key, 0) for t in traces.values()]
                    cell[key + "_us"] = statistics.median(v) / 1e3 if v else 0
                data["cells"].append(cell)
                print("  %-11s N=%-9d %s" % (door, n, " ".join(
                    "%s %.1f" % (k, cell[k + "_us"]) for k in ("request",) + STEPS)),
                    file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait()
        col.server.shutdown()
    write("breakdown", data)


# ---------------------------------------------------------------- engine

def engine():
    path = os.path.join(OUT, "engine.jsonl")
    os.makedirs(OUT, exist_ok=True)
    env = dict(os.environ, POCL_CACHE_DIR=os.path.join(ROOT, "build", "pocl-bench"))
    out = subprocess.run([os.path.join(BIN, "bench_engine"), "--packed", "--numpy",
                          os.path.join(ROOT, "tests", "bench", "numpy_cumsum.py"),
                          "--json", path], capture_output=True, text=True, env=env, check=True)
    sys.stderr.write(out.stdout)
    data = header("engine", "make bench-report (tests/bench/bench_report.py --only engine; "
                            "the same rows as make bench-engine's first table)")
    data["device"] = re.search(r"device: (.*)", out.stdout).group(1)
    data["rows"] = [json.loads(line) for line in open(path)]
    # the engine's own time for the service's shared-memory tensors, which
    # the shared-memory target compares a round trip with
    out = subprocess.run([os.path.join(BIN, "bench_engine"), "--serve"], capture_output=True,
                         text=True, env=env, check=True).stdout
    data["serve"] = {n: float(ms) for n, ms in re.findall(r"engine N=(\d+) ms=([\d.]+)", out)}
    write("engine", data)


# ---------------------------------------------------------------- accuracy

def float32_loop(x):
    y = np.empty_like(x)
    acc = np.float32(0)
    for i, v in enumerate(x):
        acc = np.float32(acc + v)
        y[i] = acc
    return y


def rel_err(y, ref):
    return float(np.max(np.abs(y.astype(np.float64) - ref) / ref))


def accuracy():
    proc, url = start_tallyd("bench-report", log_file("accuracy"), ["--access-log=off"])
    data = header("accuracy", "make bench-report (tests/bench/bench_report.py --only accuracy)")
    data["seed"] = SEED
    data["rows"] = []
    rng = np.random.default_rng(SEED)
    try:
        for k in range(10, 27, 2):
            n = 1 << k
            # (0, 1]: no element is 0, so no running sum is
            x = (1 - rng.random(n, dtype=np.float32)).astype(np.float32)
            ref = np.cumsum(x.astype(np.float64))
            row = {"n": n, "numpy": rel_err(np.cumsum(x), ref)}
            if n <= 1 << 20:
                loop = float32_loop(x)
                row["loop"] = rel_err(loop, ref)
                row["loop_equals_numpy"] = bool(np.array_equal(loop, np.cumsum(x)))
            req = urllib.request.Request(url + "/v1/cumsum?dtype=float32&shape=%d" % n,
                                         data=x.tobytes(), method="POST", headers={
                                             "Content-Type": "application/octet-stream"})
            with urllib.request.urlopen(req, timeout=600) as r:
                y = np.frombuffer(r.read(), dtype=np.float32)
            row["tally"] = rel_err(y, ref)
            data["rows"].append(row)
            print("  n=2^%-2d %s" % (k, json.dumps(row)), file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait()
    write("accuracy", data)


# ---------------------------------------------------------------- floors

SMALL_REPLY = ('{"dtype":"float32","shape":[16],"data":[0.5,1.5,3,5,7.5,10.5,14,18,22.5,27.5,'
               '33,39,45.5,52.5,60,68]}')


def ticks(pids):
    """utime + stime of the processes, in clock ticks."""
    t = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return t


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def curl_time(args, reps=5):
    times = []
    for _ in range(reps):
        out = subprocess.run(["curl", "-sf", "-o", "/dev/null", "-w", "%{time_total}"] + args,
                             capture_output=True, text=True, check=True, timeout=300)
        times.append(float(out.stdout))
    return statistics.median(times)


def floors(seconds):
    seconds = 5 * seconds
    tmp = tempfile.mkdtemp(prefix="bench-floors-")
    os.chmod(tmp, 0o755)  # nginx's workers read the files as another user
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    rng = np.random.default_rng(SEED)
    for n in (1 << 20, 16 << 20):
        np.save(os.path.join(www, "x%d.npy" % n), rng.random(n, dtype=np.float32))
    for f in os.listdir(www):
        os.chmod(os.path.join(www, f), 0o644)
    os.chmod(www, 0o755)
    nport = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""daemon off;
worker_processes auto;
pid %(t)s/nginx.pid;
error_log %(t)s/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %(t)s/body;
  proxy_temp_path %(t)s/proxy;
  fastcgi_temp_path %(t)s/fastcgi;
  uwsgi_temp_path %(t)s/uwsgi;
  scgi_temp_path %(t)s/scgi;
  server {
    listen 127.0.0.1:%(p)d;
    location = /small { default_type application/json; return 200 '%(r)s'; }
    location = /sink { client_max_body_size 1g; client_body_buffer_size 128m; return 200; }
    location / { root %(t)s/www; }
  }
}
""" % {"t": tmp, "p": nport, "r": SMALL_REPLY})
    nginx = subprocess.Popen(["/usr/sbin/nginx", "-c", conf], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    proc, url = start_tallyd("bench-floors", log_file("floors"), [])
    data = header("floors", "make bench-report (bench_report.py --only floors)")
    data.update(seconds=seconds, small=[], large=[])
    try:
        nurl = "http://127.0.0.1:%d" % nport
        for _ in range(100):
            try:
                urllib.request.urlopen(nurl + "/small", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        npids = [nginx.pid] + children(nginx.pid)
        for c in (1, 32):
            cell = {"concurrency": c}
            for who, target, env, pids in (
                    ("tally", url, None, [proc.pid]),
                    ("nginx", nurl, {"LOAD_PATH": "/small"}, npids)):
                t0 = ticks(pids)
                r = wrk(target, "small_json.lua", c, seconds, env=env)
                used = (ticks(pids) - t0) / os.sysconf("SC_CLK_TCK")
                r["cpu_us"] = used / max(r["requests"], 1) * 1e6
                cell[who] = r
            cell["ratio"] = cell["tally"]["rps"] / cell["nginx"]["rps"]
            data["small"].append(cell)
            print("  small c=%d: tally %.0f req/s (%.1f us CPU), nginx %.0f (%.1f us), %.2f" % (
                c, cell["tally"]["rps"], cell["tally"]["cpu_us"], cell["nginx"]["rps"],
                cell["nginx"]["cpu_us"], cell["ratio"]), file=sys.stderr, flush=True)
        for n in (1 << 20, 16 << 20):
            f = os.path.join(www, "x%d.npy" % n)
            t = curl_time(["--data-binary", "@" + f, "-H", "Content-Type: application/x-npy",
                           url + "/v1/cumsum?axis=0"])
            up = curl_time(["--data-binary", "@" + f, nurl + "/sink"])
            down = curl_time([nurl + "/x%d.npy" % n])
            cell = {"n": n, "bytes": os.path.getsize(f), "tally_s": t, "up_s": up,
                    "down_s": down, "ratio": t / (up + down)}
            data["large"].append(cell)
            print("  .npy %d: tally %.4f s, nginx up %.4f + down %.4f s, %.2f" % (
                n, t, up, down, cell["ratio"]), file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait()
        nginx.terminate()
        nginx.wait()
        subprocess.run(["rm", "-rf", tmp])
    write("floors", data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--only", help="comma-separated: service,breakdown,engine,accuracy,floors")
    args = ap.parse_args()
    parts = (args.only.split(",") if args.only
             else ["engine", "accuracy", "breakdown", "service", "floors"])
    for p in parts:
        if p not in ("service", "breakdown", "engine", "accuracy", "floors"):
            sys.exit("bench-report: no part %r" % p)
        print("bench-report: %s" % p, file=sys.stderr, flush=True)
        if p == "service":
            service(args.seconds)
        elif p == "breakdown":
            breakdown()
        elif p == "engine":
            engine()
        elif p == "floors":
            floors(args.seconds)
        else:
            accuracy()


if __name__ == "__main__":
    main()
