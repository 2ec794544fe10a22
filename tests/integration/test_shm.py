"""Triton's system shared-memory extension (--allow-shared-memory) against a
real tallyd: tritonclient.http and tritonclient.grpc with
tritonclient.utils.shared_memory, perf_analyzer --shared-memory system, and
every refusal the issue lists."""
import os
import subprocess
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conftest import valid_request_works
from reference import DTYPES, KSERVE, close, cumsum, random_tensor
from palib import pa_count_windows, perf_analyzer_bin, shm_lock

SEED = int(os.environ.get("TALLY_TEST_SEED", str(int(time.time()) % 100000)))
print("test_shm seed", SEED)
PID = os.getpid()


@pytest.fixture(scope="module")
def d(request):
    from conftest import Daemon
    dm = Daemon("--allow-shared-memory")
    yield dm
    assert dm.stop() == 0
    dm.cleanup()


def clients(d):
    return {"http": httpclient.InferenceServerClient("127.0.0.1:%d" % d.port),
            "grpc": grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)}


MOD = {"http": httpclient, "grpc": grpcclient}


class Region:
    """A POSIX shared-memory object made with tritonclient's helper, and
    unlinked afterwards whatever happens."""
    count = 0

    def __init__(self, nbytes, name=None):
        Region.count += 1
        self.name = name or "r%d" % Region.count
        self.key = "/tally-test-%d-%d" % (PID, Region.count)
        self.nbytes = nbytes
        self.h = shm.create_shared_memory_region(self.name, self.key, nbytes)

    def put(self, x, offset=0):
        shm.set_shared_memory_region(self.h, [x], offset=offset)

    def get(self, dtype, shape, offset=0):
        return shm.get_contents_as_numpy(self.h, dtype, shape, offset=offset).copy()

    def destroy(self):
        try:
            shm.destroy_shared_memory_region(self.h)
        except Exception:
            pass


@pytest.fixture
def regions():
    made = []

    def make(nbytes, name=None):
        r = Region(nbytes, name)
        made.append(r)
        return r

    yield make
    for r in made:
        r.destroy()


def infer(c, proto, x, xin=None, yout=None, yoff=0, params=None, headers=None):
    mod = MOD[proto]
    i = mod.InferInput("x", list(x.shape), KSERVE[str(x.dtype)])
    if xin is None:
        i.set_data_from_numpy(x)
    else:
        i.set_shared_memory(xin, x.nbytes)
    o = mod.InferRequestedOutput("y")
    if yout is not None:
        o.set_shared_memory(yout[0], yout[1], offset=yoff)
    return c.infer("cumsum", [i], outputs=[o], parameters=params, headers=headers)


def fails(fn, code_http, code_grpc, proto, words):
    """fn() raises tritonclient's error with the protocol's code and a
    message holding words."""
    with pytest.raises(InferenceServerException) as e:
        fn()
    st = str(e.value.status())
    want = code_http if proto == "http" else code_grpc
    assert want in st, (st, str(e.value))
    assert words in str(e.value), str(e.value)
    return e.value


