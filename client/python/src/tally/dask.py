"""tally.dask - cumulative sums of Dask arrays, each block's on a tally replica.

    import dask.array as da
    import tally.dask

    x = da.random.random((4096, 4096), chunks=(1024, 512))
    y = tally.dask.cumsum(x, axis=1, urls=["http://10.0.0.5:8080",
                                           "http://10.0.0.6:8080"])
    y.compute()                 # on whatever scheduler is active

How: dask.array's own cumulative-reduction machinery
(dask.array.reductions.cumreduction, its "blelloch" method) runs the graph.
Each block's scan along `axis` is one request to a tally replica
(cumsum_block: tally.Client's binary path, raw little-endian bytes over
HTTP keep-alive); the carries, each block's total (numpy's sum of the block)
combined along the axis in a tree, are added to the blocks by Dask itself.
Blocks go to the replicas in turn, per worker process; a replica that
cannot be reached, or says it is too busy (503), is passed over for the
next, and the request fails only when every replica has.

Semantics are tally's (DirectML's and OpenVINO's CumSum): `exclusive`
leaves each element out of its own sum, `reverse` sums from the end. The
result keeps the input's dtype, as tally's answers do: unlike numpy's
cumsum, int8 stays int8 (wrapping on overflow) instead of widening to
int64. float16 carries are added in float16 by numpy. Supported dtypes:
int8 to int64, uint8 to uint64, float16, float32, float64.

Threading: cumsum_block may be called from any number of threads; each
thread keeps its own connection to each replica. Nothing here starts a
thread or a cluster.

Needs numpy and dask[array] (dask.distributed only if you use a cluster);
nothing else beyond the standard library.
"""
import functools
import threading

import numpy as np

from ._transport import TallyError
from .client import DTYPES, Client, _axis

__all__ = ["TallyError", "cumsum", "cumsum_block"]

_clients = {}
_clients_lock = threading.Lock()


def _client(urls, token, timeout, cafile):
    """One client per process for these replicas (its connections are per
    thread). Shared memory is left off: blocks come from Dask's workers,
    not from memory the client's own process owns for long."""
    key = (tuple([urls] if isinstance(urls, str) else urls), token, timeout, cafile)
    with _clients_lock:
        c = _clients.get(key)
        if c is None:
            c = _clients[key] = Client(list(key[0]), token=token, cafile=cafile,
                                       timeout=timeout, shm=False)
        return c


def cumsum_block(block, axis, url, exclusive=False, reverse=False, token=None, timeout=300,
                 cafile=None):
    """The cumulative sum of one numpy array along axis, computed by the
    tally server at url (a string, or a list of them: tried in turn from a
    rotating start). Returns a new array of the same shape and dtype.

    token: a bearer token, for a server with --auth-token-file. cafile: the
    CA that signed an https server's certificate (default: the system's).
    Raises TallyError when the server refuses the block (4xx), or when no
    server could compute it."""
    return _client(url, token, timeout, cafile).cumsum(block, axis, exclusive=exclusive,
                                                       reverse=reverse)


def _block_scan(block, axis, dtype, urls, exclusive, token, timeout, cafile):
    """dask's per-block cumulative function: called as func(x, axis=, dtype=)."""
    return cumsum_block(block, axis, urls, exclusive=exclusive, token=token, timeout=timeout,
                        cafile=cafile).astype(dtype, copy=False)


def _block_total(block, axis, keepdims):
    """dask's per-block "preop": the block's sum along axis, the carry it
    hands on."""
    return np.sum(block, axis=axis, keepdims=keepdims, dtype=block.dtype)


def cumsum(x, axis, urls, exclusive=False, reverse=False, token=None, timeout=300,
           cafile=None):
    """The cumulative sum of dask array x along axis, each block's scan
    computed by a tally replica (urls: one URL or a list), the carries
    between blocks added by Dask. Lazy: returns a dask array of x's shape,
    chunks and dtype. exclusive and reverse are the API's flags."""
    import dask.array as da
    from dask.array.reductions import cumreduction

    if isinstance(urls, str):
        urls = [urls]
    urls = tuple(urls)
    if not urls:
        raise ValueError("no tally URL given")
    if x.dtype.name not in DTYPES:
        raise TypeError("tally has no dtype %s (it has %s)" % (x.dtype, ", ".join(DTYPES)))
    axis = _axis(axis, x.ndim)
    if reverse:  # scan the flipped array forward, and flip it back
        return da.flip(cumsum(da.flip(x, axis), axis, urls, exclusive=exclusive, token=token,
                              timeout=timeout, cafile=cafile), axis)
    func = functools.partial(_block_scan, urls=urls, exclusive=exclusive, token=token,
                             timeout=timeout, cafile=cafile)
    func.__name__ = "tally-cumsum"  # dask names the graph's keys after it
    return cumreduction(func, np.add, 0, x, axis=axis, dtype=x.dtype, method="blelloch",
                        preop=_block_total)
