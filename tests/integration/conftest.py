"""Fixtures that start the real tallyd on a free loopback port.

Each daemon gets its own PoCL kernel cache (concurrent processes sharing
one crash PoCL): a copy of POCL_CACHE_SEED (the cache the C tests filled,
so that the daemon's warm-up loads kernels instead of compiling them) in a
temporary directory.

Environment:
  TALLYD            the binary (default build/bin/tallyd)
  POCL_CACHE_SEED   a warm PoCL cache to copy (default build/pocl-cache)
"""
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


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A running tallyd: its port, its log, and ways to talk to it."""

    def __init__(self, *args, env=None, https=False, cafile=None, command=None):
        """args go to tallyd after --listen; or command is the whole command
        line (`make run`, say), told its port by TALLY_LISTEN and run in its
        own process group, which stop() signals."""
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
        # free_port() lets its port go before tallyd binds it, and another
        # process (a client's ephemeral port) can take it in between: a
        # start that fails only on that is tried again on new ports
        for attempt in range(3):
            self.port = free_port()
            # gRPC on a port of its own: the default (8001) would clash
            # between daemons that run at once
            self.grpc_port = free_port()
            full_env = dict(os.environ)
            full_env["POCL_CACHE_DIR"] = cache
            full_env.update(env or {})
            self.log_file = open(self.log_path, "wb")
            if self.group:
                full_env["TALLY_LISTEN"] = "127.0.0.1:%d" % self.port
                full_env["TALLY_GRPC_LISTEN"] = (env or {}).get(
                    "TALLY_GRPC_LISTEN") or "127.0.0.1:%d" % self.grpc_port
                line = command
            else:
                line = [TALLYD, "--listen", "127.0.0.1:%d" % self.port,
                        "--grpc-listen", "127.0.0.1:%d" % self.grpc_port] + list(args)
            self.proc = subprocess.Popen(line, stdout=self.log_file, stderr=subprocess.STDOUT,
                                         env=full_env, start_new_session=self.group)
            try:
                self.wait_ready()
                return
            except RuntimeError:
                taken = self.proc.poll() is not None and "Address already in use" in self.log()
                if not taken or attempt == 2:
                    raise
                self.log_file.close()

    def wait_ready(self, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tallyd exited with %s:\n%s" % (self.proc.returncode, self.log()))
            try:
                status, _, _ = self.request("GET", "/v2/health/ready", timeout=2)
                if status == 200 or status == 401:  # 401: up, wants a token
                    return
            except OSError:
                pass
            time.sleep(0.1)
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

    def start(*args, env=None, https=False, cafile=None):
        d = Daemon(*args, env=env, https=https, cafile=cafile)
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
    Once per process."""
    global _PACKAGE_DIR
    if _PACKAGE_DIR is None:
        target = tempfile.mkdtemp(prefix="tally-python-")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--disable-pip-version-check",
                        "--target", target, os.path.join(ROOT, "client", "python")],
                       check=True, capture_output=True, timeout=300)
        sys.path.insert(0, target)
        _PACKAGE_DIR = target
    return _PACKAGE_DIR


_PACKAGE_DIR = None