@pytest.mark.slow
@pytest.mark.parametrize("proto", ["http", "grpc"])
@pytest.mark.parametrize("place", ["both", "input", "output", "in_place"])
def test_every_dtype_in_every_place(d, regions, proto, place):
    c = clients(d)[proto]
    rng = np.random.default_rng(SEED)
    for dt in DTYPES:
        shape = (int(rng.integers(1, 40)), int(rng.integers(1, 300)))
        x = random_tensor(rng, dt, shape)
        axis = int(rng.integers(0, 2))
        want = cumsum(x, axis=axis)
        rin = regions(x.nbytes)
        rin.put(x)
        rout = regions(x.nbytes + 64)
        rout.put(np.full(x.nbytes + 64, 0xAB, np.uint8))  # poison
        c.register_system_shared_memory(rin.name, rin.key, rin.nbytes)
        c.register_system_shared_memory(rout.name, rout.key, rout.nbytes)
        try:
            p = {"axis": axis}
            if place == "both":
                r = infer(c, proto, x, rin.name, (rout.name, x.nbytes), params=p)
                got = rout.get(x.dtype, shape)
            elif place == "input":
                r = infer(c, proto, x, rin.name, params=p)
                got = r.as_numpy("y")
                assert np.array_equal(rin.get(x.dtype, shape), x)  # input untouched
            elif place == "output":
                r = infer(c, proto, x, None, (rout.name, x.nbytes + 64), yoff=0, params=p)
                got = rout.get(x.dtype, shape)
                tail = rout.get(np.uint8, (64,), offset=x.nbytes)
                assert (tail == 0xAB).all()  # nothing past y is written
            else:
                r = infer(c, proto, x, rin.name, (rin.name, x.nbytes), params=p)
                got = rin.get(x.dtype, shape)
            assert got.shape == want.shape
            assert close(got, want, x, axis=axis), (dt, place, shape, axis)
            y = r.get_output("y")
            if place in ("both", "output", "in_place"):
                # no data comes back; gRPC says where it went (REST, as
                # Triton, names no parameters: its C++ client would read
                # them as binary data's)
                if proto == "http":
                    assert "data" not in y and "parameters" not in y, y
                else:
                    region = y.parameters["shared_memory_region"].string_param
                    assert region == (rin.name if place == "in_place" else rout.name)
                    assert r.get_response().raw_output_contents == [b""]
        finally:
            c.unregister_system_shared_memory(rin.name)
            c.unregister_system_shared_memory(rout.name)


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_offsets_status_and_unregister(d, regions, proto):
    c = clients(d)[proto]
    x = np.arange(1, 5001, dtype=np.int64)
    r = regions(3 * x.nbytes)
    r.put(x, offset=x.nbytes)  # the tensor at one offset, y at another
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    mod = MOD[proto]
    i = mod.InferInput("x", [x.size], "INT64")
    i.set_shared_memory(r.name, x.nbytes, offset=x.nbytes)
    o = mod.InferRequestedOutput("y")
    o.set_shared_memory(r.name, x.nbytes, offset=2 * x.nbytes)
    c.infer("cumsum", [i], outputs=[o])
    assert np.array_equal(r.get(np.int64, (x.size,), offset=2 * x.nbytes), np.cumsum(x))
    assert np.array_equal(r.get(np.int64, (x.size,), offset=x.nbytes), x)
    st = c.get_system_shared_memory_status()
    assert d.metric("tally_shm_regions") >= 1 and d.metric("tally_shm_bytes") >= r.nbytes
    if proto == "http":
        assert {"name": r.name, "key": r.key, "offset": 0, "byte_size": r.nbytes} in st
        one = c.get_system_shared_memory_status(r.name)
        assert [e["name"] for e in one] == [r.name]
    else:
        assert st.regions[r.name].key == r.key and st.regions[r.name].byte_size == r.nbytes
    c.unregister_system_shared_memory(r.name)
    st = c.get_system_shared_memory_status()
    names = [e["name"] for e in st] if proto == "http" else list(st.regions)
    assert r.name not in names
    # everything of the caller's goes with no name
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    c.unregister_system_shared_memory()
    st = c.get_system_shared_memory_status()
    assert len(st) == 0 if proto == "http" else len(st.regions) == 0


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_bad_inputs_are_clear_errors(d, regions, proto):
    c = clients(d)[proto]
    x = np.arange(100, dtype=np.float32)
    r = regions(x.nbytes)
    r.put(x)
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    try:
        # an unknown region
        fails(lambda: infer(c, proto, x, "nope"), "404", "NOT_FOUND", proto,
              'no shared-memory region named "nope"')
        # offset or size past the end
        mod = MOD[proto]
        i = mod.InferInput("x", [100], "FP32")
        i.set_shared_memory(r.name, x.nbytes, offset=4)
        fails(lambda: c.infer("cumsum", [i]), "400", "INVALID_ARGUMENT", proto,
              "passes the end")
        # an offset that overflows with the size
        i = mod.InferInput("x", [100], "FP32")
        i.set_shared_memory(r.name, x.nbytes, offset=(1 << 63) - 8)
        fails(lambda: c.infer("cumsum", [i]), "400", "INVALID_ARGUMENT", proto,
              "passes the end")
        # a size that is not the tensor's
        i = mod.InferInput("x", [100], "FP32")
        i.set_shared_memory(r.name, x.nbytes - 4)
        fails(lambda: c.infer("cumsum", [i]), "400", "INVALID_ARGUMENT", proto,
              "shared_memory_byte_size is 396")
        # an output region too small
        fails(lambda: infer(c, proto, x, None, (r.name, 8)), "400", "INVALID_ARGUMENT",
              proto, "shared_memory_byte_size is 8")
        # keys that are paths, or leave /dev/shm
        for key in ("/a/b", "/..", "/.", "relative", "/"):
            fails(lambda: c.register_system_shared_memory("k", key, 4), "400",
                  "INVALID_ARGUMENT", proto, "key")
        if proto == "http":
            # a misspelt member is refused, not left out
            status, _, body = d.post_json("/v2/systemsharedmemory/region/k/register",
                                          {"key": r.key, "byte_size": 4, "ofset": 8})
            assert status == 400 and 'unknown member "ofset"' in body["error"], body
            # a name with characters a URL escapes, '?' among them
            odd = "a?b #%c"
            c.register_system_shared_memory(odd, r.key, r.nbytes)
            assert [s["name"] for s in c.get_system_shared_memory_status(odd)] == [odd]
            c.unregister_system_shared_memory(odd)
        # a key with no object behind it
        fails(lambda: c.register_system_shared_memory("k", "/tally-none-%d" % PID, 4),
              "404", "NOT_FOUND", proto, "cannot open")
        # larger than the object
        fails(lambda: c.register_system_shared_memory("k", r.key, r.nbytes + 1), "400",
              "INVALID_ARGUMENT", proto, "fewer than")
        fails(lambda: c.register_system_shared_memory("k", r.key, 16, offset=(1 << 63) - 8),
              "400", "INVALID_ARGUMENT", proto, "overflows")
        # registering twice
        fails(lambda: c.register_system_shared_memory(r.name, r.key, r.nbytes), "409",
              "ALREADY_EXISTS", proto, "already registered")
        # overlapping input and output that are not the same bytes
        big = regions(2 * x.nbytes)
        big.put(x)
        c.register_system_shared_memory(big.name, big.key, big.nbytes)
        fails(lambda: infer(c, proto, x, big.name, (big.name, x.nbytes), yoff=4), "400",
              "INVALID_ARGUMENT", proto, "overlap")
        c.unregister_system_shared_memory(big.name)
        # a region that was unregistered
        c.unregister_system_shared_memory(r.name)
        fails(lambda: infer(c, proto, x, r.name), "404", "NOT_FOUND", proto,
              "no shared-memory region")
        fails(lambda: c.unregister_system_shared_memory(r.name), "404", "NOT_FOUND",
              proto, "no shared-memory region")
        # CUDA's: refused, but unregistering everything succeeds
        c.unregister_cuda_shared_memory()
        if proto == "http":
            fails(lambda: c.register_cuda_shared_memory("g", b"\0" * 64, 0, 4), "403", "",
                  proto, "no CUDA shared memory")
    finally:
        c.unregister_system_shared_memory()
    valid_request_works(d)


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_truncated_before_use(d, regions, proto):
    c = clients(d)[proto]
    x = np.arange(1000, dtype=np.float32)
    r = regions(x.nbytes)
    r.put(x)
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    try:
        os.truncate("/dev/shm" + r.key, 100)
        fails(lambda: infer(c, proto, x, r.name), "400", "INVALID_ARGUMENT", proto,
              "has been truncated")
    finally:
        c.unregister_system_shared_memory(r.name)
    valid_request_works(d)


