"""The gRPC front door (KServe v2 / Triton's GRPCInferenceService) against
a real tallyd: tritonclient.grpc, and a second, independent client built
from proto/grpc_service.proto with grpcio-tools."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import re
import time

import numpy as np
import pytest
import grpc
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import eventually, run_threads
from palib import pa_count_windows, perf_analyzer_bin
from reference import DTYPES, KSERVE, close, cumsum, random_tensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def client(tallyd):
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % tallyd.grpc_port)
    yield c
    c.close()


@pytest.fixture(scope="session")
def stubs():
    """tally's .proto compiled by grpcio-tools into a directory: the second
    client, run in a process of its own (tritonclient's copy of the same
    messages already fills this process's descriptor pool)."""
    out = tempfile.mkdtemp(prefix="tally-stubs-")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.join(ROOT, "proto"),
                    "--python_out=" + out, "--grpc_python_out=" + out,
                    os.path.join(ROOT, "proto", "grpc_service.proto")], check=True)
    return out


def run_stub_client(d, stubs, *args):
    """tests/integration/grpc_stub_client.py against d; its output."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc_stub_client.py")
    env = dict(os.environ, PYTHONPATH=stubs + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, script, "127.0.0.1:%d" % d.grpc_port] + list(args),
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def infer(client, x, axis=None, exclusive=None, reverse=None, **kw):
    inp = grpcclient.InferInput("x", list(x.shape), KSERVE[str(x.dtype)])
    inp.set_data_from_numpy(x)
    params = {k: v for k, v in (("axis", axis), ("exclusive", exclusive),
                                ("reverse", reverse)) if v is not None}
    return client.infer("cumsum", [inp], outputs=[grpcclient.InferRequestedOutput("y")],
                        parameters=params or None, **kw)


def code_of(excinfo):
    return excinfo.value.status()


def test_health_metadata_config_and_statistics(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("cumsum") and client.is_model_ready("cumsum", "1")
    meta = client.get_server_metadata()
    assert meta.name == "tally" and "binary_tensor_data" in meta.extensions
    model = client.get_model_metadata("cumsum")
    assert [i.name for i in model.inputs] == ["x"] and model.outputs[0].name == "y"
    assert list(model.versions) == ["1"]
    config = client.get_model_config("cumsum").config
    assert config.name == "cumsum" and config.max_batch_size == 0
    assert config.input[0].name == "x" and list(config.input[0].dims) == [-1]
    before = client.get_inference_statistics("cumsum").model_stats[0].inference_stats.success.count
    infer(client, np.arange(5, dtype=np.int32))
    after = client.get_inference_statistics("cumsum").model_stats[0]
    assert after.inference_stats.success.count == before + 1
    assert after.name == "cumsum" and after.version == "1"


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_rank_and_parameter(client, dtype):
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for rank in range(1, 9):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=rank))
        x = random_tensor(rng, dtype, shape)
        axis = int(rng.integers(-rank, rank))
        exclusive, reverse = bool(rng.integers(2)), bool(rng.integers(2))
        res = infer(client, x, axis=axis, exclusive=exclusive, reverse=reverse,
                    request_id="r%d" % rank)
        y = res.as_numpy("y")
        assert y.dtype == x.dtype and y.shape == x.shape, (seed, rank)
        assert close(y, cumsum(x, axis, exclusive, reverse), x, axis), (seed, rank, axis)
        r = res.get_response()
        assert r.id == "r%d" % rank and r.model_name == "cumsum" and r.model_version == "1"
        assert r.outputs[0].name == "y" and r.outputs[0].datatype == KSERVE[dtype]


def test_defaults_and_large_tensors(client):
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for n in (1, 4096, 4097, 65536, 1 << 20, 3_000_001):
        x = random_tensor(rng, "float32", (n,))
        y = infer(client, x).as_numpy("y")
        assert close(y, cumsum(x), x), (seed, n)
    x = random_tensor(rng, "int64", (3, 200_000))
    y = infer(client, x, axis=1).as_numpy("y")
    assert np.array_equal(y, cumsum(x, 1))


def test_axis_as_an_input(client):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    a = grpcclient.InferInput("axis", [1], "INT64")
    a.set_data_from_numpy(np.array([1], dtype=np.int64))
    inp = grpcclient.InferInput("x", [3, 4], "INT32")
    inp.set_data_from_numpy(x)
    y = client.infer("cumsum", [inp, a]).as_numpy("y")
    assert np.array_equal(y, np.cumsum(x, axis=1))


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests(client, algorithm):
    x = np.random.default_rng(3).random(100_000).astype(np.float32)
    res = infer(client, x, compression_algorithm=algorithm)
    assert close(res.as_numpy("y"), cumsum(x), x)


def test_errors_and_their_codes(client, tallyd):
    x = np.arange(4, dtype=np.float32)
    inp = grpcclient.InferInput("x", [4], "FP32")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as e:
        client.infer("nope", [inp])
    assert code_of(e) == "StatusCode.NOT_FOUND" and "unknown model" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        client.infer("cumsum", [inp], model_version="7")
    assert code_of(e) == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("nope")
    assert code_of(e) == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException) as e:
        infer(client, x, axis=3)
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT" and "axis" in e.value.message()
    bad = grpcclient.InferInput("x", [4], "FP32")  # 5 elements, 4 sent
    bad.set_data_from_numpy(x)
    bad.set_shape([5])
    with pytest.raises(InferenceServerException) as e:
        client.infer("cumsum", [bad])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT" and "raw_input_contents" in e.value.message()
    s = grpcclient.InferInput("x", [2], "BYTES")
    s.set_data_from_numpy(np.array([b"a", b"b"], dtype=np.object_))
    with pytest.raises(InferenceServerException) as e:
        client.infer("cumsum", [s])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT" and "BYTES" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        client.infer("cumsum", [inp], outputs=[grpcclient.InferRequestedOutput("z")])
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException) as e:
        infer(client, np.zeros((), dtype=np.float32).reshape(()))
    assert code_of(e) == "StatusCode.INVALID_ARGUMENT"
    # what tally does not serve: UNIMPLEMENTED, with a message
    with pytest.raises(InferenceServerException) as e:
        client.get_model_repository_index()
    assert code_of(e) == "StatusCode.UNIMPLEMENTED" and "RepositoryIndex" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        client.get_model_repository_index()
    assert code_of(e) == "StatusCode.UNIMPLEMENTED"
    # shared memory is off unless asked for (test_shm.py)
    with pytest.raises(InferenceServerException) as e:
        client.register_system_shared_memory("r", "/k", 64)
    assert code_of(e) == "StatusCode.PERMISSION_DENIED"
    assert "--allow-shared-memory" in e.value.message()
    # what perf_analyzer's teardown calls succeeds
    client.unregister_system_shared_memory()
    client.unregister_cuda_shared_memory()
    assert len(client.get_system_shared_memory_status().regions) == 0
    assert len(client.get_cuda_shared_memory_status().regions) == 0
    for call in (client.get_cuda_shared_memory_status, client.unregister_cuda_shared_memory):
        with pytest.raises(InferenceServerException) as e:
            call("r")  # a named region: none exists
        assert code_of(e) == "StatusCode.NOT_FOUND" and "no CUDA shared memory" in e.value.message()
    # and the daemon still serves
    assert np.array_equal(infer(client, x).as_numpy("y"), np.cumsum(x))
    assert tallyd.metric("tally_requests_total", protocol="grpc", code="NOT_FOUND") >= 3
    assert tallyd.metric("tally_requests_total", protocol="grpc", code="UNIMPLEMENTED") >= 2
    assert tallyd.metric("tally_request_failures_total", protocol="grpc", route="infer",
                         reason="INVALID") >= 2
    assert tallyd.metric("tally_request_failures_total", protocol="grpc", route="infer",
                         reason="AXIS") >= 1


def rest_successes(tallyd):
    import json
    body = json.loads(tallyd.request("GET", "/v2/models/cumsum/stats")[2])
    return body["model_stats"][0]["inference_stats"]["success"]["count"]


def test_metrics_are_labelled_by_protocol(client, tallyd):
    before = tallyd.metric("tally_requests_total", protocol="grpc", route="infer", code="OK")
    stats_before = rest_successes(tallyd)
    infer(client, np.arange(3, dtype=np.int16))
    # Triton's statistics over REST count the gRPC call too, once it has
    # ended (its answer may reach the client a moment before)
    assert eventually(lambda: rest_successes(tallyd), stats_before + 1) == stats_before + 1
    tallyd.request("POST", "/v1/cumsum", '{"dtype":"int32","shape":[2],"data":[1,2]}',
                   {"Content-Type": "application/json"})
    assert eventually(lambda: tallyd.metric("tally_requests_total", protocol="grpc",
                                            route="infer", code="OK"), before + 1) == before + 1
    assert tallyd.metric("tally_requests_total", protocol="http", route="native") >= 1
    text = tallyd.request("GET", "/metrics")[2].decode()
    assert 'tally_request_duration_seconds_count{protocol="grpc",route="infer"}' in text
    assert tallyd.metric("tally_grpc_connections_total") >= 1
    assert tallyd.metric("tally_grpc_calls_total") >= 1


@pytest.mark.slow
def test_message_over_the_limit_is_refused(spawn):
    d = spawn("--max-body-bytes", "1MiB")
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.zeros(300_000, dtype=np.float32)  # 1.2 MB
    with pytest.raises(InferenceServerException) as e:
        infer(c, x)
    assert code_of(e) == "StatusCode.RESOURCE_EXHAUSTED" and "max-body-bytes" in e.value.message()
    # compressed, its decoded size counts
    with pytest.raises(InferenceServerException) as e:
        infer(c, x, compression_algorithm="gzip")
    assert code_of(e) == "StatusCode.RESOURCE_EXHAUSTED"
    y = infer(c, np.ones(1000, dtype=np.float32)).as_numpy("y")
    assert y[-1] == 1000


@pytest.mark.slow
def test_bearer_tokens(spawn, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("sekrit-1\n")
    d = spawn("--auth-token-file", str(tokens))
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(InferenceServerException) as e:
        infer(c, x)
    assert code_of(e) == "StatusCode.UNAUTHENTICATED" and "bearer token" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        infer(c, x, headers={"authorization": "Bearer wrong"})
    assert code_of(e) == "StatusCode.UNAUTHENTICATED"
    y = infer(c, x, headers={"authorization": "Bearer sekrit-1"}).as_numpy("y")
    assert np.array_equal(y, np.cumsum(x))
    # health is open, as over REST
    assert c.is_server_live() and c.is_server_ready()
    with pytest.raises(InferenceServerException):
        c.get_model_metadata("cumsum")


@pytest.mark.slow
@pytest.mark.concurrency
def test_deadlines(spawn):
    d = spawn("--fault-delay-ms", "400", "--inline-max-elements", "0")
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.arange(8, dtype=np.float32)
    # the client's deadline reaches the server as grpc-timeout
    with pytest.raises(InferenceServerException) as e:
        infer(c, x, client_timeout=0.15)
    assert code_of(e) == "StatusCode.DEADLINE_EXCEEDED"
    # the protocol's own timeout parameter (microseconds): the server's answer
    with pytest.raises(InferenceServerException) as e:
        infer(c, x, timeout=100_000)
    assert code_of(e) == "StatusCode.DEADLINE_EXCEEDED" and "deadline" in e.value.message()
    # the same words as REST's, with how long the work waited
    assert re.search(r"the deadline of 100 ms expired after \d+ ms", e.value.message()), \
        e.value.message()
    # the tightest bound wins, as over REST: a 10 s client deadline does not
    # lift a 100 ms parameter, and a 10 s parameter does not lift a 150 ms
    # client deadline
    with pytest.raises(InferenceServerException) as e:
        infer(c, x, timeout=100_000, client_timeout=10)
    assert code_of(e) == "StatusCode.DEADLINE_EXCEEDED"
    assert "the deadline of 100 ms expired" in e.value.message(), e.value.message()
    with pytest.raises(InferenceServerException) as e:
        infer(c, x, timeout=10_000_000, client_timeout=0.15)
    assert code_of(e) == "StatusCode.DEADLINE_EXCEEDED"
    # a generous pair leaves the 400 ms job time
    assert np.array_equal(infer(c, x, timeout=10_000_000, client_timeout=10).as_numpy("y"),
                          np.cumsum(x))
    deadline = time.time() + 5
    while d.metric("tally_request_failures_total", protocol="grpc", reason="DEADLINE") < 1:
        assert time.time() < deadline
        time.sleep(0.1)
    assert np.array_equal(infer(c, x, client_timeout=10).as_numpy("y"), np.cumsum(x))


@pytest.mark.slow
@pytest.mark.concurrency
def test_cancellation(spawn):
    d = spawn("--fault-delay-ms", "300", "--workers", "1", "--inline-max-elements", "0")
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.arange(8, dtype=np.float32)
    done = []
    inp = grpcclient.InferInput("x", [8], "FP32")
    inp.set_data_from_numpy(x)
    calls = [c.async_infer("cumsum", [inp], lambda result, error: done.append(error)) for _ in range(4)]
    time.sleep(0.1)
    for call in calls:
        call.cancel()
    deadline = time.time() + 10
    while d.metric("tally_cancelled_total") < 3:
        assert time.time() < deadline, d.log()
        time.sleep(0.1)
    # The scheduler counts a cancellation when it drops the job; the door
    # counts the request when its call is freed, on the loop thread, a
    # moment later (under TSan, more than one poll later).
    while d.metric("tally_requests_total", protocol="grpc", code="CANCELLED") < 3:
        assert time.time() < deadline, d.log()
        time.sleep(0.1)
    assert np.array_equal(infer(c, x).as_numpy("y"), np.cumsum(x))


@pytest.mark.concurrency
def test_streaming(client):
    results = []
    got = threading.Event()

    def callback(result, error):
        results.append((result, error))
        if len(results) == 12:
            got.set()

    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    rng = np.random.default_rng(seed)
    client.start_stream(callback=callback)
    sent = []
    for i in range(12):
        if i == 5:  # a bad one: answered with an error, the stream goes on
            bad = grpcclient.InferInput("x", [3], "FP32")
            bad.set_data_from_numpy(np.zeros(3, dtype=np.float32))
            client.async_stream_infer("cumsum", [bad], parameters={"axis": 4}, request_id="5")
            sent.append(None)
            continue
        n = int(rng.integers(1, 200_000))
        x = random_tensor(rng, "float32", (n,))
        inp = grpcclient.InferInput("x", [n], "FP32")
        inp.set_data_from_numpy(x)
        client.async_stream_infer("cumsum", [inp], request_id=str(i))
        sent.append(x)
    assert got.wait(30)
    client.stop_stream()
    assert len(results) == 12
    # answers come back in the order the requests went
    for i, (result, error) in enumerate(results):
        if i == 5:
            assert result is None and "axis" in str(error)
            continue
        assert error is None, error
        assert result.get_response().id == str(i)
        assert close(result.as_numpy("y"), cumsum(sent[i]), sent[i]), seed


@pytest.mark.slow
@pytest.mark.concurrency
def test_drain_finishes_every_call(spawn):
    d = spawn("--fault-delay-ms", "300", "--workers", "1", "--inline-max-elements", "0")
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.arange(1000, dtype=np.float32)
    assert np.array_equal(infer(c, x).as_numpy("y"), np.cumsum(x))
    drain_during_calls(d, [c] * 6, x, lambda: time.sleep(0.3))


def drain_during_calls(d, clients, x, before_drain):
    """A call of x + i on each clients[i] at once; once before_drain() has
    returned, SIGTERM: every call is answered right, and tallyd exits 0."""
    results = [None] * len(clients)

    def one(i):
        results[i] = infer(clients[i], x + i).as_numpy("y")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    before_drain()
    d.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(30)
    for i in range(len(clients)):
        assert results[i] is not None and np.array_equal(results[i], np.cumsum(x + i)), i
    assert d.proc.wait(30) == 0, d.log()


@pytest.mark.concurrency
def test_connections_spread_over_loops_and_drain(spawn):
    """--grpc-threads 4: sixteen connections (a client each, with its own
    subchannel) are dealt out to the loops in turn, four each (each loop
    counts its own; /metrics sums them); calls on all of them at once,
    then a drain under load: every call sent is answered right, and the
    process exits 0."""
    d = spawn("--grpc-threads", "4", "--fault-delay-ms", "300", "--workers", "2",
              "--inline-max-elements", "0")
    assert re.search(r"gRPC listening on \S+ \(port \d+, h2c, 4 loops\)", d.log()), d.log()
    clients = [grpcclient.InferenceServerClient(
        "127.0.0.1:%d" % d.grpc_port, channel_args=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(16)]
    x = np.arange(100, dtype=np.int64)
    for c in clients:  # each opens its connection
        assert np.array_equal(infer(c, x).as_numpy("y"), np.cumsum(x))
    text = d.request("GET", "/metrics")[2].decode()
    per_loop = {int(k): float(v) for k, v in re.findall(
        r'^tally_grpc_loop_connections_total\{loop="(\d+)"\} (\S+)$', text, re.M)}
    assert per_loop == {0: 4, 1: 4, 2: 4, 3: 4}, per_loop
    assert d.metric("tally_grpc_connections_total") == 16
    assert d.metric("tally_grpc_open_connections") == 16
    assert d.metric("tally_grpc_calls_total") == 16
    # the drain once every call has been received whole (none answered
    # yet: 300 ms a job, two workers)
    drain_during_calls(d, clients, x,
                       lambda: eventually(lambda: d.metric("tally_grpc_calls_total"), 32))


def test_a_second_server_on_the_grpc_port_fails_to_start(spawn, tmp_path):
    """One listening socket however many loops: a second tallyd told to
    use the first one's gRPC port (both with 2 loops) stops with a message
    that names it, instead of sharing the port."""
    from conftest import TALLYD
    d = spawn("--grpc-threads", "2")
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path / "pocl"))
    r = subprocess.run([TALLYD, "--listen", "127.0.0.1:0", "--grpc-listen",
                        "127.0.0.1:%d" % d.grpc_port, "--grpc-threads", "2",
                        "--device", "host"], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 1, r.stderr
    assert "cannot listen for gRPC on 127.0.0.1:%d" % d.grpc_port in r.stderr, r.stderr
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    assert c.is_server_ready()


def test_second_client_typed_contents(tallyd, stubs):
    out = run_stub_client(tallyd, stubs, "typed")
    assert "typed contents: 10 dtypes ok" in out, out


def test_not_a_grpc_request(tallyd):
    """HTTP/1.1 to the gRPC port is refused without harm."""
    import socket
    s = socket.create_connection(("127.0.0.1", tallyd.grpc_port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(5)
    try:
        data = s.recv(1000)
    except OSError:
        data = b""
    s.close()
    assert b"200 OK" not in data
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % tallyd.grpc_port)
    assert c.is_server_live()


@pytest.mark.concurrency
def test_many_concurrent_calls(client):
    x = np.arange(50_000, dtype=np.int64)

    def one(i):
        for _ in range(5):
            y = infer(client, x + i).as_numpy("y")
            assert np.array_equal(y, np.cumsum(x + i))

    run_threads(8, one)


@pytest.mark.slow
def test_grpc_can_be_turned_off(spawn):
    d = spawn("--grpc-listen", "")
    assert d.request("GET", "/v2/health/live")[0] == 200
    with pytest.raises(KeyError):
        d.metric("tally_grpc_connections_total")


@pytest.mark.slow
def test_tls_with_alpn_h2(spawn, tmp_path):
    """--tls-cert/--tls-key serve gRPC over TLS too; h2c is refused."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), cwd=tmp_path, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=tally grpc test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")
    (tmp_path / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext")
    d = spawn("--tls-cert", str(tmp_path / "server.pem"), "--tls-key",
              str(tmp_path / "server.key"), https=True, cafile=str(tmp_path / "ca.pem"))
    assert "TLS, ALPN h2" in d.log()
    c = grpcclient.InferenceServerClient("localhost:%d" % d.grpc_port, ssl=True,
                                         root_certificates=str(tmp_path / "ca.pem"))
    rng = np.random.default_rng(9)
    for n in (7, 300_000):
        x = random_tensor(rng, "float64", (n,))
        assert close(infer(c, x).as_numpy("y"), cumsum(x), x)
    assert c.is_server_live()
    # plaintext HTTP/2 to the TLS port gets no answer
    plain = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    with pytest.raises(InferenceServerException):
        plain.is_server_live(client_timeout=3)
    # the handshake selects h2 for a client that offers it...
    def s_client(alpn):
        return subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % d.grpc_port,
                               "-alpn", alpn, "-CAfile", str(tmp_path / "ca.pem")],
                              input=b"", capture_output=True, timeout=20)
    r = s_client("h2")
    assert r.returncode == 0 and b"ALPN protocol: h2" in r.stdout, r.stdout + r.stderr
    # ...and refuses, with TLS's own alert, one that insists on another
    r = s_client("http/1.1")
    out = (r.stdout + r.stderr).lower()
    assert b"no application protocol" in out or b"no_application_protocol" in out, out
    assert c.is_server_ready()


