"""benchlib.py - what the Python benchmarks share: a tallyd of their own,
and wrk driven by one of tests/load's scripts.

start_tallyd() starts a daemon on a free loopback port with a PoCL cache
of the caller's own under build/ (concurrent processes never share one),
with --warmup (a benchmark measures the devices, not the host backend
answering while they build their kernels), waits for /v2/health/ready,
and returns (process, base URL); the caller
owns the process and kills it. It exits the script if the daemon is not
ready within five minutes (a cold PoCL cache compiles for a while).
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tallyd(name, log, args=(), binary=None):
    """name names the PoCL cache (build/pocl-NAME) and the script in errors;
    log is a file object for the daemon's output; args go on its command
    line; binary defaults to build/bin/tallyd."""
    port = free_port()
    env = dict(os.environ, POCL_CACHE_DIR=os.path.join(ROOT, "build", "pocl-" + name))
    # gRPC off unless args ask for it (--grpc-listen): 8001 may be taken
    env.setdefault("TALLY_GRPC_LISTEN", "")
    cmd = [binary or os.path.join(BIN, "tallyd"), "--listen", "127.0.0.1:%d" % port,
           "--warmup"]
    proc = subprocess.Popen(cmd + list(args), stdout=log, stderr=log, env=env)
    url = "http://127.0.0.1:%d" % port
    for _ in range(3000):
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("%s: tallyd did not become ready" % name)


def wrk(url, script, conns, seconds, threads=2, env=None, timeout_s=30):
    """wrk with tests/load/SCRIPT and report.lua's summary: the RESULT
    line's fields as numbers (requests, errors, seconds, rps, p50_ms,
    p90_ms, p99_ms). env: the script's settings (LOAD_PATH, ...). Raises
    RuntimeError when wrk prints no result."""
    load = os.path.join(ROOT, "tests", "load")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        for part in (script, "report.lua"):
            with open(os.path.join(load, part)) as src:
                f.write(src.read())
    try:
        out = subprocess.run(["wrk", "-t%d" % min(threads, conns), "-c%d" % conns,
                              "-d%ds" % seconds, "--timeout", "%ds" % timeout_s, "-s", f.name,
                              url], capture_output=True, text=True,
                             env=dict(os.environ, **(env or {})), timeout=seconds + 60)
    finally:
        os.unlink(f.name)
    m = re.search(r"^RESULT (.*)$", out.stdout, re.M)
    if m is None:
        raise RuntimeError("wrk gave no result: %s" % (out.stdout + out.stderr)[-1500:])
    return {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