def slow_daemon(spawn, *extra):
    """Every job waits 600 ms before it runs: time to disturb its region."""
    return spawn("--allow-shared-memory", "--fault-delay-ms", "600",
                 "--inline-max-elements", "0", *extra)


def during_job(d, proto, x, rin, yout, disturb):
    """Runs an inference in a thread (with a client of its own: the HTTP
    one is gevent's, bound to its thread) and disturb() while its job
    waits; the inference's exception (or None) and result."""
    out = {}

    def run():
        try:
            out["r"] = infer(clients(d)[proto], proto, x, rin, yout)
        except InferenceServerException as e:
            out["e"] = e

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.25)
    disturb()
    t.join(30)
    assert not t.is_alive()
    return out.get("e"), out.get("r")


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_truncated_during_use_fails_that_request_and_spares_the_daemon(spawn, regions, proto):
    d = slow_daemon(spawn)
    c = clients(d)[proto]
    x = np.ones(1 << 20, dtype=np.float32)  # 4 MiB: pages past the new end
    r = regions(x.nbytes)
    r.put(x)
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    e, _ = during_job(d, proto, x, r.name, (r.name, x.nbytes),
                      lambda: os.truncate("/dev/shm" + r.key, 4096))
    assert e is not None and "truncated" in str(e), e
    assert d.proc.poll() is None  # no SIGBUS death
    # the region is spent: later uses say so until it is registered again
    os.truncate("/dev/shm" + r.key, x.nbytes)
    r.put(x)
    fails(lambda: infer(c, proto, x, r.name), "400", "INVALID_ARGUMENT", proto,
          "truncated")
    c.unregister_system_shared_memory(r.name)
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    res = infer(c, proto, x, r.name)
    assert np.array_equal(res.as_numpy("y"), np.cumsum(x, dtype=np.float32))
    valid_request_works(d)


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_unlinked_during_use_fails_that_request(spawn, regions, proto):
    d = slow_daemon(spawn)
    c = clients(d)[proto]
    x = np.ones(10000, dtype=np.float32)
    r = regions(x.nbytes)
    r.put(x)
    c.register_system_shared_memory(r.name, r.key, r.nbytes)
    e, _ = during_job(d, proto, x, r.name, (r.name, x.nbytes),
                      lambda: os.unlink("/dev/shm" + r.key))
    assert e is not None and "unlinked" in str(e), e
    valid_request_works(d)


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_unregistered_during_use_waits_for_the_job(spawn, regions, proto):
    d = slow_daemon(spawn)
    c = clients(d)[proto]
    x = np.arange(20000, dtype=np.int32)
    rin, rout = regions(x.nbytes), regions(x.nbytes)
    rin.put(x)
    for g in (rin, rout):
        c.register_system_shared_memory(g.name, g.key, g.nbytes)
    c2 = clients(d)[proto]
    e, _ = during_job(d, proto, x, rin.name, (rout.name, x.nbytes),
                      lambda: c2.unregister_system_shared_memory())
    assert e is None, e
    assert np.array_equal(rout.get(np.int32, (x.size,)), np.cumsum(x, dtype=np.int32))
    st = c.get_system_shared_memory_status()
    assert len(st) == 0 if proto == "http" else len(st.regions) == 0


