"""Running sums exact by construction (docs/durability.md): the cases
that were wrong where nobody looked, each on the state in memory and on
replicas sharing a Redis, which must answer alike.

- An id used again after its state expired, or after its end lingered
  out, gets the new sequence's sum on every replica, numbered or not,
  however stale a replica's cache is; a start racing a chunk of the old
  sequence leaves one of the two orders.
- The timers: a repeat renews a live sequence's idle time, the linger
  closes an ended sequence whatever late chunks come, and an early chunk
  waits the whole reorder window (not the store's timeout).
- The gRPC stream keeps a sequence's order, and a numbered chunk waits
  for those before it that its replica holds, however long their scans
  take; a chunk before its start is refused at once; a numbered chunk
  too large on its own is 413.
- A refused in-place shared-memory chunk leaves its input as it was, so
  that sending it again gives the right sum.
- Faults named: everysec's failed flush refuses chunks until a flush
  succeeds, a second tallyd on a --state-dir stops, Redis without an AOF
  is named, and no message shows a password, whatever the URL's shape.

Redis is Debian's redis-server on a free port (seqlib.Redis).
Seeds are printed; TALLY_EXACT_SEED replays one."""
import json
import os
import queue
import random
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conftest import TALLYD
from seqlib import REDIS, Proxy, Redis, infer

SEED = int(os.environ.get("TALLY_EXACT_SEED", random.randrange(1 << 32)))

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed")

# short timers, so that expiry and the linger happen within a test
TIMERS = ["--sequence-idle-ms", "1000", "--sequence-linger-ms", "400"]


@pytest.fixture
def redis():
    r = Redis()
    yield r
    r.cleanup()


def setups(spawn, redis, n, *extra):
    """n doors on one state: the same tallyd n times in memory, or n
    replicas on Redis."""
    args = ["--device", "host"] + TIMERS + list(extra)
    if redis is None:
        d = spawn(*args)
        return [d] * n
    return [spawn(*(args + ["--state-store", redis.url()])) for _ in range(n)]


@pytest.fixture(params=["memory", "redis"])
def state(request):
    """None (memory), or a Redis for replicas to share."""
    if request.param == "memory":
        yield None
    else:
        r = Redis()
        yield r
        r.cleanup()


# ------------------------------------------------------------ an id used again

@pytest.mark.parametrize("numbered", [False, True])
@pytest.mark.parametrize("gone", ["idle", "linger"])
def test_an_id_used_again_gets_the_new_sequences_sum(state, spawn, numbered, gone):
    """Replica A serves sequence 7 (three chunks of [1]); its state goes
    (idle expiry, or the linger after its end); B serves a new sequence 7
    (three chunks of [100], as many writes as A's cache saw); A's next
    chunk of the new one is [301], never the old sequence's [4]."""
    a, b = setups(spawn, state, 2)
    sid = "reuse-%s-%s-%d" % (numbered, gone, SEED % 10000)
    for k in range(3):
        st, y = infer(a.port, sid, [1], start=k == 0, end=gone == "linger" and k == 2,
                      chunk=k + 1 if numbered else None)
        assert (st, y) == (200, [k + 1]), (k, st, y)
    time.sleep(1.4 if gone == "idle" else 0.7)
    for k in range(3):
        st, y = infer(b.port, sid, [100], start=k == 0, chunk=k + 1 if numbered else None)
        assert (st, y) == (200, [100 * (k + 1)]), (k, st, y)
    st, y = infer(a.port, sid, [1], chunk=4 if numbered else None)
    assert (st, y) == (200, [301]), (st, y)
    st, y = infer(b.port, sid, [1], chunk=5 if numbered else None)
    assert (st, y) == (200, [302]), (st, y)


def test_a_cache_older_than_an_expiry_is_not_taken(state, spawn):
    """A's cache holds a sequence's state after two writes; the id
    expires, and B starts it again and writes it twice too (the same
    count a version once had): A's next chunk goes on the new one, and so
    after a second expiry."""
    a, b = setups(spawn, state, 2)
    sid = "stale-%d" % (SEED % 10000)
    assert infer(a.port, sid, [5], start=True) == (200, [5])
    assert infer(a.port, sid, [1]) == (200, [6])
    for life in (1, 2):
        time.sleep(1.3)
        assert infer(b.port, sid, [10 * life], start=True) == (200, [10 * life])
        assert infer(b.port, sid, [1]) == (200, [10 * life + 1])
        st, y = infer(a.port, sid, [1])
        assert (st, y) == (200, [10 * life + 2]), (life, st, y)


