"""tally: cumulative sums of numpy (and Dask) arrays on a tally service.

    import numpy as np, tally
    c = tally.Client("http://127.0.0.1:8080")
    c.cumsum(np.arange(10, dtype=np.int32))          # array([0, 1, 3, ...])

Client.sequence() keeps a running sum across calls (a stream of chunks).
tally.Client sends arrays over tally's binary path, or through POSIX
shared memory to a server on this machine that allows it; tally.dask
scans Dask arrays block by block on replicas (import tally.dask; needs
dask[array]). Failures raise tally.TallyError.
"""
from ._transport import TallyError
from .client import DTYPES, Client, RunningSum

__all__ = ["Client", "RunningSum", "TallyError", "DTYPES"]
__version__ = "0.1.0"
