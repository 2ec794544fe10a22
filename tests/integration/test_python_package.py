"""client/python, the `tally` package, installed with pip and used against
real daemons: every dtype, axis and flag against numpy, the DirectML
strided form, replicas with failover, tokens, errors that carry the
server's message and status, and shared memory for a local server (used
when allowed, the socket with one note when refused).

Random inputs come from a seed printed with the test (TALLY_SEED replays
it)."""
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import Daemon, dead_port, install_python_package
from reference import DTYPES, close, cumsum, random_tensor

install_python_package()
import tally  # noqa: E402


@pytest.fixture(scope="module")
def rng():
    seed = int(os.environ.get("TALLY_SEED", random.randrange(1 << 32)))
    print("test_python_package: seed %d (replay with TALLY_SEED=%d)" % (seed, seed))
    return np.random.default_rng(seed)


@pytest.fixture(scope="module")
def shm_daemon():
    d = Daemon("--allow-shared-memory")
    yield d
    d.cleanup()


def url(d):
    return "http://127.0.0.1:%d" % d.port


def test_installed_and_typed():
    path = install_python_package()
    assert tally.__file__.startswith(path), tally.__file__
    assert os.path.exists(os.path.join(path, "tally", "py.typed"))
    assert tally.Client.cumsum.__doc__ and tally.TallyError.__doc__


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_axis_and_flag(tallyd, rng, dtype):
    c = tally.Client(url(tallyd), shm=False)
    for rank in (1, 2, 3):
        shape = tuple(int(n) for n in rng.integers(1, 30, rank))
        x = random_tensor(rng, dtype, shape)
        for axis in range(-rank, rank):
            for exclusive in (False, True):
                for reverse in (False, True):
                    y = c.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse)
                    want = cumsum(x, axis=axis % rank, exclusive=exclusive, reverse=reverse)
                    assert y.dtype == x.dtype and y.shape == x.shape
                    assert close(y, want, x, axis=axis % rank), (dtype, shape, axis)
    # views, big-endian and empty arrays
    x = np.arange(24, dtype=">i8").reshape(4, 6)[:, ::2]
    assert np.array_equal(c.cumsum(x, axis=1), np.cumsum(x, axis=1))
    assert c.cumsum(np.empty((0, 3), np.float32)).shape == (0, 3)


def test_strided_form(tallyd):
    """A column-major buffer summed along axis 1 (docs/api.md's binary DirectML
    example), answered row-major; and an output layout of its own."""
    c = tally.Client(url(tallyd), shm=False)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = np.ascontiguousarray(x.T).reshape(-1)  # column-major
    y = c.cumsum_strided(buf, [3, 4], axis=1, in_strides=[1, 3])
    assert np.array_equal(y.reshape(3, 4), np.cumsum(x, axis=1))
    y = c.cumsum_strided(buf, [3, 4], axis=0, in_strides=[1, 3], out_strides=[1, 3],
                         reverse=True)
    assert np.array_equal(y.reshape(4, 3).T, np.flip(np.cumsum(np.flip(x, 0), 0), 0))


def test_replicas_fail_over(tallyd):
    dead = "http://127.0.0.1:%d" % dead_port()
    c = tally.Client([dead, url(tallyd)], shm=False)
    for _ in range(4):  # whichever the rotation starts with
        assert np.array_equal(c.cumsum(np.arange(5)), np.cumsum(np.arange(5)))
    with pytest.raises(tally.TallyError) as e:
        tally.Client([dead], shm=False).cumsum(np.arange(5))
    assert e.value.status == 0 and "no tally replica answered" in str(e.value)


def test_errors_carry_the_servers_message(tallyd):
    c = tally.Client(url(tallyd), shm=False)
    with pytest.raises(TypeError, match="no dtype bool"):
        c.cumsum(np.ones(3, bool))
    with pytest.raises(ValueError, match="out of range"):
        c.cumsum(np.ones((2, 2)), axis=2)
    with pytest.raises(tally.TallyError) as e:
        c.cumsum_strided(np.ones(4, np.float32), [2, 2], in_strides=[0, 0], out_strides=[0, 0])
    assert e.value.status == 400 and "OutputTensor" in e.value.message
    assert e.value.url == url(tallyd)
    with pytest.raises(ValueError):
        tally.Client("ftp://x")
    assert c.ready() and c.metadata()["name"] == "tally"


