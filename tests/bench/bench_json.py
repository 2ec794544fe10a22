"""bench_json.py - JSON through tallyd, against Python's own JSON speed.

For float32, int64 and float16 tensors of 64K and 1M elements, over both
JSON APIs (POST /v1/cumsum and KServe v2 infer), it times the round trip
with curl (no gzip: --data-binary from a file, the answer to /dev/null),
the median of REPS runs, and prints MB/s of JSON in and out. Beside that, in
the same run, it times Python's json.loads of the same request document and
json.dumps of the answer (and orjson's, if installed), and prints the ratio
of tally's round trip to json.loads + json.dumps.

Two more tables follow, when the benchmark started the daemon itself (it
reads the daemon's access log, which times each step of every request):
where the time of the same requests went inside tallyd, step by step
(medians), and the KServe requests again with Accept-Encoding: gzip (the
answer compressed, not decompressed by curl), with the time gzip took.

usage: python3 tests/bench/bench_json.py [--url URL] [--reps N] [--tallyd PATH]
Without --url it starts build/bin/tallyd (or PATH, say an older build to
compare with) on a free port, with its own PoCL cache under build/.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchlib import ROOT, start_tallyd

KSERVE = {"float32": "FP32", "int64": "INT64", "float16": "FP16"}
STEPS = ("recv", "parse", "queue", "compute", "render", "send", "gzip")


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


def curl(url, path, body_file, out_file, request_id, gzip=False):
    """One request; returns (time_total, bytes downloaded)."""
    cmd = ["curl", "-s", "-o", out_file, "-w", "%{http_code} %{time_total} %{size_download}",
           "-H", "Content-Type: application/json", "-H", "X-Request-Id: " + request_id,
           "--data-binary", "@" + body_file, url + path]
    if gzip:
        cmd[1:1] = ["-H", "Accept-Encoding: gzip"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    code, t, size = r.stdout.split()
    if code != "200":
        said = open(out_file).read()[:300] if out_file != os.devnull else ""
        sys.exit("bench_json: %s answered %s: %s" % (path, code, said))
    return float(t), int(size)


def median_of(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def steps_of(log_path, prefix):
    """Median microseconds of each step over the access-log lines whose
    request id starts with prefix (the log is flushed every few ms)."""
    time.sleep(0.05)
    per = {k: [] for k in STEPS + ("total",)}
    with open(log_path) as f:
        for line in f:
            if '"request_id":"' + prefix not in line:
                continue
            rec = json.loads(line)
            for k in per:
                if k + "_us" in rec:  # older builds logged fewer steps
                    per[k].append(rec[k + "_us"])
    return {k: statistics.median(v) if v else -1 for k, v in per.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tallyd", default=os.path.join(ROOT, "build", "bin", "tallyd"))
    args = ap.parse_args()
    try:
        import orjson
    except ImportError:
        orjson = None
    proc = None
    url = args.url
    tmp = tempfile.mkdtemp(prefix="bench_json-")
    log_path = None
    try:
        if url is None:
            log_path = os.path.join(tmp, "tallyd.log")
            # every request's access line ("true": all, to builds before and
            # after --access-log took words)
            proc, url = start_tallyd("bench-json", open(log_path, "wb"),
                                     ["--access-log=true"], binary=args.tallyd)
        run(args, url, tmp, log_path, orjson)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, url, tmp, log_path, orjson):
    rng = np.random.default_rng(1)
    body_file, out_file = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
    print("round trip = curl's time_total, median of %d; MB/s = JSON bytes / round trip" % args.reps)
    print("py = json.loads(request) + json.dumps(answer), median; ratio = round trip / py")
    print("%-8s %-8s %-7s %7s %7s %8s %8s %8s %8s %6s %8s" % (
        "dtype", "n", "api", "in MB", "out MB", "rt ms", "in MB/s", "out MB/s", "py ms",
        "ratio", "orjson"))
    worst = 0.0
    cases = []
    for dtype in ("float32", "int64", "float16"):
        for n in (65536, 1 << 20):
            x = tensor(dtype, n, rng)
            for api, doc in zip(("native", "kserve"), documents(dtype, x)):
                path = "/v1/cumsum" if api == "native" else "/v2/models/cumsum/infer"
                tag = "bj-%s-%d-%s-" % (dtype, n, api)
                with open(body_file, "w") as f:
                    f.write(doc)
                curl(url, path, body_file, out_file, "warm-" + tag)  # and the answer
                rt = statistics.median(curl(url, path, body_file, os.devnull, tag + str(i))[0]
                                       for i in range(args.reps))
                with open(out_file) as f:
                    answer_text = f.read()
                answer = json.loads(answer_text)
                py = median_of(lambda: json.loads(doc), args.reps) + \
                    median_of(lambda: json.dumps(answer), args.reps)
                oj = "-"
                if orjson is not None:
                    oj = "%.1f" % (1e3 * (median_of(lambda: orjson.loads(doc), args.reps)
                                          + median_of(lambda: orjson.dumps(answer),
                                                      args.reps)))
                ratio = rt / py
                worst = max(worst, ratio)
                print("%-8s %-8d %-7s %7.2f %7.2f %8.1f %8.1f %8.1f %8.1f %6.2f %8s" % (
                    dtype, n, api, len(doc) / 1e6, len(answer_text) / 1e6, rt * 1e3,
                    len(doc) / rt / 1e6, len(answer_text) / rt / 1e6, py * 1e3, ratio, oj))
                sys.stdout.flush()
                cases.append((dtype, n, api, path, tag, doc, rt))
    print("max ratio of round trip to json.loads + json.dumps: %.2f" % worst)
    if log_path is None:
        return
    print()
    print("inside tallyd, median us per step (access log): parse includes converting "
          "the numbers, render excludes gzip")
    print("%-8s %-8s %-7s" % ("dtype", "n", "api")
          + "".join(" %8s" % k for k in STEPS if k != "gzip") + " %8s" % "total")
    for dtype, n, api, _, tag, _, _ in cases:
        st = steps_of(log_path, tag)
        print("%-8s %-8d %-7s" % (dtype, n, api)
              + "".join(" %8d" % st[k] for k in STEPS if k != "gzip")
              + " %8d" % st["total"])
    print()
    print("with Accept-Encoding: gzip (KServe; curl keeps the answer compressed)")
    print("%-8s %-8s %8s %8s %8s %9s" % ("dtype", "n", "rt ms", "out MB", "gzip ms",
                                          "vs plain"))
    for dtype, n, api, path, tag, doc, rt in cases:
        if api != "kserve":
            continue
        with open(body_file, "w") as f:
            f.write(doc)
        ztag = "gz-" + tag
        runs = [curl(url, path, body_file, os.devnull, ztag + str(i), gzip=True)
                for i in range(args.reps)]
        zrt = statistics.median(r[0] for r in runs)
        st = steps_of(log_path, ztag)
        print("%-8s %-8d %8.1f %8.2f %8.1f %8.2fx" % (
            dtype, n, zrt * 1e3, runs[0][1] / 1e6, st["gzip"] / 1e3, zrt / rt))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
