#!/usr/bin/env python3
"""bench_start.py - how soon does a new tallyd answer? (make bench-start)

A new pod on a node whose CPU the image's kernel cache was not built for
starts with a cold PoCL cache. Each run here starts tallyd with an empty
cache of its own (build/pocl-bench-start, emptied first) and records, from
the moment the process is spawned:
  - ready: the first 200 of GET /v2/health/ready;
  - answer: the first 200 of a KServe inference (float32, 4096 elements),
    its answer checked against numpy;
  - joined: the moment /metrics says every device is in the pool
    (tally_device_up 1 and none compiling).
Then one run with the cache the cold runs left (warm), for comparison.

With --wrk SECONDS, the first cold run puts wrk on it for that long as
soon as it is ready (POST /v1/cumsum, a float32 .npy of 64K elements,
4 connections: the host backend's answers while the kernels build), and
again once every device has joined; it prints both runs' requests/s and
99th percentile, and their ratio.

With --load, the first cold run also sends requests from --threads
threads from its first 200 until two seconds after every device joined:
random dtypes, shapes, axes and modes, each answer checked against numpy
(a wrong answer stops the script with the seed). It prints how many ran
before and after the change-over, and the jobs the devices and the host
ran (tally_device_jobs_total, tally_host_jobs_total).

    python3 tests/bench/bench_start.py [--runs 3] [--load] [--threads 4] [--wrk 20]
        [--binary build/bin/tallyd] [-- tallyd arguments...]

Run it alone on the machine: a cold compile takes every core.
"""
import argparse
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import BIN, ROOT, free_port  # noqa: E402

# the tests' numpy reference and accuracy bound
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from reference import close, cumsum  # noqa: E402

POLL_S = 0.005
DTYPES = {"FP32": np.float32, "FP64": np.float64, "INT32": np.int32,
          "INT64": np.int64, "UINT8": np.uint8, "INT16": np.int16}


