"""Fixtures that start the real tallyd on a free loopback port.

Each daemon gets its own PoCL kernel cache (concurrent processes sharing
one crash PoCL): a copy of POCL_CACHE_SEED (the cache the C tests filled,
so that the daemon's warm-up loads kernels instead of compiling them) in a
temporary directory.

Environment:
  TALLYD            the binary (default build/bin/tallyd)
  POCL_CACHE_SEED   a warm PoCL cache to copy (default build/pocl-cache)
"""
import fcntl
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TALLYD = os.environ.get("TALLYD", os.path.join(ROOT, "build", "bin", "tallyd"))
CACHE_SEED = os.environ.get("POCL_CACHE_SEED", os.path.join(ROOT, "build", "pocl-cache"))
# Every tallyd a test starts by hand has gRPC off unless it asks: two on
# the default port (8001) at once would clash. Daemon gives each its own.
os.environ.setdefault("TALLY_GRPC_LISTEN", "")
# The device a Daemon gets when its test names none (TALLY_TEST_DEVICE;
# empty: tallyd's default, auto). `make test-tsan` sets host: PoCL's
# kernels, built at each start under ThreadSanitizer's interceptors, cost
# 3.3 s of CPU a daemon against 0.9 s for the host backend alone, and TSan
# cannot see inside PoCL. Tests marked `opencl` keep the default.
TEST_DEVICE = os.environ.get("TALLY_TEST_DEVICE", "")
_opencl_wanted = False


def pytest_runtest_setup(item):
    global _opencl_wanted
    _opencl_wanted = item.get_closest_marker("opencl") is not None


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: takes many seconds (a container, a browser, pip, a long run); "
        "`make check` leaves it out")
    config.addinivalue_line(
        "markers", "concurrency: exercises threads at once (many clients, streams, "
        "workers, drains, the exporter); `make test-tsan` runs these")
    config.addinivalue_line(
        "markers", "outage: kills and restarts replicas and Redis under load to check "
        "that nothing is lost; the sanitizer legs leave these out (test_redis "
        "and the other store tests reach the same C paths there)")
    config.addinivalue_line(
        "markers", "peer: drives tallyd through an outside tool's own machinery "
        "(perf_analyzer, a Dask cluster, schemathesis); the plain leg runs these, the sanitizer "
        "legs leave them out (Makefile, test-asan)")
    config.addinivalue_line(
        "markers", "opencl: needs tallyd's default devices (PoCL), whatever "
        "TALLY_TEST_DEVICE says")


def free_port():
    """A loopback port free at the time of the call, for a test that needs a
    number before anything listens. Nothing holds it afterwards: for an
    address where nobody listens, use dead_port(); for a daemon, Daemon
    binds port 0 and reads the port tallyd chose."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DEAD = []


def dead_port():
    """A loopback port that refuses connections for the rest of this
    process: bound and never listened on, so that no other process (a
    daemon of a test running beside this one) can take it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    _DEAD.append(s)
    return s.getsockname()[1]


# tallyd's start lines name the ports it bound: "... listening on ADDR
# (port N, HTTP...)" and "gRPC listening on ADDR (port N, h2c, K loops)".
_HTTP_PORT = re.compile(r'"msg":"tallyd \S+ listening on \S+ \(port (\d+),')
_GRPC_PORT = re.compile(r'"msg":"gRPC listening on \S+ \(port (\d+),')


