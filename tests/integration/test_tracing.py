"""OpenTelemetry spans, sent to a real OTLP/HTTP receiver: a small HTTP
server here that decodes each POST with the opentelemetry-proto package
from PyPI. Checks the spans' tree and attributes, the continuation of a
caller's traceparent (REST and gRPC), parent-based sampling and the
ratio, Triton's /v2/trace/setting, and that a collector that is down,
failing or slow changes nothing for the requests."""
import http.server
import json
import random
import threading
import time

import numpy as np
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from conftest import Daemon, eventually

# the exporter's thread beside the request threads: TSan runs them, and
# `make check` leaves them out (collectors slow, down or black-holed)
pytestmark = [pytest.mark.concurrency, pytest.mark.slow]

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


class Collector:
    """An OTLP/HTTP traces endpoint: POST /v1/traces, protobuf. mode is
    "ok", "error" (500) or "slow" (answers after `delay` seconds)."""

    def __init__(self):
        self.spans = []  # (resource attributes, span)
        self.posts = 0
        self.mode = "ok"
        self.delay = 0.0
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.path == "/v1/traces"
                assert self.headers["Content-Type"] == "application/x-protobuf"
                if outer.mode == "slow":
                    time.sleep(outer.delay)
                if outer.mode == "error":
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(body)
                with outer.lock:
                    outer.posts += 1
                    for rs in req.resource_spans:
                        res = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for sp in ss.spans:
                                outer.spans.append((res, sp))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def of_trace(self, trace_hex):
        with self.lock:
            return [sp for _, sp in self.spans if sp.trace_id.hex() == trace_hex]

    def wait_trace(self, trace_hex, at_least, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.of_trace(trace_hex)
            if len(got) >= at_least:
                return got
            time.sleep(0.05)
        raise AssertionError("%d spans of trace %s, wanted %d" % (
            len(self.of_trace(trace_hex)), trace_hex, at_least))


def attrs(span):
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = v.string_value if v.HasField("string_value") else v.int_value
    return out


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture
def traced(collector, spawn):
    return spawn("--otlp-endpoint", collector.url, "--trace-ratio", "1",
                 env={"OTEL_SERVICE_NAME": "tally-test"})


def cumsum(d, body='{"data":[1]}', headers=None, timeout=60):
    """POSTs a JSON body to /v1/cumsum: (status, headers, body)."""
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return d.request("POST", "/v1/cumsum", body, h, timeout=timeout)


def tp(flags="01", trace=CALLER_TRACE):
    return "00-%s-%s-%s" % (trace, CALLER_SPAN, flags)


def fresh_trace():
    return "%032x" % random.getrandbits(128)


def test_rest_spans_continue_the_callers_trace(traced, collector):
    seed = random.randrange(1 << 30)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    trace = fresh_trace()
    st, h, body = cumsum(traced, json.dumps(
        {"dtype": "int64", "data": rng.integers(-9, 9, n).tolist()}),
        {"traceparent": tp(trace=trace), "X-Request-Id": "trace-me-1"})
    assert st == 200, body
    answer = h["traceparent"].split("-")
    assert answer[1] == trace and answer[3] == "01"
    spans = collector.wait_trace(trace, 4)
    time.sleep(0.3)
    spans = collector.of_trace(trace)
    own = [s for s in spans if s.kind == s.SPAN_KIND_SERVER]
    assert len(own) == 1, (seed, spans)
    own = own[0]
    assert own.span_id.hex() == answer[2]
    assert own.parent_span_id.hex() == CALLER_SPAN
    assert own.name == "POST /v1/cumsum"
    a = attrs(own)
    assert a["http.request.method"] == "POST" and a["http.route"] == "/v1/cumsum"
    assert a["url.path"] == "/v1/cumsum" and a["http.response.status_code"] == 200
    assert a["tally.request_id"] == "trace-me-1"
    assert a["http.response.body.size"] == len(body)
    assert own.flags & 1 and own.end_time_unix_nano >= own.start_time_unix_nano
    # within a minute of now, in Unix time
    assert abs(own.start_time_unix_nano / 1e9 - time.time()) < 60
    children = {s.name: s for s in spans if s is not own}
    for s in children.values():
        assert s.parent_span_id == own.span_id and s.kind == s.SPAN_KIND_INTERNAL
        assert own.start_time_unix_nano <= s.start_time_unix_nano
        assert s.end_time_unix_nano <= own.end_time_unix_nano
    assert {"receive", "parse", "compute"} <= set(children), sorted(children)
    c = attrs(children["compute"])
    assert c["tally.elements"] == n and c["tally.batch_size"] >= 1 and c["tally.device"], c
    # why it ran there, when a worker ran it (a sum done at once has none)
    assert c.get("tally.placement", "cost") in {"cost", "explore", "device", "compiling",
                                                "fallback"}, c
    res = [r for r, sp in collector.spans if sp.span_id == own.span_id][0]
    assert res["service.name"] == "tally-test" and res["service.version"]


def test_grpc_spans_continue_the_callers_trace(traced, collector):
    import tritonclient.grpc as tg
    trace = fresh_trace()
    g = tg.InferenceServerClient("127.0.0.1:%d" % traced.grpc_port)
    x = np.arange(7, dtype=np.float32)
    i = tg.InferInput("x", [7], "FP32")
    i.set_data_from_numpy(x)
    r = g.infer("cumsum", [i], headers={"traceparent": tp(trace=trace)})
    assert r.as_numpy("y").tolist() == np.cumsum(x).tolist()
    collector.wait_trace(trace, 3)
    time.sleep(0.3)
    spans = collector.of_trace(trace)
    own = [s for s in spans if s.kind == s.SPAN_KIND_SERVER][0]
    assert own.name == "inference.GRPCInferenceService/ModelInfer"
    assert own.parent_span_id.hex() == CALLER_SPAN
    a = attrs(own)
    assert a["rpc.system"] == "grpc" and a["rpc.service"] == "inference.GRPCInferenceService"
    assert a["rpc.method"] == "ModelInfer" and a["rpc.grpc.status_code"] == 0
    names = {s.name for s in spans if s is not own}
    assert "compute" in names, names
    g.close()


def test_an_unsampled_caller_gets_no_spans(traced, collector):
    trace = fresh_trace()
    st, h, _ = cumsum(traced, '{"data":[1,2]}',
                              {"traceparent": tp("00", trace)})
    assert st == 200 and h["traceparent"].endswith("-00")
    # a sampled request after it arrives; the unsampled one never does
    after = fresh_trace()
    cumsum(traced, '{"data":[1,2]}', {"traceparent": tp("01", after)})
    collector.wait_trace(after, 1)
    time.sleep(0.3)
    assert collector.of_trace(trace) == []


def test_ratio_zero_and_one(spawn, collector):
    none = spawn("--otlp-endpoint", collector.url, "--trace-ratio", "0")
    for _ in range(20):
        st, h, _ = cumsum(none, '{"data":[1]}')
        assert st == 200 and h["traceparent"].endswith("-00")
    time.sleep(1.5)
    assert collector.spans == []
    assert none.metric("tally_trace_spans_total", result="exported") == 0
    # the standard variable, when the flag is not given
    every = spawn(env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
                       "OTEL_TRACES_SAMPLER_ARG": "1"})
    ids = []
    for _ in range(20):
        st, h, _ = cumsum(every, '{"data":[1]}')
        assert st == 200 and h["traceparent"].endswith("-01")
        ids.append(h["traceparent"].split("-")[1])
    for t in ids:
        collector.wait_trace(t, 1)
    # the exporter counts a batch once the collector's answer is back, a
    # moment after the collector has the spans
    assert eventually(lambda: every.metric("tally_trace_spans_total", result="exported") >= 20,
                      True)