def metrics(url):
    """The samples of /metrics as {name{labels}: value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def total(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def joined(url):
    m = metrics(url)
    up = [v for k, v in m.items() if k.startswith("tally_device_up{")]
    compiling = [v for k, v in m.items()
                 if k.startswith("tally_device_state{") and 'state="compiling"' in k]
    return bool(up) and all(v == 1 for v in up) and not any(compiling)


def infer_body(x, axis, exclusive, reverse, name):
    return json.dumps({
        "inputs": [{"name": "x", "shape": list(x.shape), "datatype": name,
                    "data": x.ravel().tolist()}],
        "parameters": {"axis": axis, "exclusive": exclusive, "reverse": reverse},
    }).encode()


def post(url, body, timeout=30):
    req = urllib.request.Request(url + "/v2/models/cumsum/infer", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def check(got, x, axis, exclusive, reverse, name):
    got = np.array(got, dtype=DTYPES[name]).reshape(x.shape)
    return close(got, cumsum(x, axis, exclusive, reverse), x, axis)


def one_case(rng):
    name = rng.choice(sorted(DTYPES))
    rank = rng.randint(1, 3)
    shape = [rng.randint(1, 40) for _ in range(rank)]
    if rng.random() < 0.3:  # long lines: at most 4 x 4 x 20000 elements
        shape = [min(n, 4) for n in shape]
        shape[-1] = rng.randint(1000, 20000)
    dtype = DTYPES[name]
    if np.issubdtype(dtype, np.floating):
        x = np.array([rng.uniform(-1, 1) for _ in range(int(np.prod(shape)))],
                     dtype=dtype).reshape(shape)
    else:
        x = np.array([rng.randint(0, 9) for _ in range(int(np.prod(shape)))],
                     dtype=dtype).reshape(shape)
    axis = rng.randrange(rank)
    return x, axis, rng.random() < 0.5, rng.random() < 0.5, name


def load(url, seed, threads, stop, counts, errors):
    def run(k):
        rng = random.Random(seed * 1000 + k)
        while not stop.is_set():
            x, axis, exc, rev, name = one_case(rng)
            before = not joined_flag.is_set()
            try:
                status, res = post(url, infer_body(x, axis, exc, rev, name))
            except (OSError, urllib.error.HTTPError) as e:
                errors.append("thread %d: %s" % (k, e))
                return
            out = res["outputs"][0]["data"]
            if status != 200 or not check(out, x, axis, exc, rev, name):
                errors.append("thread %d: wrong answer for %s %s axis %d "
                              "exclusive %s reverse %s" % (k, name, x.shape, axis, exc, rev))
                return
            with lock:
                counts["before" if before else "after"] += 1
    lock = threading.Lock()
    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    return ts


joined_flag = threading.Event()


def wrk(url, seconds):
    """wrk on url for seconds: (requests/s, p99 ms, non-2xx answers)."""
    body = os.path.join(ROOT, "build", "bench-start-body.npy")
    buf = io.BytesIO()
    np.save(buf, np.random.default_rng(1).random(65536, dtype=np.float32))
    with open(body, "wb") as f:
        f.write(buf.getvalue())
    env = dict(os.environ, LOAD_PATH="/v1/cumsum", LOAD_BODY=body,
               LOAD_TYPE="application/x-npy")
    out = subprocess.run(
        ["wrk", "-t1", "-c4", "-d%ds" % seconds, "--latency", "--timeout", "30s",
         "-s", os.path.join(ROOT, "tests", "load", "file_body.lua"), url],
        env=env, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, p99, int(bad.group(1)) if bad else 0


def one_run(binary, extra, cache, cold, with_load, threads, seed, log, wrk_s=0):
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    env = dict(os.environ, POCL_CACHE_DIR=cache, TALLY_GRPC_LISTEN="")
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:%d" % port] + extra,
                            stdout=log, stderr=log, env=env)
    times = {}
    try:
        while True:
            if proc.poll() is not None:
                sys.exit("tallyd exited with %d; see %s" % (proc.returncode, log.name))
            try:
                with urllib.request.urlopen(url + "/v2/health/ready", timeout=1) as r:
                    if r.status == 200:
                        times["ready"] = time.monotonic() - t0
                        break
            except OSError:
                pass
            time.sleep(POLL_S)
        x = np.arange(4096, dtype=np.float32) % 7
        status, res = post(url, infer_body(x, 0, False, False, "FP32"), timeout=300)
        times["answer"] = time.monotonic() - t0
        if status != 200 or not check(res["outputs"][0]["data"], x, 0, False, False, "FP32"):
            sys.exit("the first answer was wrong")
        if wrk_s:
            times["wrk_during"] = wrk(url, wrk_s)
            times["wrk_during"] += (not joined(url),)
        stop, counts, errors, ts = threading.Event(), {"before": 0, "after": 0}, [], []
        joined_flag.clear()
        if with_load:
            ts = load(url, seed, threads, stop, counts, errors)
        while not joined(url):
            if errors:
                break
            time.sleep(0.05)
        times["joined"] = time.monotonic() - t0
        joined_flag.set()
        if wrk_s:
            times["wrk_after"] = wrk(url, wrk_s)
        if with_load:
            time.sleep(2)
            stop.set()
            for t in ts:
                t.join()
            if errors:
                sys.exit("seed %d: %s" % (seed, errors[0]))
            m = metrics(url)
            times["load"] = (counts["before"], counts["after"],
                             total(m, "tally_device_jobs_total"),
                             total(m, "tally_host_jobs_total"))
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="cold starts")
    ap.add_argument("--binary", default=os.path.join(BIN, "tallyd"))
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--wrk", type=int, default=0, metavar="SECONDS")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("args", nargs="*", help="tallyd's own arguments, after --")
    a = ap.parse_args()
    cache = os.path.join(ROOT, "build", "pocl-bench-start")
    print("seed %d; tallyd %s %s" % (a.seed, a.binary, " ".join(a.args)))
    print("| run | ready s | first answer s | every device joined s |")
    print("|---|---:|---:|---:|")
    with open(os.path.join(ROOT, "build", "bench-start.log"), "w") as log:
        for i in range(a.runs + 1):
            cold = i < a.runs
            t = one_run(a.binary, a.args, cache, cold, a.load and i == 0,
                        a.threads, a.seed, log, a.wrk if i == 0 else 0)
            print("| %s %d | %.3f | %.3f | %.1f |" % (
                "cold" if cold else "warm", i + 1 if cold else 1,
                t["ready"], t["answer"], t["joined"]), flush=True)
            if "wrk_during" in t:
                (r1, p1, b1, still), (r2, p2, b2) = t["wrk_during"], t["wrk_after"]
                print("    wrk %d s, 64K float32 .npy, 4 connections: while building %.1f req/s, "
                      "p99 %.1f ms%s; once joined %.1f req/s, p99 %.1f ms; ratio %.2f; "
                      "non-2xx %d" % (a.wrk, r1, p1, "" if still else
                                      " (the device joined before wrk ended)",
                                      r2, p2, r1 / r2, b1 + b2), flush=True)
            if "load" in t:
                b, af, dev, host = t["load"]
                print("    load: %d answers before every device joined, %d after, all "
                      "checked against numpy; jobs run by devices %d, by the host "
                      "backend %d" % (b, af, dev, host), flush=True)


if __name__ == "__main__":
    main()
