"""Running sums that outlive a request: Triton's sequence extension through
every door (KServe REST and gRPC, the gRPC stream, the native API, shared
memory), checked against numpy on the whole tensor; the refusals, which
leave a sequence as it was; the limits and the idle expiry; a restart
with --state-dir in the middle of a sequence; perf_analyzer's sequence
mode.

The random cases draw from a seed that is printed (TALLY_SEQ_SEED picks
another)."""
import json
import os
import queue
import subprocess
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conftest import Daemon, eventually, run_threads, valid_request_works
from reference import DTYPES, close, cumsum, random_tensor
from seqlib import chunk_body, infer_numpy, send
from palib import pa_count_windows, perf_analyzer_bin

SEED = int(os.environ.get("TALLY_SEQ_SEED", "20261125"))


def rng_for(name):
    seed = SEED + sum(name.encode())
    print("%s: seed %d (TALLY_SEQ_SEED=%d)" % (name, seed, SEED))
    return np.random.default_rng(seed)


def clients(d, proto):
    if proto == "http":
        return httpclient, httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
    return grpcclient, grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)


def cut(rng, n, k):
    """k chunk lengths that add up to n (some may be 0 when n < k)."""
    edges = np.sort(rng.integers(0, n + 1, size=k - 1))
    return np.diff(np.concatenate([[0], edges, [n]])).astype(int)


def run_sequence(mod, c, x, seq, axis, exclusive, reverse, lengths):
    """Sends x cut along axis into chunks of the given lengths (from the
    last to the first when reverse), one request each; the answers put
    back together in x's order."""
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    order = list(range(len(lengths)))
    if reverse:
        order.reverse()
    parts = {}
    for i, k in enumerate(order):
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(int(bounds[k]), int(bounds[k + 1]))
        chunk = np.ascontiguousarray(x[tuple(idx)])
        parts[k] = infer_numpy(mod, c, chunk, seq, start=i == 0, end=i == len(order) - 1, axis=axis, exclusive=exclusive, reverse=reverse)
    return np.concatenate([parts[k] for k in range(len(lengths))], axis=axis)


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_random_sequences_of_every_dtype_rank_axis_and_mode(tallyd, proto):
    rng = rng_for("random_sequences_" + proto)
    mod, c = clients(tallyd, proto)
    seq = 1000 if proto == "http" else 5000
    for dtype in DTYPES:
        for case in range(4):
            rank = int(rng.integers(1, 5))
            shape = [int(v) for v in rng.integers(1, 5, size=rank)]
            axis = int(rng.integers(0, rank))
            k = int(rng.integers(2, 7))
            shape[axis] = int(rng.integers(k, 4 * k + 1))
            exclusive, reverse = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
            x = random_tensor(rng, dtype, tuple(shape))
            seq += 1
            got = run_sequence(mod, c, x, seq, axis, exclusive, reverse,
                               cut(rng, shape[axis], k))
            want = cumsum(x, axis, exclusive, reverse)
            assert got.dtype == want.dtype
            assert close(got, want, x, axis), (dtype, shape, axis, exclusive, reverse,
                                               seq, got, want)


def test_float32_carry_is_wider_than_the_data(tallyd):
    """256 chunks of 4,096 uniform values: the end within 1e-5 of float64."""
    rng = rng_for("float32_carry")
    _, c = clients(tallyd, "grpc")
    x = rng.random(256 * 4096).astype(np.float32)
    last = None
    for i in range(256):
        y = infer_numpy(grpcclient, c, x[i * 4096:(i + 1) * 4096], 77, start=i == 0, end=i == 255)
        last = float(y[-1])
    want = float(np.sum(x.astype(np.float64)))
    assert abs(last - want) / want < 1e-5, (last, want)


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_string_ids(tallyd, proto):
    mod, c = clients(tallyd, proto)
    x = np.arange(1, 7, dtype=np.int64)
    for sid in ["meter-7-" + proto, "ünïcode id " + proto, "x" * 124 + proto]:
        a = infer_numpy(mod, c, x[:4], sid, start=True)
        b = infer_numpy(mod, c, x[4:], sid, end=True)
        assert np.concatenate([a, b]).tolist() == np.cumsum(x).tolist()
    # a string id and the number with its digits are two sequences
    num = 4200 + (proto == "grpc")
    infer_numpy(mod, c, x[:1], str(num), start=True)
    with pytest.raises(InferenceServerException) as e:
        infer_numpy(mod, c, x[:1], num)
    assert "not live" in str(e.value)
    assert infer_numpy(mod, c, x[1:2], str(num), end=True).tolist() == [3]


