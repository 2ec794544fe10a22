"""Behaviour under load and faults: concurrency with keep-alive, curl's
Expect: 100-continue and chunked uploads, a full queue, deadlines, and
SIGTERM while requests are in flight. Timing-independent: every assertion
is about what happened, never how fast."""
import http.client
import io
import json
import re
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import eventually, run_threads, valid_request_works
from reference import cumsum

# many clients or threads at once: TSan runs them, and `make check` leaves
# them out (load, delays and drains take seconds)
pytestmark = [pytest.mark.concurrency, pytest.mark.slow]


def npy(x):
    buf = io.BytesIO()
    np.save(buf, x)
    return buf.getvalue()


def test_concurrent_keep_alive_clients(tallyd):
    def client(i):
        conn = tallyd.connect()
        rng = np.random.default_rng(i)
        for k in range(25):
            x = rng.integers(-1000, 1000, size=rng.integers(1, 300), dtype=np.int32)
            conn.request("POST", "/v1/cumsum", json.dumps({"dtype": "int32", "shape": [len(x)],
                                                            "data": x.tolist(), "exclusive": k % 2 == 1}),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = json.loads(resp.read())
            assert resp.status == 200, body
            assert body["data"] == cumsum(x, 0, k % 2 == 1).tolist()
            assert resp.getheader("Connection") != "close"
        conn.close()

    run_threads(16, client)


def test_curl_expect_100_continue_and_chunked(tallyd, tmp_path):
    x = np.arange(300000, dtype=np.float32)
    path = tmp_path / "x.npy"
    path.write_bytes(npy(x))
    out = tmp_path / "y.npy"
    url = "http://127.0.0.1:%d/v1/cumsum?axis=0" % tallyd.port
    # large bodies make curl send Expect: 100-continue
    r = subprocess.run(["curl", "-sS", "-v", "--fail", "--data-binary", "@%s" % path, "-H",
                        "Content-Type: application/x-npy", url, "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Expect: 100-continue" in r.stderr and "100 Continue" in r.stderr
    assert np.array_equal(np.load(out), np.cumsum(x, dtype=np.float64).astype(np.float32)) or \
        np.allclose(np.load(out), np.cumsum(x.astype(np.float64)), rtol=1e-6)
    # chunked upload from a pipe
    r = subprocess.run(["curl", "-sS", "-v", "--fail", "-T", "-", "-X", "POST", "-H",
                        "Content-Type: application/x-npy", "-H", "Transfer-Encoding: chunked", url,
                        "-o", str(out)], input=path.read_bytes(), capture_output=True)
    assert r.returncode == 0, r.stderr
    assert b"Transfer-Encoding: chunked" in r.stderr
    assert np.allclose(np.load(out), np.cumsum(x.astype(np.float64)), rtol=1e-6)


def wait_for(d, pattern, timeout=30):
    """Polls /metrics until a line matches (e.g. a job waiting)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = d.request("GET", "/metrics")[2].decode()
        if re.search(pattern, text, re.M):
            return
        time.sleep(0.01)
    name = re.match(r"\^?([a-z_]+)", pattern).group(1)
    seen = [l for l in text.splitlines() if l.startswith(name)]
    raise AssertionError("metrics never matched %r; last seen: %s" % (pattern, seen))


def background(d, n, body, headers, path="/v1/cumsum"):
    """Starts n requests on threads; returns the threads and their results."""
    results = []

    def run():
        results.append(d.request("POST", path, body, headers))

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, results


SMALL = json.dumps({"dtype": "int8", "shape": [2], "data": [1, 2]})
JSON = {"Content-Type": "application/json"}


def test_queue_full_gives_503_with_retry_after(spawn):
    """One slow worker and a queue of one: the first job runs, the second
    waits, and the third finds the queue full."""
    d = spawn("--queue-depth", "1", "--workers", "1", "--max-batch", "1",
              "--inline-max-elements", "0", "--json-inline-max-elements", "0",
              "--fault-delay-ms", "1500")
    first, r1 = background(d, 1, SMALL, JSON)
    wait_for(d, r"^tally_running_jobs 1$")               # running
    second, r2 = background(d, 1, SMALL, JSON)
    wait_for(d, r"^tally_queue_depth 1$")                # waiting
    status, hdrs, raw = d.request("POST", "/v1/cumsum", SMALL, JSON)
    assert status == 503
    assert hdrs["retry-after"] == "1"
    assert "queue is full" in json.loads(raw)["error"]
    for t in first + second:
        t.join()
    assert [r[0] for r in r1 + r2] == [200, 200]
    assert json.loads(r1[0][2])["data"] == [1, 3]


def test_queued_jobs_taken_together_and_apart(spawn):
    """Jobs that wait behind a slow one are handed to the worker in groups
    of compatible ones (same dtype, line and mode), each group run as one
    launch, the rest left queued in order: every one of a mixed crowd is
    answered, with its own result, and the metrics and statistics show
    launches that served several requests."""
    d = spawn("--workers", "1", "--max-batch", "4", "--inline-max-elements", "0",
              "--json-inline-max-elements", "0", "--fault-delay-ms", "1000")
    blocker, rb = background(d, 1, SMALL, JSON)
    wait_for(d, r"^tally_running_jobs 1$")
    rng = np.random.default_rng(7)
    bodies = []
    for i in range(12):
        # three kinds: two compatible shapes of int32 lines of 3, and
        # float64 lines of 5 reversed
        if i % 3 == 2:
            x = rng.standard_normal((2, 5))
            body = {"dtype": "float64", "shape": [2, 5], "data": x.ravel().tolist(),
                    "axis": 1, "reverse": True}
        else:
            x = rng.integers(-100, 100, size=(1 + i % 3, 3))
            body = {"dtype": "int32", "shape": list(x.shape), "data": x.ravel().tolist(),
                    "axis": 1}
        bodies.append((x, body))
    results = [None] * len(bodies)

    def send(i):
        results[i] = d.post_json("/v1/cumsum", bodies[i][1])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    wait_for(d, r"^tally_queue_depth ([5-9]|1[0-2])$")
    for t in threads + blocker:
        t.join()
    assert rb[0][0] == 200
    for (x, body), (status, _, out) in zip(bodies, results):
        assert status == 200, out
        if body["dtype"] == "int32":
            assert out["data"] == np.cumsum(x, axis=1).ravel().tolist()
        else:
            want = np.flip(np.cumsum(np.flip(x, 1), axis=1), 1).ravel()
            assert np.allclose(out["data"], want, rtol=1e-12, atol=1e-12)
    text = d.request("GET", "/metrics")[2].decode()
    launches = float(re.search(r"^tally_batch_size_count (\S+)$", text, re.M).group(1))
    served = float(re.search(r"^tally_batch_size_sum (\S+)$", text, re.M).group(1))
    singles = float(re.search(r'^tally_batch_size_bucket\{le="1"\} (\S+)$', text,
                              re.M).group(1))
    assert served == 13 and launches < served and singles < launches, text
    # a request's statistics are taken when tallyd has sent its answer,
    # which may come after the client has read it: wait for the last
    def model_stats():
        return json.loads(d.request("GET", "/v2/models/cumsum/stats")[2])["model_stats"][0]

    assert eventually(lambda: model_stats()["inference_count"], 13) == 13
    stats = model_stats()
    assert stats["inference_count"] == 13 and stats["execution_count"] == launches
    assert any(b["batch_size"] > 1 for b in stats["batch_stats"]), stats


def send_and_hang_up(d, body):
    """Sends a whole request on a raw socket and closes it without reading
    the answer: a client that gave up."""
    send_request(d, body).close()


def send_request(d, body):
    """Sends a whole request on a raw socket and returns the socket, unread."""
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(b"POST /v1/cumsum HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
    return s


def test_cancelled_when_the_client_leaves(spawn):
    """A request whose client closes the connection while its job waits is
    dropped before it runs; one whose job is already running finishes and
    its answer is discarded, without an error in the log. Both are counted,
    and other requests are answered as usual."""
    d = spawn("--workers", "1", "--max-batch", "1", "--inline-max-elements", "0",
              "--json-inline-max-elements", "0", "--fault-delay-ms", "1500")
    blocker, rb = background(d, 1, SMALL, JSON)
    wait_for(d, r"^tally_running_jobs 1$")               # the worker has it
    send_and_hang_up(d, json.dumps({"dtype": "int8", "shape": [2], "data": [5, 6]}))
    wait_for(d, r'^tally_cancelled_total\{when="queued"\} 1$')
    for t in blocker:
        t.join()
    assert rb[0][0] == 200 and json.loads(rb[0][2])["data"] == [1, 3]
    # now one that is running when its client goes: the worker, idle once
    # the blocker's answer is in, takes it and sleeps --fault-delay-ms
    # before running it, and running_jobs reads 1 from the take on. Only
    # then is it abandoned. A state that lasts the whole 1.5 s is waited
    # for, not a passing one: watching the queue depth go to 1 and back
    # raced a loaded machine, where the job could pass through the queue
    # between two polls.
    wait_for(d, r"^tally_running_jobs 0$")
    s = send_request(d, SMALL)
    wait_for(d, r"^tally_running_jobs 1$")
    s.close()
    wait_for(d, r'^tally_cancelled_total\{when="running"\} 1$')
    text = d.request("GET", "/metrics")[2].decode()
    # the dropped job never ran: the worker computed the blocker and the last
    assert re.search(r"^tally_compute_duration_seconds_count 2$", text, re.M), text
    assert d.post_json("/v1/cumsum", json.loads(SMALL))[0] == 200
    assert not [l for l in d.log_lines() if l.get("level") in ("warn", "error")], d.log()
    statuses = [l["status"] for l in d.log_lines() if l.get("path") == "/v1/cumsum"]
    assert statuses.count(499) == 2, statuses


def test_deadlines(spawn):
    """A job whose deadline passes while it waits is dropped with 504; so is
    one whose computation outlasts it; a generous deadline is met."""
    d = spawn("--workers", "1", "--max-batch", "1", "--inline-max-elements", "0",
              "--json-inline-max-elements", "0", "--fault-delay-ms", "1000")
    blocker, rb = background(d, 1, SMALL, JSON)
    wait_for(d, r"^tally_running_jobs 1$")               # the worker has it
    # waits behind the blocker: expires in the queue
    status, _, raw = d.request("POST", "/v1/cumsum", SMALL, dict(JSON, **{"X-Timeout-Ms": "50"}))
    assert status == 504
    assert "deadline of 50 ms expired" in json.loads(raw)["error"]
    assert "in the queue; the work was dropped" in json.loads(raw)["error"]
    # KServe's timeout parameter (microseconds), the same way
    status, _, raw = d.request("POST", "/v2/models/cumsum/infer", json.dumps(
        {"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [1]}],
         "parameters": {"timeout": 50000}}))
    assert status == 504, raw
    # the tightest bound wins: a generous X-Timeout-Ms does not lift the
    # parameter's 50 ms, and the header is checked even beside one
    infer_body = json.dumps(
        {"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [1]}],
         "parameters": {"timeout": 50000}})
    status, _, raw = d.request("POST", "/v2/models/cumsum/infer", infer_body,
                               {"Content-Type": "application/json", "X-Timeout-Ms": "soon"})
    assert status == 400 and "X-Timeout-Ms" in json.loads(raw)["error"], raw
    status, _, raw = d.request("POST", "/v2/models/cumsum/infer", infer_body,
                               {"Content-Type": "application/json", "X-Timeout-Ms": "60000"})
    assert status == 504 and "deadline of 50 ms expired" in json.loads(raw)["error"], raw
    # nor does a generous parameter lift a tight header
    generous = json.dumps(
        {"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [1]}],
         "parameters": {"timeout": 60_000_000}})
    status, _, raw = d.request("POST", "/v2/models/cumsum/infer", generous,
                               {"Content-Type": "application/json", "X-Timeout-Ms": "50"})
    assert status == 504 and "deadline of 50 ms expired" in json.loads(raw)["error"], raw
    # 0 sets no bound: the parameter's 60 s hold, and the job is answered
    late, rl = background(d, 1, generous, {"Content-Type": "application/json",
                                           "X-Timeout-Ms": "0"},
                          path="/v2/models/cumsum/infer")
    for t in blocker + late:
        t.join()
    assert rb[0][0] == 200
    assert rl[0][0] == 200, rl
    # the worker's own delay outlasts a 100 ms deadline
    status, _, raw = d.request("POST", "/v1/cumsum", SMALL, dict(JSON, **{"X-Timeout-Ms": "100"}))
    assert status == 504
    # a generous deadline is met
    status, _, _ = d.request("POST", "/v1/cumsum", SMALL, dict(JSON, **{"X-Timeout-Ms": "60000"}))
    assert status == 200
    text = d.request("GET", "/metrics")[2]
    assert b'reason="DEADLINE"' in text


def test_bad_deadline_header_refused_before_the_body(tallyd):
    """A bad X-Timeout-Ms is refused at the headers, as gRPC refuses a bad
    grpc-timeout: a client that announces a large body gets its 400 before
    it sends any (Expect: 100-continue gets the final answer)."""
    for value, words in ((b"soon", b"X-Timeout-Ms must be an integer"),
                         (b"-5", b"X-Timeout-Ms cannot be negative")):
        with socket.create_connection(("127.0.0.1", tallyd.port), timeout=10) as s:
            s.sendall(b"POST /v1/cumsum HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/x-npy\r\nX-Timeout-Ms: " + value
                      + b"\r\nContent-Length: 200000000\r\nExpect: 100-continue\r\n\r\n")
            head = b""
            while words not in head:
                chunk = s.recv(4096)
                assert chunk, head
                head += chunk
        assert head.startswith(b"HTTP/1.1 400"), head
        assert b"100 Continue" not in head


def test_server_deadline_bounds_the_clients(spawn):
    """--timeout-ms is an upper bound too: a client's longer X-Timeout-Ms
    or KServe timeout does not lift it, and a shorter one tightens it."""
    d = spawn("--workers", "1", "--max-batch", "1", "--inline-max-elements", "0",
              "--json-inline-max-elements", "0", "--fault-delay-ms", "1000",
              "--timeout-ms", "200")
    # the worker's 1 s outlasts the server's 200 ms, whatever the client asks
    status, _, raw = d.request("POST", "/v1/cumsum", SMALL, dict(JSON, **{"X-Timeout-Ms": "60000"}))
    assert status == 504 and "deadline of 200 ms expired" in json.loads(raw)["error"], raw
    status, _, raw = d.request("POST", "/v2/models/cumsum/infer", json.dumps(
        {"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [1]}],
         "parameters": {"timeout": 60_000_000}}))
    assert status == 504 and "deadline of 200 ms expired" in json.loads(raw)["error"], raw
    status, _, raw = d.request("POST", "/v1/cumsum", SMALL, dict(JSON, **{"X-Timeout-Ms": "0"}))
    assert status == 504 and "deadline of 200 ms expired" in json.loads(raw)["error"], raw
    # a tighter client bound is the deadline
    status, _, raw = d.request("POST", "/v1/cumsum", SMALL, dict(JSON, **{"X-Timeout-Ms": "100"}))
    assert status == 504 and "deadline of 100 ms expired" in json.loads(raw)["error"], raw


def test_sigterm_under_load_loses_nothing(spawn):
    """Clients hammer the daemon; SIGTERM arrives mid-way. Every request
    started before the signal must be answered correctly; after it, the
    daemon may refuse new connections, and it must exit 0."""
    d = spawn("--workers", "2")
    x = np.random.default_rng(4).random(1 << 20, dtype=np.float32)
    body = npy(x)
    want = cumsum(x)
    signalled = threading.Event()
    results = []  # (started before the signal, status or None)
    errors = []
    lock = threading.Lock()

    def client(i):
        conn = None
        while True:
            before = not signalled.is_set()
            if not before and conn is None:
                return  # no new connections after the signal
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120)
                conn.request("POST", "/v1/cumsum", body, {"Content-Type": "application/x-npy"})
                resp = conn.getresponse()
                raw = resp.read()
            except OSError as e:
                with lock:
                    results.append((before, None))
                    if before:
                        errors.append("request %d started before SIGTERM failed: %r" % (i, e))
                return
            ok = resp.status == 200 and np.allclose(np.load(io.BytesIO(raw)), want, rtol=1e-5, atol=1e-3)
            with lock:
                results.append((before, resp.status))
                if not ok:
                    errors.append("request %d: status %d %r" % (i, resp.status, raw[:200]))
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    signalled.set()
    d.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(180)
    code = d.proc.wait(60)
    assert not errors, errors[:3]
    assert code == 0, d.log()
    started_before = [r for r in results if r[0]]
    assert len(started_before) >= 6
    assert all(status == 200 for _, status in started_before)
    messages = [l.get("msg", "") for l in d.log_lines()]
    assert any("SIGTERM" in m for m in messages) and any("drained" in m for m in messages)


def wait_for_log(d, text, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(text in l.get("msg", "") for l in d.log_lines()):
            return
        time.sleep(0.02)
    raise AssertionError("no log line with %r:\n%s" % (text, d.log()))


def test_sigterm_idle_keep_alive_may_send_one_more(spawn):
    """A keep-alive connection idle when SIGTERM comes may still send a
    request: its client could not know. It is answered with Connection:
    close, and once that connection is gone the daemon exits at once, long
    before --drain-idle-ms."""
    d = spawn("--drain-idle-ms", "120000", "--drain-timeout", "300")
    conn = d.connect()
    valid = json.dumps({"dtype": "int64", "shape": [4], "data": [1, 2, 3, 4]})
    conn.request("POST", "/v1/cumsum", valid, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["data"] == [1, 3, 6, 10]
    d.proc.send_signal(signal.SIGTERM)
    wait_for_log(d, "SIGTERM")
    time.sleep(0.3)  # the old drain closed idle connections within 5 ms
    assert d.proc.poll() is None, d.log()
    conn.request("POST", "/v1/cumsum", valid, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["data"] == [1, 3, 6, 10]
    assert resp.getheader("Connection", "").lower() == "close"
    conn.close()
    assert d.proc.wait(60) == 0, d.log()
    assert any("drained" in l.get("msg", "") for l in d.log_lines())


def test_sigterm_quiet_connection_closed_after_drain_idle(spawn):
    """A connection that stays quiet does not hold the drain up until
    --drain-timeout: after --drain-idle-ms the daemon closes it and exits 0."""
    d = spawn("--drain-idle-ms", "300", "--drain-timeout", "300")
    conn = d.connect()
    conn.request("GET", "/v2/health/live")
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(60) == 0, d.log()
    messages = [l.get("msg", "") for l in d.log_lines()]
    assert any("drained; closing 1 idle connection" in m for m in messages), messages
    assert not any("drain timeout" in m for m in messages)
    try:
        conn.request("GET", "/v2/health/live")
        conn.getresponse()
    except (OSError, http.client.HTTPException):
        pass
    else:
        raise AssertionError("the quiet connection is still open after the daemon exited")
    conn.close()
