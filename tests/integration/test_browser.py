"""tallyd's pages in a real browser: Debian's chromium and chromium-driver,
headless, driven by selenium (`make deps` installs all three).

- The landing page loads with no console errors and draws its plot.
- The docs page runs a cumsum through Swagger UI's "Try it out", and the
  answer is read from the page.
- A page served from another origin calls tallyd with fetch(): refused
  without --cors-origins, answered with it, and tokens still apply.

Each test saves a screenshot under the build folder (TALLY_SCREENSHOTS,
default build/screenshots); README.md shows the landing page's (docs/landing.png).
"""
import http.server
import json
import os
import random
import threading

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import ROOT

# a browser per test: seconds each, so `make check` leaves them out
pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
SHOTS = os.environ.get("TALLY_SCREENSHOTS", os.path.join(ROOT, "build", "screenshots"))
WAIT_S = 30


@pytest.fixture(scope="module")
def browser():
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    # root in a container has no sandbox to drop into; /dev/shm may be small
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
        env.pop(k, None)  # the sanitizer runs are tallyd's, not the browser's
    service = Service(CHROMEDRIVER, env=env)
    d = webdriver.Chrome(service=service, options=o)
    d.set_script_timeout(WAIT_S)
    yield d
    d.quit()


def shot(browser, name):
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, name + ".png")
    assert browser.save_screenshot(path)
    assert os.path.getsize(path) > 1000
    return path


def console_errors(browser):
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def wait(browser, until):
    return WebDriverWait(browser, WAIT_S).until(until)


def test_landing_page_draws_its_plot(tallyd, browser):
    browser.get_log("browser")  # drop what earlier pages left
    browser.get("http://127.0.0.1:%d/" % tallyd.port)
    # the page sums its example at load and marks the canvas when drawn
    drawn = wait(browser, lambda d: d.execute_script(
        "return document.getElementById('plot').dataset.drawn"))
    assert drawn == "16"
    assert json.loads(browser.find_element(By.ID, "answer").text)["data"][:4] == [3, 4, 8, 9]
    # pixels of the sum's blue line are on the canvas
    blue = browser.execute_script("""
        const c = document.getElementById('plot'), g = c.getContext('2d');
        const p = g.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < p.length; i += 4)
          if (p[i + 2] > 150 && p[i] < 80 && p[i + 3] > 0) n++;
        return n;""")
    assert blue > 200, blue
    wait(browser, lambda d: "ready" in d.find_element(By.ID, "ready").text)
    assert browser.find_element(By.ID, "version").text == "0.1.0"
    # another sum through the panel, typed in as a user would
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    xs = [rng.randrange(-50, 50) for _ in range(rng.randrange(3, 30))]
    box = browser.find_element(By.ID, "numbers")
    box.clear()
    box.send_keys(" ".join(map(str, xs)))
    Select(browser.find_element(By.ID, "dtype")).select_by_visible_text("int32")
    browser.find_element(By.ID, "exclusive").click()
    browser.find_element(By.ID, "run").click()
    want = [sum(xs[:i]) for i in range(len(xs))]
    wait(browser, lambda d: d.find_element(By.ID, "answer").text.startswith("{")
         and json.loads(d.find_element(By.ID, "answer").text).get("data") == want)
    assert browser.execute_script(
        "return document.getElementById('plot').dataset.drawn") == str(len(xs)), seed
    assert "curl -s http://127.0.0.1:%d/v1/cumsum" % tallyd.port in \
        browser.find_element(By.ID, "curl").text
    shot(browser, "landing")
    assert console_errors(browser) == [], seed


def test_docs_try_it_out_runs_a_cumsum(tallyd, browser):
    browser.get_log("browser")
    browser.get("http://127.0.0.1:%d/docs#/default/cumsum" % tallyd.port)
    op = wait(browser, lambda d: d.find_element(By.ID, "operations-default-cumsum"))
    # clicks go through the page's script: an opening block can move a
    # button under the pointer
    click = lambda e: browser.execute_script("arguments[0].click()", e)
    click(wait(browser, lambda d: op.find_element(By.CSS_SELECTOR, ".try-out__btn")))
    body = wait(browser, lambda d: op.find_element(By.CSS_SELECTOR, "textarea.body-param__text"))
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    xs = [rng.randrange(-1000, 1000) for _ in range(rng.randrange(2, 20))]
    body.clear()
    body.send_keys(json.dumps({"dtype": "int64", "data": xs, "reverse": True}))
    click(op.find_element(By.CSS_SELECTOR, "button.execute"))
    status = wait(browser, lambda d: op.find_element(
        By.CSS_SELECTOR, ".live-responses-table tr.response .response-col_status"))
    assert status.text.strip() == "200", (status.text, seed)
    shown = op.find_element(By.CSS_SELECTOR, ".live-responses-table .response-col_description pre")
    answer = json.loads(shown.text)
    assert answer["data"] == [sum(xs[i:]) for i in range(len(xs))], seed
    # the request went to this daemon, not to the document's example server
    # (the curl line: a textarea.curl in Debian's Swagger UI 3, a
    # .curl-command block in Swagger UI 4)
    box = op.find_element(By.CSS_SELECTOR, ".curl-command, textarea.curl")
    curl = box.get_attribute("value") or box.text
    assert "http://127.0.0.1:%d/v1/cumsum" % tallyd.port in curl, curl
    browser.execute_script("arguments[0].scrollIntoView()", box)
    shot(browser, "docs")
    assert console_errors(browser) == [], seed


class _Page(http.server.BaseHTTPRequestHandler):
    """Serves one empty page: the other origin."""

    def do_GET(self):
        body = b"<!doctype html><title>elsewhere</title><link rel=icon href='data:,'><p>another origin"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def other_origin():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


FETCH = """
const [url, token, done] = arguments;
const headers = {"Content-Type": "application/json"};
if (token) headers["Authorization"] = "Bearer " + token;
fetch(url, {method: "POST", headers: headers, body: '{"data": [1, 2, 3, 4]}'})
  .then(r => r.text().then(t => done({status: r.status, body: t})))
  .catch(e => done({error: String(e)}));
"""


def call_from(browser, origin, daemon, token=None):
    browser.get(origin + "/")
    return browser.execute_async_script(FETCH, "http://127.0.0.1:%d/v1/cumsum" % daemon.port, token)


def test_another_origin_needs_cors(spawn, browser, other_origin, tmp_path):
    off = spawn()
    r = call_from(browser, other_origin, off)
    assert "error" in r and "Failed to fetch" in r["error"], r  # the browser refused it
    browser.get_log("browser")  # the refusal is logged; it is expected

    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret\n")
    on = spawn("--cors-origins", other_origin, "--auth-token-file", str(tokens))
    r = call_from(browser, other_origin, on, "s3cret")
    assert r.get("status") == 200 and json.loads(r["body"])["data"] == [1, 3, 6, 10], r
    # tokens still apply to the real request, and the page can read why
    r = call_from(browser, other_origin, on)
    assert r.get("status") == 401 and "token" in json.loads(r["body"])["error"], r
    browser.get_log("browser")
    # an origin not on the list is refused
    r = call_from(browser, other_origin.replace("127.0.0.1", "localhost"), on, "s3cret")
    assert "error" in r, r
    browser.get(other_origin + "/")
    shot(browser, "cors")