@pytest.mark.slow
@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_a_region_belongs_to_its_token(spawn, regions, tmp_path, proto):
    tokens = tmp_path / "tokens"
    tokens.write_text("alpha-token\nbeta-token\n")
    d = spawn("--allow-shared-memory", "--auth-token-file", str(tokens))
    c = clients(d)[proto]
    a = {"Authorization": "Bearer alpha-token"}
    b = {"Authorization": "Bearer beta-token"}
    if proto == "grpc":
        a = {"authorization": a["Authorization"]}
        b = {"authorization": b["Authorization"]}
    x = np.arange(100, dtype=np.int32)
    r = regions(x.nbytes)
    r.put(x)
    c.register_system_shared_memory(r.name, r.key, r.nbytes, headers=a)
    assert len(c.get_system_shared_memory_status(headers=b)) == 0 if proto == "http" else \
        len(c.get_system_shared_memory_status(headers=b).regions) == 0
    fails(lambda: infer(c, proto, x, r.name, headers=b), "404", "NOT_FOUND", proto,
          "no shared-memory region")
    fails(lambda: c.unregister_system_shared_memory(r.name, headers=b), "404", "NOT_FOUND",
          proto, "no shared-memory region")
    # the other token may use the same name for a region of its own
    c.register_system_shared_memory(r.name, r.key, r.nbytes, headers=b)
    res = infer(c, proto, x, r.name, headers=a)
    assert np.array_equal(res.as_numpy("y"), np.cumsum(x, dtype=np.int32))
    # and no token at all is refused before anything else
    fails(lambda: c.register_system_shared_memory("z", r.key, r.nbytes), "401",
          "UNAUTHENTICATED", proto, "token")


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_turned_off_by_default(tallyd, regions, proto):
    c = clients(tallyd)[proto]
    meta = c.get_server_metadata()
    ext = meta["extensions"] if proto == "http" else list(meta.extensions)
    assert "system_shared_memory" not in ext
    x = np.arange(10, dtype=np.int32)
    r = regions(x.nbytes)
    fails(lambda: c.register_system_shared_memory(r.name, r.key, r.nbytes), "403",
          "PERMISSION_DENIED", proto, "--allow-shared-memory")
    fails(lambda: infer(c, proto, x, r.name), "403", "PERMISSION_DENIED", proto,
          "--allow-shared-memory")
    # what perf_analyzer's teardown calls still succeeds
    c.unregister_system_shared_memory()
    valid_request_works(tallyd)


