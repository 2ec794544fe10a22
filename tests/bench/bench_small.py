"""A small request at the floor's cost (make bench-serve BENCH_ARGS="--only
small"): tallyd beside nginx and the smallest libmicrohttpd server
(build/bin/mhd_floor), and over gRPC beside grpc_floor's in-memory mode.

The loads: wrk, one thread, 1 and 32 connections, each POSTing one small
request again and again: the native JSON body {"dtype":"float32",
"shape":[4],"data":[1,2,3,4]} to /v1/cumsum, and the same tensor as a
KServe binary request (FP32 [4], 16 bytes after the JSON header) to
/v2/models/cumsum/infer. nginx (one worker, no master process) and
mhd_floor answer every request with tallyd's answer's bytes (nginx's
binary answer: its length, bytes a config can hold); tallyd runs with
--http-threads 1 and with the default (2). gRPC: h2load, 32 clients, one
stream each, a unary ModelInfer of the same tensor, against tallyd with
one gRPC loop and against grpc_floor.

A server's CPU per request is its process's utime + stime (every thread,
/proc/PID/stat) over the window, divided by the requests the load tool
counted. Three rounds in one run, each round every server in turn in
every cell; the table gives each cell's medians and the ratios
tallyd/floor and tallyd/nginx (CPU per request) and tallyd/nginx
(requests a second).

Targets (issue 71), at c=32 for both of tallyd's settings and both
bodies: CPU per request at most 1.2x the floor's and 1.25x nginx's;
requests a second at least 0.85 of nginx's (at c=1: 0.95); gRPC: CPU per
request at most 1.3x grpc_floor's.
"""
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from benchlib import BIN, free_port, start_tallyd, wrk

SHAPE = [4]
DATA = [1.0, 2.0, 3.0, 4.0]
JSON_BODY = json.dumps({"dtype": "float32", "shape": SHAPE, "data": [1, 2, 3, 4]},
                       separators=(",", ":")).encode()
