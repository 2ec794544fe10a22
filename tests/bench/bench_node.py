#!/usr/bin/env python3
"""bench_node.py - tally on a whole node, measured in one run (make bench-node).

What a user deciding what to deploy on a 16-core node with a GPU needs, in
one JSON file (--out, default build/bench-node.json, written after each
part) and a readable log. The parts run in the order 1, 2, 3, 4, and on a
GPU the layout sweep last: correctness first, stopped at 45% of --budget
so that the measurements after it still run, with the sweep's layouts
built beside it (the device's compiler is what both spend their time in):

1. correctness on the device: test_engine and test_accuracy with
   TALLY_TEST_DEVICE set to the device (every dtype, layout and mode);
   test_engine's cases dealt out to up to 16 processes (a device's
   compiler is the cost), and a case that
   prints nothing for --stall seconds stopped and named while the others
   go on;
2. the engine: bench_engine's rows through the engine (host memory in and
   out, against a copy through the device), on the device alone (its scan
   of device buffers against its own copy) and the host backend on every
   core;
   and, on a GPU, the 16M rows again under a few other kernel layouts
   (GPU_LAYOUTS, or --layouts);
3. the service: small JSON requests (wrk, c=64 and c=256), 64K and 16M
   float32 tensors in KServe's binary form over REST (wrk), and the same
   three over gRPC (h2load, unary ModelInfer), each against tallyd with
   `--device host`, the device alone (`--placement device`) and the
   default pool (no --device; jobs placed by cost): requests/s, p99 and
   errors. The three tallyds run side by side and each cell goes to them
   in turn, --rounds times (2), the order turned each round; a cell's
   figure is the mean of its rounds;
4. scaling: the small JSON run at c=64 with 1, 2, 4, 8 and 16 HTTP threads,
   and h2load's small gRPC run with 1 to 16 gRPC loop threads where tallyd
   has --grpc-threads (else that row says so); the load tools get half the
   node's cores here, a quarter in part 3, pinned apart from tallyd's (a
   thread a core).

The device is the first GPU `tallyd --list-devices` shows, or else the
first OpenCL device (PoCL's CPU device on the project's machine). Errors,
wrong answers (a failed engine case) and a cell that does not finish are
written to the JSON and make the exit status 1; the run goes on to the
other parts.

It needs python3 (the standard library), wrk and h2load. On a node with
none of the project's packages, `make bench-node-bundle` puts those tools
and every library the programs load into build/node/, which this script
puts on PATH and LD_LIBRARY_PATH; where the node has NVIDIA's OpenCL
driver but no ICD file for it, it writes one (OCL_ICD_VENDORS).

--tiny: what `make check` runs so that this never rots: every part, on
the smallest sizes, with 1 s windows, one engine case, the host and the
default pool only, and tallyd without --warmup (the host answers while a
device builds).

usage: bench_node.py [--tiny] [--out PATH] [--seconds S] [--only PARTS]
                     [--budget S] [--stall S] [--rounds N] [--scaling-share F]
                     [--layouts L;L...]
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
NODE = os.path.join(ROOT, "build", "node")
PARTS = ("correctness", "engine", "layouts", "service", "scaling")
# the GPU layouts the "layouts" part tries on the 16M rows, beside the
# default (--layouts replaces them): threads a work-group, elements a
# work-item in a row tile, columns a work-item, work-groups aimed for (the
# default is 2 a compute unit). Those not yet tried on a GPU first, then the
# two the H200's first sweep measured (BENCHMARKS.md).
GPU_LAYOUTS = ("gpu,row_k=64", "gpu,wg=256,row_k=16", "gpu,wg=64", "gpu,col_w=16",
               "gpu,col_w=32", "gpu,groups=1024", "gpu,row_k=8,groups=1024",
               "gpu,row_k=8", "gpu,row_k=16")
FAILED = []  # what went wrong, for the exit status and the JSON


def log(*a):
    print(*a, flush=True)


def fail(what):
    FAILED.append(what)
    log("bench-node: FAILED:", what)


# ------------------------------------------------------------------ setup
def node_environment(scratch):
    """Puts build/node's tools and libraries on the path, and NVIDIA's
    OpenCL driver where the ICD loader would not find it."""
    env = dict(os.environ)
    if os.path.isdir(NODE):
        env["PATH"] = os.path.join(NODE, "bin") + os.pathsep + env.get("PATH", "")
        env["LD_LIBRARY_PATH"] = os.path.join(NODE, "lib") + (
            os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    # NVIDIA's driver ships its OpenCL library but, in some images, no ICD
    # file naming it (a node seen here had only PoCL's): then the loader
    # is given a folder with the node's own files and one for NVIDIA's
    vendors = "/etc/OpenCL/vendors"
    icds = [os.path.join(vendors, f) for f in sorted(os.listdir(vendors))
            if f.endswith(".icd")] if os.path.isdir(vendors) else []
    named = "".join(open(f).read() for f in icds)
    found = sorted(os.path.join(d, f) for d in ("/usr/local/nvidia/lib64",
                                                 "/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                                                 "/lib", "/usr/lib")
                   if os.path.isdir(d) for f in os.listdir(d)
                   if f == "libnvidia-opencl.so.1")
    if found and "nvidia-opencl" not in named and "OCL_ICD_VENDORS" not in env:
        d = os.path.join(scratch, "icd")
        os.makedirs(d, exist_ok=True)
        for f in icds:
            shutil.copy(f, d)
        with open(os.path.join(d, "nvidia.icd"), "w") as f:
            f.write(found[0] + "\n")
        env["OCL_ICD_VENDORS"] = d
        log("bench-node: OpenCL ICD file written for", found[0])
    env["POCL_CACHE_DIR"] = os.path.join(scratch, "pocl")
    seed = os.path.join(ROOT, "build", "pocl-cache")
    if os.path.isdir(seed):  # make check's test-engine warmed it
        shutil.copytree(seed, env["POCL_CACHE_DIR"], dirs_exist_ok=True)
    return env


def program(name):
    for d in (BIN, os.path.join(NODE, "bin")):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    sys.exit("bench-node: %s is not built (make bench-node builds it)" % name)


def tool(name, env):
    p = shutil.which(name, path=env["PATH"])
    if p is None:
        sys.exit("bench-node: %s is not installed (make bench-node installs it here; "
                 "make bench-node-bundle brings it to a node without it)" % name)
    return p


def machine(env):
    info = {"cores": os.cpu_count(), "cpu": "", "commit": "", "date":
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    commit = os.environ.get("TALLY_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True, timeout=10).stdout.strip()
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "-uno"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            if dirty:
                commit += "+changes"
        except (OSError, subprocess.SubprocessError):
            commit = "unknown"
    info["commit"] = commit
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True)
        info["gpu"] = r.stdout.strip()
    r = subprocess.run([program("tallyd"), "--list-devices"], capture_output=True,
                       text=True, env=env, timeout=120)
    info["opencl_devices"] = [l.strip() for l in r.stdout.splitlines() if l.strip()]
    return info


def pick_device(devices):
    """The --device spec of the device to measure: the first GPU, else
    PoCL's CPU device (cpu), else none."""
    text = "\n".join(devices).lower()
    if "gpu" in text:
        return "gpu"
    if "cpu" in text:
        return "cpu"
    return None