@pytest.mark.slow
def test_metadata_and_limits(spawn, regions):
    d = spawn("--allow-shared-memory", "--shm-max-regions", "2", "--shm-max-bytes", "1MiB")
    c = clients(d)["http"]
    assert "system_shared_memory" in c.get_server_metadata()["extensions"]
    small = [regions(4096) for _ in range(3)]
    c.register_system_shared_memory(small[0].name, small[0].key, 4096)
    c.register_system_shared_memory(small[1].name, small[1].key, 4096)
    fails(lambda: c.register_system_shared_memory(small[2].name, small[2].key, 4096),
          "413", "", "http", "--shm-max-regions")
    c.unregister_system_shared_memory()
    big = regions(2 << 20)
    fails(lambda: c.register_system_shared_memory(big.name, big.key, 2 << 20),
          "413", "", "http", "--shm-max-bytes")
    # malformed register bodies
    for body in (b"", b"[]", b'{"key": 5, "byte_size": 4}', b'{"key": "/x"}',
                 b'{"key": "/x", "byte_size": -1}', b'{"key": "/x", "byte_size": 4} junk'):
        st, _, text = d.request("POST", "/v2/systemsharedmemory/region/q/register", body)
        assert st == 400, (body, text)
    valid_request_works(d)


# perf_analyzer names its regions x_0_0 and y whatever the run, so two of
# these at once unlink each other's: one xdist worker runs both, and each
# holds the machine-wide lock that benchmarks and other clones' tests take
# for the same runs (bench_serve.shm_lock)
@pytest.mark.xdist_group("perf_analyzer_shm")
@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_perf_analyzer_shared_memory_unchanged(spawn, proto):
    d = spawn("--allow-shared-memory", "--max-sequences", "0")  # plain mode
    exe, env = perf_analyzer_bin()
    port = d.port if proto == "http" else d.grpc_port
    with shm_lock():
        r = subprocess.run([exe, "-m", "cumsum", "-u", "127.0.0.1:%d" % port, "-i", proto,
                            "--shape", "x:5000", "--shared-memory", "system",
                            "--output-shared-memory-size", "20000",
                            "--concurrency-range", "1"] + pa_count_windows(500),
                           capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Throughput:" in out, out
    ok = d.metric("tally_requests_total", protocol=proto, route="infer",
                  code="OK" if proto == "grpc" else "200")
    assert ok >= 50, out
    failed = d.metric("tally_request_failures_total", protocol=proto)
    assert failed == 0, d.request("GET", "/metrics")[2].decode()
    # it unregistered what it registered
    st, _, body = d.request("GET", "/v2/systemsharedmemory/status")
    assert st == 200 and body == b"[]", body
