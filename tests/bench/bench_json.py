"""bench_json.py - JSON through tallyd, against Python's own JSON speed.

For float32, int64 and float16 tensors of 64K and 1M elements, over both
JSON APIs (POST /v1/cumsum and KServe v2 infer), it times the round trip
with curl (no gzip: --data-binary from a file, the answer to /dev/null),
the median of REPS runs, and prints MB/s of JSON in and out. Beside that, in
the same run, it times Python's json.loads of the same request document and
json.dumps of the answer (and orjson's, if installed), and prints the ratio
of tally's round trip to json.loads + json.dumps.

usage: python3 tests/bench/bench_json.py [--url URL] [--reps N]
Without --url it starts build/bin/tallyd on a free port (its own PoCL
cache under build/).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KSERVE = {"float32": "FP32", "int64": "INT64", "float16": "FP16"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tallyd():
    port = free_port()
    env = dict(os.environ)
    env["POCL_CACHE_DIR"] = os.path.join(ROOT, "build", "pocl-bench-json")
    log = open(os.path.join(tempfile.gettempdir(), "bench_json_tallyd.log"), "wb")
    proc = subprocess.Popen([os.path.join(ROOT, "build", "bin", "tallyd"), "--listen",
                             "127.0.0.1:%d" % port], stdout=log, stderr=log, env=env)
    url = "http://127.0.0.1:%d" % port
    for _ in range(3000):
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("bench_json: tallyd did not become ready")


def tensor(dtype, n, rng):
    if dtype == "int64":
        return rng.integers(-1000, 1000, n, dtype=np.int64)
    return (rng.random(n) * 2 - 1).astype(dtype)


def documents(dtype, x):
    data = x.tolist()
    native = json.dumps({"dtype": dtype, "shape": [1, len(data)], "axis": 1, "data": data})
    kserve = json.dumps({"inputs": [{"name": "x", "shape": [1, len(data)],
                                     "datatype": KSERVE[dtype], "data": data}],
                         "parameters": {"axis": 1}})
    return native, kserve


def curl(url, path, body_file, out_file):
    r = subprocess.run(["curl", "-s", "-o", out_file, "-w", "%{http_code} %{time_total}",
                        "-H", "Content-Type: application/json", "--data-binary",
                        "@" + body_file, url + path], capture_output=True, text=True, check=True)
    code, t = r.stdout.split()
    if code != "200":
        sys.exit("bench_json: %s answered %s: %s" % (path, code, open(out_file).read()[:300]))
    return float(t)


def best_of(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    try:
        import orjson
    except ImportError:
        orjson = None
    proc = None
    url = args.url
    if url is None:
        proc, url = start_tallyd()
    rng = np.random.default_rng(1)
    tmp = tempfile.mkdtemp(prefix="bench_json-")
    body_file, out_file = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
    print("round trip = curl's time_total, median of %d; MB/s = JSON bytes / round trip" % args.reps)
    print("py = json.loads(request) + json.dumps(answer), median; ratio = round trip / py")
    print("%-8s %-8s %-7s %9s %9s %9s %9s %9s %7s %9s" % (
        "dtype", "n", "api", "in MB", "out MB", "rt ms", "in MB/s", "py ms", "ratio",
        "orjson ms"))
    worst = 0.0
    try:
        for dtype in ("float32", "int64", "float16"):
            for n in (65536, 1 << 20):
                x = tensor(dtype, n, rng)
                for api, doc in zip(("native", "kserve"), documents(dtype, x)):
                    path = "/v1/cumsum" if api == "native" else "/v2/models/cumsum/infer"
                    with open(body_file, "w") as f:
                        f.write(doc)
                    curl(url, path, body_file, out_file)  # warm up
                    rt = statistics.median(curl(url, path, body_file, out_file)
                                           for _ in range(args.reps))
                    with open(out_file) as f:
                        answer_text = f.read()
                    answer = json.loads(answer_text)
                    py = best_of(lambda: json.loads(doc), args.reps) + \
                        best_of(lambda: json.dumps(answer), args.reps)
                    oj = "-"
                    if orjson is not None:
                        oj = "%.1f" % (1e3 * (best_of(lambda: orjson.loads(doc), args.reps)
                                              + best_of(lambda: orjson.dumps(answer), args.reps)))
                    ratio = rt / py
                    worst = max(worst, ratio)
                    print("%-8s %-8d %-7s %9.2f %9.2f %9.1f %9.1f %9.1f %7.2f %9s" % (
                        dtype, n, api, len(doc) / 1e6, len(answer_text) / 1e6, rt * 1e3,
                        len(doc) / rt / 1e6, py * 1e3, ratio, oj))
                    sys.stdout.flush()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
    print("max ratio of round trip to json.loads + json.dumps: %.2f" % worst)


if __name__ == "__main__":
    main()
