"""bench_peers.py - tally beside the servers a user would otherwise deploy
for a cumulative sum: MLServer, KServe's Python ModelServer, and a plain
FastAPI + uvicorn + numpy service (tests/bench/peers/), each serving
tally's contract (model cumsum, input x, output y, float32, the sum along
the last axis) with numpy, each with its own default settings.

Each peer lives in a virtual environment of its own under build/peers/,
made with Debian's python3-venv and the versions pinned below (MLServer
pins a FastAPI that KServe's newer one conflicts with, and both pin
protobuf and grpcio apart from the tests' tritonclient), so the project's
environment (build/venv) is left as the tests need it.

Before any load, every server's answer for each N is checked against
numpy (float64 reference, a float32 error bound): a server that answers
wrongly stops the run. Then, one server at a time, float32 N in {16,
65536, 1048576} at concurrency 1 and 16:
  - binary: perf_analyzer 2.51 -i http --async, binary tensors (the same
    line for every server that takes them; MLServer's REST door takes
    JSON alone);
  - wrk: the same binary requests from wrk (one thread,
    tests/load/file_body.lua), a client much lighter than perf_analyzer,
    which on two shared cores can be the slower half of a cell (the
    servers that take binary tensors);
  - json: `tally bench --format json` (KServe v2 JSON in and out, the same
    driver for all four: perf_analyzer's JSON mode cannot drive a model
    without a batch dimension, such as tally's (docs/kserve.md), and
    cannot read KServe's JSON answers, whose outputs carry
    "parameters": null).
The peers' model configurations (which perf_analyzer reads) claim a batch
dimension of 1, so x is [1, N] there; tally's x is [N]. Same bytes, same
work.

It prints a table and writes build/bench/peers.json (versions, machine,
commit, every cell), which tools/bench_report.py turns into the
performance page's peer table and picture.

usage: python3 tests/bench/bench_peers.py [--seconds S] [--only NAME,...]
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

from benchlib import BIN, ROOT, free_port, start_tallyd, wrk
from bench_serve import perf_analyzer, perf_binary

PEERS_DIR = os.path.join(ROOT, "build", "peers")
HERE = os.path.join(ROOT, "tests", "bench", "peers")
OUT = os.path.join(ROOT, "build", "bench", "peers.json")
SIZES = (16, 65536, 1 << 20)
CONCURRENCY = (1, 16)
# what each peer's environment installs, pinned
PINS = {
    # uvloop 0.22 and later refuse asyncio.get_event_loop() where no loop
    # runs, which MLServer 1.7.1's inference workers call as they start
    "mlserver": ["mlserver==1.7.1", "uvloop==0.21.0", "numpy==2.4.6"],
    "kserve": ["kserve==0.21.0", "numpy==2.4.6"],
    "fastapi": ["fastapi==0.165.0", "uvicorn==0.54.0", "numpy==2.4.6"],
}
# the packages whose versions the report names
SHOWN = {"mlserver": ("mlserver", "uvicorn", "uvloop", "numpy"), "kserve": ("kserve", "uvicorn", "numpy"),
         "fastapi": ("fastapi", "uvicorn", "numpy")}


def venv(name):
    """build/peers/NAME, made and filled once (a stamp names its pins)."""
    d = os.path.join(PEERS_DIR, name)
    stamp = os.path.join(d, ".pins")
    want = " ".join(PINS[name])
    if os.path.exists(stamp) and open(stamp).read() == want:
        return d
    print("bench-peers: installing %s into %s" % (want, d), file=sys.stderr, flush=True)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--clear", d], check=True)
    subprocess.run([os.path.join(d, "bin", "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check"] + PINS[name], check=True)
    with open(stamp, "w") as f:
        f.write(want)
    return d


def versions(name, d):
    out = subprocess.run([os.path.join(d, "bin", "python"), "-m", "pip", "list",
                          "--format", "json", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    have = {p["name"].lower(): p["version"] for p in json.loads(out)}
    return {p: have.get(p, "?") for p in SHOWN[name]}


def wait_ready(url, proc, what):
    """Until the model is ready (MLServer's server is ready before its
    inference workers have loaded the model)."""
    for _ in range(1200):
        if proc.poll() is not None:
            sys.exit("bench-peers: %s exited (%d) before it was ready" % (what, proc.returncode))
        try:
            with urllib.request.urlopen(url + "/v2/models/cumsum/ready", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("bench-peers: %s was not ready in 120 s" % what)


def start_peer(name, log):
    """Starts a peer on free loopback ports; (process, REST base URL)."""
    d = venv(name)
    py = os.path.join(d, "bin", "python")
    port = free_port()
    if name == "fastapi":
        cmd, cwd = [py, os.path.join(HERE, "fastapi_cumsum.py"), str(port)], HERE
    elif name == "kserve":
        cmd, cwd = [py, os.path.join(HERE, "kserve_cumsum.py"), str(port),
                    str(free_port())], HERE
    else:
        # a settings file of this run's own: its ports, and loopback only
        cwd = tempfile.mkdtemp(prefix="tally-mlserver-")
        for f in ("cumsum_runtime.py", "model-settings.json"):
            with open(os.path.join(HERE, "mlserver", f)) as src, \
                    open(os.path.join(cwd, f), "w") as dst:
                dst.write(src.read())
        with open(os.path.join(cwd, "settings.json"), "w") as f:
            json.dump({"host": "127.0.0.1", "http_port": port, "grpc_port": free_port(),
                       "metrics_port": free_port()}, f)
        cmd = [os.path.join(d, "bin", "mlserver"), "start", cwd]
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=log)
    url = "http://127.0.0.1:%d" % port
    wait_ready(url, proc, name)
    return proc, url


def check_answers(name, url, binary):
    """Every N: random float32 x, the server's y against numpy's float64
    sum; exits on a wrong answer. x is [N] for tally (axis -1), [1, N]
    for the peers."""
    import tritonclient.http as http
    client = http.InferenceServerClient(url.replace("http://", ""), network_timeout=120)
    seed = 1234
    rng = np.random.default_rng(seed)
    for n in SIZES:
        x = rng.random(n, dtype=np.float32)
        if name != "tally":
            x = x.reshape(1, n)
        inp = http.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        out = http.InferRequestedOutput("y", binary_data=binary)
        r = client.infer("cumsum", [inp], outputs=[out],
                         parameters={"axis": -1} if name == "tally" else None)
        y = r.as_numpy("y").reshape(-1)
        ref = np.cumsum(x.reshape(-1).astype(np.float64))
        # |error| within 2^-12 of the running sum: right, not accurate
        # (a float32 loop's error over 1M values is well inside it)
        bad = np.abs(y - ref) > ref * 2.0 ** -12 + 1e-6
        if y.shape != ref.shape or bad.any():
            sys.exit("bench-peers: %s answered N=%d wrongly (seed %d): first bad element %d"
                     % (name, n, seed, int(np.argmax(bad)) if y.shape == ref.shape else -1))
    client.close()
    print("bench-peers: %s answers N=%s right (seed %d, %s)" % (
        name, ",".join(map(str, SIZES)), seed, "binary" if binary else "JSON"),
        file=sys.stderr, flush=True)


def tally_bench_json(url, n, c, seconds, shape):
    out = subprocess.run([os.path.join(BIN, "tally"), "bench", "--url", url, "--concurrency",
                          str(c), "--duration", str(seconds), "--shape", shape, "--axis", "-1",
                          "--quiet", "--format", "json"], capture_output=True, text=True)
    text = out.stdout + out.stderr
    m = re.search(r"requests/s\s+([\d.]+)", text)
    lat = re.search(r"p50 ([\d.]+)\s+p90 [\d.]+\s+p99 ([\d.]+)", text)
    errors = re.search(r"errors\s+(\d+)", text)
    if m is None or lat is None or errors is None or int(errors.group(1)):
        print("bench-peers: tally bench --format json said:\n" + text[-1500:], file=sys.stderr)
        return None
    return float(m.group(1)), float(lat.group(1)), float(lat.group(2))


def kserve_binary_body(path, shape):
    """A KServe v2 request with x (float32 of shape, values 0..1) as a
    binary tensor and y asked for as one: the file's path and the JSON
    header's length (Inference-Header-Content-Length)."""
    x = np.random.default_rng(7).random(int(np.prod(shape)), dtype=np.float32)
    head = json.dumps({"inputs": [{"name": "x", "shape": list(shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    with open(path, "wb") as f:
        f.write(head + x.tobytes())
    return len(head)


def wrk_binary(url, shape, c, seconds):
    """wrk, one thread, c connections, posting the same KServe binary
    request: (req/s, p50 ms, p99 ms), or None when any request failed."""
    d = tempfile.mkdtemp(prefix="bench-peers-wrk-")
    try:
        body = os.path.join(d, "body")
        hlen = kserve_binary_body(body, shape)
        r = wrk(url, "file_body.lua", c, seconds, threads=1,
                env={"LOAD_PATH": "/v2/models/cumsum/infer", "LOAD_BODY": body,
                     "LOAD_HLEN": str(hlen)})
    except RuntimeError as e:
        print("bench-peers: %s" % e, file=sys.stderr)
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if r["errors"] > 0 or r["requests"] == 0:
        print("bench-peers: wrk: %d of %d requests failed" % (r["errors"], r["requests"]),
              file=sys.stderr)
        return None
    return r["rps"], r["p50_ms"], r["p99_ms"]


def measure(name, url, pa, seconds):
    cells = []
    for n in SIZES:
        for c in CONCURRENCY:
            for fmt in ("binary", "wrk", "json"):
                if fmt in ("binary", "wrk") and name == "mlserver":
                    continue
                if fmt == "wrk":
                    r = wrk_binary(url, [n] if name == "tally" else [1, n], c, seconds)
                elif fmt == "binary":
                    r = perf_binary(pa, url.replace("http://", ""), "http", n, c, seconds)
                    r = r[:3] if r else None
                else:
                    r = tally_bench_json(url, n, c, seconds,
                                         "%d" % n if name == "tally" else "1,%d" % n)
                cell = {"server": name, "format": fmt, "n": n, "concurrency": c}
                if r is None:
                    cell["error"] = "no measurement"
                else:
                    cell.update(rps=r[0], p50_ms=r[1], p99_ms=r[2])
                    print("  %-8s %-6s N=%-8d c=%-3d %9.1f req/s p50 %8.3f ms p99 %8.3f ms" % (
                        name, fmt, n, c, r[0], r[1], r[2]), file=sys.stderr, flush=True)
                cells.append(cell)
    return cells


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def cpu():
    with open("/proc/cpuinfo") as f:
        text = f.read()
    name = re.search(r"model name\s*:\s*(.*)", text)
    fam = re.search(r"cpu family\s*:\s*(\d+)", text)
    model = re.search(r"^model\s*:\s*(\d+)", text, re.M)
    return "%s (family %s, model %s), %d cores" % (
        name.group(1) if name else platform.processor(), fam.group(1) if fam else "?",
        model.group(1) if model else "?", os.cpu_count())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--only", help="comma-separated: tally,mlserver,kserve,fastapi")
    args = ap.parse_args()
    names = ["tally", "mlserver", "kserve", "fastapi"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    pa = perf_analyzer()
    result = {"machine": cpu(), "commit": commit(), "date": time.strftime("%Y-%m-%d"),
              "command": "make bench-peers", "seconds": args.seconds, "versions": {},
              "cells": []}
    log = open(os.path.join(tempfile.gettempdir(), "bench_peers.log"), "wb")
    for name in names:
        if name == "tally":
            proc, url = start_tallyd("bench-peers", log, ["--access-log=off",
                                                          "--max-sequences", "0"])
            result["versions"]["tally"] = {"tallyd": commit()}
        else:
            result["versions"][name] = versions(name, venv(name))
            proc, url = start_peer(name, log)
        try:
            check_answers(name, url, binary=name != "mlserver")
            result["cells"] += measure(name, url, pa, args.seconds)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if name == "mlserver":  # the settings folder start_peer made
                shutil.rmtree(proc.args[-1], ignore_errors=True)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    if args.only and os.path.exists(OUT):
        # a partial run replaces its servers' cells in the last full one
        old = json.load(open(OUT))
        old["cells"] = [c for c in old["cells"] if c["server"] not in names] + result["cells"]
        old["versions"].update(result["versions"])
        result = dict(old, commit=result["commit"], date=result["date"])
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    print("float32 [N]; binary: perf_analyzer -i http --async; wrk: the same binary requests "
          "from wrk -t1; json: tally bench --format json;"
          " %d s a cell; %s" % (args.seconds, result["machine"]))
    print("%-9s %-6s %-8s %-3s %10s %8s %8s" % ("server", "format", "N", "c", "req/s", "p50 ms",
                                               "p99 ms"))
    for c in result["cells"]:
        if "error" in c:
            print("%-9s %-6s %-8d %-3d  (%s)" % (c["server"], c["format"], c["n"],
                                                c["concurrency"], c["error"]))
        else:
            print("%-9s %-6s %-8d %-3d %10.1f %8.3f %8.3f" % (
                c["server"], c["format"], c["n"], c["concurrency"], c["rps"], c["p50_ms"],
                c["p99_ms"]))
    print("bench-peers: wrote %s" % os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    main()
