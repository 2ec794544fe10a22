"""proto/openapi.yaml against the server: clients are generated from the
description, so it must say what tallyd does.

schemathesis (a property-based tester driven by the description) makes
requests from it, valid and invalid, for every route, and checks each
answer against it: no 5xx, every status listed for its route, every body
and header of the listed schema and content type, valid input accepted,
input the description rules out refused. The seed is fixed so that a
failure repeats; it is printed, and TALLY_SCHEMA_SEED picks another
(TALLY_SCHEMA_EXAMPLES, the cases per route, 12 by default).

The few things OpenAPI 3.0 cannot say are configured away in
tests/integration/schemathesis.toml, each with its reason.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEED = int(os.environ.get("TALLY_SCHEMA_SEED", "20261125"))
EXAMPLES = int(os.environ.get("TALLY_SCHEMA_EXAMPLES", "12"))


def run_schemathesis(d, tmp_path, extra=()):
    st = os.path.join(os.path.dirname(sys.executable), "st")
    cmd = [st, "--config-file", os.path.join(HERE, "schemathesis.toml"), "run",
           os.path.join(ROOT, "proto", "openapi.yaml"), "--url", "http://127.0.0.1:%d" % d.port,
           "--seed", str(SEED), "--max-examples", str(EXAMPLES),
           "--workers", "1", "--generation-database", "none", "--no-color",
           "--request-timeout", "30", "--report", "junit",
           "--report-dir", str(tmp_path)] + list(extra)
    print("schemathesis: seed %d, %d examples a route (TALLY_SCHEMA_SEED, "
          "TALLY_SCHEMA_EXAMPLES)" % (SEED, EXAMPLES))
    # run in tmp_path: schemathesis keeps a cache (.schemathesis/) where it runs
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(tmp_path),
                         env=dict(os.environ, SCHEMATHESIS_HOOKS=""))
    return out.returncode, out.stdout + out.stderr


# peer: schemathesis's own generation is most of its 51 s; the plain leg
# runs it, and the fuzz targets feed the sanitized parsers malformed input
@pytest.mark.slow
@pytest.mark.peer
def test_every_answer_is_one_the_description_allows(spawn, tmp_path):
    d = spawn("--allow-shared-memory", "--access-log=off")
    rc, text = run_schemathesis(d, tmp_path)
    assert rc == 0, "schemathesis (seed %d) found disagreements:\n%s" % (SEED, text[-12000:])
    assert "passed" in text, text[-3000:]
    # the daemon is still well after all of it
    status, _, body = d.post_json("/v1/cumsum", {"data": [1, 2, 3]})
    assert status == 200 and body["data"] == [1, 3, 6], body
