"""`make run`, the README's first command, as a newcomer uses it: settings
from the environment (TALLY_*) reach tallyd, and the `tally` CLI it says it
built works against the daemon it started.

The nested make inherits this run's MAKEFLAGS (less the jobserver, whose
descriptors a child does not get), so it finds the build directory that
`make test` (or SANITIZE=...) just filled and only starts the daemon.
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from conftest import ROOT, Daemon

# make run, as a user runs it: seconds each, so `make check` leaves them out
pytestmark = pytest.mark.slow


def make_env(**extra):
    env = dict(os.environ)
    flags = [f for f in env.get("MAKEFLAGS", "").split()
             if not f.startswith("--jobserver") and not re.match(r"^-j\d*$", f)]
    env["MAKEFLAGS"] = " ".join(flags)
    env.pop("MFLAGS", None)
    env.update(extra)
    return env


def test_make_run_takes_tally_settings_and_builds_the_cli(tmp_path):
    d = Daemon(command=["make", "--no-print-directory", "-C", ROOT, "run"],
               env=make_env(TALLY_WORKERS="3", TALLY_MAX_BODY_BYTES="4096", TALLY_WARMUP="false"))
    try:
        log = d.log()
        # TALLY_LISTEN and TALLY_GRPC_LISTEN (set by Daemon: port 0) hold
        assert "run: starting tallyd on http://127.0.0.1:0, gRPC on 127.0.0.1:0 " in log, log
        started = [l for l in d.log_lines()
                   if l.get("msg", "").startswith("tallyd ") and "listening on" in l["msg"]]
        assert started and "(port %d," % d.port in started[0]["msg"], log
        assert " 3 workers" in started[0]["msg"], started
        big = json.dumps({"data": list(range(2000))})
        status, _, raw = d.request("POST", "/v1/cumsum", big, {"Content-Type": "application/json"})
        assert status == 413, raw
        # both programs are named, and the CLI is there and talks to it
        tallyd = re.search(r"^run: tallyd is (\S+)$", log, re.M)
        cli = re.search(r"^run: the CLI is (\S+) ", log, re.M)
        assert tallyd and cli, log
        assert os.access(tallyd.group(1), os.X_OK) and os.access(cli.group(1), os.X_OK)
        x = np.arange(12, dtype=np.int32).reshape(3, 4)
        np.save(tmp_path / "x.npy", x)
        r = subprocess.run([cli.group(1), "cumsum", "--url", "http://127.0.0.1:%d" % d.port,
                            "--axis", "1", str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.load(tmp_path / "y.npy"), np.cumsum(x, axis=1))
    finally:
        d.cleanup()