@pytest.mark.concurrency
def test_eight_sequences_from_eight_threads(tallyd):
    rng = rng_for("eight_threads")
    xs = [random_tensor(rng, "int32", (40, 3)) for _ in range(8)]

    def one(i):
        mod, c = clients(tallyd, "http" if i % 2 else "grpc")
        got = run_sequence(mod, c, xs[i], 9000 + i, 0, False, False, [10] * 4)
        assert np.array_equal(got, cumsum(xs[i], 0)), i

    run_threads(8, one)


def stream_sequences(port, xs, chunks, dtype):
    """Sends each tensor of xs ({id: 1-D array}) as a sequence of `chunks`
    equal chunks over one gRPC stream, interleaved (the first chunk of
    each, then the second of each, ...) and without waiting for answers;
    returns {id: the chunks' answers joined}."""
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % port)
    answers = queue.Queue()
    c.start_stream(callback=lambda result, error: answers.put((result, error)))
    got = {}
    try:
        for k in range(chunks):
            for sid, x in xs.items():
                n = len(x) // chunks
                inp = grpcclient.InferInput("x", [n], dtype)
                inp.set_data_from_numpy(x[n * k:n * (k + 1)])
                c.async_stream_infer("cumsum", [inp], request_id="%s-%d" % (sid, k),
                                     sequence_id=sid, sequence_start=k == 0,
                                     sequence_end=k == chunks - 1)
        for _ in range(chunks * len(xs)):
            result, error = answers.get(timeout=60)
            assert error is None, error
            got[result.get_response().id] = result.as_numpy("y")
    finally:
        c.stop_stream()
    return {sid: np.concatenate([got["%s-%d" % (sid, k)] for k in range(chunks)])
            for sid in xs}


def test_three_sequences_interleaved_on_one_stream(tallyd):
    rng = rng_for("stream")
    xs = {"s-" + sid: random_tensor(rng, "float64", (30,)) for sid in ("a", "b", "c")}
    ys = stream_sequences(tallyd.grpc_port, xs, 3, "FP64")
    for sid, x in xs.items():
        assert close(ys[sid], cumsum(x), x), sid


@pytest.mark.concurrency
def test_chunks_pipelined_on_a_stream_wait_their_turn(spawn):
    """Every chunk queued (--inline-max-elements 0) and sent without
    waiting for the one before: a chunk that arrives while an earlier one
    of its sequence runs waits for it, and the sums come out whole."""
    d = spawn("--inline-max-elements", "0", "--workers", "2", "--max-batch", "4")
    rng = rng_for("pipelined")
    xs = {sid: random_tensor(rng, "int64", (8 * 300,)) for sid in (11, 12, 13)}
    ys = stream_sequences(d.grpc_port, xs, 8, "INT64")
    for sid, x in xs.items():
        assert np.array_equal(ys[sid], cumsum(x)), sid
    assert d.metric("tally_sequences_total", event="ended") == 3


def test_native_api_json_raw_and_npy(tallyd):
    x = np.arange(1, 10, dtype=np.int32)
    st, _, b = tallyd.post_json("/v1/cumsum", {"dtype": "int32", "data": x[:3].tolist(),
                                               "sequence_id": "native", "sequence_start": True})
    assert st == 200 and b["data"] == [1, 3, 6], b
    st, h, body = tallyd.request("POST", "/v1/cumsum?dtype=int32&shape=3&sequence_id=native",
                                 x[3:6].tobytes(), {"Content-Type": "application/octet-stream"})
    assert st == 200, body
    assert np.frombuffer(body, np.int32).tolist() == [10, 15, 21]
    import io
    buf = io.BytesIO()
    np.save(buf, x[6:])
    st, h, body = tallyd.request("POST", "/v1/cumsum?sequence_id=native&sequence_end=true",
                                 buf.getvalue(), {"Content-Type": "application/x-npy"})
    assert st == 200, body
    assert np.load(io.BytesIO(body)).tolist() == [28, 36, 45]
    # a number's digits in a query string name the number
    st, _, b = tallyd.post_json("/v1/cumsum", {"data": [1], "sequence_id": 31337,
                                               "sequence_start": True})
    assert st == 200, b
    st, _, body = tallyd.request("POST", "/v1/cumsum?dtype=int64&shape=1&sequence_id=31337"
                                 "&sequence_end=1", np.array([5], np.int64).tobytes(),
                                 {"Content-Type": "application/octet-stream"})
    assert st == 200 and np.frombuffer(body, np.int64).tolist() == [6]