def test_trace_setting_changes_sampling_at_run_time(traced, collector):
    st, _, body = traced.request("GET", "/v2/trace/setting")
    assert st == 200
    s = json.loads(body)
    assert s["trace_level"] == ["TIMESTAMPS"] and s["trace_rate"] == "1"
    assert s["trace_mode"] == "opentelemetry"
    st, _, body = traced.post_json("/v2/trace/setting", {"trace_level": ["OFF"]})[:3]
    assert st == 200 and body["trace_level"] == ["OFF"]
    for _ in range(10):
        assert cumsum(traced, '{"data":[1]}')[1]["traceparent"].endswith("-00")
    # a caller's sampled trace is still followed (parent-based)
    trace = fresh_trace()
    cumsum(traced, '{"data":[1]}', {"traceparent": tp(trace=trace)})
    collector.wait_trace(trace, 1)
    st, _, body = traced.post_json("/v2/models/cumsum/trace/setting",
                                   {"trace_level": None, "trace_rate": "1"})
    assert st == 200 and body["trace_level"] == ["TIMESTAMPS"]
    assert cumsum(traced, '{"data":[1]}')[1]["traceparent"].endswith("-01")
    st, _, body = traced.post_json("/v2/trace/setting", {"trace_rate": "4"})
    assert st == 200 and body["sample_ratio"] == 0.25
    for bad in ({"trace_level": ["TENSORS"]}, {"trace_rate": "0"}, {"trace_count": "5"},
                {"trace_file": "/tmp/x"}, {"nope": 1}, {"sample_ratio": 2}):
        st, _, body = traced.post_json("/v2/trace/setting", bad)
        assert st == 400 and body["error"], bad
    st, _, body = traced.request("POST", "/v2/trace/setting", b"[1]",
                                 {"Content-Type": "application/json"})
    assert st == 400
    # unchanged by the refusals
    assert json.loads(traced.request("GET", "/v2/trace/setting")[2])["sample_ratio"] == 0.25


