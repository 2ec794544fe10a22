"""HTTP/2 abuse against the gRPC door: a rapid-reset flood (CVE-2023-44487),
SETTINGS and PING floods, huge header lists, a CONTINUATION flood, and a
stream that never ends. Each time the server stays up, keeps serving
other clients, and bounds its CPU and memory.

Frames are written by hand (RFC 9113; HPACK literals without indexing,
RFC 7541 6.2.2), so that a misbehaving peer can be exactly that."""
import os
import socket
import struct
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from conftest import eventually

# floods and many streams against the loop thread: TSan runs them, and
# `make check` leaves them out (seconds each)
pytestmark = [pytest.mark.concurrency, pytest.mark.slow]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0, 1, 3, 4, 6, 7, 9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack(headers):
    """Literal header fields without indexing, new names, no Huffman."""
    out = b""
    for name, value in headers:
        out += b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    return out


def request_headers(method=b"ModelInfer", extra=()):
    return hpack([(b":method", b"POST"), (b":scheme", b"http"),
                  (b":path", b"/inference.GRPCInferenceService/" + method),
                  (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
                  (b"te", b"trailers")] + list(extra))


class Peer:
    """A raw HTTP/2 connection whose reads are drained by a thread (or
    not, for the floods that count on acks piling up)."""

    def __init__(self, port, drain=True):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.received = bytearray()
        self.closed = threading.Event()
        if drain:
            threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        try:
            while True:
                b = self.s.recv(65536)
                if not b:
                    break
                self.received += b
        except OSError:
            pass
        self.closed.set()

    def send(self, data):
        try:
            self.s.sendall(data)
            return True
        except OSError:
            return False

    def frames(self):
        out, b = [], bytes(self.received)
        while len(b) >= 9:
            n = int.from_bytes(b[:3], "big")
            if len(b) < 9 + n:
                break
            out.append((b[3], b[4], int.from_bytes(b[5:9], "big") & 0x7fffffff, b[9:9 + n]))
            b = b[9 + n:]
        return out

    def close(self):
        # shutdown first: a close() alone leaves the drain thread's recv
        # holding the socket, and no FIN goes out
        try:
            self.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.s.close()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def still_serves(d):
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.arange(100, dtype=np.float32)
    inp = grpcclient.InferInput("x", [100], "FP32")
    inp.set_data_from_numpy(x)
    y = c.infer("cumsum", [inp], client_timeout=10).as_numpy("y")
    assert np.array_equal(y, np.cumsum(x))
    c.close()


@pytest.fixture
def daemon(spawn):
    d = spawn("--request-timeout", "2", "--idle-timeout", "5")
    still_serves(d)
    return d


def test_rapid_reset_flood(daemon):
    pid = daemon.proc.pid
    cpu0, rss0 = cpu_seconds(pid), rss_mib(pid)
    p = Peer(daemon.grpc_port)
    hdr = request_headers()
    sent = 0
    for batch in range(200):
        chunk = b""
        for i in range(100):
            sid = 1 + 2 * (batch * 100 + i)
            chunk += frame(HEADERS, END_HEADERS, sid, hdr) + \
                frame(RST_STREAM, 0, sid, struct.pack(">I", 8))  # CANCEL
        if not p.send(chunk):
            break
        sent += 100
    p.closed.wait(10)
    goaway = [f for f in p.frames() if f[0] == GOAWAY]
    # the flood ends the connection with a GOAWAY (nghttp2's rate limit
    # says INTERNAL_ERROR, 2; tally's own ENHANCE_YOUR_CALM, 11)
    assert p.closed.is_set() and goaway, "the server took %d rapid resets" % sent
    assert int.from_bytes(goaway[-1][3][4:8], "big") in (2, 11)
    # the server stopped before the flood's end: its GOAWAY's last stream
    # is short of the last one sent (how many the client got into the
    # socket meanwhile is the kernel's buffering, and under TSan's slower
    # reads that may be all of them)
    last = int.from_bytes(goaway[-1][3][0:4], "big") & 0x7FFFFFFF
    assert last < 1 + 2 * (sent - 1), (last, sent)
    still_serves(daemon)
    assert cpu_seconds(pid) - cpu0 < 10
    assert rss_mib(pid) - rss0 < 64
    assert daemon.metric("tally_grpc_abuse_closed_total") >= 1


@pytest.mark.parametrize("kind", ["settings", "ping"])
def test_ack_floods(daemon, kind):
    """Frames that each call for an ack, sent while never reading one."""
    pid = daemon.proc.pid
    cpu0, rss0 = cpu_seconds(pid), rss_mib(pid)
    p = Peer(daemon.grpc_port, drain=False)
    one = frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 65535)) if kind == "settings" \
        else frame(PING, 0, 0, b"12345678")
    p.s.settimeout(2)
    sent = 0
    while sent < 200_000 and p.send(one * 1000):
        sent += 1000
    # the server gave up on the connection rather than queue acks
    assert sent < 200_000, "the server queued acks for %d frames" % sent
    p.close()
    still_serves(daemon)
    assert cpu_seconds(pid) - cpu0 < 10
    assert rss_mib(pid) - rss0 < 64


