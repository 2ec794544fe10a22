"""CORS (--cors-origins): off by default; preflights and answers for the
origins it names, or for any with *; tokens still apply to the request
itself. (A real browser's fetch() from another origin is the issue's
browser test's to drive; these check the headers a browser acts on.)"""
import json

from conftest import valid_request_works

APP = "http://app.example:3000"


def preflight(d, path, origin, method="POST", headers="content-type"):
    return d.request("OPTIONS", path, None, {
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": headers})


def test_off_by_default(tallyd):
    st, h, _ = preflight(tallyd, "/v2/models/cumsum/infer", APP)
    assert st == 405 and "access-control-allow-origin" not in h
    st, h, _ = tallyd.request("GET", "/v2", None, {"Origin": APP})
    assert st == 200 and "access-control-allow-origin" not in h


def test_named_origins(spawn):
    d = spawn("--cors-origins", APP + ", https://other.example")
    st, h, body = preflight(d, "/v2/models/cumsum/infer", APP)
    assert st == 204 and body == b"", (st, body)
    assert h["access-control-allow-origin"] == APP
    assert "POST" in h["access-control-allow-methods"]
    assert "content-type" in h["access-control-allow-headers"].lower()
    assert "inference-header-content-length" in h["access-control-allow-headers"].lower()
    assert int(h["access-control-max-age"]) > 0
    assert "origin" in h["vary"].lower()
    # the request itself: the answer names the origin, and the headers a
    # page may read
    st, h, body = d.request("POST", "/v2/models/cumsum/infer", json.dumps(
        {"inputs": [{"name": "x", "datatype": "INT32", "shape": [3], "data": [1, 2, 3]}]}
    ).encode(), {"Origin": APP, "Content-Type": "application/json"})
    assert st == 200 and json.loads(body)["outputs"][0]["data"] == [1, 3, 6]
    assert h["access-control-allow-origin"] == APP
    assert "x-request-id" in h["access-control-expose-headers"].lower()
    # errors too, so that the page can read why
    st, h, _ = d.request("GET", "/nowhere", None, {"Origin": APP})
    assert st == 404 and h["access-control-allow-origin"] == APP
    # an origin not on the list gets nothing; nor does a preflight of a
    # path with no routes
    st, h, _ = preflight(d, "/v2/models/cumsum/infer", "http://evil.example")
    assert st == 405 and "access-control-allow-origin" not in h
    st, h, _ = d.request("GET", "/v2", None, {"Origin": "http://evil.example"})
    assert st == 200 and "access-control-allow-origin" not in h
    st, _, _ = preflight(d, "/v2/nowhere", APP)
    assert st == 404
    # a request with no Origin (curl, tritonclient) is unchanged
    st, h, _ = d.request("GET", "/v2")
    assert st == 200 and "access-control-allow-origin" not in h
    valid_request_works(d)


def test_any_origin_and_tokens(spawn, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("web-token\n")
    d = spawn("--cors-origins", "*", "--auth-token-file", str(tokens))
    # the preflight needs no token: browsers send none with it
    st, h, _ = preflight(d, "/v1/cumsum", "https://anywhere.example", headers="authorization")
    assert st == 204 and h["access-control-allow-origin"] == "*"
    # the request itself still does, and its 401 is readable by the page
    body = json.dumps({"dtype": "int32", "shape": [2], "data": [1, 2]}).encode()
    st, h, _ = d.request("POST", "/v1/cumsum", body, {"Origin": "https://anywhere.example",
                                                      "Content-Type": "application/json"})
    assert st == 401 and h["access-control-allow-origin"] == "*"
    st, h, out = d.request("POST", "/v1/cumsum", body, {
        "Origin": "https://anywhere.example", "Content-Type": "application/json",
        "Authorization": "Bearer web-token"})
    assert st == 200 and json.loads(out)["data"] == [1, 3]


def test_bad_origins_are_refused_at_startup(tmp_path):
    import subprocess
    from conftest import TALLYD
    for bad in ("http://x/y", "app.example", "http://", "ftp://a b"):
        r = subprocess.run([TALLYD, "--listen", "127.0.0.1:0", "--grpc-listen", "",
                            "--device", "host", "--warmup=false", "--cors-origins", bad],
                           capture_output=True, text=True, timeout=60)
        # a usage error (2), said before any device is opened
        assert r.returncode == 2 and "cors-origins" in r.stderr, (bad, r.stderr)
        assert "device ready" not in r.stderr, r.stderr
