"""grpc.health.v1.Health on the gRPC door, asked with grpcio's own health
stub (grpcio-health-checking from PyPI), as Kubernetes' gRPC probes, Envoy
and grpc-health-probe ask it: Check and Watch for the server and tally's
service, NOT_FOUND and SERVICE_UNKNOWN for others, a drain seen by a
Watch, a Watch whose client left, and tokens (open unless
--auth-health)."""
import queue
import signal
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


def stub(d):
    channel = grpc.insecure_channel("127.0.0.1:%d" % d.grpc_port)
    return channel, health_pb2_grpc.HealthStub(channel)


def check(s, service, **kw):
    return s.Check(health_pb2.HealthCheckRequest(service=service), timeout=10, **kw).status


def test_check(tallyd):
    channel, s = stub(tallyd)
    with channel:
        for service in ("", "inference.GRPCInferenceService", "cumsum"):
            assert check(s, service) == SERVING, service
        with pytest.raises(grpc.RpcError) as e:
            check(s, "no.such.Service")
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        assert "unknown service" in e.value.details()
    # counted as health calls
    assert tallyd.metric("tally_requests_total", protocol="grpc", route="health") >= 3


def watch_into(s, service, out):
    """Reads a Watch on a thread into out (statuses, then "end" or the
    error's code); returns the call, for cancelling."""
    call = s.Watch(health_pb2.HealthCheckRequest(service=service), timeout=60)

    def read():
        try:
            for r in call:
                out.put(r.status)
            out.put("end")
        except grpc.RpcError as e:
            out.put(e.code())

    threading.Thread(target=read, daemon=True).start()
    return call


@pytest.mark.concurrency
def test_watch_sees_the_drain(spawn):
    d = spawn()
    channel, s = stub(d)
    with channel:
        seen, unknown = queue.Queue(), queue.Queue()
        watch_into(s, "", seen)
        watch_into(s, "other.Service", unknown)
        assert seen.get(timeout=10) == SERVING
        assert unknown.get(timeout=10) == SERVICE_UNKNOWN
        # a quiet Watch holds nothing up, and tells nothing new
        time.sleep(0.3)
        assert seen.empty()
        d.proc.send_signal(signal.SIGTERM)
        assert seen.get(timeout=10) == NOT_SERVING
        assert seen.get(timeout=10) == "end"
        assert unknown.get(timeout=10) == SERVICE_UNKNOWN
        assert unknown.get(timeout=10) == "end"
    assert d.proc.wait(timeout=30) == 0, d.log()


@pytest.mark.concurrency
def test_a_watch_whose_client_left_is_let_go(spawn):
    d = spawn()
    channel, s = stub(d)
    seen = queue.Queue()
    call = watch_into(s, "", seen)
    assert seen.get(timeout=10) == SERVING
    call.cancel()
    channel.close()
    # the suspended answer is freed: nothing is left in flight, so a drain
    # ends at once rather than at --drain-timeout
    t0 = time.time()
    assert d.stop() == 0
    assert time.time() - t0 < 10, d.log()


def test_open_without_a_token_unless_auth_health(spawn, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("sekrit-1\n")
    d = spawn("--auth-token-file", str(tokens))
    channel, s = stub(d)
    with channel:
        assert check(s, "") == SERVING
    d2 = spawn("--auth-token-file", str(tokens), "--auth-health")
    channel, s = stub(d2)
    with channel:
        with pytest.raises(grpc.RpcError) as e:
            check(s, "")
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert check(s, "", metadata=(("authorization", "Bearer sekrit-1"),)) == SERVING


def test_a_malformed_request_is_invalid(tallyd):
    channel = grpc.insecure_channel("127.0.0.1:%d" % tallyd.grpc_port)
    with channel:
        raw = channel.unary_unary("/grpc.health.v1.Health/Check",
                                  request_serializer=lambda b: b,
                                  response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as e:
            raw(b"\x0a\x05ab", timeout=10)  # a string that runs past the end
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # unknown fields are skipped
        assert raw(b"\x10\x01", timeout=10) == b"\x08\x01"