def test_huge_header_list(daemon):
    p = Peer(daemon.grpc_port)
    big = [(b"x-junk-%d" % i, b"v" * 100) for i in range(400)]  # ~45 KB
    block = request_headers(extra=big)
    first, rest = block[:16000], block[16000:]
    data = frame(HEADERS, 0, 1, first)
    while rest:
        piece, rest = rest[:16000], rest[16000:]
        data += frame(CONTINUATION, 0 if rest else END_HEADERS, 1, piece)
    p.send(data)
    time.sleep(0.5)
    frames = p.frames()
    # refused: a reset stream, or the whole connection ended
    assert any(f[0] == RST_STREAM and f[2] == 1 for f in frames) or \
        any(f[0] == GOAWAY for f in frames), frames
    p.close()
    still_serves(daemon)


def test_continuation_flood(daemon):
    """Endless CONTINUATION frames of tiny headers (CVE-2024-27316's kind)."""
    pid = daemon.proc.pid
    rss0 = rss_mib(pid)
    p = Peer(daemon.grpc_port)
    p.send(frame(HEADERS, 0, 1, request_headers()))
    one = frame(CONTINUATION, 0, 1, hpack([(b"x-a", b"b")]))
    sent = 0
    while sent < 100_000 and p.send(one * 1000):
        sent += 1000
        if p.closed.is_set():
            break
    p.closed.wait(10)
    assert p.closed.is_set(), "the server took %d CONTINUATION frames" % sent
    still_serves(daemon)
    assert rss_mib(pid) - rss0 < 64


def test_stream_that_never_ends(daemon):
    """A message announced as 1 MiB of which 1 KiB comes, then nothing:
    --request-timeout (2 s here) ends it; the rest of the server never
    waits on it."""
    p = Peer(daemon.grpc_port)
    p.send(frame(HEADERS, END_HEADERS, 1, request_headers()) +
           frame(DATA, 0, 1, b"\x00" + struct.pack(">I", 1 << 20) + b"\x00" * 1024))
    still_serves(daemon)
    deadline = time.time() + 10
    while time.time() < deadline:
        heads = [f for f in p.frames() if f[0] == HEADERS and f[2] == 1]
        if heads:
            break
        time.sleep(0.2)
    assert heads, "the stuck stream was never answered"
    assert heads[0][1] & END_STREAM  # Trailers-Only: the status, no message
    assert eventually(lambda: daemon.metric("tally_request_failures_total", protocol="grpc",
                                            reason="REQUEST_TIMEOUT") >= 1, True)
    p.close()
    still_serves(daemon)


def test_many_streams_are_capped(spawn):
    """Past --grpc-max-streams, nghttp2 refuses the stream."""
    d = spawn("--grpc-max-streams", "4")
    p = Peer(d.grpc_port)
    time.sleep(0.3)
    data = b""
    for i in range(8):
        data += frame(HEADERS, END_HEADERS, 1 + 2 * i, request_headers())
    p.send(data)
    time.sleep(0.5)
    resets = [f for f in p.frames() if f[0] == RST_STREAM]
    assert resets and all(int.from_bytes(f[3], "big") == 7 for f in resets), p.frames()  # REFUSED_STREAM
    p.close()
    still_serves(d)


def test_connections_are_capped(spawn):
    d = spawn("--max-connections", "3")
    peers = [Peer(d.grpc_port) for _ in range(3)]
    time.sleep(0.3)
    extra = Peer(d.grpc_port)
    assert extra.closed.wait(5), "a fourth connection was kept"
    for p in peers:
        p.close()
    time.sleep(0.3)
    still_serves(d)
    assert d.metric("tally_grpc_connections_refused_total") >= 1