def test_a_start_racing_a_chunk_of_the_old_sequence(state, spawn):
    """B starts sequence 8 again while A sends a chunk of the old one: the
    chunk lands before the start (A answers [4], then the new sequence
    goes on from [100]) or after it (A answers [101], on the new one);
    never anything else."""
    a, b = setups(spawn, state, 2)
    rng = random.Random(SEED)
    seen = set()
    for i in range(12):
        sid = "race-%d-%d" % (SEED % 10000, i)
        for k in range(3):
            assert infer(a.port, sid, [1], start=k == 0)[0] == 200
        got = {}

        def old():
            time.sleep(rng.random() * 0.004)
            got["a"] = infer(a.port, sid, [1])

        t = threading.Thread(target=old)
        t.start()
        got["b"] = infer(b.port, sid, [100], start=True)
        t.join()
        after = infer(b.port, sid, [1])
        assert got["b"] == (200, [100]), got
        outcome = (tuple(got["a"][1]), tuple(got["b"][1]), tuple(after[1]))
        assert outcome in {((4,), (100,), (101,)), ((101,), (100,), (102,))}, outcome
        seen.add(outcome)
    print("orders seen:", sorted(seen))


# ------------------------------------------------------------------ the timers

def test_a_repeat_renews_the_idle_time(state, spawn):
    """A numbered chunk 1 sent again every 0.7 s, for longer than the idle
    time (1 s): each repeat is answered, the sequence stays, and chunk 2
    goes on from it."""
    (d,) = setups(spawn, state, 1)
    sid = "renew-%d" % (SEED % 10000)
    assert infer(d.port, sid, [1], start=True, chunk=1) == (200, [1])
    for _ in range(4):
        time.sleep(0.7)
        assert infer(d.port, sid, [1], chunk=1) == (200, [1])
    assert infer(d.port, sid, [2], chunk=2) == (200, [3])
    time.sleep(1.3)  # and without a chunk for longer than that, it goes
    assert infer(d.port, sid, [2], chunk=2)[0] == 400


def test_the_linger_closes_an_ended_sequence(state, spawn):
    """After an unnumbered end, late chunks are taken within the linger
    (0.4 s from the end) and refused after it, however many come: a late
    chunk does not renew it."""
    (d,) = setups(spawn, state, 1)
    sid = "linger-%d" % (SEED % 10000)
    assert infer(d.port, sid, [1], start=True) == (200, [1])
    t0 = time.time()
    assert infer(d.port, sid, [1], end=True) == (200, [2])
    answers = []
    while time.time() - t0 < 1.2:
        time.sleep(0.1)
        answers.append((time.time() - t0, infer(d.port, sid, [1])))
    early = [a for t, a in answers if t < 0.3]
    late = [a for t, a in answers if t > 0.55]
    assert early and all(a[0] == 200 for a in early), answers
    assert late and all(a[0] == 400 and "not live" in a[1] for a in late), answers


def test_an_early_chunk_waits_the_whole_reorder_window(state, spawn):
    """--sequence-reorder-ms 3000 with a store timeout of 1000: chunks
    waiting for a predecessor that never comes get the documented 409
    after 3 s, none a 503 after 1 s."""
    (d,) = setups(spawn, state, 1, "--sequence-reorder-ms", "3000",
                  "--state-store-timeout-ms", "1000", "--sequence-idle-ms", "10000")
    sid = "window-%d" % (SEED % 10000)
    assert infer(d.port, sid, [1], start=True, chunk=1) == (200, [1])
    got = []
    t0 = time.time()

    def send(n):
        got.append((infer(d.port, sid, [1], chunk=n), time.time() - t0))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(3, 33)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (st, msg), took in got:
        assert st == 409 and "chunk 2" in msg, (st, msg)
        assert took > 2.8, took


# ------------------------------------------------------------------ the doors