# ------------------------------------------------------------------ 1. correctness
RESULT_LINE = re.compile(r"^\s+(ok|FAIL)\s+(\S+)")


class CaseRunner:
    """One test program's process over a list of its cases, named exactly
    ("=case"). Every line goes to the log as it is printed; a process that
    prints nothing for `stall` seconds is stopped, the case it was in is
    counted as hung, and a new process takes the cases after it."""

    def __init__(self, name, cases, env, tag):
        self.name, self.todo, self.env, self.tag = name, list(cases), env, tag
        self.results = {}  # case: "ok", "FAIL" or "hung"
        self.ms = {}
        self.proc = None
        self.last_line = time.time()
        self.lock = threading.Lock()
        self.restarts = 0

    def start(self):
        if not self.todo:
            self.proc = None
            return
        self.proc = subprocess.Popen([program(self.name)] + ["=" + c for c in self.todo],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=self.env)
        self.last_line = time.time()
        self.reader = threading.Thread(target=self._read, args=(self.proc,))
        self.reader.start()

    def _read(self, proc):
        for line in proc.stdout:
            log("  [%s] %s" % (self.tag, line.rstrip()))
            m = RESULT_LINE.match(line)
            with self.lock:
                self.last_line = time.time()
                if m and m[2] in self.todo:
                    self.results[m[2]] = m[1]
                    t = re.search(r"([\d.]+) ms\)", line)
                    if t:
                        self.ms[m[2]] = float(t[1])
                    self.todo.remove(m[2])

    def poll(self, stall):
        """False once this runner has nothing left to run."""
        if self.proc is None:
            return False
        if self.proc.poll() is not None:
            self.reader.join()
            if self.todo:  # it ended (crashed) before its cases did
                case = self.todo.pop(0)
                self.results[case] = "crashed (exit %d)" % self.proc.returncode
                self.restarts += 1
                self.start()
                return self.proc is not None
            self.proc = None
            return False
        if time.time() - self.last_line > stall:
            self.stop()
            with self.lock:
                if self.todo:
                    case = self.todo.pop(0)
                    self.results[case] = "hung"
                    log("  [%s] %s printed nothing for %.0f s: stopped" % (self.tag, case, stall))
            self.restarts += 1
            self.start()
        return self.proc is not None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.reader.join()


