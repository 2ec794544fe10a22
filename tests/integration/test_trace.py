"""W3C Trace Context: a request's traceparent is continued (same trace id
and flags, a span id of tally's own), a missing or invalid one starts a new
trace, the answer carries tally's traceparent over REST and gRPC, and the
access log names the trace."""
import json
import re
import time

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
FORM = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def parts(tp):
    m = FORM.match(tp)
    assert m, tp
    trace, span, flags = m.groups()
    assert trace != "0" * 32 and span != "0" * 16
    return trace, span, flags


def answer_tp(d, value=None):
    st, h, _ = d.request("GET", "/v2/health/live", None,
                         {"traceparent": value} if value is not None else {})
    assert st == 200
    return h["traceparent"]


def test_rest_continues_or_starts(tallyd):
    trace, span, flags = parts(answer_tp(tallyd, CALLER))
    assert trace == CALLER[3:35] and flags == "01" and span != CALLER[36:52]
    # a later version's first fields are read; the rest is ignored
    later = "cc" + CALLER[2:] + "-more-to-come"
    assert parts(answer_tp(tallyd, later))[0] == CALLER[3:35]
    # anything else starts a new trace, not sampled
    seen = set()
    for bad in (None, "", CALLER.upper(), "ff" + CALLER[2:],
                "00-" + "0" * 32 + CALLER[35:], CALLER[:52] + "-0", CALLER + "-x",
                CALLER.replace("-", "_")):
        trace, span, flags = parts(answer_tp(tallyd, bad))
        assert trace != CALLER[3:35] and flags == "00", bad
        seen.add(trace)
    assert len(seen) == 8  # each request a trace of its own


def test_access_log_names_the_trace(spawn):
    d = spawn("--access-log=all")
    d.request("GET", "/v2/health/ready", None, {"traceparent": CALLER})
    deadline = time.time() + 5
    while True:
        lines = [json.loads(l) for l in open(d.log_path) if '"module":"http"' in l]
        if any(l.get("trace_id") == CALLER[3:35] for l in lines):
            break
        assert time.time() < deadline, lines
        time.sleep(0.05)


def test_grpc_continues_the_trace(tallyd):
    with grpc.insecure_channel("127.0.0.1:%d" % tallyd.grpc_port) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        _, call = stub.ServerLive.with_call(service_pb2.ServerLiveRequest(),
                                            metadata=[("traceparent", CALLER)], timeout=10)
        tp = dict(call.initial_metadata())["traceparent"]
        trace, span, flags = parts(tp)
        assert trace == CALLER[3:35] and flags == "01" and span != CALLER[36:52]
        _, call = stub.ServerLive.with_call(service_pb2.ServerLiveRequest(), timeout=10)
        assert parts(dict(call.initial_metadata())["traceparent"])[0] != CALLER[3:35]
        # an answer that is only trailers (a failure) carries it too
        try:
            stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="nope"),
                               metadata=[("traceparent", CALLER)], timeout=10)
            raise AssertionError("an unknown model was found")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND
            md = dict(e.initial_metadata() or ())
            md.update(dict(e.trailing_metadata() or ()))
            assert parts(md["traceparent"])[0] == CALLER[3:35], md
