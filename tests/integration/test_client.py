"""libtally and the `tally` CLI against real daemons.

The library's own cases live in tests/test_client.c (build/bin/test_client);
this file starts the servers they need and runs each case with their URLs
in its environment. The CLI is driven as a user would, its .npy files
checked with numpy.

Environment (set by `make test-integration`):
  TALLY_CLI          build/bin/tally
  TALLY_TEST_CLIENT  build/bin/test_client
  TALLY_EXAMPLE      build/bin/example_cumsum
"""
import http.server
import io
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import ROOT, Daemon, dead_port
from reference import DTYPES, close, cumsum

BUILD = os.path.join(ROOT, "build", "bin")
CLI = os.environ.get("TALLY_CLI", os.path.join(BUILD, "tally"))
TEST_CLIENT = os.environ.get("TALLY_TEST_CLIENT", os.path.join(BUILD, "test_client"))
EXAMPLE = os.environ.get("TALLY_EXAMPLE", os.path.join(BUILD, "example_cumsum"))


def url(d):
    return "http://127.0.0.1:%d" % d.port


@pytest.fixture(scope="module")
def second():
    d = Daemon()
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def small():
    """A daemon that takes bodies up to 1 MiB."""
    d = Daemon("--max-body-bytes", "1048576")
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def busy():
    """A daemon that turns most concurrent requests away: one slow worker
    and room for one waiting job."""
    d = Daemon("--workers", "1", "--queue-depth", "1", "--max-batch", "1",
               "--inline-max-elements", "0", "--json-inline-max-elements", "0",
               "--fault-delay-ms", "100")
    yield d
    d.cleanup()


class NotTally(http.server.BaseHTTPRequestHandler):
    """Answers 200 with a web page to everything."""

    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"<html><body>hello</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def fake():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotTally)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def requests_served(d):
    return d.metric("tally_requests_total", route="native")


def run_case(name, env):
    """Runs one test_client case; returns its process id (its regions in
    /dev/shm are named after it)."""
    full = dict(os.environ)
    full.update(env)
    r = run([TEST_CLIENT, name], env=full, timeout=600)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, "%s failed:\n%s%s" % (name, out, err)
    assert "ok   %s" % name in out + err
    return r.pid


def run(cmd, input=None, env=None, timeout=120):
    """subprocess.run's result, with the process id as .pid."""
    with subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else None,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as p:
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
        r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
        r.pid = p.pid
        return r


# ---------------------------------------------------------------- library

@pytest.mark.parametrize("name", ["codes_and_dtypes", "bad_arguments", "npy_files"])
def test_library_offline(name):
    run_case(name, {})


@pytest.mark.parametrize("name", ["every_dtype", "in_place", "strided", "batch", "threads",
                                  "http"])
def test_library(tallyd, name):
    run_case(name, {"TALLY_URL": url(tallyd)})


@pytest.mark.slow
@pytest.mark.concurrency
def test_library_split_over_two_servers(tallyd, second):
    before = requests_served(tallyd), requests_served(second)
    run_case("split", {"TALLY_URL": url(tallyd), "TALLY_URL2": url(second)})
    # both servers took a share of the chunks
    assert requests_served(tallyd) - before[0] > 100
    assert requests_served(second) - before[1] > 100


def test_library_refused_and_not_tally(tallyd, fake):
    run_case("refused", {"TALLY_URL": url(tallyd), "TALLY_FAKE_URL": fake,
                         "TALLY_DEAD_URL": "http://127.0.0.1:%d" % dead_port()})


def test_library_sequence_home(tallyd):
    """A sequence's chunks stay on their id's home URL unless the servers
    share a store (TALLYOPT_SHARED_STATE), and a failed chunk is the only
    one its sequence may send next (tally.h)."""
    run_case("sequence_home", {"TALLY_URL": url(tallyd),
                               "TALLY_DEAD_URL": "http://127.0.0.1:%d" % dead_port()})


