"""Number text, both ways, against references outside tally: Python's
fractions (exact decimal values), decimal and float (correctly rounded), and
numpy. Each request scans a [N, 1] tensor along axis 1, so the answer is the
parsed values themselves."""
import bisect
import json
import re
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

getcontext().prec = 200

INT_LIMITS = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1),
              "int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1),
              "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
              "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}


def narrow_table(dtype):
    """Every finite non-negative value of float16 or bfloat16, exactly, with
    its bits, in increasing order; and the overflow threshold (the midpoint
    between the largest value and the next power of two)."""
    vals = []
    for bits in range(0x8000):
        if dtype == "float16":
            v = np.array([bits], np.uint16).view(np.float16)[0]
        else:
            v = np.array([bits << 16], np.uint32).view(np.float32)[0]
        if not np.isfinite(v):
            break
        vals.append((Fraction(float(v)), bits))
    top = vals[-1][0]
    step = top - vals[-2][0]
    return vals, top + step / 2


TABLES = {t: narrow_table(t) for t in ("float16", "bfloat16")}


def nearest(dtype, text):
    """The bits a correctly rounded parse of text gives (ties to even), or
    None when it is out of range."""
    neg = text.startswith("-")
    x = abs(Fraction(text))
    if dtype in TABLES:
        vals, limit = TABLES[dtype]
        if x >= limit:
            return None
        keys = [v for v, _ in vals]
        i = bisect.bisect_left(keys, x)
        if i == len(vals):  # above the largest value, below the limit
            best = vals[-1][1]
        elif vals[i][0] == x:
            best = vals[i][1]
        else:
            lo, hi = vals[i - 1], vals[i]
            dl, dh = x - lo[0], hi[0] - x
            best = lo[1] if dl < dh or (dl == dh and lo[1] % 2 == 0) else hi[1]
        return best | (0x8000 if neg else 0)
    if dtype == "float64":
        try:
            v = float(x)  # correctly rounded
        except OverflowError:
            return None
        if v == float("inf"):
            return None
        v = -v if neg else v
        return int(np.array([v], np.float64).view(np.uint64)[0])
    # float32: the float32 neighbours of the correctly rounded double
    d = float(x)
    with np.errstate(over="ignore"):
        c = np.float32(d)
        cands = {np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))}
    best = None
    for v in cands:
        if not np.isfinite(v) or v < 0:
            continue
        dist = abs(Fraction(float(v)) - x)
        bits = int(np.array([v], np.float32).view(np.uint32)[0])
        if best is None or dist < best[0] or (dist == best[0] and bits % 2 == 0):
            best = (dist, bits)
    top = Fraction(float(np.finfo(np.float32).max))
    if x >= top + Fraction(2) ** 103:  # half an ulp above the largest
        return None
    return best[1] | (0x80000000 if neg else 0)


def bits_of(dtype, values):
    view = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}
    if dtype == "bfloat16":
        return [int(v) for v in values]
    return [int(b) for b in np.array(values, dtype=dtype).view(view[dtype])]


def exact_decimal(f):
    """A Fraction with a finite decimal expansion as exact text."""
    return format(Decimal(f.numerator) / Decimal(f.denominator), "f")


def tricky(dtype, rng, n):
    """Midpoints of neighbouring values, exactly and a hair off either way,
    random long decimals, and extremes."""
    out = []
    if dtype in TABLES:
        vals, limit = TABLES[dtype]
        for _ in range(n):
            i = int(rng.integers(0, len(vals) - 1))
            m = (vals[i][0] + vals[i + 1][0]) / 2
            eps = m * Fraction(1, 10 ** int(rng.integers(17, 30))) if m else Fraction(1, 10**40)
            for v in (m, m + eps, m - eps):
                out.append(exact_decimal(v) if v >= 0 else "0")
        out += [exact_decimal(limit - Fraction(1, 10**20)), exact_decimal(vals[-1][0]),
                exact_decimal(vals[1][0] / 2), "0", "-0"]
    else:
        info = np.finfo(dtype)
        for _ in range(n):
            v = info.dtype.type(rng.standard_normal() * 10.0 ** int(rng.integers(-30, 30)))
            a = Fraction(float(v))
            b = Fraction(float(np.nextafter(v, info.dtype.type(np.inf))))
            m = (a + b) / 2
            eps = abs(m) * Fraction(1, 10 ** int(rng.integers(18, 40)))
            for w in (m, m + eps, m - eps):
                out.append(format(Decimal(w.numerator) / Decimal(w.denominator), ".60e"))
        out += [repr(float(info.max)), repr(float(info.tiny)), repr(float(info.smallest_subnormal)),
                "1e-400", "-0e0"]
    for _ in range(n):
        digits = "".join(str(int(d)) for d in rng.integers(0, 10, int(rng.integers(1, 40))))
        out.append("%s%s.%se%d" % ("-" if rng.integers(2) else "", digits[0], digits[1:] or "0",
                                   int(rng.integers(-12, 8))))
    return out


