"""Several devices in one daemon, and devices that fail.

PoCL shows two CPU devices with POCL_DEVICES="pthread pthread". Workers
are spread over the devices. Launches are made to fail with the testing
flags --fault-device, --fault-every, --fault-after-ms and --fault-late: a
refused launch's jobs run again on the host backend; a device that fails
--device-max-failures launches in a row leaves the pool; with no device
left the host backend runs everything, and /metrics and the ready status
say so. Nothing is lost and nothing hangs."""
import json
import re
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import TALLYD

# devices fail and leave the pool while workers run (TSan runs them)
pytestmark = pytest.mark.concurrency

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


@pytest.mark.slow
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


def metric_value(d, name):
    text = d.request("GET", "/metrics")[2].decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1))


@pytest.mark.slow
def test_a_failing_device_leaves_the_pool(spawn):
    d = spawn("--device", "0:0,0:1", "--fault-device", "2", "--device-max-failures", "1",
              *QUEUED, env=TWO)
    crowd(d, 30)  # nothing lost: every answer right
    up = metric_values(d, "tally_device_up")
    errors = metric_values(d, "tally_device_errors_total")
    jobs = metric_values(d, "tally_device_jobs_total")
    second = [k for k in up if k.startswith("0:1 ")][0]
    first = [k for k in up if k.startswith("0:0 ")][0]
    assert up[second] == 0 and up[first] == 1, up
    assert errors[second] == 1 and errors[first] == 0, errors
    # the refused batch ran on the host; the rest on the first device
    reruns = metric_value(d, "tally_host_reruns_total")
    assert jobs[second] == 0 and reruns >= 1 and jobs[first] + reruns == 30, (jobs, reruns)
    lines = [x for x in d.log_lines() if "taken out of the pool" in x.get("msg", "")]
    assert len(lines) == 1 and "0:1" in lines[0]["msg"], d.log()
    assert "CL_OUT_OF_RESOURCES" in lines[0]["msg"]
    status, _, body = d.request("GET", "/v2/health/ready")
    assert status == 200
    assert json.loads(body) == {"ready": True, "devices": 2, "devices_up": 1,
                                "degraded": "failed devices have left the pool"}
    assert metric_value(d, "tally_host_fallback") == 0


def sequential(d, n, seed):
    """n requests one after another (one launch each); checks every answer."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        x = rng.integers(-1000, 1000, size=100 + i)
        status, _, out = d.post_json("/v1/cumsum", {"dtype": "int64", "shape": [len(x)],
                                                    "data": x.tolist()})
        assert status == 200, out
        assert out["data"] == np.cumsum(x).tolist()


def test_refused_launches_run_again_on_the_host(spawn):
    """1 launch in 3 refused: each refused job runs on the host backend and
    is answered right; the device stays (never 3 failures in a row)."""
    d = spawn("--fault-device", "1", "--fault-every", "3", "--workers", "1", *QUEUED)
    sequential(d, 30, 21)
    errors = sum(metric_values(d, "tally_device_errors_total").values())
    jobs = sum(metric_values(d, "tally_device_jobs_total").values())
    assert errors == 10 and metric_value(d, "tally_host_reruns_total") == 10, errors
    assert jobs == 20
    assert set(metric_values(d, "tally_device_up").values()) == {1.0}
    assert json.loads(d.request("GET", "/v2/health/ready")[2]) == {"ready": True}
    warns = [x for x in d.log_lines() if "its jobs run on the host backend" in x.get("msg", "")]
    assert warns and warns[0]["level"] == "warn", d.log()


@pytest.mark.slow
def test_repeated_failures_move_the_work_to_the_host(spawn):
    """Every launch refused from 4 s on: before, the device serves; after,
    three refusals in a row take it out, the host backend runs every job,
    and /metrics and the ready status say so. No request hangs."""
    d = spawn("--fault-device", "1", "--fault-after-ms", "4000", "--workers", "2", *QUEUED)
    sequential(d, 3, 22)
    assert sum(metric_values(d, "tally_device_jobs_total").values()) == 3
    time.sleep(4.2)
    t = time.time()
    sequential(d, 20, 23)
    crowd(d, 20)
    assert time.time() - t < 60
    assert set(metric_values(d, "tally_device_up").values()) == {0.0}
    assert metric_value(d, "tally_host_fallback") == 1
    assert sum(metric_values(d, "tally_device_errors_total").values()) == 3
    assert metric_value(d, "tally_host_reruns_total") == 3
    status, _, body = d.request("GET", "/v2/health/ready")
    assert status == 200 and json.loads(body)["degraded"].startswith("every device has failed")
    msgs = [x["msg"] for x in d.log_lines() if "msg" in x]
    assert any("failed 3 launches in a row" in m for m in msgs), d.log()
    assert any("the host backend runs every job" in m for m in msgs), d.log()


def test_a_fault_after_the_kernel_ran_is_a_500(spawn):
    """A launch that fails after running may have written an in-place
    tensor half-way: that request gets a 500 naming the device's error
    (it cannot be run again)."""
    d = spawn("--fault-device", "1", "--fault-late", "--device-max-failures", "100",
              "--workers", "1", "--max-batch", "1", *QUEUED)
    status, _, out = d.post_json("/v1/cumsum", {"dtype": "int32", "shape": [5],
                                                "data": [1, 2, 3, 4, 5]})
    assert status == 500, out
    assert "CL_OUT_OF_RESOURCES" in out["error"] and "fault injected" in out["error"]
    deadline = time.time() + 10   # the access log is written after the answer
    while not [x for x in d.log_lines() if x.get("status") == 500]:
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    lines = [x for x in d.log_lines() if x.get("status") == 500]
    assert lines[0]["error"] == "DEVICE"
    assert metric_value(d, "tally_host_reruns_total") == 0


def test_the_host_goes_on_when_every_device_fails(spawn):
    d = spawn("--device", "0:1", "--fault-device", "1", "--workers", "2", *QUEUED, env=TWO)
    crowd(d, 10)
    assert d.request("GET", "/v2/health/ready")[0] == 200
    assert any("the host backend runs every job" in x.get("msg", "") for x in d.log_lines())
    crowd(d, 5)


def test_device_lists_that_name_nothing():
    for spec, words in (("gpu:all", "no such device"), ("0:0,,0:1", "empty"),
                        ("0:9", "no OpenCL device matches")):
        out = subprocess.run([TALLYD, "--device", spec, "--listen", "127.0.0.1:1"],
                             capture_output=True, text=True, env=dict(TWO, PATH="/usr/bin:/bin"),
                             timeout=120)
        assert out.returncode == 1, (spec, out.stderr)
        assert words in out.stderr, (spec, out.stderr)