def correctness(env, device, tiny, budget, cores, stall):
    """test_engine's cases dealt out to several processes (they share the
    device; each builds its own kernels), and test_accuracy in one. A case
    that stalls is stopped and named, and the others still run; what the
    budget leaves unrun is named too."""
    e = dict(env, TALLY_TEST_DEVICE=device)
    deadline = time.time() + budget
    out = {}
    for name, pats, procs in (
            # --tiny: one engine case; test_accuracy's point is its 64M
            # elements, and make check's test-c runs it whole
            [("test_engine", ["golden_cl_gpu", "-tiny"], 1)] if tiny else
            [("test_engine", [], max(1, min(16, cores))), ("test_accuracy", [], 1)]):
        t0 = time.time()
        # test_accuracy (one process, 8 s on an H200) keeps half a minute
        until = deadline - (30 if name == "test_engine" and not tiny else 0)
        listing = subprocess.run([program(name), "--list"] + pats, capture_output=True,
                                 text=True, env=e, timeout=60)
        cases = listing.stdout.split()
        if listing.returncode != 0 or not cases:
            fail("%s --list: exit %d %s" % (name, listing.returncode, listing.stderr[-300:]))
            continue
        # an expensive case first in each share: the lists run in order
        runners = [CaseRunner(name, cases[i::procs], e, "%s/%d" % (name, i))
                   for i in range(procs)]
        for r in runners:
            r.start()
        left = runners
        while left:
            time.sleep(0.5)
            left = [r for r in left if r.poll(stall)]
            if time.time() > until:
                for r in left:
                    r.stop()
                break
        results, ms, restarts = {}, {}, 0
        for r in runners:
            results.update(r.results)
            ms.update(r.ms)
            restarts += r.restarts
            for c in r.todo:
                results.setdefault(c, "not run (budget)")
        bad = {c: v for c, v in results.items() if v != "ok"}
        secs = time.time() - t0
        slowest = sorted(ms.items(), key=lambda kv: -kv[1])[:5]
        out[name] = {"cases": len(cases), "passed": len(results) - len(bad), "bad": bad,
                     "processes": procs, "seconds": round(secs, 1),
                     "slowest_ms": dict(slowest)}
        log("%s on %s: %d cases in %d processes, %d passed, %.1f s; slowest %s" % (
            name, device, len(cases), procs, len(results) - len(bad), secs,
            ", ".join("%s %.0f ms" % kv for kv in slowest)))
        if bad:
            fail("%s on the device: %s" % (name, ", ".join(
                "%s %s" % kv for kv in sorted(bad.items()))))
    return out


# ------------------------------------------------------------------ 2. the engine
ROW = re.compile(r"^(\d+M)\s+(\S+)\s+(\d+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+"
                 r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)$")
RESIDENT = re.compile(r"on the device: scan\s+([\d.]+) GB/s\s+copy\s+([\d.]+) GB/s\s+ratio\s+([\d.]+)")


def engine(env, device, tiny, layout=None, size=None):
    args = [program("bench_engine"), "--packed", "--device", device, "--quick"]
    if tiny or size:
        args += ["--size", size or "1M"]
    if layout:
        args += ["--layout", layout]
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    log(r.stdout.rstrip())
    if r.returncode != 0:
        log(r.stderr[-2000:])
        fail("bench_engine on %s%s: exit %d" % (device, layout and " " + layout or "",
                                                r.returncode))
    rows = []
    for line in r.stdout.splitlines():
        m = ROW.match(line.strip())
        if m:
            rows.append({"size": m[1], "shape": m[2], "axis": int(m[3]), "mode": m[4],
                         "engine_gbs": float(m[5]), "copy_gbs": float(m[6]),
                         "ratio": float(m[7]), "host_gbs": float(m[10])})
            continue
        m = RESIDENT.search(line)
        if m and rows:
            rows[-1]["device_scan_gbs"] = float(m[1])
            rows[-1]["device_copy_gbs"] = float(m[2])
            rows[-1]["device_ratio"] = float(m[3])
    head = dict(re.findall(r"^(device|host):\s+(.*)$", r.stdout, re.M))
    return {"device": head.get("device", ""), "host": head.get("host", ""), "rows": rows,
            "seconds": round(time.time() - t0, 1)}


def prebuild(env, device, layouts):
    """The sweep's layouts, built beside the correctness part (which is the
    device's compiler too, not a measurement): bench_engine on the 1M rows
    under each, so that the driver's cache (NVIDIA's ~/.nv/ComputeCache)
    holds their programs when the sweep times them. A minute or more each
    on NVIDIA's compiler; in parallel, a minute for all."""
    out = []
    for spec in layouts:
        cmd = [program("bench_engine"), "--packed", "--device", device, "--quick",
               "--size", "1M", "--layout", spec]
        out.append((spec, time.time(), subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)))
    return out