@pytest.mark.parametrize("extra", [[], ["--streaming"], ["--async"],
                                   ["--request-parameter", "axis:1:int"]],
                         ids=["unary", "streaming", "async", "request-parameter"])
@pytest.mark.slow
@pytest.mark.peer
def test_perf_analyzer_grpc_unchanged(spawn, extra):
    # sequences off: perf_analyzer's plain mode (test_sequences.py has its
    # sequence mode)
    d = spawn("--max-sequences", "0")
    exe, env = perf_analyzer_bin()
    shape = "x:4,300" if "--request-parameter" in extra else "x:5000"
    r = subprocess.run([exe, "-m", "cumsum", "-u", "127.0.0.1:%d" % d.grpc_port, "-i", "grpc",
                        "--shape", shape, "--concurrency-range", "2"]
                       + pa_count_windows(500) + extra,
                       capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Throughput:" in out, out
    ok = d.metric("tally_requests_total", protocol="grpc", route="infer", code="OK")
    assert ok >= 50, out
    # no call failed, the teardown's shared-memory calls included
    failed = d.metric("tally_request_failures_total", protocol="grpc")
    assert failed == 0, d.request("GET", "/metrics")[2].decode()


@pytest.mark.concurrency
def test_a_full_queue_is_resource_exhausted(spawn):
    d = spawn("--queue-depth", "1", "--workers", "1", "--fault-delay-ms", "400",
              "--inline-max-elements", "0")
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    x = np.arange(10, dtype=np.int32)
    codes = []

    def one(i):
        try:
            infer(c, x, client_timeout=20)
            codes.append("OK")
        except InferenceServerException as e:
            codes.append(e.status())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "StatusCode.RESOURCE_EXHAUSTED" in codes, codes
    assert "OK" in codes, codes


def test_access_log_lines_and_their_rate_limit(spawn):
    d = spawn("--access-log", "errors", "--access-log-max-per-s", "5")
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    inp = grpcclient.InferInput("x", [2], "FP32")
    inp.set_data_from_numpy(np.zeros(2, dtype=np.float32))
    t0 = time.time()
    for _ in range(40):
        with pytest.raises(InferenceServerException):
            c.infer("nope", [inp])
    infer(c, np.ones(3, dtype=np.float32))  # a success: no line with =errors
    elapsed = time.time() - t0
    time.sleep(0.3)  # the log is flushed on the loop's tick
    lines = [l for l in d.log().splitlines() if '"module":"grpc"' in l and "grpc_status" in l]
    assert lines and all('"status":"NOT_FOUND"' in l for l in lines), lines[:3]
    assert len(lines) <= 5 * (int(elapsed) + 2), len(lines)
    # one cap and one counter for both doors
    assert d.metric("tally_access_log_dropped_total") >= 40 - len(lines)
    assert "tally_grpc_access_log_dropped_total" not in d.request("GET", "/metrics")[2].decode()
    # the once-a-second warning, as REST's lines get, once the second ends
    deadline = time.time() + 5
    while "lines over --access-log-max-per-s=5 left out" not in d.log():
        assert time.time() < deadline, d.log()[-2000:]
        time.sleep(0.1)
