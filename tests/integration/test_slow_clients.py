"""Slow and greedy clients: connections that trickle bytes are closed when
their time runs out, one address cannot take every connection, and a
normal client keeps getting quick answers while a thousand slow ones hang
on.

The slow connections come from 127.0.0.2 and the normal client from
127.0.0.1 (both are the loopback), so that the per-address cap can be told
apart from the rest.
"""
import json
import re
import socket
import threading
import time

from conftest import run_threads  # noqa: F401 - the fixtures' module
import pytest

# many connections at once against the HTTP threads: TSan runs them, and
# `make check` leaves them out (connections that trickle and time out)
pytestmark = [pytest.mark.concurrency, pytest.mark.slow]

BODY = json.dumps({"dtype": "int32", "shape": [4], "data": [1, 2, 3, 4]}).encode()
REQUEST = (b"POST /v1/cumsum HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(BODY)) + BODY

# The three ways to trickle: the first line, the headers, the body.
OPENINGS = [b"PO", b"POST /v1/cumsum HTTP/1.1\r\nHost: t\r\n",
            b"POST /v1/cumsum HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n{"]
DRIPS = [b"S", b"X", b" "]


def slow_socket(port, kind):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.2", 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(OPENINGS[kind])
    s.setblocking(False)
    return s


def is_closed(s):
    """True once the server has closed s (end of stream or a reset)."""
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def drip(s, kind):
    try:
        s.send(DRIPS[kind])
        return True
    except OSError:
        return False


def metric(d, name):
    text = d.request("GET", "/metrics")[2].decode()
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


def test_trickling_connections_are_closed(spawn):
    """Each byte used to restart the idle timer, so a connection that sent
    one a second stayed open for ever. Now the first line must come within
    --idle-timeout, and the rest of the request within --request-timeout
    of it, however the bytes trickle."""
    d = spawn("--idle-timeout", "3", "--request-timeout", "2")
    t0 = time.time()
    socks = [slow_socket(d.port, k) for k in range(3)]
    closed = [None] * 3
    while None in closed and time.time() - t0 < 15:
        for k, s in enumerate(socks):
            if closed[k] is None and (not drip(s, k) or is_closed(s)):
                closed[k] = time.time() - t0
        time.sleep(0.25)
    # the first line trickles until --idle-timeout (3 s); the headers and
    # the body until --request-timeout (2 s) after the first line
    assert closed[0] is not None and 2.5 <= closed[0] <= 5, closed
    assert closed[1] is not None and 1.5 <= closed[1] <= 4, closed
    assert closed[2] is not None and 1.5 <= closed[2] <= 4, closed
    for s in socks:
        s.close()
    assert metric(d, "tally_connections_timed_out_total") == 3
    # the one whose headers had come is in the access log, as a 408
    lines = [x for x in d.log_lines() if x.get("status") == 408]
    assert len(lines) == 1 and lines[0]["error"] == "REQUEST_TIMEOUT", d.log()
    assert "did not send a whole request in time" in d.log()
    # a request that takes its time but arrives whole in it is answered
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        for i in range(0, len(REQUEST), 40):
            s.sendall(REQUEST[i:i + 40])
            time.sleep(0.1)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")


def test_a_thousand_slow_connections(spawn):
    """1000 connections trickle bytes from one address while a normal client
    sends requests on its own connection: every answer comes, p99 under
    100 ms, and every slow connection is closed when its time is up."""
    d = spawn("--idle-timeout", "6", "--request-timeout", "4")
    n = 1000
    socks = [slow_socket(d.port, i % 3) for i in range(n)]
    t_open = time.time()
    stop = threading.Event()

    def trickle():
        # each socket gets a byte about once a second, a tenth at a time
        while not stop.is_set():
            for part in range(10):
                for i in range(part, n, 10):
                    drip(socks[i], i % 3)
                if stop.wait(0.1):
                    return

    dripper = threading.Thread(target=trickle)
    dripper.start()
    try:
        deadline = time.time() + 5
        while metric(d, "tally_open_connections") < n:
            assert time.time() < deadline, "the slow connections never all opened"
            time.sleep(0.1)
        latencies = []
        normal = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        while time.time() - t_open < 3.5:     # all slow ones still open
            t = time.perf_counter()
            normal.sendall(REQUEST)
            got = b""
            while b"\r\n\r\n" not in got or not got.endswith(b"}"):
                chunk = normal.recv(4096)
                assert chunk, "the server closed the normal connection"
                got += chunk
            latencies.append(time.perf_counter() - t)
            assert got.startswith(b"HTTP/1.1 200"), got[:100]
            assert b'"data":[1,3,6,10]' in got
            time.sleep(0.005)
        normal.close()
        open_during = metric(d, "tally_open_connections")
    finally:
        stop.set()
        dripper.join()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print("normal client: %d requests beside %d slow connections, p50 %.3f ms, "
          "p99 %.3f ms, max %.3f ms" % (len(latencies), n, latencies[len(latencies) // 2] * 1e3,
                                        p99 * 1e3, latencies[-1] * 1e3))
    assert len(latencies) >= 100
    assert p99 < 0.100, "p99 %.1f ms" % (p99 * 1e3)
    assert open_during >= n
    # every slow one ends: 6 s to the first line, 4 s from it to the end
    deadline = time.time() + 15
    while sum(is_closed(s) for s in socks) < n:
        assert time.time() < deadline, "slow connections still open"
        time.sleep(0.2)
    for s in socks:
        s.close()
    assert metric(d, "tally_connections_timed_out_total") >= n
    deadline = time.time() + 5
    while metric(d, "tally_open_connections") > 1:
        assert time.time() < deadline
        time.sleep(0.1)


def from_second_address(port, timeout=10):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def until(cond, what):
    deadline = time.time() + 5
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.05)


def test_one_address_cannot_take_every_connection(spawn):
    d = spawn("--max-client-connections", "10")
    held = [from_second_address(d.port) for _ in range(10)]
    until(lambda: metric(d, "tally_open_connections") >= 10, "10 open")
    # the eleventh from that address is closed as it comes
    s = from_second_address(d.port, 5)
    try:
        s.sendall(REQUEST)
        got = s.recv(4096)
    except OSError:
        got = b""
    s.close()
    assert got == b"", got
    # another address is served
    status, _, body = d.request("POST", "/v1/cumsum", BODY, {"Content-Type": "application/json"})
    assert status == 200 and json.loads(body)["data"] == [1, 3, 6, 10]
    assert metric(d, "tally_connections_refused_total") == 1
    until(lambda: "refused 1 connections at the connection limits" in d.log(), d.log())
    # one held connection closes; the address may open another
    held.pop().close()
    until(lambda: metric(d, "tally_open_connections") <= 10,   # 9 held, and this one
          "the closed one still open")
    s = from_second_address(d.port)
    s.sendall(REQUEST)
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    s.close()
    for h in held:
        h.close()