def test_refusals_leave_the_sequence_as_it_was(tallyd):
    """Each refusal is a 400 naming what is wrong; the sequence goes on
    from where it was."""
    sid = "refusals"
    st, b = send(tallyd, None, [1, 2], params={"sequence_id": sid, "sequence_start": True}, dtype="FP32")
    assert st == 200 and b["outputs"][0]["data"] == [1, 3], b
    bad = [
        ({"sequence_id": sid}, dict(dtype="INT32"), "int32"),
        ({"sequence_id": sid, "axis": -1, "exclusive": True}, {}, "exclusive"),
        ({"sequence_id": sid, "reverse": True}, {}, "reverse"),
        ({"sequence_id": sid + "?"}, {}, "not live"),
        ({"sequence_id": 0}, {}, "sequence_id 0"),
        ({"sequence_id": ""}, {}, "names no sequence"),
        ({"sequence_id": "x" * 129}, {}, "at most 128"),
        ({"sequence_id": "x" * 1000}, {}, "longer than 512 bytes"),
        ({"sequence_id": "a\tb"}, {}, "control characters"),
        ({"sequence_id": 1.5}, {}, "integer"),
        ({"sequence_id": -3}, {}, "non-negative"),
        ({"sequence_id": [1]}, {}, "number or a string"),
        ({"sequence_start": True}, {}, "need a sequence_id"),
        ({"sequence_id": sid, "sequence_end": "yes"}, {}, "true or false"),
    ]
    for params, kw, words in bad:
        st, b = send(tallyd, None, [1.0, 2.0], params=params, **{"dtype": "FP32", **kw})
        assert st == 400 and words in b["error"], (params, b)
    # a chunk of another shape off the axis
    body = {"parameters": {"sequence_id": sid},
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 1], "data": [1, 2]}]}
    st, _, b = tallyd.post_json("/v2/models/cumsum/infer", body)
    assert st == 400 and "float32 [*, 1]" in b["error"], b
    # not UTF-8, over REST's JSON (an invalid escape cannot be sent)
    raw = b'{"parameters":{"sequence_id":"\xff"},"inputs":[{"name":"x","datatype":"FP32",' \
          b'"shape":[1],"data":[1]}]}'
    st, _, body = tallyd.request("POST", "/v2/models/cumsum/infer", raw,
                                 {"Content-Type": "application/json"})
    assert st == 400 and b"UTF-8" in body, body
    # the sequence is unchanged after all of it
    st, b = send(tallyd, None, [10], params={"sequence_id": sid, "sequence_end": True}, dtype="FP32")
    assert st == 200 and b["outputs"][0]["data"] == [13], b
    valid_request_works(tallyd)


def test_grpc_refusals_are_invalid_argument(tallyd):
    _, c = clients(tallyd, "grpc")
    x = np.ones(3, np.float32)
    with pytest.raises(InferenceServerException) as e:
        infer_numpy(grpcclient, c, x, 424242)
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "424242 is not live" in str(e.value) and "sequence_start" in str(e.value)
    infer_numpy(grpcclient, c, x, 424242, start=True)
    with pytest.raises(InferenceServerException) as e:
        infer_numpy(grpcclient, c, x.astype(np.float64), 424242)
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    y = infer_numpy(grpcclient, c, x, 424242, end=True)
    assert y.tolist() == [4, 5, 6]


def test_start_again_restarts_from_zero(tallyd):
    _, c = clients(tallyd, "http")
    x = np.array([1, 2, 3], np.int16)
    infer_numpy(httpclient, c, x, "again", start=True)
    assert infer_numpy(httpclient, c, x, "again", start=True).tolist() == [1, 3, 6]
    assert infer_numpy(httpclient, c, x, "again", end=True).tolist() == [7, 9, 12]