def test_trace_setting_without_tracing_and_with_tokens(spawn, tmp_path):
    off = spawn()
    st, _, body = off.request("GET", "/v2/trace/setting")
    assert st == 200 and json.loads(body)["trace_level"] == ["OFF"]
    st, _, body = off.post_json("/v2/trace/setting", {"trace_rate": "1"})[:3]
    assert st == 403 and "--otlp-endpoint" in body["error"]
    tokens = tmp_path / "tokens"
    tokens.write_text("t\n")
    closed = spawn("--auth-token-file", str(tokens))
    assert closed.request("GET", "/v2/trace/setting")[0] == 401
    assert closed.request("GET", "/v2/trace/setting", None,
                          {"Authorization": "Bearer t"})[0] == 200


def request_ok(d, n=20):
    for _ in range(n):
        st, _, body = cumsum(d, '{"data":[1,2,3]}', timeout=10)
        assert st == 200 and json.loads(body)["data"] == [1, 3, 6]


def test_a_collector_that_is_down_changes_nothing(spawn):
    c = Collector()
    url = c.url
    c.close()  # nothing listens there now
    d = spawn("--otlp-endpoint", url, "--trace-ratio", "1")
    request_ok(d)
    deadline = time.time() + 15
    while d.metric("tally_trace_exports_total", result="failed") == 0:
        assert time.time() < deadline
        time.sleep(0.1)
    assert d.metric("tally_trace_spans_total", result="failed") >= 1
    request_ok(d)
    assert any("cannot send spans" in l.get("msg", "") for l in d.log_lines())


def test_a_collector_that_fails_then_recovers(traced, collector):
    collector.mode = "error"
    request_ok(traced)
    deadline = time.time() + 15
    while traced.metric("tally_trace_exports_total", result="failed") == 0:
        assert time.time() < deadline
        time.sleep(0.1)
    collector.mode = "ok"
    trace = fresh_trace()
    cumsum(traced, '{"data":[1]}', {"traceparent": tp(trace=trace)})
    collector.wait_trace(trace, 1)


