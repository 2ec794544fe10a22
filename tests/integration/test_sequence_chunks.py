"""Numbered chunks (sequence_chunk): exactly once and in order, through
every door (docs/kserve.md, "Numbered chunks").

The examples are the issue's: the sequence [1,2,3], [4,5], [6], [7,8],
whose running sums are [1,3,6], [10,15], [21], [28,36]."""
import io
import os
import queue
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import eventually
from reference import cumsum, random_tensor
from seqlib import answer, send

SEED = int(os.environ.get("TALLY_SEQ_SEED", "20261125"))

CHUNKS = [[1, 2, 3], [4, 5], [6], [7, 8]]
SUMS = [[1, 3, 6], [10, 15], [21], [28, 36]]


def test_a_retried_chunk_is_answered_again_not_added(tallyd):
    d = tallyd
    st, b = send(d, "retry-1", CHUNKS[0], number=1, start=True)
    assert st == 200 and answer(b) == SUMS[0], b
    assert b["parameters"] == {"sequence_chunk": 1}, b
    repeats = d.metric("tally_sequence_numbered_chunks_total", outcome="repeat")
    for _ in range(3):  # the retry gets the first answer, every time
        st, b = send(d, "retry-1", CHUNKS[1], number=2)
        assert st == 200 and answer(b) == SUMS[1], b
    st, b = send(d, "retry-1", CHUNKS[2], number=3)
    assert st == 200 and answer(b) == SUMS[2], b
    assert eventually(lambda: d.metric("tally_sequence_numbered_chunks_total",
                                       outcome="repeat") - repeats, 2) == 2


def test_conflicts_and_older_chunks_are_refused_and_change_nothing(tallyd):
    d = tallyd
    for n in range(3):
        st, b = send(d, "conflict-1", CHUNKS[n], number=n + 1, start=n == 0)
        assert st == 200 and answer(b) == SUMS[n], b
    # chunk 3 again with another input
    st, b = send(d, "conflict-1", [9], number=3)
    assert st == 409, b
    assert '"conflict-1"' in b["error"] and "chunk 3" in b["error"], b
    # chunk 2, overtaken: the message names the last chunk
    st, b = send(d, "conflict-1", CHUNKS[1], number=2)
    assert st == 409 and "chunk 2" in b["error"] and ", 3" in b["error"], b
    # nothing moved
    st, b = send(d, "conflict-1", CHUNKS[3], number=4, end=True)
    assert st == 200 and answer(b) == SUMS[3], b


def test_chunks_that_cross_are_applied_in_their_numbers_order(tallyd):
    """Chunk 4 sent 0.2 s before chunk 3, on another connection: it waits
    for chunk 3, and both answers are right."""
    d = tallyd
    for n in range(2):
        st, b = send(d, "cross-1", CHUNKS[n], number=n + 1, start=n == 0)
        assert st == 200, b
    got = queue.Queue()
    t = threading.Thread(target=lambda: got.put(
        send(d, "cross-1", CHUNKS[3], number=4, end=True)))
    t.start()
    time.sleep(0.2)
    st, b = send(d, "cross-1", CHUNKS[2], number=3)
    assert st == 200 and answer(b) == SUMS[2], b
    t.join(30)
    st, b = got.get_nowait()
    assert st == 200 and answer(b) == SUMS[3], b


def test_an_early_chunk_is_refused_after_the_reorder_window(spawn):
    d = spawn("--sequence-reorder-ms", "300")
    st, b = send(d, "gap-1", CHUNKS[0], number=1, start=True)
    assert st == 200, b
    t0 = time.time()
    st, b = send(d, "gap-1", CHUNKS[2], number=3)
    waited = time.time() - t0
    assert st == 409, b
    assert "chunk 2" in b["error"] and "--sequence-reorder-ms" in b["error"], b
    assert waited >= 0.3, waited
    # nothing moved: chunk 2, then 3, go on from chunk 1
    for n in (1, 2):
        st, b = send(d, "gap-1", CHUNKS[n], number=n + 1)
        assert st == 200 and answer(b) == SUMS[n], b
    assert d.metric("tally_sequence_numbered_chunks_total", outcome="gap") == 1
    # over gRPC: FAILED_PRECONDITION
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    i = grpcclient.InferInput("x", [1], "INT64")
    i.set_data_from_numpy(np.array([1], np.int64))
    with pytest.raises(InferenceServerException) as e:
        c.infer("cumsum", [i], sequence_id="gap-1",
                parameters={"sequence_chunk": 9})
    assert e.value.status() == "StatusCode.FAILED_PRECONDITION", e.value
    assert "chunk 4" in str(e.value), e.value


