"""Operations: metrics, health, logs, the OpenAPI document, the CLI flags."""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time

import openapi_spec_validator
import pytest
import yaml

from conftest import CACHE_SEED, ROOT, TALLYD


def metric(text, name, labels=""):
    pattern = r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels))
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None


def check_families(text):
    """Prometheus' text format, family by family: each family has one
    HELP and one TYPE line naming it, before its samples, and its samples
    come together; a histogram's are its _bucket, _sum and _count.
    Returns the families, for the caller's own checks."""
    declared, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^# (HELP|TYPE) ([a-z_:][a-z0-9_:]*) (.+)$", line)
        if m:
            kind, family, rest = m.groups()
            entry = declared.setdefault(family, {})
            assert kind not in entry, "%s twice: %s" % (kind, line)
            entry[kind] = rest
            if kind == "TYPE":
                assert rest in ("counter", "gauge", "histogram"), line
            current = family
            continue
        assert not line.startswith("#"), line
        name = re.match(r"^[a-z_:][a-z0-9_:]*", line).group(0)
        family = name
        if family not in declared:
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            assert declared.get(family, {}).get("TYPE") == "histogram", line
        assert family == current, "%s, outside its family's lines" % line
        assert set(declared[family]) == {"HELP", "TYPE"}, line
    return declared


def test_metrics(tallyd):
    for _ in range(3):
        tallyd.post_json("/v1/cumsum", {"dtype": "int32", "shape": [2], "data": [1, 2]})
    tallyd.post_json("/v1/cumsum", {"dtype": "int32", "shape": [2], "data": [1]})
    status, hdrs, body = tallyd.request("GET", "/metrics")
    assert status == 200 and hdrs["content-type"].startswith("text/plain")
    text = body.decode()
    assert metric(text, "tally_requests_total", '{protocol="http",route="native",code="200"}') >= 3
    assert metric(text, "tally_requests_total", '{protocol="http",route="native",code="400"}') >= 1
    assert metric(text, "tally_request_failures_total", '{protocol="http",route="native",reason="INVALID"}') >= 1
    for h in ("tally_queue_duration_seconds", "tally_compute_duration_seconds"):
        assert metric(text, h + "_bucket", '{le="+Inf"}') >= 3
        assert metric(text, h + "_count") >= 3
    assert metric(text, "tally_request_duration_seconds_count", '{protocol="http",route="native"}') >= 4
    assert metric(text, "tally_queue_depth") is not None
    assert metric(text, "tally_running_jobs") is not None
    assert metric(text, "tally_inflight_requests") >= 1  # this request
    assert metric(text, "tally_received_bytes_total") > 0
    assert metric(text, "tally_sent_bytes_total") > 0
    assert re.search(r'^tally_device_busy_seconds_total\{worker="0",device=".+"\} \S+$', text, re.M)
    assert "tally_build_info{" in text
    # every sample line is in the text exposition format: a name, labels
    # in braces only when there are some, a value
    sample = re.compile(r'^[a-z_:][a-z0-9_:]*(\{[a-z_]+="(?:[^"\\\n]|\\.)*"'
                        r'(?:,[a-z_]+="(?:[^"\\\n]|\\.)*")*\})? \S+$')
    for line in text.splitlines():
        if not line.startswith("#"):
            assert sample.match(line), line
    assert "tally_requests_total" in check_families(text)


def test_every_section_of_metrics_keeps_the_format(spawn, tmp_path):
    """The sections other setups add (the log's, the shared store's, the
    span exporter's, shared memory's) are in the same format."""
    d = spawn("--device", "host", "--state-dir", str(tmp_path),
              "--otlp-endpoint", "http://127.0.0.1:9", "--allow-shared-memory")
    d.post_json("/v1/cumsum", {"data": [1, 2], "sequence_id": 7, "sequence_start": True})
    families = check_families(d.request("GET", "/metrics")[2].decode())
    for f in ("tally_sequence_log_records_total", "tally_trace_spans_total",
              "tally_shm_regions", "tally_sequences_total"):
        assert f in families, f
    if shutil.which("redis-server") is None:
        return
    from seqlib import Redis
    r = Redis()
    try:
        shared = spawn("--device", "host", "--state-store", r.url())
        shared.post_json("/v1/cumsum", {"data": [1], "sequence_id": 8, "sequence_start": True})
        families = check_families(shared.request("GET", "/metrics")[2].decode())
        assert "tally_state_store_durability" in families
    finally:
        r.cleanup()


