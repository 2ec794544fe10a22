"""tally.dask (client/python, installed with pip): Dask arrays summed block by block on two
tallyd replicas, the carries added by Dask, on a local Dask cluster of two
worker processes.

Checked against numpy: a 2-D float64 array (16 chunks) and an int64 array
(64 chunks), along each axis, inclusive and exclusive, forward and reverse.
Each block is one request (counted in the replicas' /metrics, which shows
that both took a share and that tally, not numpy, scanned every block). A
replica that cannot be reached is passed over.

Random inputs come from a seed printed with the test (TALLY_SEED replays
it).
"""
import os
import random

import numpy as np
import pytest

from conftest import dead_port, install_python_package

PYDIR = install_python_package()

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import tally.dask as tally_dask  # noqa: E402

# a dask cluster per module: seconds each, so `make check` leaves them
# out; and on one pytest-xdist worker: the cluster and the replicas are
# module fixtures, so spread over four workers they started four times
# (about 10 s each on two cores, in every CI leg)
pytestmark = [pytest.mark.slow, pytest.mark.peer, pytest.mark.xdist_group("dask")]


def native_requests(d):
    return d.metric("tally_requests_total", route="native", code="200")


def reference(x, axis, exclusive, reverse):
    """numpy's cumsum with the API's flags, in x's dtype."""
    y = np.flip(x, axis) if reverse else x
    s = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        s = s - y
    return np.flip(s, axis) if reverse else s


@pytest.fixture(scope="module")
def cluster():
    """A local Dask cluster of two worker processes that can import
    tally.dask."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = PYDIR + (os.pathsep + old if old else "")
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                      dashboard_address=None) as c, \
                distributed.Client(c) as client:
            yield client
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def replicas():
    from conftest import Daemon
    ds = []
    try:
        for _ in range(2):  # one by one: the first is stopped if the second fails
            ds.append(Daemon())
        yield ds
    finally:
        for d in ds:
            d.cleanup()


@pytest.fixture(scope="module")
def rng():
    seed = int(os.environ.get("TALLY_SEED", random.randrange(1 << 32)))
    print("test_dask: seed %d (replay with TALLY_SEED=%d)" % (seed, seed))
    return np.random.default_rng(seed)


CASES = [(axis, exclusive, reverse) for axis in (0, 1, -1)
         for exclusive in (False, True) for reverse in (False, True)]


@pytest.mark.concurrency
@pytest.mark.parametrize("axis,exclusive,reverse", CASES)
def test_float64_16_chunks(cluster, replicas, rng, axis, exclusive, reverse):
    x = rng.standard_normal((300, 400))
    dx = da.from_array(x, chunks=(75, 100))
    assert dx.npartitions == 16
    urls = ["http://127.0.0.1:%d" % d.port for d in replicas]
    before = [native_requests(d) for d in replicas]
    y = tally_dask.cumsum(dx, axis=axis, urls=urls, exclusive=exclusive, reverse=reverse)
    assert y.dtype == np.float64 and y.chunks == dx.chunks
    got = y.compute()
    want = reference(x, axis, exclusive, reverse)
    # tally sums more exactly than numpy's running sum; both are close to
    # the true sums, well within this
    assert np.allclose(got, want, rtol=1e-11, atol=1e-11), np.max(np.abs(got - want))
    served = [native_requests(d) - b for d, b in zip(replicas, before)]
    assert sum(served) == 16, served  # one request a block, no numpy scan
    assert all(s > 0 for s in served), served


@pytest.mark.parametrize("axis,exclusive,reverse", CASES)
def test_int64_64_chunks(cluster, replicas, rng, axis, exclusive, reverse):
    x = rng.integers(-10**12, 10**12, size=(256, 320), dtype=np.int64)
    dx = da.from_array(x, chunks=(16, 80))
    assert dx.npartitions == 64
    urls = ["http://127.0.0.1:%d" % d.port for d in replicas]
    y = tally_dask.cumsum(dx, axis=axis, urls=urls, exclusive=exclusive, reverse=reverse)
    got = y.compute()
    assert got.dtype == np.int64
    assert np.array_equal(got, reference(x, axis, exclusive, reverse))


def test_a_replica_that_is_down_is_passed_over(cluster, replicas, rng):
    x = rng.integers(0, 1000, size=(64, 64), dtype=np.int32)
    dx = da.from_array(x, chunks=(16, 16))
    dead = "http://127.0.0.1:%d" % dead_port()  # nobody listens there
    urls = [dead, "http://127.0.0.1:%d" % replicas[0].port]
    before = native_requests(replicas[0])
    got = tally_dask.cumsum(dx, axis=0, urls=urls).compute()
    assert np.array_equal(got, np.cumsum(x, axis=0, dtype=np.int32))
    assert native_requests(replicas[0]) - before == 16


def test_errors_are_clear(replicas):
    url = "http://127.0.0.1:%d" % replicas[0].port
    with pytest.raises(TypeError, match="no dtype bool"):
        tally_dask.cumsum(da.ones((4,), dtype=bool, chunks=2), axis=0, urls=[url])
    with pytest.raises(ValueError, match="out of range"):
        tally_dask.cumsum(da.ones((4, 4), chunks=2), axis=2, urls=[url])
    with pytest.raises(tally_dask.TallyError, match="no tally replica answered"):
        tally_dask.cumsum_block(np.ones(3), 0, "http://127.0.0.1:%d" % dead_port())
    # the server's own message, for a request it refuses (4xx): not retried
    with pytest.raises(tally_dask.TallyError) as e:
        tally_dask.cumsum_block(np.ones(3), 0, url + "/nowhere")
    assert e.value.status == 404


def test_block_on_its_own(replicas):
    """cumsum_block without Dask, every dtype the module names."""
    url = "http://127.0.0.1:%d" % replicas[1].port
    for name in tally_dask.DTYPES:
        x = (np.arange(24) % 7).astype(name).reshape(2, 3, 4)
        for axis in range(3):
            got = tally_dask.cumsum_block(x, axis, url)
            assert got.dtype == x.dtype and got.shape == x.shape
            assert np.array_equal(got, np.cumsum(x, axis=axis, dtype=x.dtype)), (name, axis)
    big_endian = np.arange(10, dtype=">i4")
    assert np.array_equal(tally_dask.cumsum_block(big_endian, 0, url), np.cumsum(np.arange(10)))
