"""Running sums on many replicas (docs/deployment.md, "Sequences on many
replicas"): tallyds with --state-store keep every sequence's state in one
Redis, Debian's redis-server started here on a free port, never a mock.

- Three replicas, each chunk of each sequence sent to one at random,
  through a door drawn at random too (REST, or gRPC, whose loops have
  their own connections to Redis): every answer equals numpy's (int64
  exactly, float32 within the bound).
- Replicas killed for good, or killed and started again, mid-run; then
  Redis itself: chunks get 503 (never a wrong answer) and go on, and
  every chunk is counted once.
- A wrong password, and nobody listening: tallyd does not start, and says
  which URL (without the password) and why.
- The same requests to tallyds with the state in memory, in the log and
  in Redis get the same answers, status and words (a property test).

Seeds are printed; TALLY_STORE_SEED replays one."""
import http.client
import json
import os
import random
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import Daemon, dead_port
from reference import close, cumsum, random_tensor
from seqlib import REDIS, Redis, answer, send, send_grpc

SEED = int(os.environ.get("TALLY_STORE_SEED", random.randrange(1 << 32)))

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed")


@pytest.fixture
def redis():
    r = Redis()
    yield r
    r.cleanup()


class Replicas:
    """n tallyds on one Redis; ports() are those up now."""

    def __init__(self, url, n, extra=()):
        self.args = ["--device", "host", "--state-store", url,
                     "--sequence-reorder-ms", "3000"] + list(extra)
        self.lock = threading.Lock()
        self.all = []
        self.up = []
        self.resent = 0
        for _ in range(n):
            self.start()

    def start(self):
        d = Daemon(*self.args)
        with self.lock:
            self.all.append(d)
            self.up.append(d)
        return d

    def kill(self, d):
        with self.lock:
            self.up.remove(d)
        d.proc.kill()
        d.proc.wait()

    def ports(self):
        with self.lock:
            return [d.port for d in self.up]

    def doors(self):
        """(REST port, gRPC port) of each replica up now."""
        with self.lock:
            return [(d.port, d.grpc_port) for d in self.up]

    def log(self):
        return "\n".join(d.log()[-2000:] for d in self.all)

    def cleanup(self):
        for d in self.all:
            d.cleanup()


def post_chunk(port, seq, n, x, start, end):
    """The numbered chunk (seq, n, x, start, end) over REST: (status, raw
    body bytes as JSON)."""
    st, b = send(port, seq, x, start=start, end=end, number=int(n))
    return st, json.dumps(b).encode()


def post_grpc(port, seq, n, x, start, end):
    """The same over gRPC: 503 for tally's UNAVAILABLE (the store's);
    OSError when the replica cannot be reached (gone, or going)."""
    code, out = send_grpc(port, seq, x, start=start, end=end, number=int(n))
    if code == 200:
        return 200, json.dumps({"outputs": [{"data": out}]}).encode()
    if code.endswith("UNAVAILABLE") and "Redis" in out:
        return 503, json.dumps({"error": out}).encode()
    if code.endswith(("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED")):
        raise OSError("%s: %s" % (code, out))
    return 400, json.dumps({"error": "%s: %s" % (code, out)}).encode()


def send_until_answered(reps, rng, chunk, deadline, unavailable):
    """One numbered chunk (post_chunk()'s arguments) to a random replica up
    now, through a random door, sent again (to another random one) until
    an answer comes: (status, body), or (None, why) past the deadline.
    503s are counted in unavailable."""
    why = ""
    sends = 0
    while time.time() < deadline:
        doors = reps.doors()
        if not doors:
            time.sleep(0.02)
            continue
        sends += 1
        if sends > 1:
            reps.resent += 1
        rest, grpc = doors[rng.integers(len(doors))]
        try:
            if rng.integers(2) == 0:
                st, raw = post_chunk(rest, *chunk)
            else:
                st, raw = post_grpc(grpc, *chunk)
        except (OSError, http.client.HTTPException) as e:
            why = repr(e)
            time.sleep(0.02)
            continue
        if st == 503:
            unavailable.append(raw)
            why = raw.decode(errors="replace")
            time.sleep(0.05)
            continue
        return st, json.loads(raw)
    return None, why