JSON_ANSWER = b'{"dtype":"float32","shape":[4],"data":[1,3,6,10]}'
BIN_HEADER = json.dumps({"inputs": [{"name": "x", "shape": SHAPE, "datatype": "FP32",
                                     "parameters": {"binary_data_size": 16}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]},
                        separators=(",", ":")).encode()
BIN_BODY = BIN_HEADER + struct.pack("<4f", *DATA)
BIN_ANSWER_HEADER = (b'{"model_name":"cumsum","model_version":"1","outputs":[{"name":"y",'
                     b'"datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}}]}')
BIN_ANSWER = BIN_ANSWER_HEADER + struct.pack("<4f", 1, 3, 6, 10)
BODIES = {"json": ("/v1/cumsum", JSON_BODY, "application/json", None, JSON_ANSWER),
          "binary": ("/v2/models/cumsum/infer", BIN_BODY, "application/octet-stream",
                     len(BIN_HEADER), BIN_ANSWER)}
CONCURRENCY = (1, 32)
ROUNDS = 3
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of process pid, every thread, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start_floor(d):
    """mhd_floor for each body: {kind: (proc, base URL)}."""
    out = {}
    for kind, (_, _, ctype, hlen, answer) in BODIES.items():
        path = os.path.join(d, "answer-" + kind)
        with open(path, "wb") as f:
            f.write(answer)
        extra = ["Inference-Header-Content-Length", str(len(BIN_ANSWER_HEADER))] if hlen else []
        p = subprocess.Popen([os.path.join(BIN, "mhd_floor"), "0", path, ctype] + extra,
                             stdout=subprocess.PIPE, text=True)
        port = int(p.stdout.readline().split()[1])
        out[kind] = (p, "http://127.0.0.1:%d" % port)
    return out


def start_nginx(d):
    """nginx, one worker in one process, answering both paths: (proc, URL)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    # a config string cannot hold the binary answer's bytes: its length
    binary = BIN_ANSWER_HEADER.decode() + "x" * 16
    conf = """worker_processes 1; master_process off; daemon off;
pid %(d)s/nginx.pid; error_log stderr;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 100000000; keepalive_timeout 600s;
  client_body_temp_path %(d)s/body;
  server {
    listen 127.0.0.1:%(port)d;
    location = /v1/cumsum { default_type application/json; return 200 '%(json)s'; }
    location = /v2/models/cumsum/infer {
      default_type application/octet-stream;
      add_header Inference-Header-Content-Length %(hlen)d;
      return 200 '%(binary)s';
    }
  }
}
""" % {"d": d, "port": port, "json": JSON_ANSWER.decode(), "binary": binary,
       "hlen": len(BIN_ANSWER_HEADER)}
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    p = subprocess.Popen([nginx, "-p", d, "-c", path, "-e", "stderr"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "nginx.log"), "w"))
    url = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            subprocess.run(["curl", "-sf", "-o", "/dev/null", "-X", "POST", "--data", "x",
                            url + "/v1/cumsum"], check=True, timeout=5)
            return p, url
        except subprocess.CalledProcessError:
            time.sleep(0.1)
    sys.exit("bench small: nginx did not answer (%s/nginx.log)" % d)


def http_cell(pid, url, kind, c, seconds, d):
    """One window of wrk against url: (requests a second, CPU us a request,
    errors)."""
    path, body, ctype, hlen, _ = BODIES[kind]
    body_file = os.path.join(d, "body-" + kind)
    with open(body_file, "wb") as f:
        f.write(body)
    env = {"LOAD_PATH": path, "LOAD_BODY": body_file, "LOAD_TYPE": ctype}
    if hlen:
        env["LOAD_HLEN"] = str(hlen)
    before = cpu_seconds(pid)
    r = wrk(url, "file_body.lua", c, seconds, threads=1, env=env)
    used = cpu_seconds(pid) - before
    return r["rps"], 1e6 * used / max(r["requests"], 1), r["errors"]


def grpc_body(d):
    """A ModelInfer of the small tensor, as a gRPC message (its 5-byte
    prefix): the file h2load sends."""
    from tritonclient.grpc import service_pb2
    q = service_pb2.ModelInferRequest(model_name="cumsum")
    x = q.inputs.add()
    x.name, x.datatype = "x", "FP32"
    x.shape.extend(SHAPE)
    q.raw_input_contents.append(struct.pack("<4f", *DATA))
    msg = q.SerializeToString()
    path = os.path.join(d, "grpc-body")
    with open(path, "wb") as f:
        f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
    return path


def grpc_cell(pid, port, body, seconds):
    """One window of h2load, 32 clients: (requests a second, CPU us a
    request, failed)."""
    before = cpu_seconds(pid)
    out = subprocess.run(["h2load", "-c", "32", "-m", "1", "-t", "1", "-D", str(seconds),
                          "-d", body, "-H", "content-type: application/grpc",
                          "-H", "te: trailers",
                          "http://127.0.0.1:%d/inference.GRPCInferenceService/ModelInfer" % port],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    used = cpu_seconds(pid) - before
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed",
                  out)
    t = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out)
    if m is None or t is None:
        raise RuntimeError("h2load gave no result: %s" % out[-1500:])
    done = int(m.group(3))
    return float(t.group(2)), 1e6 * used / max(done, 1), int(m.group(4))


def start_grpc_floor():
    p = subprocess.Popen([os.path.join(BIN, "grpc_floor"), "0", "0", "-"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"listening (\d+)", line)
    if m is None:
        sys.exit("bench small: grpc_floor did not listen: %r" % line)
    return p, int(m.group(1))


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def ratio(a, b):
    return a / b if b else float("nan")


def small_table(seconds):
    """Runs the cells; prints the table; returns the targets missed."""
    d = tempfile.mkdtemp(prefix="bench-small-")
    procs = []
    log = open(os.path.join(d, "tallyd.log"), "wb")
    try:
        floor = start_floor(d)
        procs += [p for p, _ in floor.values()]
        nginx, nginx_url = start_nginx(d)
        procs.append(nginx)
        tallyds = {}
        for name, extra in (("tallyd-1", ["--http-threads", "1"]), ("tallyd", [])):
            p, url = start_tallyd("bench-small-" + name, log,
                                  ["--access-log=off", "--device", "host"] + extra)
            procs.append(p)
            tallyds[name] = (p, url)
        gport = free_port()
        gp, gurl = start_tallyd("bench-small-grpc", log,
                                ["--access-log=off", "--device", "host", "--grpc-threads", "1",
                                 "--grpc-listen", "127.0.0.1:%d" % gport])
        procs.append(gp)
        gfloor, gfloor_port = start_grpc_floor()
        procs.append(gfloor)
        body = grpc_body(d)
        results = {}
        for rnd in range(ROUNDS):
            for kind in BODIES:
                for c in CONCURRENCY:
                    servers = [("nginx", nginx.pid, nginx_url),
                               ("floor", floor[kind][0].pid, floor[kind][1])] + \
                              [(n, p.pid, u) for n, (p, u) in tallyds.items()]
                    for name, pid, url in servers:
                        r = http_cell(pid, url, kind, c, seconds, d)
                        results.setdefault((kind, c, name), []).append(r)
                        print("  round %d %-6s c=%-3d %-9s %10.0f req/s %7.2f us CPU a request"
                              "%s" % (rnd + 1, kind, c, name, r[0], r[1],
                                      " (%d errors)" % r[2] if r[2] else ""),
                              file=sys.stderr, flush=True)
            for name, pid, port in (("grpc_floor", gfloor.pid, gfloor_port),
                                    ("tallyd", gp.pid, gport)):
                r = grpc_cell(pid, port, body, seconds)
                results.setdefault(("grpc", 32, name), []).append(r)
                print("  round %d grpc   c=32  %-10s %10.0f req/s %7.2f us CPU a request%s" % (
                    rnd + 1, name, r[0], r[1], " (%d failed)" % r[2] if r[2] else ""),
                    file=sys.stderr, flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(d, ignore_errors=True)
    fails = report(results, seconds)
    write_small_json(results, seconds)
    return fails


def medians(results):
    return {k: (median([r[0] for r in v]), median([r[1] for r in v]), sum(r[2] for r in v))
            for k, v in results.items()}


def write_small_json(results, seconds):
    """The table's medians, for docs/performance.md's small block
    (tools/perf_page.py): build/bench/small.json; then the page."""
    from bench_peers import commit, cpu
    med = medians(results)
    cells = [{"body": k[0], "c": k[1], "server": k[2], "rps": v[0], "cpu_us": v[1]}
             for k, v in sorted(med.items())]
    data = {"part": "small", "machine": cpu(), "commit": commit(),
            "date": time.strftime("%Y-%m-%d"),
            "command": "make bench-serve BENCH_ARGS=\"--only small\"",
            "seconds": seconds, "rounds": ROUNDS, "cells": cells}
    out = os.path.join(os.path.dirname(BIN), "bench")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "small.json"), "w") as f:
        json.dump(data, f, indent=1)
    print("bench-serve: wrote build/bench/small.json", file=sys.stderr, flush=True)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, os.path.join(root, "tools", "perf_page.py"), "--only",
                    "small"], check=True)


def report(results, seconds):
    med = medians(results)
    print("small requests: %d rounds of %d s windows; CPU: the server's utime+stime a "
          "request (us); medians" % (ROUNDS, seconds))
    print("%-6s %-4s %-9s %10s %8s %11s %11s %13s" % (
        "body", "c", "server", "req/s", "CPU us", "CPU/floor", "CPU/nginx", "req/s / nginx"))
    fails = []
    for kind in BODIES:
        for c in CONCURRENCY:
            ng, fl = med[(kind, c, "nginx")], med[(kind, c, "floor")]
            for name in ("nginx", "floor", "tallyd-1", "tallyd"):
                rps, cpu, errors = med[(kind, c, name)]
                print("%-6s %-4d %-9s %10.0f %8.2f %11.2f %11.2f %13.2f%s" % (
                    kind, c, name, rps, cpu, ratio(cpu, fl[1]), ratio(cpu, ng[1]),
                    ratio(rps, ng[0]),
                    "  %d errors" % errors if errors else ""))
                if errors:
                    fails.append("%s c=%d %s: %d errors" % (kind, c, name, errors))
                if not name.startswith("tallyd"):
                    continue
                if c == 32 and cpu > 1.2 * fl[1]:
                    fails.append("%s c=32 %s: CPU %.2f us > 1.2 x the floor's %.2f" % (
                        kind, name, cpu, fl[1]))
                if c == 32 and cpu > 1.25 * ng[1]:
                    fails.append("%s c=32 %s: CPU %.2f us > 1.25 x nginx's %.2f" % (
                        kind, name, cpu, ng[1]))
                want = 0.85 if c == 32 else 0.95
                if rps < want * ng[0]:
                    fails.append("%s c=%d %s: %.0f req/s < %.2f x nginx's %.0f" % (
                        kind, c, name, rps, want, ng[0]))
    gf, gt = med[("grpc", 32, "grpc_floor")], med[("grpc", 32, "tallyd")]
    print("%-6s %-4d %-9s %10.0f %8.2f %11.2f" % ("grpc", 32, "floor", gf[0], gf[1], 1.0))
    print("%-6s %-4d %-9s %10.0f %8.2f %11.2f" % ("grpc", 32, "tallyd", gt[0], gt[1],
                                                   ratio(gt[1], gf[1])))
    if not gf[0] or not gt[0]:
        fails.append("grpc c=32: no measurement")
    elif gt[1] > 1.3 * gf[1]:
        fails.append("grpc c=32: CPU %.2f us > 1.3 x grpc_floor's %.2f" % (gt[1], gf[1]))
    for name, (_, _, failed) in (("grpc_floor", gf), ("tallyd", gt)):
        if failed:
            fails.append("grpc %s: %d failed" % (name, failed))
    return fails
