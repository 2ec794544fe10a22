"""Bearer tokens (--auth-token-file) and HTTPS (--tls-cert, --tls-key).

Tokens: every route but health and /metrics needs one; those two follow
--auth-health and --auth-metrics. A missing or wrong token is a 401 with
WWW-Authenticate: Bearer, sent before any of the body is read. SIGHUP
rereads the file. tritonclient (headers=), curl, libtally and the CLI
each get through with the token and are turned away without it.

HTTPS: a throwaway CA is made at test time with openssl; curl,
tritonclient (ssl=True) and the CLI round-trip a tensor over HTTPS on the
loopback, verifying the server's certificate against that CA, and are
refused when they cannot verify it.
"""
import json
import os
import signal
import socket
import ssl
import subprocess
import time

import numpy as np
import pytest

from conftest import ROOT
from reference import cumsum

CLI = os.environ.get("TALLY_CLI", os.path.join(ROOT, "build", "bin", "tally"))
TOKENS = "# the test's tokens\nfirst-token\n\n  second.token/+== \n"
BODY = json.dumps({"dtype": "int32", "shape": [4], "data": [1, 2, 3, 4]})
JSON = {"Content-Type": "application/json"}


def bearer(token):
    return {"Authorization": "Bearer " + token}


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "tokens"
    path.write_text(TOKENS)
    os.chmod(path, 0o600)
    return path


def test_routes_need_a_token(spawn, token_file):
    d = spawn("--auth-token-file", str(token_file))
    protected = [("POST", "/v1/cumsum", BODY), ("GET", "/v2", None),
                 ("GET", "/v2/models/cumsum", None), ("GET", "/v2/models/cumsum/config", None),
                 ("GET", "/v2/models/cumsum/stats", None), ("GET", "/metrics", None),
                 ("POST", "/v2/models/cumsum/infer",
                  json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "INT32",
                                          "data": [1, 2]}]}))]
    for method, path, body in protected:
        status, hdrs, raw = d.request(method, path, body, JSON)
        assert status == 401, (path, status, raw)
        assert hdrs["www-authenticate"] == 'Bearer realm="tally"', path
        assert "requires a bearer token" in json.loads(raw)["error"]
        status, hdrs, raw = d.request(method, path, body, dict(JSON, **bearer("nope")))
        assert status == 401, (path, status)
        assert hdrs["www-authenticate"] == 'Bearer realm="tally", error="invalid_token"'
        assert "not one this server accepts" in json.loads(raw)["error"]
        # another scheme is no token at all
        status, hdrs, _ = d.request(method, path, body,
                                    dict(JSON, Authorization="Basic Zmlyc3QtdG9rZW4="))
        assert status == 401 and "error=" not in hdrs["www-authenticate"]
        for token in ("first-token", "second.token/+=="):
            status, _, raw = d.request(method, path, body, dict(JSON, **bearer(token)))
            assert status == 200, (path, status, raw)
    status, _, raw = d.request("POST", "/v1/cumsum", BODY, dict(JSON, **bearer("first-token")))
    assert json.loads(raw)["data"] == [1, 3, 6, 10]
    # probes get through without one
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/cumsum/ready"):
        assert d.request("GET", path)[0] == 200, path
    # a 404 stays a 404: it says nothing a token would protect
    assert d.request("GET", "/nope")[0] == 404
    # the refusals are counted
    text = d.request("GET", "/metrics", headers=bearer("first-token"))[2].decode()
    assert 'tally_requests_total{protocol="http",route="native",code="401"} 3' in text


def test_health_and_metrics_settings(spawn, token_file):
    d = spawn("--auth-token-file", str(token_file), "--auth-health=true",
              "--auth-metrics=false")
    assert d.request("GET", "/metrics")[0] == 200
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert d.request("GET", path)[0] == 401
        assert d.request("GET", path, headers=bearer("first-token"))[0] == 200