def test_generated_request_ids(tallyd, spawn):
    """Without X-Request-Id each request gets a fresh id, and another
    daemon does not hand out the same ones (their logs can be merged)."""
    def ids(d, n=50):
        return [d.request("GET", "/v2/health/live")[1]["x-request-id"] for _ in range(n)]
    first = ids(tallyd)
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in first), first
    assert len(set(first)) == len(first)
    other = ids(spawn("--device", "host", "--warmup=false"))
    assert not set(first) & set(other)


def test_health(tallyd):
    assert tallyd.request("GET", "/v2/health/live")[0] == 200
    status, _, body = tallyd.request("GET", "/v2/health/ready")
    assert status == 200 and b'"ready":true' in body
    status, hdrs, body = tallyd.request("HEAD", "/v2/health/ready")
    assert status == 200 and body == b""


@pytest.mark.slow
def test_access_log(spawn):
    tallyd = spawn("--access-log=all")
    tallyd.post_json("/v1/cumsum", {"dtype": "int8", "shape": [1], "data": [1]},
                     headers={"X-Request-Id": "log-me"})
    lines = []
    for _ in range(100):  # access lines are flushed every few milliseconds
        lines = [l for l in tallyd.log_lines() if l.get("request_id") == "log-me"]
        if lines:
            break
        time.sleep(0.02)
    assert len(lines) == 1
    line = lines[0]
    assert line["module"] == "http" and line["method"] == "POST" and line["path"] == "/v1/cumsum"
    assert line["status"] == 200 and line["bytes_in"] > 0 and line["bytes_out"] > 0
    for k in ("queue_us", "compute_us", "total_us", "ts"):
        assert k in line


def log_line(d, request_id):
    for _ in range(200):  # access lines are flushed every few milliseconds
        lines = [l for l in d.log_lines() if l.get("request_id") == request_id]
        if lines:
            return lines[0]
        time.sleep(0.02)
    raise AssertionError("no access line for " + request_id)


def access_lines(d):
    return [l for l in d.log_lines() if "status" in l and "path" in l]


@pytest.mark.slow
def test_access_log_by_default_has_failed_and_slow_requests(spawn):
    """The default (--access-log=errors): a request that succeeds quickly
    gets no line; one that fails does, and so does one slower than
    --slow-request-ms, marked slow."""
    d = spawn("--slow-request-ms", "150", "--fault-delay-ms", "300",
              "--inline-max-elements", "0", "--json-inline-max-elements", "0")
    assert d.request("GET", "/v2/health/live", headers={"X-Request-Id": "quick"})[0] == 200
    assert d.request("GET", "/nowhere", headers={"X-Request-Id": "lost"})[0] == 404
    status, _, _ = d.post_json("/v1/cumsum", {"dtype": "int8", "shape": [1], "data": [1]},
                               headers={"X-Request-Id": "slow"})
    assert status == 200
    lost, slow = log_line(d, "lost"), log_line(d, "slow")
    assert lost["status"] == 404 and "slow" not in lost, lost
    assert slow["status"] == 200 and slow["slow"] is True and slow["total_us"] >= 150000, slow
    assert [l["request_id"] for l in access_lines(d)] == ["lost", "slow"], d.log()