def test_limits_idle_expiry_and_metrics(spawn):
    d = spawn("--max-sequences", "2", "--sequence-idle-ms", "400",
              "--sequence-max-bytes", "64")
    assert send(d, None, [1.0, 2.0], params={"sequence_id": 1, "sequence_start": True}, dtype="FP32")[0] == 200
    assert send(d, None, [1.0, 2.0], params={"sequence_id": 2, "sequence_start": True}, dtype="FP32")[0] == 200
    st, h, b = d.post_json("/v2/models/cumsum/infer", chunk_body(3, [1, 2], True, dtype="FP32"))
    assert st == 503 and "retry-after" in h and "--max-sequences" in b["error"], b
    _, c = clients(d, "grpc")
    with pytest.raises(InferenceServerException) as e:
        infer_numpy(grpcclient, c, np.ones(2, np.float32), 4, start=True)
    assert e.value.status() == "StatusCode.UNAVAILABLE"
    # ending one makes room
    assert send(d, None, [1.0, 2.0], params={"sequence_id": 1, "sequence_end": True}, dtype="FP32")[0] == 200
    assert send(d, None, [1.0, 2.0], params={"sequence_id": 3, "sequence_start": True}, dtype="FP32")[0] == 200
    # the carries' bytes: 9 lines take 72 bytes, more than 64 alone
    body = {"parameters": {"sequence_id": 5, "sequence_start": True},
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 9], "data": [1] * 9}]}
    st, _, b = d.post_json("/v2/models/cumsum/infer", body)
    assert st == 413 and "--sequence-max-bytes" in b["error"], b
    assert d.metric("tally_sequences_live") == 2
    assert d.metric("tally_sequences_total", event="started") == 3
    assert d.metric("tally_sequences_total", event="ended") == 1
    assert d.metric("tally_sequence_refusals_total") >= 2
    # idle: both expire, and their chunks are refused
    assert eventually(lambda: d.metric("tally_sequences_total", event="expired"), 2) == 2
    st, b = send(d, None, [1.0, 2.0], params={"sequence_id": 2}, dtype="FP32")
    assert st == 400 and "400 ms" in b["error"], b
    assert d.metric("tally_sequences_live") == 0


def test_an_ended_sequence_lingers_for_late_chunks(spawn):
    """A chunk sent before the last one may arrive after it on another
    connection: for --sequence-linger-ms the ended sequence takes it, after
    the end, without coming back to life; then it is refused."""
    d = spawn("--sequence-linger-ms", "300")
    assert send(d, None, [1, 2], params={"sequence_id": 8, "sequence_start": True}, dtype="FP32")[0] == 200
    st, b = send(d, None, [3], params={"sequence_id": 8, "sequence_end": True}, dtype="FP32")
    assert st == 200 and b["outputs"][0]["data"] == [6], b
    assert d.metric("tally_sequences_live") == 0
    st, b = send(d, None, [4], params={"sequence_id": 8}, dtype="FP32")
    assert st == 200 and b["outputs"][0]["data"] == [10], b
    assert d.metric("tally_sequence_late_chunks_total") == 1
    assert d.metric("tally_sequences_live") == 0
    # a start takes the id at once
    st, b = send(d, None, [5], params={"sequence_id": 9, "sequence_start": True, "sequence_end": True}, dtype="FP32")
    assert st == 200 and b["outputs"][0]["data"] == [5], b
    time.sleep(0.5)
    st, b = send(d, None, [4], params={"sequence_id": 8}, dtype="FP32")
    assert st == 400 and "not live" in b["error"], b
    d0 = spawn("--sequence-linger-ms", "0")
    assert send(d0, None, [1.0, 2.0], params={"sequence_id": 8, "sequence_start": True, "sequence_end": True}, dtype="FP32")[0] == 200
    st, b = send(d0, None, [4], params={"sequence_id": 8}, dtype="FP32")
    assert st == 400 and "not live" in b["error"], b


def test_sequences_off(spawn):
    d = spawn("--max-sequences", "0")
    st, b = send(d, None, [1.0, 2.0], params={"sequence_id": 1, "sequence_start": True}, dtype="FP32")
    assert st == 400 and "--max-sequences 0" in b["error"], b
    cfg = json.loads(d.request("GET", "/v2/models/cumsum/config")[2])
    assert "sequence_batching" not in cfg
    meta = json.loads(d.request("GET", "/v2")[2])
    assert "sequence" not in meta["extensions"]
    valid_request_works(d)