def finish_prebuild(builds, t0, budget):
    """Waits for prebuild's processes, until a quarter of --budget past the
    correctness part at most; stops the rest (the sweep then builds them
    itself, timed apart from the scans). {layout: seconds or what
    happened}"""
    out = {}
    deadline = max(time.time() + 30, t0 + 0.7 * budget)
    for spec, started, proc in builds:
        try:
            _, err = proc.communicate(timeout=max(1, deadline - time.time()))
            out[spec] = round(time.time() - started, 1) if proc.returncode == 0 else \
                "%s: %s" % (exit_text(proc.returncode), err.strip()[-300:])
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[spec] = "stopped after %.0f s" % (time.time() - started)
        log("layout %s built: %s" % (spec, out[spec]))
    return out


# ------------------------------------------------------------------ 3. the service
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cpus):
    """A preexec_fn that runs the child on `cpus` alone (None: anywhere)."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def split_cores(share):
    """The node's cores in two disjoint sets: the first `share` of them
    for tallyd, the rest for the load tool (at least one each). Pinned
    apart, a load tool's threads never run on a core tallyd's thread was
    given, which moved the 1-thread figure by 40% between two runs of the
    same node (BENCHMARKS.md, "The H200 node again")."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    k = min(len(cpus) - 1, max(1, round(len(cpus) * share)))
    return cpus[:k], cpus[k:]