def run_sequences(reps, seed, nseq, nchunk, dtypes=("int64",), on_answer=None):
    """nseq client threads, each one sequence of nchunk numbered chunks
    (its dtype drawn from dtypes), every send to a random replica. Asserts
    every answer; returns the 503 bodies seen."""
    rng = np.random.default_rng(seed)
    plans = []
    for s in range(nseq):
        dt = dtypes[s % len(dtypes)]
        lengths = rng.integers(1, 9, size=nchunk)
        plans.append((random_tensor(rng, dt, (int(lengths.sum()),)),
                      np.concatenate([[0], np.cumsum(lengths)])))
    wrong, refused, stuck, unavailable = [], [], [], []
    answered = [0]
    lock = threading.Lock()

    def client(s):
        x, cut = plans[s]
        crng = np.random.default_rng([seed, s])
        got = []
        deadline = time.time() + 240
        for k in range(nchunk):
            lo, hi = cut[k], cut[k + 1]
            chunk = ("store-%d-%d" % (seed % 100000, s), k + 1, x[lo:hi],
                     k == 0, k == nchunk - 1)
            st, b = send_until_answered(reps, crng, chunk, deadline, unavailable)
            if st is None:
                stuck.append((s, k, b))
                return
            if st != 200:
                refused.append((s, k, st, b))
                return
            got.extend(b["outputs"][0]["data"])
            with lock:
                answered[0] += 1
                n = answered[0]
            if on_answer is not None:
                on_answer(n)
        want = cumsum(x)
        if not close(np.array(got, dtype=x.dtype), want, x):
            wrong.append((s, x.dtype.name, got[:8], want[:8].tolist()))

    threads = [threading.Thread(target=client, args=(s,)) for s in range(nseq)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not stuck, (stuck[:2], reps.log())
    assert not refused, refused[:3]
    assert not wrong, wrong[:3]
    return unavailable


def test_three_replicas_answer_chunks_sent_at_random(redis):
    seed = SEED
    print("seed %d (replay with TALLY_STORE_SEED=%d)" % (seed, seed))
    reps = Replicas(redis.url(), 3)
    try:
        unavailable = run_sequences(reps, seed, nseq=6, nchunk=30,
                                    dtypes=("int64", "float32"))
        assert not unavailable, unavailable[:2]
        applied = sum(d.metric("tally_sequence_numbered_chunks_total", outcome="applied")
                      for d in reps.up)
        assert applied == 6 * 30, applied  # each chunk once, on some replica
        # every replica took some: the state really was shared
        assert all(d.metric("tally_sequence_numbered_chunks_total", outcome="applied") > 0
                   for d in reps.up)
        # and both doors did: gRPC's loops write through connections of their own
        assert all(d.metric("tally_grpc_calls_total") > 0 for d in reps.up)
        # ended sequences stay (for a repeat of their end) with a time to live
        assert all(d.metric("tally_state_store_up") == 1 for d in reps.up)
    finally:
        reps.cleanup()


@pytest.mark.concurrency
def test_chunks_that_cross_on_replicas_are_applied_in_order(redis):
    """A sequence's start, then every other chunk of it sent at once,
    each to a random replica: the later ones wait for the earlier ones to
    commit, and every answer is right. A chunk sent before its start is
    refused at once, as in memory (docs/durability.md). Unnumbered chunks,
    one at a time through random replicas, go on too."""
    seed = SEED + 4
    print("seed %d (replay with TALLY_STORE_SEED=%d)" % (seed - 4, seed - 4))
    rng = np.random.default_rng(seed)
    reps = Replicas(redis.url(), 3)
    try:
        ports = reps.ports()
        for s in range(3):
            n = 12
            lengths = rng.integers(1, 6, size=n)
            x = random_tensor(rng, "int64", (int(lengths.sum()),))
            cut = np.concatenate([[0], np.cumsum(lengths)])
            want = cumsum(x)
            got = [None] * n
            order = rng.permutation(n)

            def send_k(k):
                got[k] = post_chunk(ports[(k * 7 + s) % len(ports)],
                                    "cross-%d-%d" % (seed % 1000, s), k + 1,
                                    x[cut[k]:cut[k + 1]], k == 0, k == n - 1)

            if s == 0:  # before its start: refused at once, not kept waiting
                st, raw = post_chunk(ports[1], "cross-%d-%d" % (seed % 1000, s), 2,
                                     x[cut[1]:cut[2]], False, False)
                assert st == 400 and b"not live" in raw, (st, raw)
            send_k(0)  # the start first: a chunk before it is refused
            order = [k for k in order if k != 0]
            threads = [threading.Thread(target=send_k, args=(int(k),)) for k in order]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            for k in range(n):
                st, raw = got[k]
                assert st == 200, (k, raw)
                assert json.loads(raw)["outputs"][0]["data"] == \
                    want[cut[k]:cut[k + 1]].tolist(), (s, k)
        # each of the 36 chunks applied once, whichever replica took it
        applied = sum(d.metric("tally_sequence_numbered_chunks_total", outcome="applied")
                      for d in reps.up)
        assert applied == 3 * 12, applied
        # unnumbered, one at a time
        x = random_tensor(rng, "int64", (20,))
        want = cumsum(x)
        for k in range(10):
            st, b = send(ports[int(rng.integers(len(ports)))], "plain-%d" % seed,
                         x[2 * k:2 * k + 2], start=k == 0)
            assert st == 200 and answer(b) == want[2 * k:2 * k + 2].tolist(), (k, b)
    finally:
        reps.cleanup()


def test_a_flushed_script_is_sent_again(redis, spawn):
    """tallyd names its write script by SHA-1 (EVALSHA); after SCRIPT FLUSH
    Redis answers NOSCRIPT, and the write goes again with the script's
    text: the chunk is answered, once."""
    d = spawn("--device", "host", "--state-store", redis.url())
    x = np.arange(1, 7, dtype=np.int64)
    for k in range(3):
        if k == 1:
            assert redis.command("SCRIPT", "FLUSH").startswith(b"+OK")
        st, raw = post_chunk(d.port, "flush-1", k + 1, x[2 * k:2 * k + 2], k == 0, k == 2)
        assert st == 200, raw
        assert json.loads(raw)["outputs"][0]["data"] == np.cumsum(x)[2 * k:2 * k + 2].tolist()
    assert d.metric("tally_sequence_numbered_chunks_total", outcome="applied") == 3
    assert d.metric("tally_state_store_failures_total") == 0


@pytest.mark.slow
@pytest.mark.outage
def test_replicas_killed_mid_run_lose_nothing(redis):
    """One replica killed for good, another killed and started again,
    while chunks go to all of them: every chunk is answered once, right."""
    seed = SEED + 1
    print("seed %d (replay with TALLY_STORE_SEED=%d)" % (seed - 1, seed - 1))
    reps = Replicas(redis.url(), 3)
    total = 6 * 40
    events = {total // 4: "kill", total // 2: "restart"}
    fired = set()
    flock = threading.Lock()

    def on_answer(n):
        with flock:
            what = events.get(n)
            if what is None or n in fired:
                return
            fired.add(n)
        if what == "kill":
            reps.kill(reps.up[0])
        else:
            d = reps.up[0]
            reps.kill(d)
            reps.start()

    try:
        run_sequences(reps, seed, nseq=6, nchunk=40, on_answer=on_answer)
        assert fired == set(events), fired
        print("%d chunks sent again" % reps.resent)
        assert len(reps.up) == 2
    finally:
        reps.cleanup()


@pytest.mark.slow
@pytest.mark.outage
def test_redis_killed_and_started_again(redis):
    """Redis goes away mid-run: chunks get 503 with Retry-After, never a
    wrong answer; plain requests go on; once it is back, so do the
    sequences."""
    seed = SEED + 2
    print("seed %d (replay with TALLY_STORE_SEED=%d)" % (seed - 2, seed - 2))
    reps = Replicas(redis.url(), 2, ["--state-store-timeout-ms", "300"])
    down = threading.Event()
    done = threading.Event()

    def on_answer(n):
        if n == 60 and not down.is_set():
            down.set()

    def bounce():
        down.wait(120)
        redis.kill()
        # while it is down: a chunk's 503, and a plain request's answer
        d = reps.up[0]
        st, hdrs, b = d.post_json("/v2/models/cumsum/infer", {
            "parameters": {"sequence_id": "down-1", "sequence_chunk": 1,
                           "sequence_start": True},
            "inputs": [{"name": "x", "datatype": "INT64", "shape": [2], "data": [1, 2]}]})
        checks.append((st, hdrs.get("retry-after"), b))
        st, _, b = d.post_json("/v1/cumsum", {"dtype": "int32", "shape": [3], "data": [1, 2, 3]})
        checks.append((st, b))
        checks.append(d.request("GET", "/v2/health/ready")[0])
        time.sleep(1.0)
        redis.start()
        done.set()

    checks = []
    t = threading.Thread(target=bounce)
    t.start()
    try:
        unavailable = run_sequences(reps, seed, nseq=4, nchunk=50, on_answer=on_answer)
        t.join(60)
        assert done.is_set()
        st, retry, b = checks[0]
        assert st == 503 and retry == "1", (st, retry, b)
        assert "Redis" in b["error"], b
        assert checks[1][0] == 200 and checks[1][1]["data"] == [1, 3, 6], checks[1]
        assert checks[2] == 200  # ready for plain work
        assert unavailable, "no chunk met the outage"
        d = reps.up[0]
        assert d.metric("tally_state_store_failures_total") > 0
        assert d.metric("tally_state_store_up") == 1
    finally:
        t.join(60)
        reps.cleanup()


def test_start_refuses_a_wrong_password_and_an_unreachable_store(spawn):
    r = Redis(password="s3cret-pw")
    try:
        for url, why in ((r.url("wrong-pw"), "WRONGPASS"),
                         ("redis://127.0.0.1:%d" % dead_port(), "refused")):
            p = subprocess.run([os.environ.get("TALLYD", "build/bin/tallyd"),
                                "--listen", "127.0.0.1:0", "--device", "host",
                                "--state-store", url, "--state-store-timeout-ms", "2000"],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode != 0, p.stdout + p.stderr
            out = p.stdout + p.stderr
            assert "state store redis://" in out and why in out, out
            assert "wrong-pw" not in out, out  # the password is never shown
        # the right one starts, and a chunk goes through
        d = spawn("--device", "host", "--state-store", r.url())
        st, _, b = d.post_json("/v2/models/cumsum/infer", {
            "parameters": {"sequence_id": 7, "sequence_start": True},
            "inputs": [{"name": "x", "datatype": "INT64", "shape": [2], "data": [1, 2]}]})
        assert st == 200 and b["outputs"][0]["data"] == [1, 3], b
        # and it cannot be combined with --state-dir
        p = subprocess.run([os.environ.get("TALLYD", "build/bin/tallyd"), "--listen",
                            "127.0.0.1:0", "--state-store", r.url(), "--state-dir", "/tmp"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "cannot be combined" in p.stdout + p.stderr
    finally:
        r.cleanup()


# ---------------------------------------------------------------- the property


PROPERTY_KINDS = {"p0": ("INT64", 1), "p1": ("INT64", 2),
                  "p2": ("INT32", 1), "p3": ("INT64", 1)}


def property_requests(rng, n):
    """n random chunk requests over a few ids: numbered and unnumbered,
    starts, ends, repeats, conflicting inputs, early and old numbers,
    other dtypes and shapes."""
    out = []
    last = {}
    for _ in range(n):
        sid = "p%d" % rng.integers(4)
        numbered = sid in ("p0", "p1")
        k = last.get(sid, 0)
        r = rng.random()
        params = {"sequence_id": sid}
        if numbered:
            if r < 0.15 or k == 0:
                num = 1
                params["sequence_start"] = True
            elif r < 0.3:
                num = k  # a repeat, same input or not
            elif r < 0.4:
                num = k + 2  # early: waits, then a gap
            elif r < 0.45:
                num = max(1, k - 2)  # old
            else:
                num = k + 1
            params["sequence_chunk"] = int(num)
            if num > k and num == k + 1:
                last[sid] = num
        elif r < 0.2:
            params["sequence_start"] = True
        if rng.random() < 0.12:
            params["sequence_end"] = True
        if params.get("sequence_start"):
            last[sid] = 1 if numbered else 0
        # each id's starts have its own kind; one chunk in ten after them
        # another (refused: unlike its first chunk). A start of another
        # kind would leave a numbered id that never ends refusing most
        # of what follows, and the 409s this test wants many of, few.
        dtype, width = PROPERTY_KINDS[sid]
        if not params.get("sequence_start") and rng.random() < 0.1:
            dtype, width = PROPERTY_KINDS["p%d" % rng.integers(4)]
            if (dtype, width) == PROPERTY_KINDS[sid]:
                dtype = "INT32" if dtype == "INT64" else "INT64"
        length = int(rng.integers(1, 4))
        data = rng.integers(-9, 10, size=length * width).tolist()
        shape = [length] if width == 1 else [length, width]
        out.append({"parameters": params, "inputs": [
            {"name": "x", "datatype": dtype, "shape": shape, "data": data}]})
    return out


@pytest.mark.slow
def test_the_store_answers_as_the_memory_does(redis, spawn, tmp_path):
    """The same random requests, one at a time, to three tallyds, their
    sequences in memory, in the log (--state-dir) and in Redis: the same
    status, so the same kind of refusal, and the same body, word for
    word, for every one; and the same counters after."""
    seed = SEED + 3
    print("seed %d (replay with TALLY_STORE_SEED=%d)" % (seed - 3, seed - 3))
    common = ["--device", "host", "--sequence-reorder-ms", "60",
              "--sequence-linger-ms", "600000", "--sequence-idle-ms", "600000"]
    stores = {"memory": spawn(*common),
              "log": spawn(*common, "--state-dir", str(tmp_path)),
              "redis": spawn(*common, "--state-store", redis.url())}
    reqs = property_requests(np.random.default_rng(seed), 400)
    outcomes = {}
    for i, r in enumerate(reqs):
        got = {name: d.post_json("/v2/models/cumsum/infer", r) for name, d in stores.items()}
        a = got["memory"]
        for name, b in got.items():
            assert (a[0], a[2]) == (b[0], b[2]), (i, r, name, a, b)
        outcomes[a[0]] = outcomes.get(a[0], 0) + 1
    print("statuses", outcomes)
    assert outcomes.get(200, 0) > 100 and outcomes.get(409, 0) > 10 \
        and outcomes.get(400, 0) > 5, outcomes
    for name, labels in (("tally_sequence_numbered_chunks_total", {"outcome": "applied"}),
                         ("tally_sequence_numbered_chunks_total", {"outcome": "repeat"}),
                         ("tally_sequence_numbered_chunks_total", {"outcome": "gap"}),
                         ("tally_sequences_total", {"event": "ended"}),
                         ("tally_sequence_late_chunks_total", {})):
        want = stores["memory"].metric(name, **labels)
        for store, d in stores.items():
            assert d.metric(name, **labels) == want, (store, name, labels)


def test_a_rollback_of_redis_makes_no_cache_pass(spawn):
    """Issue 70's item 3: replicas A and B; A starts [1], Redis takes a
    snapshot, B adds [10] ([11]) and caches that state; Redis is killed
    and started from the snapshot, so the 10 is gone. A adds [100]: [101].
    B adds [1000]: its cache of the lost write fails the compare-and-set
    (versions never repeat), and B decides on what Redis has: [1101],
    never [1011]. A 503 while B's connection finds Redis gone is sent
    again, as a client would."""
    r = Redis(aof=None)
    try:
        a = spawn("--device", "host", "--state-store", r.url())
        b = spawn("--device", "host", "--state-store", r.url())

        def chunk(d, data, **kw):
            for _ in range(50):
                st, body = send(d, "rollback", data, **kw)
                if st != 503:
                    return st, body
                time.sleep(0.1)
            return st, body

        def answered(st_body):
            st, body = st_body
            assert st == 200, body
            return answer(body)

        assert answered(chunk(a, [1], start=True)) == [1]
        r.save()
        assert answered(chunk(b, [10])) == [11]
        r.rollback()
        assert answered(chunk(a, [100])) == [101]
        assert answered(chunk(b, [1000])) == [1101]
        assert answered(chunk(a, [5], end=True)) == [1106]
    finally:
        r.cleanup()
