"""The model checker (tests/model/driver.py, docs/durability.md): random
operations from many clients through every door, each answer checked
against the reference model of the sequence rules, on five setups: the
shared store's backend itself, three replicas on a fake store whose
answers come in a drawn order and whose writes are lost before or after
they apply (build/bin/model_fake); tallyd in memory; tallyd with
--state-dir killed or stopped and started again, its disk filled, its
writes failed (always, then everysec); three replicas on one Redis, with
replicas and Redis killed, Redis paused and rolled back to a snapshot;
two replicas with --state-store-wait 1 through a Redis failover. A short
fixed budget each (about 80 s in all, TALLY_MODEL_SECONDS scales it), a
new seed each run, printed; TALLY_MODEL_SEED replays one. `make soak`
runs them for minutes."""
import os
import random
import shutil
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "model"))
import driver  # noqa: E402

os.environ.setdefault("TALLY_MODEL_FAKE", os.path.join(os.path.dirname(os.environ.get(
    "TALLYD", os.path.join(driver.ROOT, "build", "bin", "tallyd"))), "model_fake"))

SEED = int(os.environ.get("TALLY_MODEL_SEED", random.randrange(1 << 31)))
SCALE = float(os.environ.get("TALLY_MODEL_SECONDS", "1"))


def check(setup, seconds, **kw):
    try:
        figures = driver.run(setup, seconds * SCALE, SEED, **kw)
    except driver.Failure as e:
        pytest.fail(str(e), pytrace=False)
    # it ran, and checked: answers came and were compared
    assert figures["operations"] > 50 * SCALE, figures
    return figures


def test_model_fake_store():
    f = check("fake", 10)
    assert f["faults"] >= 4, f


def test_model_memory():
    check("memory", 15)


@pytest.mark.slow
@pytest.mark.outage
@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_model_state_dir_killed(fsync):
    f = check("state-dir", 10, fsync=fsync)
    assert f["faults"] >= 2, f


@pytest.mark.slow
@pytest.mark.outage
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")
def test_model_replicas_on_redis():
    f = check("redis", 25)
    assert f["faults"] >= 4, f


@pytest.mark.slow
@pytest.mark.outage
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")
def test_model_failover_with_state_store_wait():
    f = check("failover", 12)
    assert f["faults"] >= 2, f