class Tallyd:
    def __init__(self, env, args, scratch, name, warmup, cpus=None):
        self.port, self.grpc_port = free_port(), free_port()
        self.log = open(os.path.join(scratch, "tallyd-%s.log" % name), "w")
        cmd = [program("tallyd"), "--listen", "127.0.0.1:%d" % self.port,
               "--grpc-listen", "127.0.0.1:%d" % self.grpc_port, "--access-log", "off",
               "--max-sequences", "0"] + (["--warmup"] if warmup else []) + args
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, env=env,
                                     preexec_fn=pinned(cpus))
        self.url = "http://127.0.0.1:%d" % self.port
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tallyd %s exited %d" % (" ".join(args), self.proc.returncode))
            try:
                with urllib.request.urlopen(self.url + "/v2/health/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("tallyd %s was not ready in 300 s" % " ".join(args))

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line.startswith(("tally_requests_total", "tally_device_jobs_total",
                                "tally_host_jobs_total", "tally_placements_total")):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def cpu_seconds(self):
        """CPU time tallyd has spent so far (user + system), from
        /proc/PID/stat; None where that cannot be read."""
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# Requests a load tool cut off as its window closed: a REST body left half
# sent (tallyd counts it as "other") or a gRPC stream reset (CANCELLED).
# They are the tool's stop, not the server's answers.
CUT = ('code="other"', 'code="CANCELLED"')


def exit_text(rc):
    """A child's exit status in words: "exit 1", "signal 9 (SIGKILL)"."""
    if rc is not None and rc < 0:
        try:
            return "signal %d (%s)" % (-rc, signal.Signals(-rc).name)
        except ValueError:
            return "signal %d" % -rc
    return "exit %s" % rc


def answered(before, after, protocol):
    """Requests answered over a door between two scrapes: (ok, {series:
    count} of the others), leaving out those cut off at the stop."""
    ok, bad = 0, {}
    for k, v in after.items():
        if not k.startswith("tally_requests_total") or 'protocol="%s"' % protocol not in k:
            continue
        if 'route="/metrics"' in k or "health" in k:
            continue
        d = v - before.get(k, 0)
        if 'code="200"' in k or 'code="OK"' in k:
            ok += d
        elif d and not any(c in k for c in CUT):
            bad[k] = int(d)
    return int(ok), bad


def kserve_binary_body(n, path):
    """A KServe v2 REST request with n float32 values as binary data."""
    header = json.dumps({"inputs": [{"name": "x", "shape": [n], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4 * n}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}
                        ).encode()
    with open(path, "wb") as f:
        f.write(header)
        f.write(struct.pack("<%df" % n, *[(i % 7) * 0.5 for i in range(n)]) if n <= (1 << 16)
                else bytes(4 * n))
    return len(header)


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def grpc_infer_body(n, path):
    """One gRPC message (the 5-byte prefix and a ModelInferRequest) with n
    float32 values in raw_input_contents, for h2load."""
    values = (struct.pack("<%df" % n, *[(i % 7) * 0.5 for i in range(n)]) if n <= (1 << 16)
              else bytes(4 * n))
    tensor = _field(1, b"x") + _field(2, b"FP32") + _field(3, _varint(n))
    req = _field(1, b"cumsum") + _field(5, tensor) + _field(7, values)
    with open(path, "wb") as f:
        f.write(b"\x00" + struct.pack(">I", len(req)) + req)


SMALL_JSON = ('wrk.method = "POST"\nwrk.path = "/v1/cumsum"\n'
              'wrk.headers["Content-Type"] = "application/json"\n'
              'wrk.body = \'{"dtype":"float32","shape":[16],"data":[0.5,1,1.5,2,2.5,3,3.5,4,'
              '4.5,5,5.5,6,6.5,7,7.5,8],"axis":0}\'\n')
FILE_BODY = ('wrk.method = "POST"\nwrk.path = "/v2/models/cumsum/infer"\n'
             'local f = assert(io.open(os.getenv("LOAD_BODY"), "rb"))\n'
             'wrk.body = f:read("*a")\nf:close()\n'
             'wrk.headers["Content-Type"] = "application/octet-stream"\n'
             'wrk.headers["Inference-Header-Content-Length"] = os.getenv("LOAD_HLEN")\n')
REPORT = ('function done(summary, latency, requests)\n'
          '  io.write(string.format("RESULT requests=%d errors=%d seconds=%.3f p50_ms=%.3f '
          'p99_ms=%.3f\\n", summary.requests, summary.errors.connect + summary.errors.read + '
          'summary.errors.write + summary.errors.status + summary.errors.timeout, '
          'summary.duration / 1e6, latency:percentile(50) / 1000, '
          'latency:percentile(99) / 1000))\nend\n')


def load_tool(name, cmd, env, seconds, cpus=None):
    """A load generator's run over a window of `seconds`, on `cpus` if
    given: its CompletedProcess, or {"error": ...} when it has not ended
    within three windows and half a minute."""
    limit = seconds * 3 + 30
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit,
                              preexec_fn=pinned(cpus))
    except subprocess.TimeoutExpired:
        return {"error": "%s did not finish in %d s" % (name, limit)}


def children_cpu():
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


def cpu_per_request(d, server0, load0, answered_ok):
    """CPU microseconds a request in tallyd and in the load tool over a
    window (server0, load0: the counters at its start), so that a figure
    says which side ran out of cores."""
    server1, load1 = d.cpu_seconds(), children_cpu()
    if not answered_ok or server0 is None or server1 is None:
        return {}
    return {"server_cpu_us": round((server1 - server0) * 1e6 / answered_ok, 2),
            "load_cpu_us": round((load1 - load0) * 1e6 / answered_ok, 2)}


def placed(before, after):
    """Jobs placed between two scrapes, by backend and reason
    (tally_placements_total), those that moved only."""
    out = {}
    for k, v in after.items():
        if k.startswith("tally_placements_total") and v - before.get(k, 0):
            out[k[len("tally_placements_total"):]] = int(v - before.get(k, 0))
    return out


def run_wrk(env, d, script, conns, threads, seconds, extra_env=None, timeout_s=30, cpus=None):
    cmd = [tool("wrk", env), "-t%d" % min(threads, conns), "-c%d" % conns,
           "-d%ds" % seconds, "--timeout", "%ds" % timeout_s, "-s", script, d.url]
    before = d.metrics()
    server0, load0 = d.cpu_seconds(), children_cpu()
    r = load_tool("wrk", cmd, dict(env, **(extra_env or {})), seconds, cpus)
    if isinstance(r, dict):
        return r
    m = re.search(r"RESULT (.*)", r.stdout)
    if not m:
        return {"error": "wrk: " + (r.stderr or r.stdout)[-300:]}
    f = dict(kv.split("=") for kv in m[1].split())
    after = d.metrics()
    ok, bad = answered(before, after, "http")
    secs = float(f["seconds"])
    return dict({"rps": round(int(f["requests"]) / secs, 1), "p50_ms": float(f["p50_ms"]),
                 "p99_ms": float(f["p99_ms"]), "errors": int(f["errors"]) + sum(bad.values()),
                 "answered": ok, "refused": bad, "placed": placed(before, after)},
                **cpu_per_request(d, server0, load0, ok))


def run_h2load(env, d, body, conns, threads, seconds, scratch, cpus=None):
    logf = os.path.join(scratch, "h2load.log")
    if os.path.exists(logf):  # h2load appends
        os.unlink(logf)
    cmd = [tool("h2load", env), "-c%d" % conns, "-t%d" % min(threads, conns), "-m1",
           "-D%d" % seconds, "--warm-up-time=200ms",
           "-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers",
           "--log-file", logf,
           "http://127.0.0.1:%d/inference.GRPCInferenceService/ModelInfer" % d.grpc_port]
    before = d.metrics()
    server0, load0 = d.cpu_seconds(), children_cpu()
    r = load_tool("h2load", cmd, env, seconds, cpus)
    if isinstance(r, dict):
        return r
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", r.stdout)
    if not m:
        return {"error": "h2load: " + (r.stderr or r.stdout)[-300:]}
    lat = []
    with open(logf) as f:  # start (s), status, duration (us) a request
        for line in f:
            p = line.split()
            if len(p) >= 3:
                lat.append(int(p[2]) / 1000.0)
    lat.sort()
    after = d.metrics()
    ok, bad = answered(before, after, "grpc")
    st = re.search(r"(\d+) succeeded, (\d+) failed, (\d+) errored", r.stdout)
    errors = sum(bad.values()) + (int(st[2]) + int(st[3]) if st else 0)
    pct = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 3)) if lat else (lambda q: None)
    return dict({"rps": float(m[3]), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
                 "errors": errors, "answered": ok, "refused": bad,
                 "placed": placed(before, after)},
                **cpu_per_request(d, server0, load0, ok))