class Daemon:
    """A running tallyd: its port, its log, and ways to talk to it."""

    def __init__(self, *args, env=None, https=False, cafile=None, command=None,
                 joined=True):
        """args go to tallyd after --listen; or command is the whole command
        line (`make run`, say), told its address by TALLY_LISTEN and run in
        its own process group, which stop() signals.

        tallyd is ready before its OpenCL devices have built their kernels
        (the host backend answers meanwhile); with joined (the default)
        the constructor also waits until every device has joined the pool,
        so that a test sees the devices it asked for.

        tallyd binds port 0 (REST and gRPC) and the ports are read from its
        log: no other process can take them between a choice and the bind,
        as it could when the harness picked a free port and let it go."""
        self.https = https
        self.ssl_context = ssl.create_default_context(cafile=cafile) if https else None
        self.tmp = tempfile.mkdtemp(prefix="tallyd-test-")
        cache = os.path.join(self.tmp, "pocl-cache")
        if os.path.isdir(CACHE_SEED):
            shutil.copytree(CACHE_SEED, cache, symlinks=True)
        else:
            os.makedirs(cache)
        self.log_path = os.path.join(self.tmp, "tallyd.log")
        self.group = command is not None
        self.port = self.grpc_port = None
        full_env = dict(os.environ)
        full_env["POCL_CACHE_DIR"] = cache
        full_env.update(env or {})
        self.log_file = open(self.log_path, "wb")
        if self.group:
            full_env["TALLY_LISTEN"] = "127.0.0.1:0"
            full_env["TALLY_GRPC_LISTEN"] = (env or {}).get("TALLY_GRPC_LISTEN") or "127.0.0.1:0"
            line = command
        else:
            line = [TALLYD, "--listen", "127.0.0.1:0",
                    "--grpc-listen", "127.0.0.1:0"] + list(args)
            named = any(str(a) == "--device" or str(a).startswith("--device=") for a in args)
            if TEST_DEVICE and not named and not _opencl_wanted and "TALLY_DEVICE" not in full_env:
                line += ["--device", TEST_DEVICE]
        self.proc = subprocess.Popen(line, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     env=full_env, start_new_session=self.group)
        self.wait_ready(joined=joined)

    def wait_ports(self, deadline):
        """Reads the bound ports from the start lines (gRPC's, when it is
        on, comes first)."""
        while self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("tallyd exited with %s:\n%s" % (self.proc.returncode, self.log()))
            if time.time() > deadline:
                raise RuntimeError("tallyd did not say where it listens:\n" + self.log())
            text = self.log()
            m = _HTTP_PORT.search(text)
            if m:
                self.port = int(m.group(1))
                g = _GRPC_PORT.search(text)
                self.grpc_port = int(g.group(1)) if g else None
            else:
                time.sleep(0.05)

    def wait_ready(self, timeout=300, joined=True):
        """Until /v2/health/ready answers 200 (or 401: up, wants a token)
        and, with joined, says no device is still building its kernels."""
        deadline = time.time() + timeout
        self.wait_ports(deadline)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tallyd exited with %s:\n%s" % (self.proc.returncode, self.log()))
            try:
                status, _, body = self.request("GET", "/v2/health/ready", timeout=2)
                if status == 401 or (status == 200 and not (
                        joined and json.loads(body).get("devices_compiling", 0) > 0)):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("tallyd did not become ready:\n" + self.log())

    def log(self):
        if not self.log_file.closed:  # still running
            self.log_file.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_lines(self):
        out = []
        for line in self.log().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def connect(self, timeout=60):
        if self.https:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = self.connect(timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), resp.read()
        finally:
            conn.close()

    def metric(self, name, **labels):
        """The sum of a metric's samples in /metrics whose labels include
        the given ones (0 when none has been counted yet); KeyError when
        tallyd does not serve the metric at all."""
        text = self.request("GET", "/metrics")[2].decode()
        if not re.search(r"^# TYPE %s " % re.escape(name), text, re.M):
            raise KeyError(name)
        total = 0
        for m in re.finditer(r"^%s(?:\{(.*)\})? (\S+)$" % re.escape(name), text, re.M):
            have = dict(re.findall(r'([a-z_]+)="([^"]*)"', m.group(1) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(2))
        return total

    def post_json(self, path, obj, headers=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        status, hdrs, body = self.request("POST", path, json.dumps(obj), h)
        return status, hdrs, json.loads(body) if body else None

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            if self.group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if self.group:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        return self.proc.returncode

    def cleanup(self):
        if self.proc.poll() is None:
            self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def tallyd():
    """One daemon shared by the tests that only talk to it."""
    d = Daemon()
    yield d
    code = d.stop()
    d.cleanup()
    assert code == 0, "tallyd exited with %s" % code


@pytest.fixture
def spawn():
    """Starts daemons with given flags; stops and removes them afterwards."""
    started = []

    def start(*args, env=None, https=False, cafile=None, joined=True):
        d = Daemon(*args, env=env, https=https, cafile=cafile, joined=joined)
        started.append(d)
        return d

    yield start
    for d in started:
        d.cleanup()


def valid_request_works(d):
    """The check after every bad request: the daemon still answers."""
    status, _, body = d.post_json("/v1/cumsum", {"dtype": "int32", "shape": [3], "data": [1, 2, 3]})
    assert status == 200, body
    assert body["data"] == [1, 3, 6]


@pytest.fixture
def still_healthy(tallyd):
    yield lambda: valid_request_works(tallyd)


def eventually(probe, want, timeout=10):
    """Polls probe() until it returns want (or timeout seconds pass), and
    returns what it returned last. A request's counters, statistics and
    access line are written when the request ends, just after its last
    byte went out: a client that has its answer may look a moment
    before they are."""
    deadline = time.time() + timeout
    while True:
        got = probe()
        if got == want or time.time() > deadline:
            return got
        time.sleep(0.02)


def run_threads(n, fn):
    """Runs fn(i) on n threads; re-raises the first failure."""
    errors = []

    def wrap(i):
        try:
            fn(i)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def install_python_package():
    """client/python installed with pip (no dependencies, no build
    isolation: the machine's setuptools builds it, as it would offline)
    into a directory of this run's, put first on sys.path; that directory.
    Once per process. pip builds in client/python's own tree, so a lock
    file keeps two processes (xdist's workers) from building at once: two
    builds there broke each other's install."""
    global _PACKAGE_DIR
    if _PACKAGE_DIR is None:
        target = tempfile.mkdtemp(prefix="tally-python-")
        with open(os.path.join(tempfile.gettempdir(), "tally-python-build.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                            "--no-build-isolation", "--disable-pip-version-check",
                            "--target", target, os.path.join(ROOT, "client", "python")],
                           check=True, capture_output=True, timeout=300)
        sys.path.insert(0, target)
        _PACKAGE_DIR = target
    return _PACKAGE_DIR


_PACKAGE_DIR = None
