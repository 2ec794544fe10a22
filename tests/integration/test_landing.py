"""GET /: the landing page (built into tallyd, nothing fetched from
elsewhere) and its JSON index; GET /openapi.yaml. (The page's script,
plot and try-it panel are a browser's to run.)"""
import json
import os
import re

import yaml

from conftest import ROOT


def test_page_for_browsers(tallyd):
    st, h, body = tallyd.request("GET", "/", None, {"Accept": "text/html,*/*;q=0.8"})
    assert st == 200 and h["content-type"].startswith("text/html")
    page = body.decode("utf-8")
    with open(os.path.join(ROOT, "server", "web", "index.html"), encoding="utf-8") as f:
        assert page == f.read()
    for marker in ('id="plot"', 'id="run"', 'id="drop"', 'id="devices"', "/v1/cumsum"):
        assert marker in page, marker
    # no CDN, no other origin: every src and href is local
    for url in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert url.startswith("/") or url.startswith("#") or url == "data:,", url
    assert "accept" in h["vary"].lower()
    st, _, _ = tallyd.request("HEAD", "/")
    assert st == 200


def test_json_index_links_answer(tallyd):
    st, h, body = tallyd.request("GET", "/", None, {"Accept": "application/json"})
    assert st == 200 and h["content-type"].startswith("application/json")
    index = json.loads(body)
    assert index["name"] == "tally" and index["version"]
    for name, path in index["links"].items():
        if name in ("infer", "native"):
            continue  # POST only
        st, _, _ = tallyd.request("GET", path)
        assert st == 200, (name, path)


def test_openapi_document(tallyd):
    st, h, body = tallyd.request("GET", "/openapi.yaml")
    assert st == 200 and h["content-type"].startswith("application/yaml")
    with open(os.path.join(ROOT, "proto", "openapi.yaml"), "rb") as f:
        assert body == f.read()
    assert "/v1/cumsum" in yaml.safe_load(body)["paths"]


def test_open_with_tokens_but_says_no_version(spawn, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("t\n")
    d = spawn("--auth-token-file", str(tokens))
    st, _, _ = d.request("GET", "/")
    assert st == 200
    st, _, body = d.request("GET", "/", None, {"Accept": "application/json"})
    assert st == 200 and "version" not in json.loads(body)
    st, _, _ = d.request("GET", "/v2")
    assert st == 401  # what the page fetches still needs the token