def cells(tiny):
    """(door, what, elements, connections); --tiny: one of each kind"""
    if tiny:
        return [("rest", "json16", 16, 4), ("rest", "binary64K", 1 << 16, 2),
                ("grpc", "raw16", 16, 4), ("grpc", "raw64K", 1 << 16, 2)]
    return [("rest", "json16", 16, 64), ("rest", "json16", 16, 256),
            ("rest", "binary64K", 1 << 16, 16), ("rest", "binary16M", 1 << 24, 4),
            ("grpc", "raw16", 16, 64), ("grpc", "raw16", 16, 256),
            ("grpc", "raw64K", 1 << 16, 16), ("grpc", "raw16M", 1 << 24, 4)]


def bodies(scratch, tiny):
    out = {}
    for n in sorted({c[2] for c in cells(tiny)}):
        rest = os.path.join(scratch, "rest-%d.bin" % n)
        out[("rest", n)] = (rest, kserve_binary_body(n, rest))
        g = os.path.join(scratch, "grpc-%d.bin" % n)
        grpc_infer_body(n, g)
        out[("grpc", n)] = (g, None)
    with open(os.path.join(scratch, "small.lua"), "w") as f:
        f.write(SMALL_JSON + REPORT)
    with open(os.path.join(scratch, "file.lua"), "w") as f:
        f.write(FILE_BODY + REPORT)
    return out


def run_cell(env, d, cell, files, seconds, scratch, load_threads, cpus=None):
    door, label, n, conns = cell
    if door == "rest":
        if label.startswith("json"):
            return run_wrk(env, d, os.path.join(scratch, "small.lua"), conns, load_threads,
                           seconds, cpus=cpus)
        body, hlen = files[("rest", n)]
        return run_wrk(env, d, os.path.join(scratch, "file.lua"), conns, load_threads, seconds,
                       {"LOAD_BODY": body, "LOAD_HLEN": str(hlen)}, timeout_s=60, cpus=cpus)
    return run_h2load(env, d, files[("grpc", n)][0], conns, load_threads, seconds, scratch,
                      cpus)


def merge_rounds(runs, out):
    """out["configs"]: each tallyd's cells, the mean of their rounds."""
    for name, cellruns in runs.items():
        res = {}
        for key, rs in cellruns.items():
            if key == "jobs":
                res[key] = rs
                continue
            good = [r for r in rs if "rps" in r]
            if not good:
                res[key] = rs[-1]
                continue
            merged = dict(good[-1])
            merged["rps"] = round(sum(r["rps"] for r in good) / len(good), 1)
            p99 = [r["p99_ms"] for r in good if r.get("p99_ms") is not None]
            merged["p99_ms"] = max(p99) if p99 else None
            merged["errors"] = sum(r.get("errors", 0) for r in rs)
            merged["answered"] = sum(r.get("answered", 0) for r in good)
            merged["rounds_rps"] = [r["rps"] for r in good]
            merged["placed"] = {}
            for r in good:
                for k, v in r.get("placed", {}).items():
                    merged["placed"][k] = merged["placed"].get(k, 0) + v
            bad = [r["error"] for r in rs if "error" in r]
            if bad:
                merged["error"] = bad[0]
            res[key] = merged
        out["configs"][name] = res
    return out