def stream_answers(d, sends, timeout=30):
    """Each of sends, (request id, an INT64 array, async_stream_infer's
    keywords), on one gRPC stream to d, in order: each answer's y by
    request id (an error fails the test)."""
    results = queue.Queue()
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    c.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for rid, x, kw in sends:
            inp = grpcclient.InferInput("x", list(x.shape), "INT64")
            inp.set_data_from_numpy(x)
            c.async_stream_infer("cumsum", [inp], request_id=rid, **kw)
        got = {}
        for _ in sends:
            result, error = results.get(timeout=timeout)
            assert error is None, error
            got[result.get_response().id] = result.as_numpy("y")
        return got
    finally:
        c.stop_stream()
        c.close()


def test_the_grpc_stream_keeps_a_sequences_order(state, spawn):
    """tritonclient's async_stream_infer, as kserve.md shows it: 20
    sequences of 6 chunks interleaved on one stream; every answer is the
    running sum in the order sent."""
    (d,) = setups(spawn, state, 1)
    sends, want = [], {}
    for k in range(6):
        for s in range(20):
            sid = "stream-%d-%d" % (SEED % 10000, s)
            rid = "%d:%d" % (s, k)
            sends.append((rid, np.array([10 ** k], dtype=np.int64),
                          dict(sequence_id=sid, sequence_start=k == 0,
                               sequence_end=k == 5)))
            want[rid] = int("1" * (k + 1))
    got = stream_answers(d, sends)
    assert {rid: int(y[0]) for rid, y in got.items()} == want


def test_numbered_chunks_on_the_stream_wait_for_those_before_them(state, spawn):
    """--sequence-reorder-ms 1, and on one stream numbered chunks whose
    second is large (its scan ends well after the small third's): the
    third waits for the second, which its replica holds, past the
    window, as memory's line waits; every answer is the running sum, none
    a 409 (stop 68's model run: on Redis the third's reads came back
    before the second's write, and it was refused)."""
    (d,) = setups(spawn, state, 1, "--sequence-reorder-ms", "1")
    rng = np.random.default_rng(SEED)
    print("seed %d (replay with TALLY_EXACT_SEED=%d)" % (SEED, SEED))
    sends, want = [], {}
    for s in range(4):
        sid = "wait-%d-%d" % (SEED % 10000, s)
        total = 0
        for k, n in enumerate([1, 1 << 19, 1, 1, 1]):
            x = rng.integers(-9, 10, size=n, dtype=np.int64)
            rid = "%d:%d" % (s, k)
            sends.append((rid, x, dict(sequence_id=sid, sequence_start=k == 0,
                                       sequence_end=k == 4,
                                       parameters={"sequence_chunk": k + 1})))
            want[rid] = total + np.cumsum(x)
            total += int(x.sum())
    got = stream_answers(d, sends, timeout=60)
    assert sorted(got) == sorted(want)
    for rid, y in got.items():
        assert np.array_equal(y, want[rid]), rid


@pytest.mark.parametrize("numbered", [False, True])
def test_a_chunk_before_its_start_is_refused_at_once(state, spawn, numbered):
    (d,) = setups(spawn, state, 1, "--sequence-reorder-ms", "3000")
    t0 = time.time()
    st, msg = infer(d.port, "before-%d" % (SEED % 10000), [1],
                    chunk=2 if numbered else None)
    assert st == 400 and "not live" in msg, (st, msg)
    assert time.time() - t0 < 1.0


def test_a_numbered_chunk_too_large_alone_is_413(state, spawn):
    """16 bytes a line in a numbered sequence: 100 lines against
    --sequence-max-bytes 1024 can never fit, so 413, not 503; unnumbered
    (8 a line) they fit."""
    import http.client
    (d,) = setups(spawn, state, 1, "--sequence-max-bytes", "1024")

    def send(params):
        body = json.dumps({"parameters": dict(params, sequence_start=True, axis=1),
                           "inputs": [{"name": "x", "datatype": "INT64", "shape": [100, 1],
                                       "data": [1] * 100}]})
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=20)
        c.request("POST", "/v2/models/cumsum/infer", body)
        r = c.getresponse()
        return r.status, r.read()

    st, raw = send({"sequence_id": "big-n", "sequence_chunk": 1})
    assert st == 413 and b"--sequence-max-bytes" in raw, (st, raw)
    st, raw = send({"sequence_id": "big-u"})
    assert st == 200, raw