def test_discovery(spawn):
    d = spawn("--model-sequence-batching")
    cfg = json.loads(d.request("GET", "/v2/models/cumsum/config")[2])
    assert cfg["sequence_batching"] == {"max_sequence_idle_microseconds": 60000000}
    meta = json.loads(d.request("GET", "/v2")[2])
    assert "sequence" in meta["extensions"] and "sequence(string_id)" in meta["extensions"]
    _, c = clients(d, "grpc")
    g = c.get_model_config("cumsum", as_json=True)["config"]
    assert g["sequence_batching"]["max_sequence_idle_microseconds"] == "60000000", g
    assert "sequence(string_id)" in c.get_server_metadata(as_json=True)["extensions"]


def test_the_default_config_has_no_sequence_batching(tallyd):
    # perf_analyzer runs its sequence mode whenever the config has
    # sequence_batching; by default it measures plain requests, and
    # sequences are still taken and advertised as an extension
    cfg = json.loads(tallyd.request("GET", "/v2/models/cumsum/config")[2])
    assert "sequence_batching" not in cfg, cfg
    _, c = clients(tallyd, "grpc")
    assert "sequence_batching" not in c.get_model_config("cumsum", as_json=True)["config"]
    meta = json.loads(tallyd.request("GET", "/v2")[2])
    assert "sequence" in meta["extensions"], meta
    st, b = send(tallyd, None, [1.0, 2.0], params={"sequence_id": 77, "sequence_start": True, "sequence_end": True}, dtype="FP32")
    assert st == 200, b


def test_access_log_carries_the_id(spawn):
    d = spawn("--access-log", "all")
    send(d, None, [1.0, 2.0], params={"sequence_id": "logged \"id\"", "sequence_start": True}, dtype="FP32")
    send(d, None, [1.0, 2.0], params={"sequence_id": 99}, dtype="FP32")  # refused: not live

    def ids():
        return [l.get("sequence_id") for l in d.log_lines() if "sequence_id" in l]
    assert eventually(lambda: sorted(map(str, ids())), ['99', 'logged "id"']) == \
        ['99', 'logged "id"'], d.log()


def test_shared_memory_chunks(spawn):
    d = spawn("--allow-shared-memory")
    c = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
    x = np.arange(1, 9, dtype=np.float32)
    name, key = "seq_region_%d" % os.getpid(), "/tally_seq_%d" % os.getpid()
    h = shm.create_shared_memory_region(name, key, 64)
    try:
        c.register_system_shared_memory(name, key, 64)
        out = []
        for k in range(2):
            shm.set_shared_memory_region(h, [x[4 * k:4 * (k + 1)]])
            i = httpclient.InferInput("x", [4], "FP32")
            i.set_shared_memory(name, 16)
            o = httpclient.InferRequestedOutput("y", binary_data=True)
            o.set_shared_memory(name, 16, offset=32)
            c.infer("cumsum", [i], outputs=[o], sequence_id="shm", sequence_start=k == 0,
                    sequence_end=k == 1)
            out.append(shm.get_contents_as_numpy(h, np.float32, [4], offset=32).copy())
        assert np.concatenate(out).tolist() == np.cumsum(x).tolist()
        c.unregister_system_shared_memory(name)
    finally:
        shm.destroy_shared_memory_region(h)


def test_restart_with_a_state_dir_in_the_middle(spawn, tmp_path):
    state = str(tmp_path)
    rng = rng_for("restart")
    x = random_tensor(rng, "float32", (4, 30))
    xi = random_tensor(rng, "uint8", (3, 20))
    d = spawn("--state-dir", state)
    mod, c = clients(d, "grpc")
    a = infer_numpy(mod, c, np.ascontiguousarray(x[:, :10]), "across", start=True, axis=1)
    ai = infer_numpy(mod, c, xi[:, :7], 55, start=True, axis=1, exclusive=True)
    assert d.stop() == 0
    assert "2 live sequences kept in" in d.log()
    assert os.path.exists(os.path.join(state, "sequences.log"))
    d2 = spawn("--state-dir", state)
    assert "2 sequences loaded" in d2.log()
    mod, c = clients(d2, "grpc")
    b = infer_numpy(mod, c, np.ascontiguousarray(x[:, 10:]), "across", end=True, axis=1)
    bi = infer_numpy(mod, c, xi[:, 7:], 55, end=True, axis=1, exclusive=True)
    assert close(np.concatenate([a, b], axis=1), cumsum(x, 1), x, 1)
    assert np.array_equal(np.concatenate([ai, bi], axis=1), cumsum(xi, 1, exclusive=True))
    assert d2.stop() == 0
    assert "0 live sequences kept in" in d2.log()


