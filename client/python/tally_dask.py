"""tally_dask - cumulative sums of Dask arrays, each block's on a tally replica.

    import dask.array as da
    import tally_dask

    x = da.random.random((4096, 4096), chunks=(1024, 512))
    y = tally_dask.cumsum(x, axis=1, urls=["http://10.0.0.5:8080",
                                           "http://10.0.0.6:8080"])
    y.compute()                 # on whatever scheduler is active

How: dask.array's own cumulative-reduction machinery
(dask.array.reductions.cumreduction, its "blelloch" method) runs the graph.
Each block's scan along `axis` is one request to a tally replica
(cumsum_block: raw little-endian bytes over HTTP keep-alive, the parameters
in the query); the carries, each block's total (numpy's sum of the block)
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
import builtins
import functools
import http.client
import itertools
import json
import ssl
import threading
import time
import urllib.parse

import numpy as np

__all__ = ["TallyError", "cumsum", "cumsum_block"]

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64")


class TallyError(RuntimeError):
    """A replica refused a block (a 4xx: the request itself is wrong, so no
    other replica is tried), or every replica failed. `status` is the HTTP
    status (0: no replica answered)."""

    def __init__(self, message, status=0):
        super().__init__(message)
        self.status = status


_local = threading.local()
_turn = itertools.count()


def _connection(url, timeout, cafile):
    """This thread's keep-alive connection to url."""
    conns = getattr(_local, "conns", None)
    if conns is None:
        conns = _local.conns = {}
    conn = conns.get(url)
    if conn is None:
        u = urllib.parse.urlsplit(url)
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=cafile)
            conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=timeout,
                                               context=ctx)
        elif u.scheme == "http":
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
        else:
            raise ValueError("tally URL must be http:// or https://, not %r" % url)
        conns[url] = conn
    return conn


def _drop(url):
    conn = getattr(_local, "conns", {}).pop(url, None)
    if conn is not None:
        conn.close()


def _post(url, path, body, headers, timeout, cafile, retry=True):
    """One POST on this thread's connection to url, reconnecting once when a
    kept-alive connection turns out to be closed. Returns (status, response,
    body)."""
    conn = _connection(url, timeout, cafile)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
    except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
        _drop(url)
        if not retry:
            raise
        return _post(url, path, body, headers, timeout, cafile, retry=False)
    except BaseException:
        _drop(url)
        raise
    if resp.getheader("Connection", "").lower() == "close":
        _drop(url)
    return resp.status, resp, data


def cumsum_block(block, axis, url, exclusive=False, reverse=False, token=None, timeout=300,
                 cafile=None):
    """The cumulative sum of one numpy array along axis, computed by the
    tally server at url (a string, or a list of them: tried in turn from a
    rotating start). Returns a new array of the same shape and dtype.

    token: a bearer token, for a server with --auth-token-file. cafile: the
    CA that signed an https server's certificate (default: the system's).
    Raises TallyError when the server refuses the block (4xx), or when no
    server could compute it."""
    block = np.asarray(block)
    if block.dtype.name not in DTYPES:
        raise TypeError("tally has no dtype %s (it has %s)" % (block.dtype, ", ".join(DTYPES)))
    axis = _axis(axis, block.ndim)
    if block.size == 0:
        return np.empty(block.shape, block.dtype)
    data = np.ascontiguousarray(block, dtype=block.dtype.newbyteorder("<"))
    payload = memoryview(data.reshape(-1)).cast("B")  # sent as it lies, not copied
    query = urllib.parse.urlencode({
        "dtype": block.dtype.name, "shape": ",".join(map(str, block.shape)) or "1",
        "axis": axis, "exclusive": "true" if exclusive else "false",
        "reverse": "true" if reverse else "false"})
    headers = {"Content-Type": "application/octet-stream"}
    if token:
        headers["Authorization"] = "Bearer " + token
    urls = [url] if isinstance(url, str) else list(url)
    if not urls:
        raise ValueError("no tally URL given")
    start = next(_turn)
    failures = []
    for round_ in (0, 1):
        wait = None
        for i in range(len(urls)):
            u = urls[(start + i) % len(urls)]
            base = urllib.parse.urlsplit(u).path.rstrip("/")
            try:
                status, resp, raw = _post(u, base + "/v1/cumsum?" + query, payload,
                                          headers, timeout, cafile)
            except (OSError, http.client.HTTPException) as e:
                failures.append("%s: %s" % (u, e))
                continue
            if status == 200:
                out = np.frombuffer(raw, dtype=data.dtype)
                if out.size != block.size:
                    raise TallyError("%s answered %d elements for %d"
                                     % (u, out.size, block.size), status)
                return out.reshape(block.shape).astype(block.dtype, copy=False)
            message = _error_text(raw)
            if status in (429, 502, 503, 504):  # busy or draining: another may not be
                failures.append("%s: %d %s" % (u, status, message))
                retry = resp.getheader("Retry-After") or ""
                if retry.isdigit():
                    wait = builtins.min(int(retry), wait if wait is not None else 5)
                continue
            raise TallyError("%s: %d %s" % (u, status, message), status)
        if wait is None or round_ == 1:
            break
        time.sleep(wait)  # every replica asked for a pause: once, then again
    raise TallyError("no tally replica computed the block: " + "; ".join(failures))


def _error_text(raw):
    try:
        return json.loads(raw)["error"]
    except (ValueError, KeyError, TypeError):
        return raw[:200].decode("utf-8", "replace")


def _axis(axis, ndim):
    if not -builtins.max(ndim, 1) <= axis < builtins.max(ndim, 1):
        raise ValueError("axis %d is out of range for %d dimensions" % (axis, ndim))
    return axis % builtins.max(ndim, 1)


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