def test_numbered_and_unnumbered_chunks_do_not_mix(tallyd):
    d = tallyd
    st, b = send(d, "mix-1", [1], number=1, start=True)
    assert st == 200, b
    st, _, b = d.post_json("/v2/models/cumsum/infer", {
        "parameters": {"sequence_id": "mix-1"},
        "inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [1]}]})
    assert st == 400 and "no number" in b["error"], b
    st, _, b = d.post_json("/v2/models/cumsum/infer", {
        "parameters": {"sequence_id": "mix-2", "sequence_start": True},
        "inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [1]}]})
    assert st == 200, b
    st, b = send(d, "mix-2", [1], number=2)
    assert st == 400 and "has one" in b["error"], b
    # bad numbers
    st, b = send(d, "mix-3", [1], number=0, start=True)
    assert st == 400 and "counts from 1" in b["error"], b
    st, b = send(d, "mix-3", [1], number=2, start=True)
    assert st == 400 and "numbered from 1" in b["error"], b
    st, _, b = d.post_json("/v2/models/cumsum/infer", {
        "parameters": {"sequence_chunk": 1},
        "inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [1]}]})
    assert st == 400 and "need a sequence_id" in b["error"], b


def test_the_end_chunk_may_be_repeated_and_nothing_follows_it(tallyd):
    d = tallyd
    st, b = send(d, "end-1", CHUNKS[0], number=1, start=True)
    assert st == 200, b
    st, b = send(d, "end-1", CHUNKS[1], number=2, end=True)
    assert st == 200 and answer(b) == SUMS[1], b
    st, b = send(d, "end-1", CHUNKS[1], number=2, end=True)
    assert st == 200 and answer(b) == SUMS[1], b
    st, b = send(d, "end-1", CHUNKS[2], number=3)
    assert st == 409 and "ended at chunk 2" in b["error"], b
    # a retried start of a live numbered sequence is its chunk 1 again
    st, b = send(d, "end-2", CHUNKS[0], number=1, start=True)
    st, b = send(d, "end-2", CHUNKS[0], number=1, start=True)
    assert st == 200 and answer(b) == SUMS[0], b
    st, b = send(d, "end-2", CHUNKS[1], number=2, end=True)
    assert st == 200 and answer(b) == SUMS[1], b


def test_every_door_takes_and_echoes_the_number(tallyd):
    d = tallyd
    x = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int64)
    parts = [x[0:3], x[3:5], x[5:6], x[6:8]]
    want = [cumsum(x)[0:3], cumsum(x)[3:5], cumsum(x)[5:6], cumsum(x)[6:8]]
    # tritonclient over HTTP with binary tensors, twice each (a retry)
    c = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
    for k, p in enumerate(parts):
        for _ in range(2):
            i = httpclient.InferInput("x", [len(p)], "INT64")
            i.set_data_from_numpy(p, binary_data=True)
            r = c.infer("cumsum", [i], sequence_id="door-http", sequence_start=k == 0,
                        sequence_end=k == 3, parameters={"sequence_chunk": k + 1})
            assert r.as_numpy("y").tolist() == want[k].tolist(), k
            assert r.get_response()["parameters"] == {"sequence_chunk": k + 1}
    # gRPC unary
    g = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    for k, p in enumerate(parts):
        for _ in range(2):
            i = grpcclient.InferInput("x", [len(p)], "INT64")
            i.set_data_from_numpy(p)
            r = g.infer("cumsum", [i], sequence_id="door-grpc", sequence_start=k == 0,
                        sequence_end=k == 3, parameters={"sequence_chunk": k + 1})
            assert r.as_numpy("y").tolist() == want[k].tolist(), k
            assert r.get_response().parameters["sequence_chunk"].uint64_param == k + 1
    # the gRPC stream: sent out of order (4, 2, 3 after 1), answered in order
    got = queue.Queue()
    g.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        for k in (0, 3, 1, 2):
            i = grpcclient.InferInput("x", [len(parts[k])], "INT64")
            i.set_data_from_numpy(parts[k])
            g.async_stream_infer("cumsum", [i], sequence_id="door-stream",
                                 sequence_start=k == 0, sequence_end=k == 3,
                                 parameters={"sequence_chunk": k + 1})
            if k == 0:
                r, e = got.get(timeout=30)
                assert e is None, e
        seen = {}
        for _ in range(3):
            r, e = got.get(timeout=30)
            assert e is None, e
            n = r.get_response().parameters["sequence_chunk"].uint64_param
            seen[n] = r.as_numpy("y").tolist()
        assert seen == {k + 1: want[k].tolist() for k in (1, 2, 3)}, seen
    finally:
        g.stop_stream()
    # the native API: a JSON member, and query parameters with raw and .npy
    st, h, b = d.post_json("/v1/cumsum", {"dtype": "int64", "data": parts[0].tolist(),
                                          "sequence_id": "door-native",
                                          "sequence_start": True, "sequence_chunk": 1})
    assert st == 200 and b["data"] == want[0].tolist(), b
    assert h["sequence-chunk"] == "1", h
    for _ in range(2):
        st, h, body = d.request("POST", "/v1/cumsum?dtype=int64&shape=2&sequence_id="
                                "door-native&sequence_chunk=2", parts[1].tobytes(),
                                {"Content-Type": "application/octet-stream"})
        assert st == 200 and np.frombuffer(body, np.int64).tolist() == want[1].tolist()
        assert h["sequence-chunk"] == "2", h
    buf = io.BytesIO()
    np.save(buf, parts[2])
    st, h, body = d.request("POST", "/v1/cumsum?sequence_id=door-native&sequence_chunk=3",
                            buf.getvalue(), {"Content-Type": "application/x-npy"})
    assert st == 200 and np.load(io.BytesIO(body)).tolist() == want[2].tolist()
    assert h["sequence-chunk"] == "3", h
    st, _, body = d.request("POST", "/v1/cumsum?dtype=int64&shape=1&sequence_id="
                            "door-native&sequence_chunk=x", b"\0" * 8,
                            {"Content-Type": "application/octet-stream"})
    assert st == 400 and b"sequence_chunk" in body, body


def test_many_clients_retrying_out_of_order_get_numpy_exactly(tallyd):
    """Eight int64 sequences of 40 chunks, each chunk sent 1 to 3 times by
    8 threads in a shuffled order (each thread sends its share in number
    order, so that a chunk waits only on one a thread will send). Every
    chunk is answered, every answer equals numpy's cumsum of the whole,
    exactly; a copy that arrives once a later chunk was applied is refused
    as older (409), as a retry after its answer would be."""
    seed = SEED + 45
    print("seed %d (TALLY_SEQ_SEED=%d)" % (seed, SEED))
    rng = np.random.default_rng(seed)
    d = tallyd
    nseq, nchunk = 8, 40
    xs, cuts = {}, {}
    for s in range(nseq):
        lengths = rng.integers(1, 6, size=nchunk)
        xs[s] = random_tensor(rng, "int64", (int(lengths.sum()),))
        cuts[s] = np.concatenate([[0], np.cumsum(lengths)])
    sends = []
    for s in range(nseq):
        for k in range(1, nchunk):
            sends += [(s, k)] * int(rng.integers(1, 4))
    rng.shuffle(sends)
    # the starts go first (a sequence must exist before its chunk 2 waits)
    for s in range(nseq):
        lo, hi = cuts[s][0], cuts[s][1]
        st, b = send(d, "many-%d" % s, xs[s][lo:hi].tolist(), number=1, start=True)
        assert st == 200, b
    shares = [sorted(sends[t::8], key=lambda x: x[1]) for t in range(8)]
    answers, errors, older = {}, [], []

    def sender(t):
        for s, k in shares[t]:
            lo, hi = cuts[s][k], cuts[s][k + 1]
            st, b = send(d, "many-%d" % s, xs[s][lo:hi].tolist(), number=k + 1, end=k == nchunk - 1)
            if st == 409 and "older" in b.get("error", ""):
                older.append((s, k))
            elif st != 200:
                errors.append((s, k, st, b))
            else:
                answers.setdefault((s, k), []).append(answer(b))

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    for s in range(nseq):
        want = np.cumsum(xs[s])
        for k in range(1, nchunk):
            lo, hi = cuts[s][k], cuts[s][k + 1]
            assert (s, k) in answers, (s, k)
            for got in answers[(s, k)]:
                assert got == want[lo:hi].tolist(), (s, k)
    print("%d sends, %d answered, %d older copies refused"
          % (len(sends), sum(len(v) for v in answers.values()), len(older)))


def test_a_drain_that_times_out_keeps_the_sums(spawn, tmp_path):
    """SIGTERM while chunk 3 still runs (every job waits 1.5 s here), and
    the drain's 1 s runs out: tallyd exits 1 without answering chunk 3,
    and saves the sums as they stood. Started again on the same
    --state-dir, chunk 3 sent again is applied once, and chunk 2 sent again
    is a repeat: the numbers were kept too."""
    state = str(tmp_path)
    slow = ["--state-dir", state, "--drain-timeout", "1", "--fault-delay-ms", "1500",
            "--inline-max-elements", "0", "--json-inline-max-elements", "0"]
    d = spawn(*slow)
    for n in range(2):
        st, b = send(d, "drained", CHUNKS[n], number=n + 1, start=n == 0)
        assert st == 200 and answer(b) == SUMS[n], b
    got = queue.Queue()

    def third():
        try:
            got.put(send(d, "drained", CHUNKS[2], number=3))
        except Exception as e:  # the connection closes unanswered
            got.put(e)

    t = threading.Thread(target=third)
    t.start()
    time.sleep(0.3)
    assert d.stop() == 1, d.log()
    t.join(30)
    r = got.get_nowait()
    assert isinstance(r, Exception) or r[0] != 200, r  # never answered 200
    assert "drain timeout" in d.log() and "live sequences kept in" in d.log(), d.log()
    d2 = spawn("--state-dir", state)
    st, b = send(d2, "drained", CHUNKS[2], number=3)
    assert st == 200 and answer(b) == SUMS[2], b
    st, b = send(d2, "drained", CHUNKS[1], number=2)
    assert st == 409 and "older" in b["error"], b
    st, b = send(d2, "drained", CHUNKS[2], number=3)
    assert st == 200 and answer(b) == SUMS[2], b
    st, b = send(d2, "drained", CHUNKS[3], number=4, end=True)
    assert st == 200 and answer(b) == SUMS[3], b


def test_the_end_chunk_is_answered_again_after_a_restart(spawn, tmp_path):
    """An ended numbered sequence stays in the log for --sequence-idle-ms,
    so that an end chunk whose answer a crash lost is answered again."""
    state = str(tmp_path)
    d = spawn("--state-dir", state)
    for n in range(2):
        st, b = send(d, "ended-kept", CHUNKS[n], number=n + 1, start=n == 0, end=n == 1)
        assert st == 200 and answer(b) == SUMS[n], b
    d.proc.kill()
    d.proc.wait()
    d2 = spawn("--state-dir", state)
    st, b = send(d2, "ended-kept", CHUNKS[1], number=2, end=True)
    assert st == 200 and answer(b) == SUMS[1], b
    st, b = send(d2, "ended-kept", CHUNKS[2], number=3)
    assert st == 409 and "ended at chunk 2" in b["error"], b