_TWO_RECORDS = {}


def two_records(spawn, state):
    """A log of two sequences' starts, tallyd stopped, in state: its bytes.
    Nine tests damage a copy of it: one made by a tallyd within the last
    20 s is copied (the records hold their idle deadline, 60 s after their
    chunk by default, and a later start drops a sequence past it)."""
    path = os.path.join(state, "sequences.log")
    made = _TWO_RECORDS.get("at")
    if made is None or time.monotonic() - made > 20:
        d = spawn("--state-dir", state)
        send(d, None, [1.0, 2.0], params={"sequence_id": "first", "sequence_start": True}, dtype="FP32")
        send(d, None, [1.0, 2.0], params={"sequence_id": "second", "sequence_start": True}, dtype="FP32")
        assert d.stop() == 0
        _TWO_RECORDS["bytes"] = open(path, "rb").read()
        _TWO_RECORDS["at"] = time.monotonic()
    else:
        open(path, "wb").write(_TWO_RECORDS["bytes"])
    return bytearray(_TWO_RECORDS["bytes"])


@pytest.mark.parametrize("damage", ["flipped", "header"])
def test_a_damaged_log_stops_the_start(spawn, tmp_path, damage):
    state = str(tmp_path)
    data = two_records(spawn, state)
    path = os.path.join(state, "sequences.log")
    if damage == "flipped":
        data[40] ^= 0x40  # inside the first record's payload
    else:
        data[8] = 9  # the first record's flags: its header's check fails
    open(path, "wb").write(bytes(data))
    with pytest.raises(RuntimeError) as e:
        Daemon("--state-dir", state)
    assert "sequences.log" in str(e.value) and "at byte 0" in str(e.value), e.value
    assert "does not start" in str(e.value), e.value
    # the file is left for its owner to look at
    assert os.path.exists(path)


ROOM = 4 << 20  # the zeros tallyd allocates ahead of its records


@pytest.mark.parametrize("room", [False, True], ids=["cut", "in-room"])
@pytest.mark.parametrize("cut", [1, 11, 30])
def test_a_torn_last_record_is_dropped(spawn, tmp_path, cut, room):
    """A crash in the middle of the last record's write: that record was
    never answered; it is dropped, and the one before it kept. The file
    ends where the write stopped, or (a crash leaves the room tallyd
    allocates ahead) in zeros where the rest of the record was to go."""
    state = str(tmp_path)
    data = two_records(spawn, state)
    if room:
        # zeros where the cut bytes were: when those were zeros already (the
        # record's check ends in a zero byte one time in 256), the file is
        # whole, so the cut reaches back to the last byte that is not zero
        while not any(data[len(data) - cut:]):
            cut += 1
    kept = bytes(data[:len(data) - cut])
    if room:
        kept += bytes(ROOM - len(kept))
    open(os.path.join(state, "sequences.log"), "wb").write(kept)
    d = spawn("--state-dir", state)
    assert "cut short by a crash" in d.log(), d.log()
    assert send(d, None, [1.0, 2.0], params={"sequence_id": "first"}, dtype="FP32")[0] == 200
    st, b = send(d, None, [1.0, 2.0], params={"sequence_id": "second"}, dtype="FP32")
    assert st == 400 and "not live" in b["error"], b


def test_the_room_after_the_records_is_not_a_record(spawn, tmp_path):
    """A log whose writer was killed keeps the zeros allocated after its
    records: both sequences come back, and nothing is called torn."""
    state = str(tmp_path)
    data = two_records(spawn, state)
    open(os.path.join(state, "sequences.log"), "wb").write(bytes(data) + bytes(ROOM))
    d = spawn("--state-dir", state)
    assert "cut short" not in d.log(), d.log()
    assert send(d, None, [1.0, 2.0], params={"sequence_id": "first"}, dtype="FP32")[0] == 200
    assert send(d, None, [1.0, 2.0], params={"sequence_id": "second"}, dtype="FP32")[0] == 200
    # a clean stop cuts the room off: the file is its records
    assert d.stop() == 0
    size = os.path.getsize(os.path.join(state, "sequences.log"))
    assert 0 < size < ROOM, size