# ------------------------------------------------------ in-place shared memory

class Region:
    count = 0

    def __init__(self, nbytes):
        Region.count += 1
        self.name = "exact%d" % Region.count
        self.key = "/tally-exact-%d-%d" % (os.getpid(), Region.count)
        self.h = shm.create_shared_memory_region(self.name, self.key, nbytes)

    def put(self, x):
        shm.set_shared_memory_region(self.h, [x])

    def get(self, n):
        return shm.get_contents_as_numpy(self.h, np.int64, [n]).copy()

    def destroy(self):
        shm.destroy_shared_memory_region(self.h)


def in_place(d, proto, region, x, sid, start=False, chunk=None):
    """x placed in the region and scanned in place: the answer's status
    (200, or the refusal's code) and the region after it."""
    region.put(x)
    mod = grpcclient if proto == "grpc" else httpclient
    c = (grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port) if proto == "grpc"
         else httpclient.InferenceServerClient("127.0.0.1:%d" % d.port))
    try:
        i = mod.InferInput("x", [len(x)], "INT64")
        i.set_shared_memory(region.name, x.nbytes)
        o = mod.InferRequestedOutput("y")
        o.set_shared_memory(region.name, x.nbytes)
        params = {"sequence_chunk": chunk} if chunk else None
        try:
            c.infer("cumsum", [i], outputs=[o], sequence_id=sid, sequence_start=start,
                    parameters=params)
            status = "ok"
        except InferenceServerException as e:
            status = str(e.status())
        return status, region.get(len(x))
    finally:
        c.close()


def register(d, proto, region, nbytes):
    c = (grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port) if proto == "grpc"
         else httpclient.InferenceServerClient("127.0.0.1:%d" % d.port))
    c.register_system_shared_memory(region.name, region.key, nbytes)
    c.close()


@pytest.mark.parametrize("proto", ["http", "grpc"])
@pytest.mark.parametrize("fault", ["paused", "conflict", "not_live", "full_disk"])
def test_a_refused_in_place_chunk_leaves_its_input(redis, spawn, tmp_path, proto, fault):
    """y on x's bytes in a region: a chunk refused after its scan (Redis
    paused: 503; another input under its number: 409; not live on a
    replica that scanned it first: 400; a full disk under --state-dir:
    503) leaves x as the client wrote it, so that sending it again, as
    the answer says, gives the right sum."""
    args = ["--device", "host", "--allow-shared-memory", "--inline-max-elements", "0"]
    if fault == "full_disk":
        args += ["--state-dir", str(tmp_path), "--fault-state", "enospc",
                 "--fault-state-after", "1"]
    else:
        args += ["--state-store", redis.url(), "--state-store-timeout-ms", "500"]
    d = spawn(*args)
    region = Region(64)
    try:
        register(d, proto, region, 64)
        sid = "inplace-%s-%d" % (fault, SEED % 10000)
        numbered = fault in ("conflict", "paused")  # a resend is answered once
        assert in_place(d, proto, region, np.array([1, 2], np.int64), sid, start=True,
                        chunk=1 if numbered else None)[0] == "ok"
        x = np.array([10, 20], np.int64)
        if fault == "paused":
            redis.proc.send_signal(signal.SIGSTOP)
            try:
                st, after = in_place(d, proto, region, x, sid, chunk=2)
            finally:
                redis.proc.send_signal(signal.SIGCONT)
        elif fault == "conflict":
            st, after = in_place(d, proto, region, x, sid, start=True, chunk=1)
        elif fault == "not_live":
            st, after = in_place(d, proto, region, x, sid + "-never")
        else:
            st, after = in_place(d, proto, region, x, sid)
        assert st != "ok", st
        assert after.tolist() == [10, 20], (st, after)
        if fault == "paused":  # sent again, as the answer says
            st, after = in_place(d, proto, region, x, sid, chunk=2)
            assert (st, after.tolist()) == ("ok", [13, 33]), (st, after)
    finally:
        region.destroy()