def test_401_goes_out_before_the_body(spawn, token_file):
    """A client without a token that announces a large body is refused
    before it sends any: Expect: 100-continue gets a final 401."""
    d = spawn("--auth-token-file", str(token_file))
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"POST /v1/cumsum HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
                  b"Content-Length: 200000000\r\nExpect: 100-continue\r\n\r\n")
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 401"), head
    assert b"100 Continue" not in head


@pytest.mark.concurrency
def test_sighup_rereads_the_tokens(spawn, tmp_path):
    path = tmp_path / "tokens"
    path.write_text("old-token\n")
    d = spawn("--auth-token-file", str(path))
    assert d.request("POST", "/v1/cumsum", BODY, dict(JSON, **bearer("old-token")))[0] == 200
    # written beside it and renamed in place, as an operator should
    (tmp_path / "new").write_text("new-token\n")
    os.replace(tmp_path / "new", path)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while d.request("POST", "/v1/cumsum", BODY, dict(JSON, **bearer("new-token")))[0] != 200:
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    assert d.request("POST", "/v1/cumsum", BODY, dict(JSON, **bearer("old-token")))[0] == 401
    # a bad file leaves the tokens as they were, and says so
    path.write_text("# nothing\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "stay in force" not in d.log():
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    assert d.request("POST", "/v1/cumsum", BODY, dict(JSON, **bearer("new-token")))[0] == 200
    assert "holds no token" in d.log()


def test_a_bad_token_file_stops_startup(tmp_path):
    from conftest import TALLYD
    for text, says in (("", "holds no token"), ("two words\n", "line 1")):
        path = tmp_path / "tokens"
        path.write_text(text)
        r = subprocess.run([TALLYD, "--auth-token-file", str(path), "--device", "host"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and says in r.stderr, r.stderr
    r = subprocess.run([TALLYD, "--auth-token-file", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "cannot open" in r.stderr


def test_clients_send_the_token(spawn, token_file):
    import tritonclient.http as tc
    from tritonclient.utils import InferenceServerException
    d = spawn("--auth-token-file", str(token_file))
    c = tc.InferenceServerClient("127.0.0.1:%d" % d.port)
    x = tc.InferInput("x", [2, 3], "FP32")
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    x.set_data_from_numpy(data)
    y = c.infer("cumsum", [x], parameters={"axis": 1},
                headers=bearer("second.token/+==")).as_numpy("y")
    assert np.array_equal(y, np.cumsum(data, axis=1))
    with pytest.raises(InferenceServerException) as e:
        c.infer("cumsum", [x], parameters={"axis": 1})
    assert "bearer token" in str(e.value)
    assert c.is_server_ready()          # health is open
    c.close()
    # curl
    url = "http://127.0.0.1:%d/v1/cumsum" % d.port
    r = subprocess.run(["curl", "-sS", "-H", "Authorization: Bearer first-token", "-d", BODY, url],
                       capture_output=True, text=True)
    assert json.loads(r.stdout)["data"] == [1, 3, 6, 10], r
    # the CLI (libtally underneath): --token, TALLY_TOKEN, and without
    base = "http://127.0.0.1:%d" % d.port
    env = dict(os.environ)
    env.pop("TALLY_TOKEN", None)
    r = subprocess.run([CLI, "info", "--url", base], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "bearer token" in r.stderr and "--token" in r.stderr, r.stderr
    r = subprocess.run([CLI, "info", "--url", base, "--token", "first-token"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and '"cumsum"' in r.stdout, r.stderr
    r = subprocess.run([CLI, "info", "--url", base], capture_output=True, text=True,
                       env=dict(env, TALLY_TOKEN="second.token/+=="))
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# HTTPS


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A throwaway CA, a server certificate it signed for 127.0.0.1 and
    localhost, and a second CA that signed nothing of the server's."""
    d = tmp_path_factory.mktemp("pki")

    def run(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=tally test CA")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out",
        "other.pem", "-days", "2", "-subj", "/CN=another CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext")
    return d


def https_daemon(spawn, pki, *args):
    d = spawn("--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
              *args, https=True, cafile=str(pki / "ca.pem"))
    return d


@pytest.mark.slow
def test_https_round_trips(spawn, pki, tmp_path):
    d = https_daemon(spawn, pki)
    base = "https://127.0.0.1:%d" % d.port
    ca = str(pki / "ca.pem")
    assert "HTTPS" in d.log()
    # curl, verifying against the CA
    r = subprocess.run(["curl", "-sS", "--cacert", ca, "-d", BODY, base + "/v1/cumsum"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["data"] == [1, 3, 6, 10], r
    # ... and refusing a certificate its CA did not sign
    r = subprocess.run(["curl", "-sS", "--cacert", str(pki / "other.pem"), "-d", BODY,
                        base + "/v1/cumsum"], capture_output=True, text=True)
    assert r.returncode == 60, r
    # plain HTTP to the HTTPS port gets nothing useful
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        try:
            got = s.recv(100)
        except (ConnectionResetError, socket.timeout):
            got = b""
        assert not got.startswith(b"HTTP/1.1 200")

    # tritonclient, ssl=True, binary data both ways
    import tritonclient.http as tc
    c = tc.InferenceServerClient(
        "127.0.0.1:%d" % d.port, ssl=True,
        ssl_context_factory=lambda *a, **k: ssl.create_default_context(cafile=ca))
    data = np.random.default_rng(5).random((3, 1000), dtype=np.float32)
    x = tc.InferInput("x", list(data.shape), "FP32")
    x.set_data_from_numpy(data, binary_data=True)
    out = tc.InferRequestedOutput("y", binary_data=True)
    y = c.infer("cumsum", [x], outputs=[out], parameters={"axis": 1}).as_numpy("y")
    assert np.allclose(y, cumsum(data.astype(np.float64), 1), rtol=1e-6)
    c.close()

    # the CLI: .npy through, verified with --cacert; refused without it
    x = np.random.default_rng(6).integers(-100, 100, size=(5, 7)).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([CLI, "cumsum", "--url", base, "--cacert", ca, "--axis", "1",
                        str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.cumsum(x, axis=1))
    r = subprocess.run([CLI, "health", "--url", base], capture_output=True, text=True)
    assert r.returncode == 3 and "certificate" in r.stdout, r.stdout
    r = subprocess.run([CLI, "cumsum", "--url", base, "--axis", "1", str(tmp_path / "x.npy"),
                        str(tmp_path / "z.npy")], capture_output=True, text=True)
    assert r.returncode == 3 and "--cacert" in r.stderr, r.stderr
    assert not (tmp_path / "z.npy").exists()
    r = subprocess.run([CLI, "health", "--url", base, "--insecure"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_https_with_tokens(spawn, pki, token_file):
    d = https_daemon(spawn, pki, "--auth-token-file", str(token_file))
    base = "https://127.0.0.1:%d" % d.port
    r = subprocess.run([CLI, "info", "--url", base, "--cacert", str(pki / "ca.pem"), "--token",
                        "first-token"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([CLI, "info", "--url", base, "--cacert", str(pki / "ca.pem")],
                       capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert r.returncode == 1 and "bearer token" in r.stderr


def test_bad_tls_settings_stop_startup(pki, tmp_path):
    from conftest import TALLYD
    cases = [
        (["--tls-cert", str(pki / "server.pem")], "needs both"),
        (["--tls-key", str(pki / "server.key")], "needs both"),
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(pki / "server.key")],
         "missing.pem"),
    ]
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    cases.append((["--tls-cert", str(tmp_path / "junk.pem"), "--tls-key",
                   str(pki / "server.key")], "not a PEM file"))
    for args, says in cases:
        r = subprocess.run([TALLYD, "--device", "host", "--listen", "127.0.0.1:0"] + args,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and says in r.stdout + r.stderr, (args, r.stdout, r.stderr)
