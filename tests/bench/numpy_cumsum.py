"""Times numpy.cumsum for bench_engine: prints GB/s (bytes read + written).

usage: numpy_cumsum.py SHAPE AXIS [REPS]   e.g. 256,256,256 -1 10
"""
import sys
import time

import numpy as np


def main():
    shape = tuple(int(d) for d in sys.argv[1].split(","))
    axis = int(sys.argv[2])
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    x = np.random.default_rng(1).random(shape, dtype=np.float32)
    y = np.empty_like(x)
    np.cumsum(x, axis=axis, out=y)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.cumsum(x, axis=axis, out=y)
        times.append(time.perf_counter() - t)
    times.sort()
    print("%.3f" % (2 * x.nbytes / times[len(times) // 2] / 1e9))


if __name__ == "__main__":
    main()
