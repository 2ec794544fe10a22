"""Several devices in one daemon: PoCL shows two CPU devices with
POCL_DEVICES="pthread pthread". Workers are spread over the devices; a
device whose launches fail (--fault-device, a testing flag) leaves the
pool, its jobs run elsewhere and nothing is lost; with no device left the
host backend goes on."""
import json
import re
import subprocess
import threading

import numpy as np

from conftest import TALLYD

TWO = {"POCL_DEVICES": "pthread pthread"}
QUEUED = ("--inline-max-elements", "0", "--json-inline-max-elements", "0")


def metric_values(d, name):
    """{device label: value} for a metric with a device label."""
    text = d.request("GET", "/metrics")[2].decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^%s\{device="([^"]*)"\} (\S+)$' % re.escape(name), text, re.M)}


def crowd(d, n):
    """n requests at once, each its own tensor; checks every answer."""
    rng = np.random.default_rng(11)
    xs = [rng.integers(-100, 100, size=50 + i) for i in range(n)]
    results = [None] * n

    def send(i):
        results[i] = d.post_json("/v1/cumsum", {"dtype": "int64", "shape": [len(xs[i])],
                                               "data": xs[i].tolist()})

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, (status, _, out) in zip(xs, results):
        assert status == 200, out
        assert out["data"] == np.cumsum(x).tolist()


def test_two_devices_share_the_work(spawn):
    d = spawn("--device", "all", "--workers", "4", *QUEUED, env=TWO)
    up = metric_values(d, "tally_device_up")
    assert len(up) == 2 and set(up.values()) == {1.0}, up
    assert all(k.startswith(("0:0 ", "0:1 ")) for k in up), up
    crowd(d, 40)
    jobs = metric_values(d, "tally_device_jobs_total")
    assert sum(jobs.values()) == 40, jobs
    text = d.request("GET", "/metrics")[2].decode()
    busy = re.findall(r'^tally_device_busy_seconds_total\{worker="(\d)",device="(0:\d) ', text,
                      re.M)
    assert {dev for _, dev in busy} == {"0:0", "0:1"}, busy  # workers spread over both


def test_a_failing_device_leaves_the_pool(spawn):
    d = spawn("--device", "0:0,0:1", "--fault-device", "2", *QUEUED, env=TWO)
    crowd(d, 30)  # nothing lost: every answer right
    up = metric_values(d, "tally_device_up")
    errors = metric_values(d, "tally_device_errors_total")
    jobs = metric_values(d, "tally_device_jobs_total")
    second = [k for k in up if k.startswith("0:1 ")][0]
    first = [k for k in up if k.startswith("0:0 ")][0]
    assert up[second] == 0 and up[first] == 1, up
    assert errors[second] >= 1 and errors[first] == 0, errors
    assert jobs[first] == 30 and jobs[second] == 0, jobs
    lines = [l for l in d.log_lines() if "taken out of the pool" in l.get("msg", "")]
    assert len(lines) == 1 and "0:1" in lines[0]["msg"], d.log()
    assert d.request("GET", "/v2/health/ready")[0] == 200


def test_the_host_goes_on_when_every_device_fails(spawn):
    d = spawn("--device", "0:1", "--fault-device", "1", "--workers", "2", *QUEUED, env=TWO)
    crowd(d, 10)
    assert d.request("GET", "/v2/health/ready")[0] == 200
    assert any("goes on with the host backend" in l.get("msg", "") for l in d.log_lines())
    crowd(d, 5)


def test_device_lists_that_name_nothing():
    for spec, words in (("gpu:all", "no such device"), ("0:0,,0:1", "empty"),
                        ("0:9", "no OpenCL device matches")):
        out = subprocess.run([TALLYD, "--device", spec, "--listen", "127.0.0.1:1"],
                             capture_output=True, text=True, env=dict(TWO, PATH="/usr/bin:/bin"),
                             timeout=120)
        assert out.returncode == 1, (spec, out.stderr)
        assert words in out.stderr, (spec, out.stderr)