def answer_tokens(body):
    """The number tokens of an answer's data, as the text tally wrote."""
    data = body.decode()
    data = data[data.index('"data"'):]
    return re.findall(r'-?[0-9][0-9.eE+-]*|"[^"]*"', data[data.index("["):])


def post_tokens(tallyd, dtype, tokens):
    body = '{"dtype": "%s", "shape": [%d, 1], "axis": 1, "data": [%s]}' % (
        dtype, len(tokens), ", ".join(tokens))
    return tallyd.request("POST", "/v1/cumsum", body, {"Content-Type": "application/json"})


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_floats_round_once_from_the_decimal(tallyd, dtype):
    seed = int(np.random.default_rng().integers(2**31))
    print("seed", seed)
    rng = np.random.default_rng(seed)
    tokens = tricky(dtype, rng, 150)
    want = [nearest(dtype, t) for t in tokens]
    ok = [t for t, w in zip(tokens, want) if w is not None]
    status, _, body = post_tokens(tallyd, dtype, ok)
    assert status == 200, body
    # the answer's own text reads back (by the reference) as the same bits
    got = [nearest(dtype, g) for g in answer_tokens(body)]
    assert len(got) == len(ok)
    expect = [w for w in want if w is not None]
    for t, g, w in zip(ok, got, expect):
        sign = {"float32": 1 << 31, "float64": 1 << 63}.get(dtype, 0x8000)
        if g & ~sign == 0 and w & ~sign == 0:
            continue  # zeros: the sign of a zero is not kept (docs/api.md)
        assert g == w, (seed, dtype, t, hex(g), hex(w))
    # out of range, one at a time
    for t, w in zip(tokens, want):
        if w is None:
            status, _, body = post_tokens(tallyd, dtype, [t])
            assert status == 400 and b"out of range" in body, (seed, t, body)


@pytest.mark.parametrize("dtype", sorted(INT_LIMITS))
def test_integers_at_their_limits(tallyd, dtype):
    lo, hi = INT_LIMITS[dtype]
    status, _, body = post_tokens(tallyd, dtype, [str(lo), str(hi), "%de0" % hi, "0.0e5"])
    assert status == 200, body
    assert json.loads(body)["data"] == [lo, hi, hi, 0]
    for bad in (str(lo - 1), str(hi + 1), "%d.5" % lo, "1" + "0" * 65 + "1e-65"):
        status, _, body = post_tokens(tallyd, dtype, [bad])
        assert status == 400, (dtype, bad, body)


def significant_digits(token):
    mantissa = token.lower().lstrip("-").split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


def test_shortest_text(tallyd):
    """Printing gives the fewest digits that read back: as Python's repr
    does for float64, and numpy's shortest unique form for float32 and
    float16."""
    cases = {"float64": [0.1, 1 / 3, 1e21, 1e-7, 123456789.125, 5e-324],
             "float32": [0.1, 1 / 3, 3.4028234663852886e38, 1e-45],
             "float16": [0.1, 1 / 3, 65504.0, 6e-08]}
    for dtype, values in cases.items():
        arr = np.array(values, dtype=dtype)
        tokens = [repr(float(v)) for v in arr]
        status, _, body = post_tokens(tallyd, dtype, tokens)
        assert status == 200, body
        got = answer_tokens(body)
        for v, g in zip(arr, got):
            assert np.array([float(g)], dtype=dtype)[0] == v, (dtype, v, g)
            short = repr(float(v)) if dtype == "float64" else \
                np.format_float_scientific(v, unique=True)
            assert significant_digits(g) <= significant_digits(short), (dtype, v, g, short)
