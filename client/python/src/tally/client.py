"""tally.Client: cumulative sums of numpy arrays on a tally service."""
import hashlib
import json
import os
import sys
import threading
import time
import urllib.parse
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from ._transport import Replicas, TallyError

__all__ = ["Client", "RunningSum", "DTYPES"]

#: The numpy dtypes tally sums (bfloat16 has no numpy dtype).
DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64")

_LOCAL_HOSTS = ("localhost", "::1")


def home_replica(id_text: str, replicas: int) -> int:
    """Which of `replicas` servers is a sequence's home without a shared
    store: FNV-1a (64 bit) of its id's text, modulo their count; libtally
    and the tally CLI choose the same one (docs/sequences.md, "Clients")."""
    h = 0xcbf29ce484222325
    for b in id_text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h % replicas


def _is_local(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.startswith("127.")


def _axis(axis: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= axis < n:
        raise ValueError("axis %d is out of range for %d dimensions" % (axis, ndim))
    return axis % n


def _checked(array) -> np.ndarray:
    a = np.asarray(array)
    if a.dtype.name not in DTYPES:
        raise TypeError("tally has no dtype %s (it has %s)" % (a.dtype, ", ".join(DTYPES)))
    return a


class _Region:
    """A POSIX shared-memory region this client made and registered: the
    tensor is copied in, summed in place by the server, copied out."""

    def __init__(self, server: Replicas, size: int):
        from multiprocessing import shared_memory
        self.name = "tally-py-%d-%x" % (os.getpid(), id(self))
        self.mem = shared_memory.SharedMemory(name=self.name, create=True, size=size)
        self.size = size
        body = json.dumps({"key": "/" + self.name, "offset": 0, "byte_size": size})
        try:
            server.request("POST", "/v2/systemsharedmemory/region/%s/register" % self.name,
                           body, {"Content-Type": "application/json"})
        except BaseException:
            self._unlink()
            raise

    def _unlink(self) -> None:
        self.mem.close()
        try:
            self.mem.unlink()
        except FileNotFoundError:
            pass

    def free(self, server: Replicas) -> None:
        try:
            server.request("POST", "/v2/systemsharedmemory/region/%s/unregister" % self.name)
        except (TallyError, OSError):
            pass  # the server's copy goes when it stops; ours goes now
        self._unlink()


class Client:
    """A tally service: one URL, or several replicas tried in turn.

    token: a bearer token, for a server with --auth-token-file. cafile: the
    CA that signed an https server's certificate (default: the system's).
    timeout: seconds for each request. shm: "auto" (the default) passes
    tensors through POSIX shared memory when the first URL is on this
    machine (localhost, 127.x.y.z, [::1]) and the server allows it
    (--allow-shared-memory), and over the socket otherwise, with one
    warning on stderr when the server refuses; True requires it (a refusal
    raises); False never uses it.

    shared_state: the replicas share their sequences' state (tallyd
    --state-store): a sequence's chunk may go to any of them, and fails
    over to the next (see sequence()).

    Threading: a client may be shared by threads; each keeps its own
    connections, and shared memory is used by one call at a time (the
    others go over the socket meanwhile)."""

    def __init__(self, url: Union[str, Sequence[str]] = "http://127.0.0.1:8080",
                 token: Optional[str] = None, cafile: Optional[str] = None,
                 timeout: float = 60.0, shm: Union[str, bool] = "auto",
                 shared_state: bool = False):
        if shm not in ("auto", True, False):
            raise ValueError("shm is \"auto\", True or False, not %r" % (shm,))
        self.shared_state = bool(shared_state)
        self._replicas = Replicas(url, token, cafile, timeout)
        # the first URL alone: the server that holds this client's region
        self._local = Replicas(self._replicas.urls[0], token, cafile, timeout)
        self._shm = shm
        self._region: Optional[_Region] = None
        self._region_lock = threading.Lock()
        self._shm_off = shm is False or (shm == "auto" and not _is_local(self._replicas.urls[0]))

    # -- the cumulative sum ------------------------------------------------

    def cumsum(self, array, axis: int = 0, exclusive: bool = False,
               reverse: bool = False) -> np.ndarray:
        """The cumulative sum of a numpy array along axis (negative counts
        from the back): a new array of the same shape and dtype (integers
        wrap, as tally's do; unlike numpy's cumsum, int8 stays int8).
        exclusive leaves each element out of its own sum; reverse sums from
        the end. Raises TallyError with the server's message and status."""
        a = _checked(array)
        axis = _axis(axis, a.ndim)
        if a.size == 0:
            return np.empty(a.shape, a.dtype)
        data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        if not self._shm_off and self._region_lock.acquire(blocking=False):
            try:
                out = self._cumsum_shm(data, axis, exclusive, reverse)
                if out is not None:
                    return out.astype(a.dtype, copy=False)
            finally:
                self._region_lock.release()
        query = urllib.parse.urlencode({
            "dtype": a.dtype.name, "shape": ",".join(map(str, a.shape)) or "1",
            "axis": axis, "exclusive": "true" if exclusive else "false",
            "reverse": "true" if reverse else "false"})
        payload = memoryview(data.reshape(-1)).cast("B")  # sent as it lies
        url, _, raw = self._replicas.request("POST", "/v1/cumsum?" + query, payload,
                                             {"Content-Type": "application/octet-stream"})
        out = np.frombuffer(raw, dtype=data.dtype)
        if out.size != a.size:
            raise TallyError("answered %d elements for %d" % (out.size, a.size), 200, url)
        return out.reshape(a.shape).astype(a.dtype, copy=False)

    def _cumsum_shm(self, data: np.ndarray, axis: int, exclusive: bool,
                    reverse: bool) -> Optional[np.ndarray]:
        """The sum through this client's region, in place; None when the
        server will not take shared memory (and shm is "auto")."""
        url = self._replicas.urls[0]
        try:
            if self._region is None or self._region.size < data.nbytes:
                if self._region is not None:
                    self._region.free(self._local)
                    self._region = None
                self._region = _Region(self._local, max(data.nbytes, 1 << 16))
        except TallyError as e:
            if self._shm is True or e.status not in (403,):
                raise
            print("tally: note: %s does not take shared memory (%s); sending tensors over "
                  "the socket" % (url, e.message), file=sys.stderr)
            self._shm_off = True
            return None
        region = self._region
        view = np.ndarray(data.shape, data.dtype, buffer=region.mem.buf)
        view[...] = data
        place = {"shared_memory_region": region.name, "shared_memory_offset": 0,
                 "shared_memory_byte_size": data.nbytes}
        body = json.dumps({
            "inputs": [{"name": "x", "datatype": data.dtype.name,
                        "shape": list(data.shape), "parameters": place}],
            "outputs": [{"name": "y", "parameters": place}],
            "parameters": {"axis": axis, "exclusive": exclusive, "reverse": reverse}})
        self._local.request("POST", "/v2/models/cumsum/infer", body,
                            {"Content-Type": "application/json"})
        out = view.copy()
        del view  # the region's buffer must have no views when it is closed
        return out

    def cumsum_strided(self, buffer, sizes: Sequence[int], axis: int = 0,
                       in_strides: Optional[Sequence[int]] = None,
                       out_strides: Optional[Sequence[int]] = None,
                       exclusive: bool = False, reverse: bool = False,
                       total_bytes: Optional[int] = None) -> np.ndarray:
        """DirectML's form (DML_CUMULATIVE_SUMMATION_OPERATOR_DESC with
        buffer tensors): buffer is the input buffer (a numpy array of the
        element type, read as its bytes in memory order); sizes the
        tensor's sizes; in_strides and out_strides its layout in each
        buffer, in elements (None: packed; a stride of 0 repeats an input
        element). Returns the output buffer as a flat array of the dtype:
        only the elements out_strides addresses are written (the rest are
        0). total_bytes is the input's TotalTensorSizeInBytes (None: the
        buffer's size)."""
        b = _checked(buffer)
        data = np.ascontiguousarray(b, dtype=b.dtype.newbyteorder("<")).reshape(-1)
        name = b.dtype.name.upper()
        inp = {"DataType": name, "Sizes": [int(s) for s in sizes],
               "TotalTensorSizeInBytes": int(total_bytes if total_bytes is not None
                                             else data.nbytes)}
        if in_strides is not None:
            inp["Strides"] = [int(s) for s in in_strides]
        out = {"DataType": name, "Sizes": [int(s) for s in sizes]}
        if out_strides is not None:
            out["Strides"] = [int(s) for s in out_strides]
        op = json.dumps({"InputTensor": inp, "OutputTensor": out, "Axis": int(axis),
                         "AxisDirection": "DECREASING" if reverse else "INCREASING",
                         "HasExclusiveSum": bool(exclusive)}, separators=(",", ":"))
        _, _, raw = self._replicas.request(
            "POST", "/v1/cumsum", memoryview(data).cast("B"),
            {"Content-Type": "application/octet-stream", "DML-Operator": op})
        return np.frombuffer(raw, dtype=data.dtype).astype(b.dtype, copy=False)

    # -- sequences -----------------------------------------------------------

    def sequence(self, axis: int = 0, exclusive: bool = False, reverse: bool = False,
                 sequence_id: Union[int, str, None] = None,
                 retries: int = 4, end_on_error: bool = False) -> "RunningSum":
        """A running sum that outlives a request (Triton's sequence
        extension): a context manager whose cumsum(chunk) sends the next
        chunk of one tensor cut along axis and answers that chunk's part of
        the whole tensor's cumulative sum. The first chunk starts the
        sequence on the server; leaving the block ends it (with the last
        chunk when cumsum(chunk, last=True) was called, else with an empty
        one). With reverse, send the chunks from the last to the first.

            with client.sequence(axis=0) as s:
                for chunk in stream:
                    y = s.cumsum(chunk)

        sequence_id: an int (1 to 2**64 - 1) or a str of 1 to 128 bytes of
        UTF-8 (default: a random one).

        Where the chunks go, the one rule of every tally client
        (docs/sequences.md, "Clients"): with several replica URLs and
        shared_state (the Client's), a chunk may go to any replica and
        fails over to the next; without it, every chunk goes to the
        replica the id hashes to, the one server that keeps the sequence,
        and to no other.

        The chunks are numbered (sequence_chunk, from 1), so the server
        adds each exactly once: a chunk whose answer did not come (a
        dropped connection, a timeout, a 502, 503 or 504) is sent again
        with the same number, up to `retries` more times, 0.1 s, 0.2 s,
        0.4 s ... apart; the server answers a repeat with the first answer
        and does not add it again. When every try failed, TallyError is
        raised and the chunk's outcome is unknown: the next cumsum() must
        send the same chunk (its number is kept), and any other raises
        ValueError, so that no chunk silently leaves the sum; abandon()
        gives the sequence up. Leaving the block on an exception does not
        end the sequence (the server drops it after --sequence-idle-ms)
        unless end_on_error."""
        if sequence_id is None:
            sequence_id = "py-" + os.urandom(12).hex()
        return RunningSum(self, sequence_id, axis, exclusive, reverse, retries,
                          end_on_error)

    # -- the service -------------------------------------------------------

    def ready(self) -> bool:
        """Whether a replica says it is ready (GET /v2/health/ready)."""
        try:
            self._replicas.request("GET", "/v2/health/ready")
            return True
        except TallyError:
            return False

    def metadata(self) -> dict:
        """The server's KServe metadata (GET /v2): name, version, extensions."""
        _, _, raw = self._replicas.request("GET", "/v2")
        return json.loads(raw)

    def close(self) -> None:
        """Unregisters and removes this client's shared-memory region, and
        closes this thread's connections. The client may be used again."""
        with self._region_lock:
            if self._region is not None:
                self._region.free(self._local)
                self._region = None
        self._replicas.close()
        self._local.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RunningSum:
    """One sequence (Client.sequence), its chunks numbered from 1 and
    retried with their numbers (Client.sequence says where they go and
    what follows a failure). Not for several threads at once: its chunks
    are ordered."""

    def __init__(self, client: Client, sequence_id: Union[int, str], axis: int,
                 exclusive: bool, reverse: bool, retries: int = 4,
                 end_on_error: bool = False):
        if retries < 0:
            raise ValueError("retries is 0 or more, not %d" % retries)
        if isinstance(sequence_id, bool) or not isinstance(sequence_id, (int, str)):
            raise TypeError("a sequence id is an int or a str, not %r" % (sequence_id,))
        if isinstance(sequence_id, int):
            if not 0 < sequence_id < 2 ** 64:
                raise ValueError("a numeric sequence id is 1 to 2**64 - 1, not %d"
                                 % sequence_id)
            self.id_text = str(sequence_id)
        else:
            n = len(sequence_id.encode("utf-8"))
            if not 1 <= n <= 128 or sequence_id.isdigit():
                raise ValueError("a string sequence id is 1 to 128 bytes of UTF-8, and not "
                                 "all digits (that names a number: pass an int)")
            self.id_text = sequence_id
        self.sequence_id = sequence_id
        self.axis, self.exclusive, self.reverse = axis, exclusive, reverse
        r = client._replicas
        if client.shared_state:
            self._server = Replicas(r.urls, r.token, r.cafile, r.timeout)
        else:
            urls = r.urls
            url = urls[home_replica(self.id_text, len(urls))]
            self._server = Replicas(url, r.token, r.cafile, r.timeout)
        self._started = self._ended = False
        self._last: Optional[np.ndarray] = None  # dtype and shape, for the end
        self._chunk = 1  # the next chunk's number
        # a chunk whose every try failed (its outcome unknown): its number,
        # a digest of what it was, and why; only it may be sent next
        self._pending: Optional[Tuple[int, bytes, str]] = None
        self.retries = retries
        self.end_on_error = end_on_error
        self.repeats = 0  # chunks sent again (their answer had not come)

    def _digest(self, data: np.ndarray, last: bool) -> bytes:
        h = hashlib.sha256()
        h.update(("%s %s %d" % (data.dtype.str, data.shape, last)).encode())
        h.update(memoryview(data.reshape(-1)).cast("B") if data.size else b"")
        return h.digest()

    def cumsum(self, chunk, last: bool = False) -> np.ndarray:
        """Sends the next chunk; returns its answer (a new array of its
        shape and dtype). last=True ends the sequence with it."""
        if self._ended:
            raise TallyError("sequence %s has ended" % self.id_text)
        a = _checked(chunk)
        if a.ndim == 0:
            raise ValueError("a chunk has one dimension at least")
        axis = _axis(self.axis, a.ndim)
        data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        digest = self._digest(data, last)
        if self._pending is not None and self._pending[1] != digest:
            raise ValueError(
                "sequence %s: chunk %d failed (%s), and the server may or may not "
                "have added it: send that chunk again (the same data, and last= "
                "as before) before any other, or abandon() the sequence"
                % (self.id_text, self._pending[0], self._pending[2]))
        params = {"dtype": a.dtype.name, "shape": ",".join(map(str, a.shape)),
                  "axis": axis, "exclusive": "true" if self.exclusive else "false",
                  "reverse": "true" if self.reverse else "false",
                  "sequence_id": self.id_text}
        params["sequence_chunk"] = str(self._chunk)
        if not self._started:
            params["sequence_start"] = "true"
        if last:
            params["sequence_end"] = "true"
        payload = memoryview(data.reshape(-1)).cast("B") if data.size else b""
        path = "/v1/cumsum?" + urllib.parse.urlencode(params)
        for attempt in range(self.retries + 1):
            try:
                url, _, raw = self._server.request(
                    "POST", path, payload, {"Content-Type": "application/octet-stream"})
                break
            except TallyError as e:
                # no answer (status 0: the connection dropped or timed
                # out) or busy: the same chunk again, with its number
                if e.status not in (0, 502, 503, 504):
                    self._pending = None  # refused: nothing was added
                    raise
                if attempt == self.retries:
                    self._pending = (self._chunk, digest, e.message)
                    raise
                self.repeats += 1
                time.sleep(0.1 * 2 ** attempt)
        self._pending = None
        self._chunk += 1
        self._started = True
        self._ended = last
        self._last = a
        out = np.frombuffer(raw, dtype=data.dtype)
        if out.size != a.size:
            raise TallyError("answered %d elements for %d" % (out.size, a.size), 200, url)
        return out.reshape(a.shape).astype(a.dtype, copy=False)

    def end(self) -> None:
        """Ends the sequence on the server, with an empty chunk, unless the
        last chunk already did (or none was sent). A chunk that failed must
        be sent again first (cumsum, above)."""
        if self._started and not self._ended:
            shape = list(self._last.shape)
            shape[_axis(self.axis, len(shape))] = 0
            self.cumsum(np.empty(shape, self._last.dtype), last=True)
        self._ended = True
        self._server.close()

    def abandon(self) -> None:
        """Gives the sequence up: nothing more is sent (a failed chunk
        included), and the server drops it after --sequence-idle-ms."""
        self._ended = True
        self._pending = None
        self._server.close()

    def __enter__(self) -> "RunningSum":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None or self.end_on_error:
            self.end()
        else:
            self._server.close()  # the sequence stays for a retry