def test_library_too_large(small):
    run_case("too_large", {"TALLY_SMALL_URL": url(small)})


@pytest.fixture(scope="module")
def shm_daemon():
    """A daemon that takes tensors in shared memory."""
    d = Daemon("--allow-shared-memory")
    yield d
    d.cleanup()


def shm_objects(pid):
    """The regions process pid made that are still in /dev/shm (libtally
    names them tally-PID-...): other tests' processes make and remove
    theirs meanwhile."""
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith("tally-%d-" % pid))


def test_library_shared_memory(tallyd, shm_daemon):
    pid = run_case("shm", {"TALLY_SHM_URL": url(shm_daemon), "TALLY_URL": url(tallyd)})
    assert shm_objects(pid) == []  # every region it made is gone


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "float16"])
def test_cli_shm(tallyd, shm_daemon, tmp_path, dtype):
    """--shm through a daemon that allows it (its regions counted in
    /metrics, nothing left in /dev/shm), and the fallback to the socket,
    with a note, through one that does not."""
    rng = np.random.default_rng(11)
    x = (rng.random((40, 300)) * 100).astype(dtype)
    np.save(tmp_path / "x.npy", x)
    r = tally("cumsum", "--url", url(shm_daemon), "--shm", "--axis", "1",
              tmp_path / "x.npy", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr.decode()
    assert "note" not in r.stderr.decode(), r.stderr.decode()
    assert close(np.load(tmp_path / "y.npy"), cumsum(x, axis=1), x, axis=1)
    # a request is counted as it ends, just after its answer went out: the
    # client may read the unregister's answer, exit and have /metrics
    # asked (on another connection, maybe another HTTP thread) first
    deadline = time.time() + 5
    while shm_daemon.metric("tally_requests_total", route="shared_memory",
                            code="200") < 2:
        assert time.time() < deadline, "the region's register and unregister not counted"
        time.sleep(0.02)
    assert shm_objects(r.pid) == []
    r = tally("cumsum", "--url", url(tallyd), "--shm", "--axis", "1",
              tmp_path / "x.npy", tmp_path / "z.npy")
    assert r.returncode == 0, r.stderr.decode()
    assert "note: no shared memory" in r.stderr.decode() and "--allow-shared-memory" in r.stderr.decode()
    assert close(np.load(tmp_path / "z.npy"), cumsum(x, axis=1), x, axis=1)
    assert shm_objects(r.pid) == []


def test_cli_shm_remote_url_uses_the_socket(tmp_path):
    x = np.arange(10, dtype=np.int32)
    np.save(tmp_path / "x.npy", x)
    r = tally("cumsum", "--url", "http://192.0.2.1:9", "--shm", "--connect-timeout-ms", "200",
              "--retries", "0", tmp_path / "x.npy", tmp_path / "y.npy")
    assert "is not on this machine" in r.stderr.decode(), r.stderr.decode()
    assert r.returncode != 0  # nothing listens there


class StoreFailed(http.server.BaseHTTPRequestHandler):
    """Answers every request as tallyd does when a sequence's store failed
    after its write may have landed (503 STORE), counting the requests."""

    posts = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        StoreFailed.posts.append(self.path)
        body = json.dumps({"error": "sequence \"s\": its new state could not be written "
                                    "to Redis (timed out waiting for Redis's answer); the "
                                    "chunk may or may not have been added"}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_an_unnumbered_chunk_is_not_sent_again_after_a_503(tmp_path):
    """A 503 or a broken connection may come after the server added a
    chunk: libtally (through the CLI) sends a numbered chunk again, which
    the server answers once, and an unnumbered one never (sent again, it
    would be added twice)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StoreFailed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        np.save(tmp_path / "x.npy", np.arange(4, dtype=np.int64))
        where = "http://127.0.0.1:%d" % server.server_address[1]
        for numbered, attempts in ((False, 1), (True, 4)):
            StoreFailed.posts = []
            extra = ("--sequence-chunk", "1", "--sequence-start") if numbered else ()
            r = tally("cumsum", "--url", where, "--sequence-id", "s", "--retries", "3",
                      *extra, tmp_path / "x.npy", tmp_path / "y.npy")
            assert r.returncode != 0 and "503" in r.stderr.decode(), r.stderr.decode()
            assert len(StoreFailed.posts) == attempts, (numbered, StoreFailed.posts)
    finally:
        server.shutdown()


@pytest.mark.slow
@pytest.mark.concurrency
def test_library_busy_retries(busy):
    run_case("busy", {"TALLY_BUSY_URL": url(busy)})
    # the retries were real: the server answered 503 along the way
    assert sum(1 for line in busy.log_lines() if line.get("status") == 503) > 0


def connections_opened(d):
    _, _, body = d.request("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("tally_connections_opened_total "):
            return int(line.split()[1])
    raise AssertionError("no tally_connections_opened_total in /metrics")


@pytest.mark.concurrency
def test_library_keeps_connections_alive(tallyd):
    before = connections_opened(tallyd)
    r = tally("bench", "--url", url(tallyd), "--count", "200", "--concurrency", "2",
              "--shape", "100", "--quiet")
    assert r.returncode == 0, r.stderr
    # two clients, one connection each, for 200 requests (the /metrics
    # reads open one each)
    assert connections_opened(tallyd) - before <= 3


def test_example(tallyd):
    r = subprocess.run([EXAMPLE, url(tallyd)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "row 0: 3 4 8 9\nrow 1: 5 14 16 22\nafter: 3.375 3.125 3 2 0\n"
    r = subprocess.run([EXAMPLE, "http://127.0.0.1:%d" % dead_port()], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "could not connect" in r.stderr


# ---------------------------------------------------------------- CLI

def tally(*args, input=None, env=None, timeout=120):
    full = dict(os.environ)
    full.pop("TALLY_URL", None)
    full.update(env or {})
    return run([CLI] + [str(a) for a in args], input=input, env=full, timeout=timeout)


def npy_bytes(x):
    buf = io.BytesIO()
    np.save(buf, x)
    return buf.getvalue()


def random_tensor(rng, dtype, rank):
    shape = tuple(int(s) for s in rng.integers(1, 9, size=rank))
    if np.dtype(dtype).kind == "f":
        return (rng.random(shape) - 0.5).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cli_npy_round_trip(tallyd, tmp_path, dtype):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    for rank in (1, 2, 3, 4):
        x = random_tensor(rng, dtype, rank)
        axis = int(rng.integers(-rank, rank))
        exclusive, reverse = bool(rng.integers(2)), bool(rng.integers(2))
        np.save(tmp_path / "x.npy", x)
        args = ["cumsum", "--url", url(tallyd), "--axis", axis, tmp_path / "x.npy",
                tmp_path / "y.npy"]
        if exclusive:
            args.insert(1, "--exclusive")
        if reverse:
            args.insert(1, "--reverse")
        r = tally(*args)
        assert r.returncode == 0, "seed %d: %s" % (seed, r.stderr.decode())
        y = np.load(tmp_path / "y.npy")
        want = cumsum(x, axis, exclusive, reverse)
        assert y.dtype == x.dtype and y.shape == x.shape
        assert close(y, want, x, axis), "seed %d rank %d axis %d" % (seed, rank, axis)


def test_cli_stdin_stdout_and_odd_layouts(tallyd):
    x = np.arange(24, dtype=">i4").reshape(2, 3, 4)  # big-endian
    r = tally("cumsum", "--url", url(tallyd), "--axis", "1", "-", "-", input=npy_bytes(x))
    assert r.returncode == 0, r.stderr
    y = np.load(io.BytesIO(r.stdout))
    assert y.dtype == np.dtype("<i4")
    assert np.array_equal(y, np.cumsum(x, axis=1))
    f = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    r = tally("cumsum", "--url", url(tallyd), "--axis", "-1", "--direction", "decreasing",
              "-", "-", input=npy_bytes(f))
    assert r.returncode == 0, r.stderr
    y = np.load(io.BytesIO(r.stdout))
    assert np.array_equal(y, np.flip(np.cumsum(np.flip(f, 1), axis=1), 1))


def test_cli_bfloat16(tallyd):
    one = 0x3F80  # bfloat16 bits of 1.0
    x = np.array([one, one, one, one], dtype=np.uint16)
    r = tally("cumsum", "--url", url(tallyd), "--dtype", "bfloat16", "-", "-",
              input=npy_bytes(x))
    assert r.returncode == 0, r.stderr
    y = np.load(io.BytesIO(r.stdout))
    assert y.dtype == np.uint16
    assert y.tolist() == [0x3F80, 0x4000, 0x4040, 0x4080]  # 1, 2, 3, 4


def test_cli_json_and_raw(tallyd, tmp_path):
    doc = {"dtype": "uint64", "shape": [2, 2], "data": [18446744073709551615, 1, 2, 3]}
    (tmp_path / "x.json").write_text(json.dumps(doc))
    r = tally("cumsum", "--url", url(tallyd), "--axis", "0", tmp_path / "x.json",
              tmp_path / "y.json")
    assert r.returncode == 0, r.stderr
    out = json.loads((tmp_path / "y.json").read_text())
    assert out == {"dtype": "uint64", "shape": [2, 2], "data": [18446744073709551615, 1, 1, 4]}
    r = tally("cumsum", "--url", url(tallyd), "--format", "json", "--axis", "1", "--exclusive",
              "-", "-", input=json.dumps(doc).encode())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["data"] == [0, 18446744073709551615, 0, 2]
    # the document's own parameters, and a clash with the command line's
    doc["axis"] = 1
    r = tally("cumsum", "--url", url(tallyd), "--format", "json", "-", "-",
              input=json.dumps(doc).encode())
    assert r.returncode == 0 and json.loads(r.stdout)["data"] == [18446744073709551615, 0, 2, 5]
    r = tally("cumsum", "--url", url(tallyd), "--format", "json", "--axis", "0", "-", "-",
              input=json.dumps(doc).encode())
    assert r.returncode == 1 and b"axis" in r.stderr and b"twice" in r.stderr

    x = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.int16)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    r = tally("cumsum", "--url", url(tallyd), "--format", "raw", "--dtype", "int16",
              "--shape", "2,3", "--axis", "1", tmp_path / "x.bin", tmp_path / "y.bin")
    assert r.returncode == 0, r.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype=np.int16).reshape(2, 3)
    assert np.array_equal(y, np.cumsum(x, axis=1, dtype=np.int16))
    r = tally("cumsum", "--url", url(tallyd), "--format", "raw", "--dtype", "int16",
              "--shape", "2,4", tmp_path / "x.bin", tmp_path / "y.bin")
    assert r.returncode == 2 and b"12 bytes" in r.stderr and b"16" in r.stderr


def test_cli_strides(tallyd, tmp_path):
    """--strides and --out-strides: raw buffers laid out as DirectML says."""
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    (tmp_path / "cm.bin").write_bytes(x.T.tobytes())  # column-major
    base = ["cumsum", "--url", url(tallyd), "--format", "raw", "--dtype", "float32",
            "--shape", "2,3", "--axis", "1"]
    r = tally(*base, "--strides", "1,2", tmp_path / "cm.bin", tmp_path / "y.bin")
    assert r.returncode == 0, r.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype=np.float32)
    assert y.tolist() == np.cumsum(x, axis=1).ravel().tolist()
    # the answer column-major too, and padded rows with holes left at 0
    r = tally(*base, "--strides", "1,2", "--out-strides", "1,2", tmp_path / "cm.bin",
              tmp_path / "y.bin")
    assert r.returncode == 0, r.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype=np.float32)
    assert y.tolist() == np.cumsum(x, axis=1).T.ravel().tolist()
    r = tally(*base, "--strides", "1,2", "--out-strides", "4,1", tmp_path / "cm.bin",
              tmp_path / "y.bin")
    assert r.returncode == 0, r.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype=np.float32)
    assert y.tolist() == [1, 3, 6, 0, 4, 9, 15]
    # refusals
    r = tally(*base, "--strides", "1", tmp_path / "cm.bin", tmp_path / "y.bin")
    assert r.returncode == 2 and b"one number per dimension" in r.stderr
    r = tally(*base, "--out-strides", "1,1", tmp_path / "cm.bin", tmp_path / "y.bin")
    assert r.returncode == 2 and b"share an address" in r.stderr
    r = tally(*base, "--strides", "1,3", tmp_path / "cm.bin", tmp_path / "y.bin")
    assert r.returncode == 2 and b"24 bytes" in r.stderr and b"address 32" in r.stderr
    r = tally("cumsum", "--url", url(tallyd), "--strides", "1,2", tmp_path / "cm.bin",
              tmp_path / "y.npy")
    assert r.returncode == 2 and b"--format raw" in r.stderr


@pytest.mark.concurrency
def test_cli_split_over_two_servers(tallyd, second, tmp_path):
    rng = np.random.default_rng(7)
    x = rng.random(300000)
    np.save(tmp_path / "x.npy", x)
    before = requests_served(second)
    r = tally("cumsum", "--url", url(tallyd), "--url", url(second), "--chunk-bytes", "65536",
              "--reverse", tmp_path / "x.npy", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    want = np.flip(np.cumsum(np.flip(x)))
    assert np.max(np.abs(y - want) / want) < 1e-12
    assert requests_served(second) - before >= 10  # 2.4 MB in 64 KiB chunks, shared


def test_cli_errors(tallyd, tmp_path):
    dead = "http://127.0.0.1:%d" % dead_port()
    x = tmp_path / "x.npy"
    np.save(x, np.arange(5, dtype=np.int32))
    out = tmp_path / "out.npy"
    out.write_bytes(b"keep me")

    r = tally("cumsum", "--url", dead, "--retries", "0", x, out)
    assert r.returncode == 3
    assert b"could not connect" in r.stderr.lower() or b"connect" in r.stderr
    assert b"is tallyd running" in r.stderr
    assert out.read_bytes() == b"keep me"  # nothing written on failure

    r = tally("cumsum", "--url", url(tallyd), tmp_path / "missing.npy", out)
    assert r.returncode == 4 and b"missing.npy" in r.stderr
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    r = tally("cumsum", "--url", url(tallyd), tmp_path / "junk.npy", out)
    assert r.returncode == 4 and b"not an .npy file" in r.stderr
    r = tally("cumsum", "--url", url(tallyd), "--axis", "3", x, out)
    assert r.returncode == 2 and b"out of range" in r.stderr
    r = tally("cumsum", "--url", url(tallyd), x)
    assert r.returncode == 2 and b"needs an input and an output" in r.stderr
    r = tally("cumsum", "--bogus", x, out)
    assert r.returncode == 2 and b"unknown option --bogus" in r.stderr
    r = tally("cumsum", "--url", "localhost:8080", x, out)
    assert r.returncode == 2 and b"http://" in r.stderr
    r = tally("cumsum", "--url", url(tallyd) + "/wrong", x, out)
    assert r.returncode == 1 and b"404" in r.stderr and b"base URL" in r.stderr
    r = tally("cumsum", "--url", url(tallyd), "--retries", "x", x, out)
    assert r.returncode == 2 and b"--retries" in r.stderr
    r = tally("frobnicate")
    assert r.returncode == 2 and b"unknown command" in r.stderr
    assert out.read_bytes() == b"keep me"
    # a piped .npy whose header promises 80 GB and brings 16 bytes: memory
    # follows the bytes that come, so it is refused as truncated, not as
    # out of memory (found by tests/fuzz/fuzz_client_npy)
    head = npy_bytes(np.zeros((1,), dtype=np.float64))
    end = head.index(b"\n") + 1
    text = head[10:end].replace(b"(1,)", b"(100000, 100000)")
    text = text[:-1].rstrip(b" ").ljust(end - 11) + b"\n"   # the same length
    r = tally("cumsum", "--url", url(tallyd), "-", out, input=head[:10] + text + bytes(16))
    assert r.returncode == 4 and b"truncated" in r.stderr, r.stderr
    assert out.read_bytes() == b"keep me"


def test_cli_too_large_hint(small, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.ones(400000, dtype=np.float32))
    r = tally("cumsum", "--url", url(small), "--chunk-bytes", "0", x, tmp_path / "y.npy")
    assert r.returncode == 1 and b"413" in r.stderr and b"--chunk-bytes" in r.stderr
    r = tally("cumsum", "--url", url(small), "--chunk-bytes", "500000", x, tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.arange(1, 400001, dtype=np.float32))


def test_cli_health_and_info(tallyd, second, fake):
    r = tally("health", "--url", url(tallyd), "--url", url(second))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().count("live, ready") == 2
    r = tally("health", env={"TALLY_URL": url(tallyd)})
    assert r.returncode == 0 and url(tallyd).encode() in r.stdout
    dead = "http://127.0.0.1:%d" % dead_port()
    r = tally("health", "--url", url(tallyd), "--url", dead)
    assert r.returncode == 3 and b"unreachable" in r.stdout
    r = tally("health", "--quiet", "--url", url(tallyd) + "/wrong")
    assert r.returncode == 1 and r.stdout == b""

    r = tally("info", "--url", url(tallyd))
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert '"name": "cumsum"' in text and '"extensions": [' in text and "GET /v2" in text
    r = tally("info", "--url", dead)
    assert r.returncode == 3


@pytest.mark.slow
def test_cli_bench(tallyd, busy):
    r = tally("bench", "--url", url(tallyd), "--count", "60", "--concurrency", "3",
              "--shape", "64,32", "--dtype", "int32", "--axis", "0", "--quiet")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "60 requests" in out and "requests/s" in out and "MB/s" in out
    assert "latency ms  p50" in out and "p99" in out and "errors      0" in out
    # progress while it runs
    r = tally("bench", "--url", url(tallyd), "--duration", "2", "--concurrency", "2",
              "--shape", "1000")
    assert r.returncode == 0, r.stderr
    progress = [line for line in r.stderr.decode().splitlines() if line.endswith("errors")]
    assert progress and "requests" in progress[0] and "/s" in progress[0]
    # a server that turns requests away, without retries: errors counted
    r = tally("bench", "--url", url(busy), "--count", "20", "--concurrency", "6",
              "--retries", "0", "--quiet", "--shape", "100")
    assert r.returncode == 1
    assert "errors      0" not in r.stdout.decode() and b"queue" in r.stderr
    r = tally("bench", "--concurrency", "0")
    assert r.returncode == 2
    # KServe JSON requests; every one answered 200 (the server counts them)
    before = json.loads(tallyd.request("GET", "/v2/models/cumsum/stats")[2])
    r = tally("bench", "--url", url(tallyd), "--count", "30", "--concurrency", "2",
              "--shape", "3,40", "--dtype", "int16", "--format", "json", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "30 requests" in r.stdout.decode() and "errors      0" in r.stdout.decode()
    after = json.loads(tallyd.request("GET", "/v2/models/cumsum/stats")[2])
    grew = (after["model_stats"][0]["inference_count"]
            - before["model_stats"][0]["inference_count"])
    assert grew >= 30, grew
    r = tally("bench", "--format", "xml")
    assert r.returncode == 2 and b"raw, json or shm" in r.stderr


@pytest.mark.parametrize("cmd", ["cumsum", "health", "info", "bench"])
def test_cli_help(cmd):
    r = tally(cmd, "--help")
    assert r.returncode == 0 and r.stdout.startswith(b"usage: tally " + cmd.encode())
    r = tally("help", cmd)
    assert r.returncode == 0 and r.stdout.startswith(b"usage: tally " + cmd.encode())
    r = tally("--help")
    assert r.returncode == 0 and b"Exit codes" in r.stdout
    r = tally("version")
    assert r.returncode == 0 and r.stdout.startswith(b"tally ")


def test_cli_sequence(tallyd, tmp_path):
    """tally cumsum --sequence-id: chunks whose answers make the whole
    tensor's sum, an empty last chunk that ends it, and the server's
    refusal once it has ended."""
    x = np.arange(1, 13, dtype=np.float64).reshape(2, 6)
    files = []
    for k in range(3):
        p = tmp_path / ("x%d.npy" % k)
        np.save(p, x[:, 2 * k:2 * k + 2])
        files.append(p)
    empty = tmp_path / "e.npy"
    np.save(empty, np.zeros((2, 0)))
    flags = [["--sequence-start"], [], []]
    got = []
    for k in range(3):
        y = tmp_path / ("y%d.npy" % k)
        r = run([CLI, "cumsum", "--url", url(tallyd), "--axis", "1", "--sequence-id", "cli seq",
                 str(files[k]), str(y)] + flags[k])
        assert r.returncode == 0, r.stderr
        got.append(np.load(y))
    assert np.array_equal(np.concatenate(got, axis=1), np.cumsum(x, axis=1))
    r = run([CLI, "cumsum", "--url", url(tallyd), "--axis", "1", "--sequence-id", "cli seq",
             "--sequence-end", str(empty), str(tmp_path / "ye.npy")])
    assert r.returncode == 0, r.stderr
    r = run([CLI, "cumsum", "--url", url(tallyd), "--axis", "1", "--sequence-id", "cli never",
             str(files[0]), str(tmp_path / "late.npy")])
    assert r.returncode == 1 and b"not live" in r.stderr, r.stderr
    r = run([CLI, "cumsum", "--url", url(tallyd), "--sequence-end", str(files[0]),
             str(tmp_path / "z.npy")])
    assert r.returncode != 0 and b"need --sequence-id" in r.stderr, r.stderr


def test_cli_numbered_chunks(tallyd, tmp_path):
    """tally cumsum --sequence-chunk: a chunk sent twice with its number is
    answered twice alike and added once; a number taken by another chunk
    is refused; a bad number is a usage error."""
    x = np.arange(1, 10, dtype=np.int64)
    files = []
    for k in range(3):
        p = tmp_path / ("x%d.npy" % k)
        np.save(p, x[3 * k:3 * k + 3])
        files.append(p)

    def chunk(k, src, extra=()):
        y = tmp_path / ("y%d.npy" % k)
        r = run([CLI, "cumsum", "--url", url(tallyd), "--sequence-id", "cli numbered",
                 "--sequence-chunk", str(k + 1), str(src), str(y)] + list(extra))
        return r, y

    r, y = chunk(0, files[0], ["--sequence-start"])
    assert r.returncode == 0, r.stderr
    for _ in range(2):
        r, y = chunk(1, files[1])
        assert r.returncode == 0, r.stderr
        assert np.load(y).tolist() == [10, 15, 21]
    r, y = chunk(1, files[0])
    assert r.returncode == 1 and b"another input" in r.stderr, r.stderr
    r, y = chunk(2, files[2], ["--sequence-end"])
    assert r.returncode == 0 and np.load(y).tolist() == [28, 36, 45], r.stderr
    r = run([CLI, "cumsum", "--url", url(tallyd), "--sequence-id", "cli numbered",
             "--sequence-chunk", "0", str(files[0]), str(tmp_path / "z.npy")])
    assert r.returncode != 0 and b"not a chunk number" in r.stderr, r.stderr
