"""The interactive API docs over HTTP: GET /docs (Swagger UI, whose files
come from Debian's python3-flasgger through `make deps` and `make`:
tools/swagger_ui.sh),
GET /openapi.json, and what tallyd does when the files are missing. A real
browser runs the page in test_browser.py."""
import json
import os
import shutil
import subprocess
import sys

import openapi_spec_validator
import pytest
import yaml

from conftest import ROOT, TALLYD, Daemon

FILES = {"swagger-ui-bundle.js": "application/javascript", "swagger-ui.css": "text/css"}
# where the package's files are: installed, or unpacked by `make deps`
STATIC = "usr/lib/python3/dist-packages/flasgger/ui3/static"
SWAGGER_UI = next((os.path.join(r, STATIC) for r in ("/", os.path.join(ROOT, "build", "swagger-ui"))
                   if os.path.exists(os.path.join(r, STATIC, "swagger-ui-bundle.js"))), None)
needs_swagger_ui = pytest.mark.skipif(SWAGGER_UI is None, reason="make deps fetches Swagger UI")


def test_openapi_json_is_the_yaml(tallyd):
    st, h, body = tallyd.request("GET", "/openapi.json")
    assert st == 200 and h["content-type"] == "application/json"
    spec = json.loads(body)
    with open(os.path.join(ROOT, "proto", "openapi.yaml"), encoding="utf-8") as f:
        assert spec == yaml.safe_load(f)
    openapi_spec_validator.validate(spec)
    # and the file in the tree is what tools/openapi_json.py writes now
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "openapi_json.py"),
                        "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@needs_swagger_ui
def test_docs_page_and_its_files(tallyd):
    st, h, body = tallyd.request("GET", "/docs")
    assert st == 200 and h["content-type"].startswith("text/html")
    page = body.decode()
    for want in ('src="/docs/swagger-ui-bundle.js"', 'href="/docs/swagger-ui.css"',
                 '"/openapi.json"', "window.location.origin"):
        assert want in page, want
    assert "http://" not in page.replace("http://127.0.0.1", "") and "https://" not in page
    for name, kind in FILES.items():
        st, h, body = tallyd.request("GET", "/docs/" + name)
        assert st == 200 and h["content-type"].startswith(kind), name
        assert "max-age" in h["cache-control"]
        with open(os.path.join(SWAGGER_UI, name), "rb") as f:
            assert body == f.read(), name
    st, _, body = tallyd.request("GET", "/docs/index.html")
    assert st == 404
    st, h, _ = tallyd.request("POST", "/docs", b"")
    assert st == 405 and "GET" in h["allow"]


@needs_swagger_ui
def test_docs_open_with_tokens(spawn, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("t\n")
    d = spawn("--auth-token-file", str(tokens))
    for path in ("/docs", "/docs/swagger-ui.css", "/openapi.json"):
        assert d.request("GET", path)[0] == 200, path
    assert d.request("POST", "/v1/cumsum", b"{}")[0] == 401


def test_named_docs_dir_must_hold_the_files(tmp_path):
    for where in (str(tmp_path / "absent"), str(tmp_path)):
        r = subprocess.run([TALLYD, "--docs-dir", where, "--listen", "127.0.0.1:1"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r
        assert "--docs-dir" in r.stderr and "swagger-ui-bundle.js" in r.stderr, r.stderr


@needs_swagger_ui
def test_docs_dir_of_ones_own_choosing(spawn):
    d = spawn("--docs-dir", SWAGGER_UI)
    assert d.request("GET", "/docs/swagger-ui.css")[0] == 200
    assert any("Swagger UI from" in l.get("msg", "") for l in d.log_lines())


@pytest.mark.slow
def test_without_the_files_docs_say_how_to_get_them(tmp_path):
    # a tallyd with no share/tally/docs beside its bin/
    (tmp_path / "bin").mkdir()
    exe = str(tmp_path / "bin" / "tallyd")
    shutil.copy(TALLYD, exe)
    d = Daemon(command=[exe])
    try:
        st, h, body = d.request("GET", "/docs")
        assert st == 404 and h["content-type"] == "application/json"
        msg = json.loads(body)["error"]
        assert str(tmp_path) in msg and "make deps" in msg and "--docs-dir" in msg
        assert d.request("GET", "/docs/swagger-ui-bundle.js")[0] == 404
        # the rest of the service is there
        assert d.request("GET", "/openapi.json")[0] == 200
        assert d.post_json("/v1/cumsum", {"data": [1, 2, 3]})[2]["data"] == [1, 3, 6]
        assert any("/docs answers 404" in l.get("msg", "") for l in d.log_lines())
    finally:
        assert d.stop() == 0
        d.cleanup()


def documented_extensions():
    """docs/kserve.md's extensions table: {name: when it is advertised}."""
    with open(os.path.join(ROOT, "docs", "kserve.md"), encoding="utf-8") as f:
        page = f.read()
    section = page.split("\n## Extensions\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def advertised(d):
    import tritonclient.grpc as grpcclient
    rest = set(json.loads(d.request("GET", "/v2")[2])["extensions"])
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    grpc = set(c.get_server_metadata().extensions)
    c.close()
    assert rest == grpc, (rest, grpc)
    return rest


def test_the_extensions_table_is_what_the_server_advertises(spawn):
    """Every extension docs/kserve.md names is in the server metadata of
    both doors, under the settings the table gives, and the reverse."""
    rows = documented_extensions()
    assert len(rows) >= 7, rows
    always = {n for n, when in rows.items() if when == "always"}
    assert advertised(spawn("--allow-shared-memory")) == set(rows)
    assert advertised(spawn("--max-sequences", "0")) == always
    assert advertised(spawn()) == set(rows) - {"system_shared_memory"}