@pytest.mark.slow
def test_access_log_errors_are_capped_per_second(spawn):
    """A flood of bad requests writes at most --access-log-max-per-s lines
    a second; the rest are counted in /metrics, and a warning says how many
    were left out, also when the flood has stopped."""
    d = spawn("--access-log-max-per-s", "5")
    t0 = time.time()
    conn = d.connect()
    for i in range(60):
        conn.request("GET", "/nowhere", headers={"X-Request-Id": "flood-%d" % i})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 404
    conn.close()
    seconds = time.time() - t0
    deadline = time.time() + 5
    while True:
        # read again each time: a request is counted after its answer went
        dropped = d.metric("tally_access_log_dropped_total")
        written = [l for l in access_lines(d) if l["request_id"].startswith("flood-")]
        warned = [l for l in d.log_lines() if "left out" in l.get("msg", "")]
        if len(written) + dropped == 60 and warned:
            break
        assert time.time() < deadline, (dropped, len(written), d.log())
        time.sleep(0.05)
    assert 5 <= len(written) <= 5 * (int(seconds) + 2), (len(written), seconds)
    assert sum(int(re.search(r"(\d+) lines", w["msg"]).group(1)) for w in warned) <= dropped
    assert warned[0]["level"] == "warn"


@pytest.mark.slow
def test_access_log_all_and_off(spawn):
    """all writes every request's line (nothing capped); off writes none,
    failures included; a word that is neither is refused at startup."""
    every = spawn("--access-log=all", "--access-log-max-per-s", "1")
    for i in range(5):
        every.request("GET", "/v2/health/live", headers={"X-Request-Id": "all-%d" % i})
    for i in range(5):
        log_line(every, "all-%d" % i)
    assert every.metric("tally_access_log_dropped_total") == 0
    quiet = spawn("--access-log", "off")
    assert quiet.request("GET", "/nowhere", headers={"X-Request-Id": "unseen"})[0] == 404
    assert quiet.stop() == 0
    assert not access_lines(quiet), quiet.log()
    r = subprocess.run([TALLYD, "--access-log=some"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "access-log must be errors, all or off" in r.stderr + r.stdout


STEPS = ("recv_us", "decode_us", "parse_us", "queue_us", "compute_us", "render_us",
         "send_us", "gzip_us")


@pytest.mark.slow
def test_access_log_steps(spawn):
    """Each step of a request is timed in its access line: a large JSON
    tensor is received, parsed, queued and computed, rendered and sent, and
    gzip is timed too. The steps do not overlap, so they add up to no more
    than the whole."""
    tallyd = spawn("--access-log=all")
    n = 70000
    doc = json.dumps({"dtype": "int64", "shape": [n], "data": list(range(n))})
    for rid, extra in (("steps-plain", {}), ("steps-gzip", {"Accept-Encoding": "gzip"}),
                       ("steps-deflated", {"Content-Encoding": "gzip"})):
        body = gzip.compress(doc.encode()) if "Content-Encoding" in extra else doc
        status, hdrs, raw = tallyd.request("POST", "/v1/cumsum", body, dict(
            {"Content-Type": "application/json", "X-Request-Id": rid}, **extra))
        assert status == 200
        if "Accept-Encoding" in extra:
            assert hdrs["content-encoding"] == "gzip" and "content-length" in hdrs
            raw = gzip.decompress(raw)
        assert json.loads(raw)["data"][-1] == n * (n - 1) // 2
        line = log_line(tallyd, rid)
        for k in STEPS:
            assert isinstance(line[k], int) and line[k] >= 0, (k, line)
        assert line["parse_us"] > 0 and line["render_us"] > 0, line
        # gzip is timed inside render or send, whichever compressed
        assert sum(line[k] for k in STEPS if k != "gzip_us") <= line["total_us"] + len(STEPS), line
        assert line["gzip_us"] <= line["total_us"], line
        assert (line["gzip_us"] > 0) == (rid == "steps-gzip"), line
        assert (line["decode_us"] > 0) == (rid == "steps-deflated"), line


@pytest.mark.slow
def test_json_tensors_summed_inline(spawn):
    """A tensor that came as JSON is summed on the HTTP thread up to
    --json-inline-max-elements, where a binary one of the same size goes
    to a device worker (its busy time grows); past the bound, JSON goes
    to the workers too."""
    d = spawn("--json-inline-max-elements", "10000")

    def busy():
        text = d.request("GET", "/metrics")[2].decode()
        return sum(float(v) for v in re.findall(
            r"^tally_device_busy_seconds_total\{[^}]*\} (\S+)$", text, re.M))

    def post_json(n):
        status, _, out = d.post_json("/v1/cumsum", {"dtype": "int32", "shape": [n],
                                                    "data": [1] * n})
        assert status == 200 and out["data"][-1] == n

    before = busy()
    post_json(8000)
    assert busy() == before
    status, _, raw = d.request("POST", "/v1/cumsum?dtype=int32&shape=8000",
                               b"\x01\x00\x00\x00" * 8000,
                               {"Content-Type": "application/octet-stream"})
    assert status == 200 and raw[-4:] == (8000).to_bytes(4, "little")
    after_raw = busy()
    assert after_raw > before
    post_json(12000)
    assert busy() > after_raw


@pytest.mark.slow
def test_model_stats(spawn):
    """Triton's statistics extension: every inference request counted once,
    a failure apart, the steps of the successes, executions by batch size;
    the same document on all three paths; an unknown model is a 404."""
    d = spawn()

    def stats(path="/v2/models/cumsum/stats"):
        status, hdrs, body = d.request("GET", path)
        assert status == 200 and hdrs["content-type"] == "application/json"
        doc = json.loads(body)
        assert len(doc["model_stats"]) == 1
        return doc["model_stats"][0]

    zero = stats()
    assert zero["name"] == "cumsum" and zero["version"] == "1"
    assert zero["inference_count"] == 0 and zero["execution_count"] == 0
    for k in ("success", "fail", "queue", "compute_input", "compute_infer",
              "compute_output", "cache_hit", "cache_miss"):
        assert zero["inference_stats"][k] == {"count": 0, "ns": 0}, k
    assert zero["batch_stats"] == []
    for n in (8, 100000):  # summed at once, and by a worker
        assert d.post_json("/v1/cumsum", {"dtype": "int32", "shape": [n],
                                          "data": [1] * n})[0] == 200
    assert d.request("POST", "/v2/models/cumsum/infer", json.dumps(
        {"inputs": [{"name": "x", "shape": [3], "datatype": "FP32",
                     "data": [1, 2, 3]}]}))[0] == 200
    assert d.post_json("/v1/cumsum", {"dtype": "int32", "shape": [2],
                                      "data": [1]})[0] == 400
    st = stats()
    inf = st["inference_stats"]
    assert st["inference_count"] == 3 and inf["success"]["count"] == 3
    assert inf["fail"]["count"] == 1 and inf["fail"]["ns"] > 0
    for k in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[k]["count"] == 3, k
    assert inf["success"]["ns"] >= inf["compute_input"]["ns"] + inf["compute_infer"]["ns"] > 0
    assert 1 <= st["execution_count"] <= 3
    assert sum(b["compute_infer"]["count"] for b in st["batch_stats"]) == st["execution_count"]
    assert st["last_inference"] > 1.7e12  # milliseconds since 1970
    for path in ("/v2/models/stats", "/v2/models/cumsum/versions/1/stats"):
        other = stats(path)
        assert other["inference_count"] == st["inference_count"], path
    assert d.request("GET", "/v2/models/nope/stats")[0] == 404
    meta = json.loads(d.request("GET", "/v2")[2])
    assert "statistics" in meta["extensions"]


def test_openapi_matches_routes(tallyd):
    """Every route in proto/openapi.yaml answers as documented, and every
    documented status exists."""
    with open(os.path.join(ROOT, "proto", "openapi.yaml")) as f:
        spec = yaml.safe_load(f)
    openapi_spec_validator.validate(spec)
    paths = spec["paths"]
    expected = {"/", "/openapi.yaml", "/openapi.json", "/docs", "/docs/swagger-ui-bundle.js",
                "/docs/swagger-ui.css", "/v1/cumsum", "/v2", "/v2/health/live", "/v2/health/ready",
                "/v2/models/{model}", "/v2/models/{model}/versions/{version}",
                "/v2/models/{model}/ready", "/v2/models/{model}/versions/{version}/ready",
                "/v2/models/{model}/config", "/v2/models/{model}/infer",
                "/v2/models/{model}/versions/{version}/infer", "/metrics",
                "/v2/models/stats", "/v2/models/{model}/stats",
                "/v2/models/{model}/versions/{version}/stats", "/v2/trace/setting",
                "/v2/models/{model}/trace/setting"}
    for ext in ("system", "cuda"):
        base = "/v2/%ssharedmemory" % ext
        expected |= {base + "/status", base + "/region/{region}/status",
                     base + "/region/{region}/register", base + "/unregister",
                     base + "/region/{region}/unregister"}
    assert set(paths) == expected
    for path, ops in paths.items():
        concrete = path.replace("{model}", "cumsum").replace("{version}", "1")
        concrete = concrete.replace("{region}", "r")
        for method, op in ops.items():
            if method == "parameters":
                continue
            assert "responses" in op and op.get("summary")
            if method == "get" and "{region}" in path:
                # no region exists on this daemon (shared memory is off)
                assert str(tallyd.request("GET", concrete)[0]) in op["responses"], path
            elif method == "get":
                assert tallyd.request("GET", concrete)[0] == 200, path
            else:
                # a POST without a body is a documented client error
                status = tallyd.request("POST", concrete, b"", {"Content-Type": "application/json"})[0]
                assert str(status) in op["responses"], (path, status)


def test_cli():
    out = subprocess.run([TALLYD, "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for flag in ("--listen", "--device", "--workers", "--queue-depth", "--max-body-bytes",
                 "--timeout-ms", "--drain-timeout", "--drain-idle-ms", "TALLY_DRAIN_IDLE_MS",
                 "TALLY_LISTEN"):
        assert flag in out.stdout
    out = subprocess.run([TALLYD, "--workers", "zero"], capture_output=True, text=True)
    assert out.returncode == 2 and "workers" in out.stderr
    out = subprocess.run([TALLYD, "--bogus"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown option --bogus" in out.stderr
    out = subprocess.run([TALLYD, "--list-devices"], capture_output=True, text=True)
    assert out.returncode == 0 and "host" in out.stdout
    assert "--warm-cache" in subprocess.run([TALLYD, "--help"], capture_output=True,
                                            text=True).stdout


@pytest.mark.slow
def test_warm_cache(tmp_path):
    """--warm-cache compiles the kernels into the cache and exits, without
    listening (images bake their kernel cache with it)."""
    cache = tmp_path / "pocl"
    if os.path.isdir(CACHE_SEED):
        shutil.copytree(CACHE_SEED, cache, symlinks=True)  # warm: seconds, not a minute
    env = dict(os.environ, POCL_CACHE_DIR=str(cache))
    out = subprocess.run([TALLYD, "--warm-cache", "--listen", "127.0.0.1:1"], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "device ready" in out.stderr and "listening" not in out.stderr
    assert any(cache.iterdir())
    out = subprocess.run([TALLYD, "--device", "no-such-device", "--listen", "127.0.0.1:1"],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "no-such-device" in out.stderr


@pytest.mark.concurrency
def test_sigterm_during_startup(tmp_path):
    """A SIGTERM while the kernels compile (an empty cache: a minute of
    work) ends tallyd at once with exit code 0; as PID 1 in a container
    the default action would be to ignore it."""
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path / "empty-cache"))
    p = subprocess.Popen([TALLYD, "--listen", "127.0.0.1:1"], stderr=subprocess.PIPE,
                         env=env)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert b"stopped during startup" in err or b"stopped" in err
