"""benchlib.py - what the Python benchmarks share: a tallyd of their own.

start_tallyd() starts a daemon on a free loopback port with a PoCL cache
of the caller's own under build/ (concurrent processes never share one),
with --warmup (a benchmark measures the devices, not the host backend
answering while they build their kernels), waits for /v2/health/ready,
and returns (process, base URL); the caller
owns the process and kills it. It exits the script if the daemon is not
ready within five minutes (a cold PoCL cache compiles for a while).
"""
import os
import socket
import subprocess
import sys
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