def service(env, device, tiny, seconds, scratch, files, load_threads, http_threads, rounds,
            partial=None):
    """Each cell against the three tallyds in turn, `rounds` times, the
    order turned each round, so that a drift of the node (clocks, another
    tenant) falls on all three alike; all three run throughout (an idle
    tallyd costs nothing). A cell's figure is the mean of its rounds.
    The tallyds run on three quarters of the node's cores and the load
    tool, with a thread a core, on the other quarter. partial(out), if
    given, gets the rounds so far after each round, so that a run stopped
    by its time limit keeps what it measured."""
    server_cpus, load_cpus = split_cores(0.75)
    if load_cpus:
        load_threads = len(load_cpus)
    configs = [("host", ["--device", "host"])]
    if device is not None and not tiny:
        # the device alone: nothing placed on the host by cost
        configs.append((device, ["--device", device, "--placement", "device"]))
    if device is not None:
        configs.append(("default", []))
    out = {"http_threads": http_threads, "load_threads": load_threads, "seconds": seconds,
           "rounds": rounds, "configs": {}, "server_cpus": server_cpus, "load_cpus": load_cpus}
    servers = {}
    for name, args in configs:
        args = args + ["--http-threads", str(http_threads)]
        log("service, %s: tallyd %s" % (name, " ".join(args)))
        try:
            servers[name] = (Tallyd(env, args, scratch, name, warmup=not tiny,
                                    cpus=server_cpus), args)
        except RuntimeError as e:
            fail("service %s: %s" % (name, e))
    runs = {name: {} for name in servers}  # name: key: [one result a round]
    try:
        for rnd in range(rounds):
            for cell in cells(tiny):
                key = "%s %s c=%d" % (cell[0], cell[1], cell[3])
                order = list(servers)
                k = rnd % max(1, len(order))
                for name in order[k:] + order[:k]:
                    d, args = servers[name]
                    try:
                        r = run_cell(env, d, cell, files, seconds, scratch, load_threads,
                                     load_cpus)
                    except OSError as e:  # tallyd stopped answering (urllib's are OSErrors)
                        r = {"error": "no answer: %s" % e}
                    if d.proc.poll() is not None:
                        # it died: say how, and go on with a new one so that
                        # the other cells are still measured
                        r = dict(r, error="tallyd ended during this cell: %s" % exit_text(
                            d.proc.returncode))
                    runs[name].setdefault(key, []).append(r)
                    log("  %-8s %-22s round %d %s" % (name, key, rnd + 1, r))
                    if "error" in r or r.get("errors"):
                        fail("service %s, %s: %s" % (name, key, r.get("error") or
                                                     "%d errors" % r["errors"]))
                    if d.proc.poll() is not None:
                        d.stop()
                        try:
                            servers[name] = (Tallyd(env, args, scratch, name + "-again",
                                                    warmup=not tiny, cpus=server_cpus), args)
                        except RuntimeError as e:
                            fail("service %s: %s" % (name, e))
                            del servers[name]
                            break
            if partial is not None:  # a copy: the rounds go on
                partial(merge_rounds(runs, dict(out, configs={}, rounds_done=rnd + 1)))
        for name, (d, _) in servers.items():
            try:
                m = d.metrics()
                # where the jobs ran, and why (placement by cost)
                runs[name]["jobs"] = {k: v for k, v in m.items()
                                      if "jobs_total" in k or "placements_total" in k}
            except OSError as e:
                fail("service %s: %s" % (name, e))
    finally:
        for d, _ in servers.values():
            d.stop()
    return merge_rounds(runs, out)


def grpc_threads_flag(env):
    r = subprocess.run([program("tallyd"), "--help"], capture_output=True, text=True, env=env)
    return "--grpc-threads" in r.stdout + r.stderr