def test_a_slow_collector_drops_spans_not_requests(spawn, collector):
    collector.mode = "slow"
    collector.delay = 5.0
    d = spawn("--otlp-endpoint", collector.url, "--trace-ratio", "1", "--otlp-max-queue", "8")
    slowest = 0.0
    for _ in range(10):
        t0 = time.time()
        request_ok(d, 20)
        slowest = max(slowest, (time.time() - t0) / 20)
    # the exporter is stuck in a 5 s POST: the queue fills and drops, and
    # no request waits for it (one that did would take 5 s)
    assert d.metric("tally_trace_dropped_requests_total") > 0
    assert slowest < 2.5, slowest
    collector.mode = "ok"
    st, _, body = d.request("GET", "/metrics")
    assert "tally_trace_queued_requests" in body.decode()


def test_the_exit_does_not_wait_on_a_black_holed_collector(spawn, collector):
    # every POST hangs past OTEL_EXPORTER_OTLP_TIMEOUT (4 s): requests come
    # faster than one batch (512) in 4 s, so spans are still queued at
    # SIGTERM.
    # The stop sends until one batch fails, drops the rest and says so,
    # instead of a timeout per batch left (8 batches: 80 s at the default)
    collector.mode = "slow"
    collector.delay = 60.0
    d = spawn("--otlp-endpoint", collector.url, "--trace-ratio", "1",
              "--otlp-max-queue", "4096", env={"OTEL_EXPORTER_OTLP_TIMEOUT": "4000"})
    request_ok(d, 1500)
    assert d.metric("tally_trace_queued_requests") > 0
    t0 = time.time()
    code = d.stop()
    took = time.time() - t0
    assert code == 0, d.log()
    dropped = [l for l in d.log_lines() if "spans not sent" in l.get("msg", "")]
    assert dropped, d.log()
    # the POST in flight at SIGTERM and one failed batch: 2 timeouts (8 s),
    # not the collector's 60 s (the log line above is what shows that no
    # further batch was tried)
    assert took < 30, took


def test_a_bad_exporter_timeout_is_refused(spawn, collector):
    for bad in ("abc", "0", "-5", "600001", "10s"):
        with pytest.raises(RuntimeError, match="OTEL_EXPORTER_OTLP_TIMEOUT"):
            spawn("--otlp-endpoint", collector.url, env={"OTEL_EXPORTER_OTLP_TIMEOUT": bad})


def test_tracestate_rides_along(traced, collector):
    trace = fresh_trace()
    cumsum(traced, headers={"traceparent": tp(trace=trace), "tracestate": "vendor=abc,other=1"})
    spans = collector.wait_trace(trace, 1)
    own = [s for s in spans if s.kind == s.SPAN_KIND_SERVER][0]
    assert own.trace_state == "vendor=abc,other=1"


def test_a_batch_links_its_requests(spawn, collector):
    # one worker that waits for company, and nothing run inline: the
    # concurrent requests share launches
    d = spawn("--otlp-endpoint", collector.url, "--trace-ratio", "1", "--workers", "1",
              "--max-batch", "8", "--max-queue-delay-us", "200000",
              "--inline-max-elements", "0", "--json-inline-max-elements", "0")
    traces = [fresh_trace() for _ in range(6)]
    errors = []

    def one(t):
        try:
            st, _, _ = cumsum(d, '{"dtype":"float32","data":[1,2,3,4]}',
                              {"traceparent": tp(trace=t)})
            assert st == 200
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(t,)) for t in traces]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    own = {}
    compute = {}
    for t in traces:
        spans = collector.wait_trace(t, 3)
        time.sleep(0.1)
        spans = collector.of_trace(t)
        own[t] = [s for s in spans if s.kind == s.SPAN_KIND_SERVER][0]
        compute[t] = [s for s in spans if s.name == "compute"][0]
    batched = [t for t in traces if attrs(compute[t])["tally.batch_size"] > 1]
    assert batched, [attrs(c) for c in compute.values()]
    for t in batched:
        c = compute[t]
        linked = {(l.trace_id.hex(), l.span_id.hex()) for l in c.links}
        assert len(linked) == attrs(c)["tally.batch_size"] - 1, (t, linked)
        for lt, ls in linked:
            assert lt != t and lt in own and own[lt].span_id.hex() == ls
            # and the link is mutual
            back = {(l.trace_id.hex(), l.span_id.hex()) for l in compute[lt].links}
            assert (t, own[t].span_id.hex()) in back
