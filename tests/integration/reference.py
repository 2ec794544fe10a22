"""The cumulative sum tally computes, in numpy, for checking answers."""
import numpy as np

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64"]  # numpy has no bfloat16
KSERVE = {"float16": "FP16", "float32": "FP32", "float64": "FP64", "int8": "INT8",
          "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8",
          "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64"}


def cumsum(x, axis=0, exclusive=False, reverse=False):
    """Inclusive or exclusive, either direction; integers wrap, floats are
    summed in float64 and rounded to the dtype once."""
    x = np.asarray(x)
    if reverse:
        x = np.flip(x, axis)
    if x.dtype.kind == "f":
        y = np.cumsum(x.astype(np.float64), axis=axis)
    else:
        y = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        y = np.roll(y, 1, axis=axis)
        idx = [slice(None)] * y.ndim
        idx[axis] = 0
        y[tuple(idx)] = 0
    if reverse:
        y = np.flip(y, axis)
    return y.astype(x.dtype)


def close(got, want, x, axis=0):
    """Integers exactly; floats within docs/design.md's bound, scaled by the running
    sum of |x| (computed along the same axis)."""
    got = np.asarray(got)
    want = np.asarray(want)
    if want.dtype.kind != "f":
        return np.array_equal(got, want)
    scale = np.cumsum(np.abs(np.asarray(x, dtype=np.float64)), axis=axis)
    if np.asarray(x).size:
        scale = np.maximum(scale, np.flip(np.cumsum(np.flip(np.abs(np.asarray(x, dtype=np.float64)), axis), axis=axis), axis))
    unit = {2: 2.0 ** -10, 4: 2.0 ** -23, 8: 2.0 ** -50}[want.dtype.itemsize]
    tol = 2.0 ** -18 * scale + unit * np.abs(want.astype(np.float64)) + 1e-30
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return bool(np.all((diff <= tol) | (np.isnan(got) & np.isnan(want))))


def random_tensor(rng, dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.random(shape) * 2 - 1).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