def scaling(env, tiny, seconds, scratch, files, load_threads, share=0.5):
    """tallyd on `share` of the node's cores (half), the load tool on the
    others with a thread a core: so 16 threads share 8 cores on a 16-core
    node, and the 1-thread figure is one thread on a core of its own."""
    counts = [1, 2] if tiny else [1, 2, 4, 8, 16]
    conns = 8 if tiny else 64
    server_cpus, load_cpus = split_cores(share)
    if load_cpus:
        load_threads = len(load_cpus)
    out = {"http": {}, "grpc": {}, "connections": conns, "load_threads": load_threads,
           "server_cpus": server_cpus, "load_cpus": load_cpus}
    has_grpc_threads = grpc_threads_flag(env)
    for t in counts:
        args = ["--device", "host", "--http-threads", str(t)]
        if has_grpc_threads:
            args += ["--grpc-threads", str(t)]
        try:
            d = Tallyd(env, args, scratch, "scale-%d" % t, warmup=False, cpus=server_cpus)
        except RuntimeError as e:
            fail("scaling %d threads: %s" % (t, e))
            continue
        try:
            r = run_wrk(env, d, os.path.join(scratch, "small.lua"), conns, load_threads, seconds,
                        cpus=load_cpus)
            if d.proc.poll() is not None:
                r = dict(r, error="tallyd ended: %s" % exit_text(d.proc.returncode))
            out["http"][str(t)] = r
            log("  http threads %-2d %s" % (t, r))
            if has_grpc_threads or t == counts[0]:
                g = run_h2load(env, d, files[("grpc", 16)][0], conns, load_threads, seconds,
                               scratch, load_cpus)
                out["grpc"][str(t)] = g
                log("  grpc loops   %-2d %s" % (t if has_grpc_threads else 1, g))
            for k, v in (("http", r),) + ((("grpc", g),) if has_grpc_threads or t == counts[0] else ()):
                if "error" in v or v.get("errors"):
                    fail("scaling %s %d: %s" % (k, t, v.get("error") or "%d errors" % v["errors"]))
        except OSError as e:  # tallyd stopped answering
            fail("scaling %d threads: %s (tallyd: %s)" % (t, e, exit_text(d.proc.poll())))
        finally:
            d.stop()
    if not has_grpc_threads:
        out["grpc_note"] = "this tallyd has no --grpc-threads: gRPC runs on one loop"
    for door in ("http", "grpc"):
        rows = out[door]
        if str(counts[0]) in rows and str(counts[-1]) in rows and "rps" in rows[str(counts[0])] \
                and "rps" in rows[str(counts[-1])]:
            out[door + "_growth"] = round(rows[str(counts[-1])]["rps"] / rows[str(counts[0])]["rps"], 2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="make check's quick run")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-node.json"))
    ap.add_argument("--seconds", type=int, default=None, help="each load window")
    ap.add_argument("--only", default=",".join(PARTS), help="parts, comma-separated")
    ap.add_argument("--budget", type=float, default=450,
                    help="seconds the whole run should take: the correctness part "
                         "gets what the others leave (default 450)")
    ap.add_argument("--stall", type=float, default=None,
                    help="seconds a test program may print nothing before its case is "
                         "stopped as hung (default 150: a device compiler's first builds)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of the service's cells, each against the three tallyds "
                         "in turn (default 2; --tiny 1)")
    ap.add_argument("--scaling-share", type=float, default=0.5,
                    help="the scaling part's share of the cores for tallyd; the load "
                         "tool gets the others (default 0.5)")
    ap.add_argument("--layouts", default="",
                    help="layouts for the layouts part, ';'-separated (default: a GPU sweep)")
    a = ap.parse_args()
    parts = a.only.split(",")
    for p in parts:
        if p not in PARTS:
            ap.error("--only takes %s" % ", ".join(PARTS))
    seconds = a.seconds or (1 if a.tiny else 3)
    t0 = time.time()
    scratch = tempfile.mkdtemp(prefix="tally-node-")
    try:
        env = node_environment(scratch)
        info = machine(env)
        device = pick_device(info["opencl_devices"])
        cores = os.cpu_count() or 2
        load_threads = max(1, cores // 4)
        result = {"machine": info, "device": device, "tiny": a.tiny}
        log("bench-node: %s, %d cores, device %s, commit %s" % (
            info.get("gpu") or info["cpu"], cores, device, info["commit"]))
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)

        def save():  # after every part, so that a run cut short leaves what it measured
            result["failed"] = FAILED
            result["seconds"] = round(time.time() - t0, 1)
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)

        layouts = ["gpu"] + (a.layouts.split(";") if a.layouts else list(GPU_LAYOUTS))
        sweep = "layouts" in parts and (device == "gpu" or bool(a.layouts)) and not a.tiny
        if "correctness" in parts and device is not None:
            # at most 45% of --budget; the parts after it need the rest.
            # The sweep's layouts are built beside it, so that the sweep
            # at the end finds them in the driver's cache.
            builds = prebuild(env, device, layouts[1:]) if sweep else []
            result["correctness"] = correctness(env, device, a.tiny, 0.45 * a.budget, cores,
                                                a.stall or (30 if a.tiny else 150))
            if builds:
                result["layout_builds"] = finish_prebuild(builds, t0, a.budget)
            save()
        if "engine" in parts and device is not None:
            result["engine"] = engine(env, device, a.tiny)
            save()
        files = bodies(scratch, a.tiny) if {"service", "scaling"} & set(parts) else {}
        if "service" in parts:
            def service_so_far(part):
                result["service"] = part
                save()
            result["service"] = service(env, device, a.tiny, seconds, scratch, files,
                                        load_threads, cores, a.rounds or (1 if a.tiny else 2),
                                        service_so_far)
            save()
        if "scaling" in parts:
            # the load tools' threads: half the node. wrk and h2load spend
            # about as much CPU on a small request as tallyd does, so with a
            # quarter of the cores the load tool, not tallyd, was the limit
            # at 8 threads and more
            result["scaling"] = scaling(env, a.tiny, seconds, scratch, files,
                                        max(1, cores // 2), a.scaling_share)
            save()
        if sweep:
            result["layouts"] = {}
            for spec in layouts:
                if time.time() - t0 > a.budget:
                    log("layout %s: not run, --budget spent" % spec)
                    result["layouts"][spec] = {"error": "not run: --budget spent"}
                    continue
                log("layout %s, the 16M rows" % spec)
                result["layouts"][spec] = engine(env, device, a.tiny, spec, "16M")
                save()
        save()
        log("bench-node: %s in %.0f s, %d failures" % (a.out, result["seconds"], len(FAILED)))
    finally:
        for name in os.listdir(scratch):
            if name.startswith("tallyd-") and FAILED:
                with open(os.path.join(scratch, name)) as f:
                    tail = f.read()[-1500:]
                log("---", name, "(last lines)\n" + tail)
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