def test_a_full_disk_chunk_sent_again_in_place_is_right(spawn, tmp_path):
    """A chunk refused for a full disk, sent again once the disk has
    room (here: tallyd started again on the log), gives the right sum."""
    state_dir = str(tmp_path)
    d = spawn("--device", "host", "--allow-shared-memory", "--state-dir", state_dir,
              "--fault-state", "enospc", "--fault-state-after", "1")
    region = Region(64)
    try:
        register(d, "http", region, 64)
        assert in_place(d, "http", region, np.array([1, 2], np.int64), "disk",
                        start=True, chunk=1)[0] == "ok"
        st, after = in_place(d, "http", region, np.array([10, 20], np.int64), "disk", chunk=2)
        assert st != "ok" and after.tolist() == [10, 20]
        d.stop()
        d = spawn("--device", "host", "--allow-shared-memory", "--state-dir", state_dir)
        register(d, "http", region, 64)
        st, after = in_place(d, "http", region, after, "disk", chunk=2)
        assert (st, after.tolist()) == ("ok", [13, 33])
    finally:
        region.destroy()


# ------------------------------------------------------------ faults named

def test_everysec_refuses_chunks_after_a_failed_flush(spawn, tmp_path):
    """--state-fsync everysec: the once-a-second flush fails (the fault
    flag: every flush from the third record on); it is logged and
    counted, and the chunks after it get 503 until a flush succeeds."""
    d = spawn("--device", "host", "--state-dir", str(tmp_path), "--state-fsync", "everysec",
              "--fault-state", "fsync", "--fault-state-after", "2")
    assert infer(d.port, "sec", [1], start=True, chunk=1) == (200, [1])
    assert infer(d.port, "sec", [1], chunk=2) == (200, [2])
    deadline = time.time() + 5
    while d.metric("tally_sequence_log_flush_failures_total") < 1:
        assert time.time() < deadline, d.log()
        time.sleep(0.1)
    st, msg = infer(d.port, "sec", [1], chunk=3)
    assert st == 503 and "flush" in msg, (st, msg)
    assert any("once-a-second flush" in line.get("msg", "") for line in d.log_lines())
    assert d.metric("tally_sequence_numbered_chunks_total", outcome="applied") == 2


