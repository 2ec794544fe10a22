"""perf_analyzer_json.py - what perf_analyzer 2.51 sends in JSON mode,
against a stand-in server that advertises a model configuration of our
choosing and records the first inference body.

    python3 tests/bench/perf_analyzer_json.py

The finding (docs/kserve.md, "perf_analyzer's JSON mode"): with max_batch_size 0 (a model
without batching, as tally's is) perf_analyzer's JSON mode writes ONE
element of data whatever --shape says, fixed dims or not, whatever the
platform; with max_batch_size > 0 it writes them all. Binary mode is
right either way. tally cannot advertise batching to dodge it: a batched
model's first dimension is the batch, and a cumulative sum along it would
mean something else. The fault is perf_analyzer's.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from bench_serve import perf_analyzer
from benchlib import free_port

META = {"name": "cumsum", "versions": ["1"], "platform": "tally",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}]}
CONFIG = {"name": "cumsum", "platform": "tally", "backend": "tally", "max_batch_size": 0,
          "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1]}],
          "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1]}]}


def serve(meta, config, bodies):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, obj):
            b = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def do_GET(self):
            if self.path.endswith("/config"):
                self.reply(config)
            elif "/models/" in self.path:
                self.reply(meta)
            else:
                self.reply({"name": "stand-in", "version": "1", "extensions": []})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            bodies.append(req)
            x = req["inputs"][0]
            self.reply({"model_name": "cumsum", "outputs": [
                {"name": "y", "datatype": x["datatype"], "shape": x["shape"], "data": x["data"]}]})

    port = free_port()
    httpd = HTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, port


def trial(pa, meta, config, extra=()):
    bodies = []
    httpd, port = serve(meta, config, bodies)
    exe, env = pa
    try:
        subprocess.run([exe, "-m", "cumsum", "-u", "127.0.0.1:%d" % port, "-i", "http",
                        "--shape", "x:16", "--input-tensor-format", "json",
                        "--output-tensor-format", "json", "--measurement-interval", "300",
                        "--max-trials", "1", "--stability-percentage", "100"] + list(extra),
                       capture_output=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pass
    httpd.shutdown()
    x = bodies[0]["inputs"][0] if bodies else None
    return (x["shape"], len(x["data"])) if x else None


def main():
    pa = perf_analyzer()
    fixed_meta, fixed = copy.deepcopy(META), copy.deepcopy(CONFIG)
    fixed_meta["inputs"][0]["shape"] = [16]
    fixed["input"][0]["dims"] = [16]
    batched_meta, batched = copy.deepcopy(META), copy.deepcopy(CONFIG)
    batched_meta["inputs"][0]["shape"] = [-1, -1]
    batched["max_batch_size"] = 8
    onnx = dict(CONFIG, platform="onnxruntime_onnx", backend="onnxruntime")
    data = os.path.join(tempfile.mkdtemp(), "data.json")
    with open(data, "w") as f:
        json.dump({"data": [{"x": {"content": [float(i) for i in range(16)], "shape": [16]}}]}, f)
    print("perf_analyzer --shape x:16, JSON tensors: shape sent, elements sent")
    for name, meta, config, extra in (
            ("tally's config (max_batch_size 0, dims [-1])", META, CONFIG, ()),
            ("fixed dims [16]", fixed_meta, fixed, ()),
            ("platform onnxruntime", META, onnx, ()),
            ("--input-data file of 16 values", META, CONFIG, ("--input-data", data)),
            ("max_batch_size 8", batched_meta, batched, ())):
        print("  %-48s %s" % (name, trial(pa, meta, config, extra)))


if __name__ == "__main__":
    sys.exit(main())
