"""What the sequences' integration tests share (so that no test module
imports another): Debian's redis-server, started here on a free port and
never a mock, with its snapshot and its replicas; and one way to send a
chunk of a sequence, over KServe REST (JSON) or gRPC, and read its answer.

    from seqlib import REDIS, Redis, send, answer, outcome, infer, send_grpc
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

REDIS = shutil.which("redis-server")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """Debian's redis-server on a free loopback port. By default its
    append-only file is flushed at every write (appendfsync always), so
    that a kill -9 and a start again keep every acknowledged write; aof
    None runs it without one (snapshots only: save() takes one, and a
    kill -9 and a start again roll it back to it); extra: more arguments
    (a replica's --replicaof)."""

    def __init__(self, password=None, aof="always", extra=()):
        self.dir = tempfile.mkdtemp(prefix="tally-redis-")
        self.password = password
        self.aof = aof
        self.extra = list(extra)
        self.proc = None
        self.port = None
        self.start()

    def args(self, port):
        args = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
        if self.aof:
            args += ["--appendonly", "yes", "--appendfsync", self.aof]
        else:
            args += ["--appendonly", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        return args + self.extra

    def start(self):
        for _ in range(20):  # a port another process took meanwhile: another
            port = self.port or _free_port()
            self.proc = subprocess.Popen(self.args(port), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                        s.sendall(b"PING\r\n")
                        if s.recv(64)[:1] in (b"+", b"-"):
                            self.port = port
                            return
                except OSError:
                    time.sleep(0.02)
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError("redis-server did not start:\n" + self.log())

    def url(self, password=None):
        pw = password if password is not None else self.password
        return "redis://%s127.0.0.1:%d" % (":%s@" % pw if pw else "", self.port)

    def command(self, *words):
        """One inline command, its raw answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            if self.password:
                s.sendall(("AUTH %s\r\n" % self.password).encode())
                s.recv(64)
            s.sendall((" ".join(words) + "\r\n").encode())
            return s.recv(65536)

    def save(self):
        """A snapshot (dump.rdb) of everything now."""
        assert self.command("SAVE").startswith(b"+OK")

    def rollback(self):
        """Killed and started again from its last snapshot: what it took
        since is gone (a Redis without its append-only file)."""
        assert not self.aof, "a rollback needs a Redis without its append-only file"
        self.kill()
        self.start()

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def log(self):
        try:
            with open(os.path.join(self.dir, "redis.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def chunk_params(seq, start=False, end=False, number=None):
    """A chunk's sequence parameters, as KServe's "parameters" carry them."""
    p = {"sequence_id": seq}
    if start:
        p["sequence_start"] = True
    if end:
        p["sequence_end"] = True
    if number is not None:
        p["sequence_chunk"] = number
    return p


def chunk_body(seq, data, start=False, end=False, number=None, dtype="INT64", shape=None):
    """One chunk as a KServe v2 JSON body."""
    return {"parameters": chunk_params(seq, start, end, number),
            "inputs": [{"name": "x", "datatype": dtype,
                        "shape": list(shape) if shape else [len(data)],
                        "data": list(data)}]}


def send(target, seq, data, start=False, end=False, number=None, dtype="INT64",
         timeout=20, body=None, params=None, shape=None, headers=None):
    """One chunk over KServe REST (JSON) to target (a Daemon, or a port):
    (HTTP status, the answer's JSON). data: a list, or a 1-D numpy array
    (its dtype the chunk's); params: the request's parameters instead of
    seq's; body: another body to send instead; headers: the request's
    own, besides its Content-Type."""
    if hasattr(data, "dtype"):
        dtype = {"int64": "INT64", "int32": "INT32", "float32": "FP32",
                 "float64": "FP64"}[data.dtype.name]
        data = data.tolist()
    port = target if isinstance(target, int) else target.port
    if body is None:
        body = chunk_body(seq, data, start, end, number, dtype, shape)
        if params is not None:
            body["parameters"] = params
    payload = json.dumps(body)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v2/models/cumsum/infer", payload,
                  dict({"Content-Type": "application/json"}, **(headers or {})))
        r = c.getresponse()
        raw = r.read()
    finally:
        c.close()
    return r.status, json.loads(raw) if raw else {}


def answer(body):
    """The answer's values."""
    return body["outputs"][0]["data"]


def outcome(st, body):
    """(status, the values) for a 200, else (status, the error's words)."""
    return (st, answer(body)) if st == 200 else (st, body.get("error", ""))


def infer(target, seq, data, start=False, end=False, chunk=None, timeout=20):
    """One chunk over KServe REST: (status, the values or the error's
    words)."""
    return outcome(*send(target, seq, data, start=start, end=end, number=chunk,
                         timeout=timeout))


def send_grpc(port, seq, data, start=False, end=False, number=None, timeout=20):
    """One chunk over gRPC (tritonclient, unary; data a list, INT64, or a
    1-D numpy array, its dtype kept): (200, the values) or (the gRPC
    status's name, its words)."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % port)
    try:
        x = np.ascontiguousarray(data if isinstance(data, np.ndarray)
                                 else np.array(data, dtype=np.int64))
        i = grpcclient.InferInput("x", [len(x)], np_to_triton_dtype(x.dtype))
        i.set_data_from_numpy(x)
        extra = {"sequence_chunk": number} if number is not None else None
        r = c.infer("cumsum", [i], sequence_id=seq, sequence_start=start,
                    sequence_end=end, parameters=extra, client_timeout=timeout)
        return 200, r.as_numpy("y").tolist()
    except InferenceServerException as e:
        return str(e.status()), e.message() or ""
    finally:
        c.close()


def infer_numpy(mod, client, x, seq, start=False, end=False, axis=0, exclusive=False,
                reverse=False, **kw):
    """A chunk x (any numpy array) through tritonclient's module mod (http
    or grpc) and its client, with the scan's parameters: its answer."""
    from tritonclient.utils import np_to_triton_dtype
    inp = mod.InferInput("x", list(x.shape), np_to_triton_dtype(x.dtype))
    inp.set_data_from_numpy(x)
    params = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
    r = client.infer("cumsum", [inp], outputs=[mod.InferRequestedOutput("y")],
                     parameters=params, sequence_id=seq, sequence_start=start,
                     sequence_end=end, **kw)
    return r.as_numpy("y")


class Proxy:
    """A TCP proxy in front of Redis, as a Kubernetes Service is: switch()
    points it at another server and drops the connections it holds."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.open = []
        self.frozen = False  # bytes stay where they are, undelivered
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                c.close()
                continue
            for x in (c, u):  # as Redis's own sockets: no Nagle delay
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.open += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                # held when frozen, however long this pump waited in recv():
                # bytes that arrive after the freeze must not pass (a
                # write's replication and its WAIT's acknowledgement
                # slipped through once, and the model checker's snapshot,
                # taken at the freeze, lost an answered write)
                while self.frozen and not self.closed:
                    time.sleep(0.005)
                if self.closed:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def switch(self, target):
        with self.lock:
            self.target = target
            held, self.open = self.open, []
        for s in held:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.closed = True
        self.lsock.close()
        self.switch(self.target)