def test_an_empty_log_starts_empty(spawn, tmp_path):
    open(os.path.join(str(tmp_path), "sequences.log"), "wb").close()
    d = spawn("--state-dir", str(tmp_path))
    st, b = send(d, None, [1.0, 2.0], params={"sequence_id": "nothing"}, dtype="FP32")
    assert st == 400 and "not live" in b["error"], b


def test_a_state_dir_that_cannot_be_written_stops_the_start(tmp_path):
    with pytest.raises(RuntimeError) as e:
        Daemon("--state-dir", str(tmp_path / "missing"))
    assert "--state-dir" in str(e.value) and "No such file" in str(e.value), e.value


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("proto", [["-i", "http"], ["-i", "grpc"], ["-i", "grpc", "--streaming"]],
                         ids=["http", "grpc", "grpc-streaming"])
def test_perf_analyzer_sequence_mode(spawn, proto):
    d = spawn("--model-sequence-batching")
    exe, env = perf_analyzer_bin()
    port = d.port if proto[1] == "http" else d.grpc_port
    # Sequences longer than the run: each of the four starts at the
    # beginning, and the run's end sends their last chunks. (A sequence
    # that starts as a run ends can have its last chunk overtake its first
    # on another connection over -i http; that chunk is refused, as
    # Triton refuses it: docs/kserve.md. Long sequences keep the test
    # about what tally controls.)
    r = subprocess.run([exe, "-m", "cumsum", "-u", "127.0.0.1:%d" % port] + proto +
                       ["--shape", "x:500", "--concurrency-range", "4",
                        "--sequence-length", "100000", "--sequence-length-variation", "0",
                        "--sequence-id-range", "1:64"] + pa_count_windows(200),
                       capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out + d.log()
    assert "Sequence count" in out, out
    started = d.metric("tally_sequences_total", event="started")
    ended = d.metric("tally_sequences_total", event="ended")
    assert started == 4 and ended == 4, out
    # As a run ends, perf_analyzer sends each open sequence's last chunk
    # without waiting for the chunk before it; over -i http the last may
    # arrive first, and the one before it is taken late (the ended
    # sequence lingers, --sequence-linger-ms): nothing is refused
    assert "had error" not in out, out
    assert d.metric("tally_sequence_refusals_total") == 0, out
    assert d.metric("tally_request_failures_total") == 0, d.request("GET", "/metrics")[2].decode()


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("mode", ["--async", "--sync"])
@pytest.mark.parametrize("concurrency", [16, 32])
def test_perf_analyzer_sequence_mode_over_http_ends(spawn, concurrency, mode):
    # perf_analyzer 2.51 processes each time window's records in a time
    # that grows with them (its ValidLatencyMeasurement erases them one by
    # one, and copies each): over HTTP at high concurrency a window's
    # processing outlasts the window, and a run over time windows never
    # ends. docs/kserve.md gives lines that do end; this runs the HTTP one,
    # over three count windows (pa_count_windows says why not
    # --request-count), to its measurement. Its sequences are longer than
    # the run, so that none starts as the run ends: such a sequence's last
    # chunk can overtake its first on another connection and be refused
    # (docs/kserve.md).
    #
    # One HTTP thread: the run ends only while perf_analyzer's main thread
    # keeps up with its records, which it does not on two cores beside a
    # tallyd with several HTTP threads at about 30,000 answers a second
    # (with 4, 12 --sync runs of 12 never ended in 40 s; with 1, every one
    # ended in 4 to 7 s, beside two busy loops too: BENCHMARKS.md,
    # "perf_analyzer's sequence mode over HTTP on two cores").
    d = spawn("--model-sequence-batching", "--http-threads", "1")
    exe, env = perf_analyzer_bin()
    r = subprocess.run([exe, "-m", "cumsum", "-u", "127.0.0.1:%d" % d.port, "-i", "http", mode,
                        "--shape", "x:16", "--concurrency-range", str(concurrency),
                        "--sequence-length", "100000", "--sequence-length-variation", "0",
                        "--sequence-id-range", "1:100000"] + pa_count_windows(1000),
                       capture_output=True, text=True, env=env, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out + d.log()
    assert "Throughput:" in out and "Sequence count" in out, out
    assert d.metric("tally_sequences_total", event="started") == concurrency, out
    assert d.metric("tally_sequences_total", event="ended") == concurrency, out
    assert d.metric("tally_sequence_refusals_total") == 0, out
    assert d.metric("tally_request_failures_total") == 0, d.request("GET", "/metrics")[2].decode()