def test_tokens(spawn, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("py-token\n")
    d = spawn("--auth-token-file", str(tokens))
    with pytest.raises(tally.TallyError) as e:
        tally.Client(url(d), shm=False).cumsum(np.arange(3))
    assert e.value.status == 401 and "token" in e.value.message
    y = tally.Client(url(d), token="py-token", shm=False).cumsum(np.arange(3))
    assert np.array_equal(y, [0, 1, 3])


def test_shared_memory_for_a_local_server(shm_daemon, rng):
    # this process's regions (the package names them tally-py-PID-...):
    # other tests' processes make and remove theirs meanwhile
    mine = "tally-py-%d-" % os.getpid()
    shm_objects = lambda: sorted(f for f in os.listdir("/dev/shm") if f.startswith(mine))
    before = shm_objects()
    with tally.Client(url(shm_daemon)) as c:
        for dtype in ("float32", "int64", "uint8", "float16"):
            x = random_tensor(rng, dtype, (50, 300))
            y = c.cumsum(x, axis=1, exclusive=True)
            assert close(y, cumsum(x, axis=1, exclusive=True), x, axis=1), dtype
        big = random_tensor(rng, "float64", (1 << 17,))  # grows the region
        assert close(c.cumsum(big), cumsum(big), big)
        assert len(shm_objects()) == len(before) + 1
    # the tensors went through the region: the shm routes and KServe
    # inference were used, the native route not at all
    assert shm_daemon.metric("tally_requests_total", route="infer", code="200") >= 5
    assert shm_daemon.metric("tally_requests_total", route="native") == 0
    assert shm_objects() == before  # close() removed it
    st, _, body = shm_daemon.request("GET", "/v2/systemsharedmemory/status")
    assert st == 200 and body == b"[]"


def test_shared_memory_refused_falls_back_to_the_socket(tallyd):
    """A server without --allow-shared-memory: one note on stderr, then the
    socket. Run in a process of its own to read its stderr."""
    code = ("import numpy as np, tally\n"
            "c = tally.Client(%r)\n"
            "for _ in range(3): assert list(c.cumsum(np.arange(4))) == [0, 1, 3, 6]\n"
            "try:\n"
            "    tally.Client(%r, shm=True).cumsum(np.arange(4))\n"
            "except tally.TallyError as e:\n"
            "    assert e.status == 403, e\n"
            "else:\n"
            "    raise SystemExit('shm=True did not raise')\n") % (url(tallyd), url(tallyd))
    env = dict(os.environ, PYTHONPATH=install_python_package())
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("does not take shared memory") == 1, r.stderr
    assert "--allow-shared-memory" in r.stderr


@pytest.mark.parametrize("dtype", ["float32", "int16", "float16"])
def test_sequence_keeps_the_running_sum(tallyd, rng, dtype):
    x = random_tensor(rng, dtype, (3, 40))
    c = tally.Client(url(tallyd), shm=False)
    parts = []
    with c.sequence(axis=1, exclusive=True) as s:
        for k in range(0, 40, 15):
            parts.append(s.cumsum(x[:, k:k + 15]))
    got = np.concatenate(parts, axis=1)
    assert got.dtype == x.dtype and close(got, cumsum(x, 1, exclusive=True), x, 1)
    # leaving the block ended it (with an empty chunk 4): a chunk after the
    # end is refused
    st, _, body = tallyd.request(
        "POST", "/v1/cumsum?dtype=%s&shape=3,1&axis=1&exclusive=true&sequence_chunk=5"
        "&sequence_id=%s" % (dtype, s.sequence_id), np.zeros(3, dtype).tobytes(),
        {"Content-Type": "application/octet-stream"})
    assert st == 409 and b"ended at chunk 4" in body, body


def test_sequence_last_chunk_reverse_and_ids(tallyd):
    c = tally.Client(url(tallyd), shm=False)
    x = np.arange(1, 11, dtype=np.int64)
    with c.sequence(reverse=True, sequence_id=777001) as s:
        b = s.cumsum(x[5:])
        a = s.cumsum(x[:5], last=True)
    assert np.concatenate([a, b]).tolist() == np.cumsum(x[::-1])[::-1].tolist()
    with pytest.raises(ValueError):
        c.sequence(sequence_id="123")
    with pytest.raises(ValueError):
        c.sequence(sequence_id="x" * 129)
    with pytest.raises(ValueError):
        c.sequence(sequence_id=0)
    # a chunk unlike the first is refused with the server's words, and the
    # sequence goes on
    with c.sequence() as s:
        s.cumsum(np.ones(3, np.int32))
        with pytest.raises(tally.TallyError) as e:
            s.cumsum(np.ones(3, np.float32))
        assert e.value.status == 400 and "int32" in str(e.value)
        assert s.cumsum(np.ones(2, np.int32)).tolist() == [4, 5]


def test_sequence_retries_a_chunk_whose_answer_was_lost(tallyd):
    """A proxy drops the answer to the second chunk (it closes the
    connection once tallyd has answered): the client sends the chunk again
    with its number, and tallyd answers it again without adding it."""
    import socket
    import threading
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    port = lsock.getsockname()[1]
    seen = {"requests": 0}

    def serve(conn):
        up = socket.create_connection(("127.0.0.1", tallyd.port))
        try:
            while True:
                req = b""
                while b"\r\n\r\n" not in req:
                    b = conn.recv(65536)
                    if not b:
                        return
                    req += b
                head, _, body = req.partition(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                while len(body) < n:
                    body += conn.recv(65536)
                up.sendall(head + b"\r\n\r\n" + body)
                resp = b""
                while b"\r\n\r\n" not in resp:
                    resp += up.recv(65536)
                rhead, _, rbody = resp.partition(b"\r\n\r\n")
                m = 0
                for line in rhead.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        m = int(line.split(b":")[1])
                while len(rbody) < m:
                    rbody += up.recv(65536)
                seen["requests"] += 1
                if seen["requests"] == 2:
                    return  # tallyd answered chunk 2; the client never hears it
                conn.sendall(rhead + b"\r\n\r\n" + rbody)
        finally:
            conn.close()
            up.close()

    def accept():
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        before = tallyd.metric("tally_sequence_numbered_chunks_total", outcome="repeat")
        c = tally.Client("http://127.0.0.1:%d" % port, shm=False)
        x = np.arange(1, 9, dtype=np.int64)
        with c.sequence(sequence_id="lost-answer") as s:
            got = [s.cumsum(x[0:3]), s.cumsum(x[3:5]), s.cumsum(x[5:8], last=True)]
        assert np.concatenate(got).tolist() == np.cumsum(x).tolist()
        assert seen["requests"] == 4, seen
        assert tallyd.metric("tally_sequence_numbered_chunks_total",
                             outcome="repeat") - before == 1
    finally:
        lsock.close()


def test_sequence_stays_on_one_replica(spawn):
    """Two replicas: every chunk of a sequence reaches the one its id
    hashes to (the other would refuse a chunk it never saw start)."""
    a, b = spawn(), spawn()
    c = tally.Client([url(a), url(b)], shm=False)
    for i in range(6):
        with c.sequence(sequence_id="replica-%d" % i) as s:
            assert s.cumsum(np.arange(3)).tolist() == [0, 1, 3]
            assert s.cumsum(np.arange(3)).tolist() == [3, 4, 6]
    started = a.metric("tally_sequences_total", event="started") + \
        b.metric("tally_sequences_total", event="started")
    assert started == 6
    assert a.metric("tally_sequence_refusals_total") == 0
    assert b.metric("tally_sequence_refusals_total") == 0


def test_one_home_replica_for_every_client(spawn, tmp_path):
    """Without a shared store, Python, libtally and the tally CLI send a
    sequence's chunks to the same replica (FNV-1a of the id's text,
    tally.client.home_replica): on three replicas, a sequence Python
    starts goes on and ends through the CLI (libtally), and one the CLI
    starts lands on the replica Python's function names; no refusal."""
    cli = os.environ.get("TALLY_CLI", os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "build", "bin", "tally"))
    ds = [spawn(), spawn(), spawn()]
    urls = [url(d) for d in ds]
    c = tally.Client(urls, shm=False)
    x = tmp_path / "x.npy"
    np.save(x, np.array([10, 20], np.int64))

    def started():
        return [d.metric("tally_sequences_total", event="started") for d in ds]

    def cli_chunk(sid, out, *flags):
        r = subprocess.run([cli, "cumsum"] + [w for u in urls for w in ("--url", u)] +
                           ["--sequence-id", sid] + list(flags) + [str(x), str(out)],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, (sid, flags, r.stderr)
        return np.load(out).tolist()

    homes = set()
    for i in range(12):
        sid = "home-%d" % i
        home = tally.client.home_replica(sid, len(urls))
        homes.add(home)
        want = [1 if k == home else 0 for k in range(3)]
        before = started()
        s = c.sequence(sequence_id=sid)
        assert s.cumsum(np.array([1, 2], np.int64)).tolist() == [1, 3]
        assert [a - b for a, b in zip(started(), before)] == want, (sid, home)
        y = tmp_path / ("y%d.npy" % i)
        assert cli_chunk(sid, y, "--sequence-chunk", "2") == [13, 33], sid
        assert cli_chunk(sid, y, "--sequence-chunk", "3", "--sequence-end") == [43, 63], sid
        s.abandon()
        sid = "cli-home-%d" % i
        home = tally.client.home_replica(sid, len(urls))
        before = started()
        assert cli_chunk(sid, y, "--sequence-start", "--sequence-end") == [10, 30], sid
        assert [a - b for a, b in zip(started(), before)] == \
            [1 if k == home else 0 for k in range(3)], (sid, home)
    assert homes == {0, 1, 2}  # the ids reach every replica
    for d in ds:
        assert d.metric("tally_sequence_refusals_total") == 0