def test_a_second_tallyd_on_a_state_dir_stops(spawn, tmp_path):
    first = spawn("--device", "host", "--state-dir", str(tmp_path))
    r = subprocess.run([TALLYD, "--device", "host", "--listen", "127.0.0.1:0",
                        "--grpc-listen", "", "--state-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "pid %d" % first.proc.pid in r.stdout + r.stderr, r.stdout + r.stderr
    assert infer(first.port, "still", [1], start=True) == (200, [1])


@pytest.mark.parametrize("aof", [("no", None, 0), ("yes", "everysec", 1), ("yes", "always", 2)])
def test_redis_durability_is_named(spawn, aof):
    """At connect tallyd asks Redis how it keeps what it acknowledged:
    without an append-only file a warning, and the gauge says so."""
    r = Redis()
    try:
        with socket.create_connection(("127.0.0.1", r.port), timeout=5) as s:
            s.sendall(("CONFIG SET appendonly %s\r\n" % aof[0]).encode())
            assert s.recv(64).startswith(b"+OK")
            if aof[1]:
                s.sendall(("CONFIG SET appendfsync %s\r\n" % aof[1]).encode())
                assert s.recv(64).startswith(b"+OK")
        d = spawn("--device", "host", "--state-store", r.url())
        deadline = time.time() + 5
        while d.metric("tally_state_store_durability") != aof[2] and time.time() < deadline:
            time.sleep(0.05)
        assert d.metric("tally_state_store_durability") == aof[2]
        warned = [x for x in d.log_lines() if "appendonly no" in x.get("msg", "")]
        assert bool(warned) == (aof[0] == "no"), warned
    finally:
        r.cleanup()


@pytest.mark.parametrize("url", [
    "rediss://:s3cretpw@127.0.0.1:6379", "REDIS://:s3cretpw@127.0.0.1",
    " redis://:s3cretpw@127.0.0.1", "redis://s3cretpw@127.0.0.1",
    "redis://:s3cretpw@", "redis://u:s3cretpw@127.0.0.1:99999",
    "redis://:s3cret@pw@127.0.0.1/99"])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_no_message_shows_a_password(url, how):
    env = dict(os.environ)
    args = [TALLYD, "--device", "host", "--listen", "127.0.0.1:0", "--grpc-listen", ""]
    if how == "flag":
        args += ["--state-store", url]
    else:
        env["TALLY_STATE_STORE"] = url
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "s3cret" not in out and "pw@" not in out, out
    assert "***" in out or "not a Redis URL" in out, out


# ------------------------------------------------------------------ clients

def url_of(d):
    return "http://127.0.0.1:%d" % d.port


def test_python_running_sum_fails_over_with_a_shared_store(redis, spawn):
    """shared_state: a replica down, every chunk goes to the other; the
    sum is right."""
    from conftest import install_python_package
    install_python_package()
    import tally
    a = spawn("--device", "host", "--state-store", redis.url())
    b = spawn("--device", "host", "--state-store", redis.url())
    c = tally.Client([url_of(a), url_of(b)], shm=False, shared_state=True)
    x = np.arange(1, 13, dtype=np.int64)
    got = []
    with c.sequence(sequence_id="shared-%d" % (SEED % 10000)) as s:
        for k in range(6):
            if k == 3:
                a.proc.kill()
                a.proc.wait()
            got.append(s.cumsum(x[2 * k:2 * k + 2]))
    assert np.concatenate(got).tolist() == np.cumsum(x).tolist()


def test_python_running_sum_keeps_a_failed_chunk(spawn, tmp_path):
    """Without a shared store: the home replica down, the chunk fails
    (retryable, status 0), another chunk is refused until the failed one
    goes again, and leaving the block on the error sends no end; the home
    replica back on its --state-dir, the same chunk goes on."""
    from conftest import free_port, install_python_package
    install_python_package()
    import tally
    port = free_port()
    args = ["--device", "host", "--state-dir", str(tmp_path), "--listen", "127.0.0.1:%d" % port]
    d = spawn(*args)
    c = tally.Client(url_of(d), shm=False)
    s = c.sequence(sequence_id="home-%d" % (SEED % 10000), retries=1)
    assert s.cumsum(np.array([1, 2])).tolist() == [1, 3]
    d.stop(signal.SIGKILL)
    with pytest.raises(tally.TallyError) as e:
        s.cumsum(np.array([3, 4]))
    assert e.value.status == 0
    with pytest.raises(ValueError, match="send that chunk again"):
        s.cumsum(np.array([5, 6]))
    with pytest.raises(ValueError):
        s.end()
    d = spawn(*args)
    assert s.cumsum(np.array([3, 4])).tolist() == [6, 10]
    with pytest.raises(RuntimeError):
        with s:
            raise RuntimeError("the caller's own error")
    assert d.metric("tally_sequences_live") == 1  # no end was sent
    assert d.metric("tally_sequences_total", event="ended") == 0


# ----------------------------------------- a failover, with --state-store-wait

def Node(*extra):
    """A redis-server with its append-only file flushed once a second, and
    extra arguments (a replica's --replicaof)."""
    return Redis(aof="everysec", extra=extra)


def failover_run(spawn, wait, seconds=6.0, nseq=4):
    """Two tallyds on a primary and its replica behind a proxy, with
    --state-store-wait `wait`; numbered chunks from nseq clients; at a
    third of the run the primary is killed, the replica promoted
    (REPLICAOF NO ONE), a new replica started for it, and the proxy
    pointed at it. A client that meets a gap (409 naming an older chunk:
    its answered chunk was lost with the primary) or a sequence that is
    not live sends the lost chunks again, and checks that they are
    answered as before. The chunks lost; asserts every answer."""
    primary = Node()
    link = Proxy(primary.port)  # the replication's own link, to hold up
    replica = Node("--replicaof", "127.0.0.1", str(link.port))
    second = None
    proxy = Proxy(primary.port)
    try:
        deadline = time.time() + 10
        while b"master_link_status:up" not in replica.command("INFO", "replication"):
            assert time.time() < deadline, replica.log()
            time.sleep(0.05)
        args = ["--device", "host", "--state-store", "redis://127.0.0.1:%d" % proxy.port,
                "--state-store-wait", str(wait), "--state-store-timeout-ms", "1000",
                "--sequence-reorder-ms", "200", "--sequence-idle-ms", "60000"]
        ds = [spawn(*args), spawn(*args)]
        rng = random.Random(SEED + wait)
        lost, wrong, answered = [], [], [0]
        stop = time.time() + seconds

        def client(s):
            crng = random.Random(rng.random())
            sid = "failover-%d-%d-%d" % (wait, SEED % 10000, s)
            xs, want_answers = [], []  # every chunk, and its first answer
            total = 0
            n = 1
            while time.time() < stop or n <= len(xs):
                if n > len(xs):
                    xs.append(crng.randrange(1, 1000))
                d = ds[crng.randrange(2)]
                try:
                    st, y = infer(d.port, sid, [xs[n - 1]], start=n == 1, chunk=n, timeout=5)
                except OSError:
                    time.sleep(0.05)
                    continue
                if st == 503:
                    time.sleep(0.05)
                    continue
                if st == 409 and "waited" in y or st == 400 and "not live" in y:
                    # answered chunks the failover lost: from the one it names
                    back = int(y.split("for chunk ")[1].split(",")[0]) if st == 409 else 1
                    lost.append((sid, back, n))
                    n = back
                    total = sum(xs[:back - 1])
                    continue
                if st != 200:
                    wrong.append((sid, n, st, y))
                    return
                total_n = sum(xs[:n])
                if y != [total_n]:
                    wrong.append((sid, n, y, total_n))
                    return
                if n <= len(want_answers):
                    if want_answers[n - 1] != y:
                        wrong.append((sid, n, "answered again otherwise", y))
                        return
                else:
                    want_answers.append(y)
                answered[0] += 1
                total = total_n
                n += 1

        threads = [threading.Thread(target=client, args=(s,)) for s in range(nseq)]
        for t in threads:
            t.start()
        time.sleep(seconds / 3)
        # the replica falls behind (its link holds the primary's writes
        # for half a second), and the primary dies with them
        link.frozen = True
        time.sleep(0.5)
        primary.kill()
        link.close()
        assert replica.command("REPLICAOF", "NO", "ONE").startswith(b"+OK")
        second = Node("--replicaof", "127.0.0.1", str(replica.port))
        proxy.switch(replica.port)
        for t in threads:
            t.join(120)
        assert not wrong, wrong[:3]
        assert answered[0] > 50, answered
        return lost, answered[0]
    finally:
        proxy.close()
        link.close()
        for n in (primary, replica, second):
            if n is not None:
                n.cleanup()


def test_a_frozen_proxy_passes_nothing_that_comes_after_the_freeze():
    """The failovers above and the model checker's hold a replica back by
    freezing the proxy on its link: bytes that reach the proxy after the
    freeze stay there, even when its pump was already waiting for them
    (they once slipped through, a write's replication and its WAIT's
    acknowledgement with them), and go on when it thaws."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    proxy = Proxy(server.getsockname()[1])
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        far, _ = server.accept()
        far.settimeout(0.3)
        client.sendall(b"before")
        assert far.recv(64) == b"before"
        time.sleep(0.05)  # both pumps wait in recv() now
        proxy.frozen = True
        client.sendall(b"after")
        with pytest.raises(socket.timeout):
            far.recv(64)
        proxy.frozen = False
        far.settimeout(5)
        assert far.recv(64) == b"after"
        client.close()
        far.close()
    finally:
        proxy.close()
        server.close()


@pytest.mark.slow
@pytest.mark.outage
def test_a_failover_loses_no_answered_chunk_with_state_store_wait(spawn):
    """The replica falls half a second behind, and the primary dies. With
    --state-store-wait 1 every answered chunk is on the replica that the
    failover promotes (the chunks of that half second wait, and get 503),
    so none is lost; without it (0), the chunks answered in that half
    second are lost: their clients meet a gap and send them again."""
    lost, answered = failover_run(spawn, 1)
    print("--state-store-wait 1: %d chunks answered, %d lost" % (answered, len(lost)))
    assert not lost, lost
    lost0, answered0 = failover_run(spawn, 0)
    print("--state-store-wait 0: %d chunks answered, %d lost: %s"
          % (answered0, len(lost0), lost0[:4]))
    assert lost0, "nothing lost without WAIT: the test did not hold the replica back"
