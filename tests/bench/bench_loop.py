#!/usr/bin/env python3
"""bench_loop.py - does a large compressed gRPC message hold back REST's
deadlines? (make bench-loop)

The gRPC door runs on the loop thread, and so does gzip decoding of its
messages. The scheduler's 5 ms tick expires queued jobs of both doors. If
the tick shares the loop with the decoding, a REST request's deadline
fires late while a big message is decoded.

The daemon has one worker that holds each job for 10 s (--fault-delay-ms),
and sums nothing at once (--inline-max-elements 0): one REST request
occupies the worker, and every other one waits in the queue until its 50 ms
deadline (X-Timeout-Ms) expires it, with a 504. One thread sends such
requests one after another and records how late each answer came (its time
less 50 ms). After a quiet second, a gRPC client sends one ModelInfer
message of --mb megabytes of float32 zeros, gzip-compressed; the REST
thread goes on through the decoding. The script prints, for the requests
before the message and for those during its decoding, the count and the
median, p99 and largest lateness in ms. Run it alone on the machine.

    python3 tests/bench/bench_loop.py [--mb 100] [--seconds 4]
"""
import argparse
import http.client
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, start_tallyd  # noqa: E402

DEADLINE_MS = 50

# The gRPC client: builds its message, says "ready", and on "go" sends it
# gzip-compressed (its job then waits behind the held worker: its deadline
# ends the call).
SENDER = r"""
import sys
import numpy as np
import tritonclient.grpc as grpcclient
port, size, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
x = np.zeros(size // 4, dtype=np.float32)
inp = grpcclient.InferInput("x", [x.size], "FP32")
inp.set_data_from_numpy(x)
c = grpcclient.InferenceServerClient("127.0.0.1:%d" % port, channel_args=[
    ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
print("ready", flush=True)
sys.stdin.readline()
try:
    c.infer("cumsum", [inp], compression_algorithm="gzip", client_timeout=seconds)
except Exception:
    pass
"""


def rest_loop(host, port, stop, out):
    """(start, end) of every 50 ms request until stop is set."""
    body = np.arange(4, dtype=np.float32).tobytes()
    conn = http.client.HTTPConnection(host, port, timeout=30)
    while not stop.is_set():
        t0 = time.monotonic()
        conn.request("POST", "/v1/cumsum?dtype=float32&shape=4", body,
                     {"Content-Type": "application/octet-stream",
                      "X-Timeout-Ms": str(DEADLINE_MS)})
        r = conn.getresponse()
        r.read()
        t1 = time.monotonic()
        out.append((t0, t1, r.status))


def summary(name, rows):
    late = sorted((t1 - t0) * 1000 - DEADLINE_MS for t0, t1, _ in rows)
    if not late:
        print("%-24s none" % name)
        return
    p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
    print("%-24s %4d requests  lateness ms: median %6.1f  p99 %6.1f  max %6.1f"
          % (name, len(late), statistics.median(late), p99, late[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--tallyd", default=None)
    args = ap.parse_args()
    gport = free_port()
    size = args.mb << 20
    log = open(os.path.join("build", "bench_loop.log"), "w")
    proc, url = start_tallyd(
        "bench-loop", log,
        ["--grpc-listen", "127.0.0.1:%d" % gport, "--workers", "1",
         "--fault-delay-ms", "10000", "--inline-max-elements", "0",
         "--json-inline-max-elements", "0", "--access-log", "off",
         "--max-body-bytes", str(size + (1 << 20)),
         "--max-buffered-bytes", str(3 * size), "--queue-depth", "64"],
        binary=args.tallyd)
    try:
        host, port = url[len("http://"):].split(":")
        port = int(port)
        # occupy the worker: this one waits 10 s, every later one queues
        hold = http.client.HTTPConnection(host, port, timeout=60)
        hold.request("POST", "/v1/cumsum?dtype=float32&shape=4",
                     np.zeros(4, np.float32).tobytes(),
                     {"Content-Type": "application/octet-stream"})
        time.sleep(0.2)
        rows, stop = [], threading.Event()
        th = threading.Thread(target=rest_loop, args=(host, port, stop, rows))
        th.start()
        time.sleep(1.0)
        # the gRPC client runs in a process of its own, so that building
        # and compressing its message never holds this one's GIL
        sender = subprocess.Popen(
            [sys.executable, "-c", SENDER, str(gport), str(size), str(args.seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert sender.stdout.readline().strip() == "ready"
        g0 = time.monotonic()
        sender.stdin.write("go\n")
        sender.stdin.flush()
        time.sleep(args.seconds)
        stop.set()
        th.join()
        sender.wait()
        # from the send to the end of the run (the message's job is then
        # held behind the worker, so nothing else of gRPC runs on the loop)
        before = [r for r in rows if r[1] < g0]
        during = [r for r in rows if r[1] >= g0]
        bad = [r for r in rows if r[2] != 504]
        print("bench_loop: %d MB gzip gRPC message at t=%.2f s; REST requests"
              " with %d ms deadlines (%d not 504)" % (args.mb, g0 - rows[0][0]
                                                      if rows else 0,
                                                      DEADLINE_MS, len(bad)))
        summary("before the message", before)
        summary("from the message on", during)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
