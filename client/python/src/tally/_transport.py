"""HTTP to tally replicas: one keep-alive connection per thread and replica,
a request tried on each replica in turn from a rotating start, and tally's
errors as TallyError."""
import builtins
import http.client
import itertools
import json
import ssl
import threading
import time
import urllib.parse
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["TallyError", "Replicas"]


class TallyError(RuntimeError):
    """A request tally refused or could not serve.

    status is the HTTP status of the answer (0 when no replica answered);
    message is the server's own message (its {"error": ...}); url is the
    replica that answered, when one did."""

    def __init__(self, message: str, status: int = 0, url: Optional[str] = None):
        super().__init__(message if url is None else "%s: %s" % (url, message))
        self.message = message
        self.status = status
        self.url = url


_turn = itertools.count()
BUSY = (429, 502, 503, 504)  # busy or draining: another replica may not be


def error_text(raw: bytes) -> str:
    """The message of an {"error": ...} body, or the body's start."""
    try:
        return str(json.loads(raw)["error"])
    except (ValueError, KeyError, TypeError):
        return raw[:200].decode("utf-8", "replace")


class Replicas:
    """Replicas of one service. Requests go to each in turn from a rotating
    start; a replica that cannot be reached, or answers that it is busy, is
    passed over for the next, and a request fails only when every replica
    has (after one pause when all asked for one with Retry-After). A 4xx
    answer is final: the request itself is wrong.

    Threading: any number of threads; each keeps its own connections."""

    def __init__(self, urls: Union[str, Sequence[str]], token: Optional[str] = None,
                 cafile: Optional[str] = None, timeout: float = 60.0):
        self.urls: List[str] = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("no tally URL given")
        for u in self.urls:
            if urllib.parse.urlsplit(u).scheme not in ("http", "https"):
                raise ValueError("a tally URL is http:// or https://, not %r" % u)
        self.token = token
        self.cafile = cafile
        self.timeout = timeout
        self._local = threading.local()

    def _connection(self, url: str) -> http.client.HTTPConnection:
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get(url)
        if conn is None:
            u = urllib.parse.urlsplit(url)
            if u.scheme == "https":
                ctx = ssl.create_default_context(cafile=self.cafile)
                conn = http.client.HTTPSConnection(u.hostname, u.port or 443,
                                                   timeout=self.timeout, context=ctx)
            else:
                conn = http.client.HTTPConnection(u.hostname, u.port or 80,
                                                  timeout=self.timeout)
            conns[url] = conn
        return conn

    def _drop(self, url: str) -> None:
        conn = getattr(self._local, "conns", {}).pop(url, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Closes this thread's connections."""
        for url in list(getattr(self._local, "conns", {})):
            self._drop(url)

    def _once(self, url: str, method: str, path: str, body, headers: Mapping[str, str],
              retry: bool = True) -> Tuple[int, http.client.HTTPResponse, bytes]:
        """One exchange on this thread's connection to url, reconnecting
        once when a kept-alive connection turns out to be closed."""
        conn = self._connection(url)
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            resp = conn.getresponse()
            data = resp.read()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            self._drop(url)
            if not retry:
                raise
            return self._once(url, method, path, body, headers, retry=False)
        except BaseException:
            self._drop(url)
            raise
        if (resp.getheader("Connection") or "").lower() == "close":
            self._drop(url)
        return resp.status, resp, data

    def request(self, method: str, path: str, body=None,
                headers: Optional[Dict[str, str]] = None,
                ok: Sequence[int] = (200,)) -> Tuple[str, http.client.HTTPResponse, bytes]:
        """Sends method path (with the replica's own path prefix) to the
        replicas in turn: (the URL that answered, its response, its body)
        for an answer whose status is in ok; TallyError otherwise."""
        headers = dict(headers or {})
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        start = next(_turn)
        failures = []
        last = 0  # the last busy status, when a replica answered
        for round_ in (0, 1):
            wait = None
            for i in range(len(self.urls)):
                u = self.urls[(start + i) % len(self.urls)]
                base = urllib.parse.urlsplit(u).path.rstrip("/")
                try:
                    status, resp, raw = self._once(u, method, base + path, body, headers)
                except (OSError, http.client.HTTPException) as e:
                    failures.append("%s: %s" % (u, e))
                    continue
                if status in ok:
                    return u, resp, raw
                message = error_text(raw)
                if status in BUSY:
                    last = status
                    failures.append("%s: %d %s" % (u, status, message))
                    retry = resp.getheader("Retry-After") or ""
                    if retry.isdigit():
                        wait = builtins.min(int(retry), wait if wait is not None else 5)
                    continue
                raise TallyError(message, status, u)
            if wait is None or round_ == 1:
                break
            time.sleep(wait)  # every replica asked for a pause: once, then again
        raise TallyError("no tally replica answered: " + "; ".join(failures), last)
