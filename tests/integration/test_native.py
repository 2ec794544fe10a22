"""POST /v1/cumsum in its three formats, checked against numpy."""
import gzip
import io
import json
import zlib

import numpy as np
import pytest

from reference import DTYPES, close, cumsum, random_tensor


def npy_bytes(x, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, x)
    else:
        np.lib.format.write_array(buf, x, version=version)
    return buf.getvalue()


def post_npy(d, x, query="", version=None, headers=None):
    h = {"Content-Type": "application/x-npy"}
    h.update(headers or {})
    status, hdrs, body = d.request("POST", "/v1/cumsum" + query, npy_bytes(x, version), h)
    return status, hdrs, body


@pytest.mark.parametrize("dtype", DTYPES)
def test_json_every_dtype(tallyd, dtype):
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    for axis in (0, 1, -1):
        for exclusive in (False, True):
            for reverse in (False, True):
                x = random_tensor(rng, dtype, (3, 5))
                if x.dtype.kind == "f":
                    data = [float(v) for v in x.ravel()]
                else:
                    data = [int(v) for v in x.ravel()]
                status, _, body = tallyd.post_json("/v1/cumsum", {
                    "dtype": dtype, "shape": [3, 5], "data": data, "axis": axis,
                    "exclusive": exclusive, "reverse": reverse})
                assert status == 200, body
                assert body["dtype"] == dtype and body["shape"] == [3, 5]
                got = np.array(body["data"], dtype=np.float64 if x.dtype.kind == "f" else object)
                want = cumsum(x, axis, exclusive, reverse)
                if x.dtype.kind == "f":
                    assert close(got.astype(x.dtype).reshape(3, 5), want, x, axis % 2)
                else:
                    assert [int(v) for v in got] == [int(v) for v in want.ravel()]


def test_json_nested_and_direction(tallyd):
    body = {"dtype": "float32", "shape": [1, 1, 3, 4],
            "data": [[[[2, 1, 3, 5], [3, 8, 7, 3], [9, 6, 2, 4]]]],
            "axis": 3, "direction": "decreasing"}
    status, _, out = tallyd.post_json("/v1/cumsum", body)
    assert status == 200, out
    assert out["data"] == [11, 9, 8, 5, 21, 18, 10, 3, 21, 12, 6, 4]


def test_json_int64_and_uint64_are_exact(tallyd):
    big = 2**63 - 1
    status, _, out = tallyd.post_json("/v1/cumsum", {"dtype": "int64", "shape": [3], "data": [big, 1, -big]})
    assert status == 200
    assert out["data"] == [big, -(2**63), -(2**63) - big + 2**64]
    status, _, out = tallyd.post_json("/v1/cumsum", {"dtype": "uint64", "shape": [2], "data": [2**64 - 1, 2]})
    assert out["data"] == [2**64 - 1, 1]
    # the raw text, to be sure no float went in between
    status, _, raw = tallyd.request("POST", "/v1/cumsum", '{"dtype":"uint64","shape":[1],"data":[18446744073709551615]}',
                                    {"Content-Type": "application/json"})
    assert b"18446744073709551615" in raw


def test_json_wrapping_int8(tallyd):
    status, _, out = tallyd.post_json("/v1/cumsum", {"dtype": "int8", "shape": [3], "data": [100, 100, 100]})
    assert out["data"] == [100, -56, 44]


def test_json_non_finite(tallyd):
    status, _, raw = tallyd.request(
        "POST", "/v1/cumsum",
        '{"dtype":"float64","shape":[4],"data":[1,"Infinity","-Infinity","NaN"]}',
        {"Content-Type": "application/json"})
    assert status == 200
    out = json.loads(raw)  # valid JSON, strictly
    assert out["data"] == [1, "Infinity", "NaN", "NaN"]
    # bare NaN and infinities, as Python's json.dumps and Triton's clients
    # write them, are read too (the answer still spells them as strings)
    body = json.dumps({"dtype": "float32", "shape": [3], "data": [float("inf"), 1.0, 2.0]})
    assert "Infinity" in body and '"Infinity"' not in body
    status, _, raw = tallyd.request("POST", "/v1/cumsum", body,
                                    {"Content-Type": "application/json"})
    assert status == 200 and json.loads(raw)["data"] == ["Infinity"] * 3
    status, _, raw = tallyd.request("POST", "/v2/models/cumsum/infer", json.dumps(
        {"inputs": [{"name": "x", "shape": [2], "datatype": "FP16",
                     "data": [float("-inf"), float("nan")]}]}))
    assert status == 200 and json.loads(raw)["outputs"][0]["data"] == ["-Infinity", "NaN"]
    status, _, out = tallyd.post_json("/v1/cumsum", json.loads('{"data": [NaN, 1]}'))
    assert status == 200 and out["dtype"] == "float64"  # numpy's inference: a float


def test_json_floats_round_trip(tallyd):
    """Printed floats read back as the same value: feeding an answer back
    through a scan of length 1 (the identity) returns the same text."""
    for dtype in ("float16", "float32", "float64"):
        x = np.random.default_rng(3).random(200).astype(dtype)
        status, _, raw = tallyd.request("POST", "/v1/cumsum", json.dumps(
            {"dtype": dtype, "shape": [200], "data": [float(v) for v in x], "exclusive": True,
             "reverse": True}), {"Content-Type": "application/json"})
        first = raw.decode()
        text = first[first.index('"data":[') + 8:first.rindex("]")]
        status, _, again = tallyd.request("POST", "/v1/cumsum",
                                          '{"dtype":"%s","shape":[200,1],"axis":1,"data":[%s]}' % (dtype, text),
                                          {"Content-Type": "application/json"})
        assert status == 200
        again = again.decode()
        assert again[again.index('"data":[') + 8:again.rindex("]")] == text
        # and short: float32 needs at most 9 significant digits
        assert max(len(t.lstrip("-0.").replace(".", "").split("e")[0]) for t in text.split(",")) <= \
            {"float16": 5, "float32": 9, "float64": 17}[dtype]


def test_json_empty_and_large(tallyd):
    status, _, out = tallyd.post_json("/v1/cumsum", {"dtype": "float32", "shape": [2, 0, 3], "data": []})
    assert status == 200 and out["data"] == [] and out["shape"] == [2, 0, 3]
    # large enough that the response streams (chunked) rather than buffering
    x = np.arange(20000, dtype=np.int32)
    status, hdrs, out = tallyd.post_json("/v1/cumsum", {"dtype": "int32", "shape": [20000], "data": x.tolist()})
    assert status == 200
    assert out["data"] == np.cumsum(x, dtype=np.int32).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_every_dtype(tallyd, dtype):
    rng = np.random.default_rng(7)
    x = random_tensor(rng, dtype, (4, 3, 5))
    for axis in range(-3, 3):
        status, hdrs, body = post_npy(tallyd, x, "?axis=%d&exclusive=%s" % (axis, "true" if axis % 2 else "false"))
        assert status == 200, body
        y = np.load(io.BytesIO(body))
        assert y.dtype == x.dtype.newbyteorder("<") and y.shape == x.shape
        assert y.flags.c_contiguous
        assert close(y, cumsum(x, axis, axis % 2 == 1, False), x, axis % 3)
        assert hdrs["tensor-dtype"] == dtype and hdrs["tensor-shape"] == "4,3,5"


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_orders_and_versions(tallyd, order, byteorder, version):
    x = np.arange(60, dtype=byteorder + "i4").reshape(3, 4, 5)
    x = np.asfortranarray(x) if order == "F" else x
    status, _, body = post_npy(tallyd, x, "?axis=1&reverse=true", version=version)
    assert status == 200, body
    y = np.load(io.BytesIO(body))
    assert y.dtype == np.dtype("<i4") and y.flags.c_contiguous
    assert np.array_equal(y, cumsum(x, 1, False, True))


def test_npy_bfloat16(tallyd):
    # numpy has no bfloat16: its bits travel as uint16, with dtype=bfloat16
    vals = np.array([1.0, 2.0, 3.0, 0.5], dtype=np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    status, hdrs, body = post_npy(tallyd, bits, "?dtype=bfloat16")
    assert status == 200, body
    y = np.load(io.BytesIO(body))
    out = (y.astype(np.uint32) << 16).view(np.float32)
    assert out.tolist() == [1.0, 3.0, 6.0, 6.5]
    assert hdrs["tensor-dtype"] == "bfloat16"


def test_npy_large_round_trip(tallyd):
    x = np.random.default_rng(5).random((64, 1024, 32), dtype=np.float32)
    status, _, body = post_npy(tallyd, x, "?axis=1")
    assert status == 200
    y = np.load(io.BytesIO(body))
    assert close(y, cumsum(x, 1), x, 1)


@pytest.mark.parametrize("dtype", DTYPES + ["bfloat16"])
def test_raw_every_dtype(tallyd, dtype):
    if dtype == "bfloat16":
        x = (np.arange(1, 13, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).reshape(3, 4)
        status, hdrs, body = tallyd.request("POST", "/v1/cumsum?dtype=bfloat16&shape=3,4&axis=-1",
                                            x.tobytes(), {"Content-Type": "application/octet-stream"})
        assert status == 200
        y = (np.frombuffer(body, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(3, 4)
        assert np.array_equal(y, np.cumsum(np.arange(1, 13, dtype=np.float32).reshape(3, 4), axis=1))
        return
    x = random_tensor(np.random.default_rng(9), dtype, (3, 4))
    status, hdrs, body = tallyd.request("POST", "/v1/cumsum?dtype=%s&shape=3,4&axis=0&direction=decreasing" % dtype,
                                        x.astype(x.dtype.newbyteorder("<")).tobytes(),
                                        {"Content-Type": "application/octet-stream"})
    assert status == 200, body
    assert hdrs["tensor-dtype"] == dtype and hdrs["tensor-shape"] == "3,4"
    y = np.frombuffer(body, dtype=x.dtype.newbyteorder("<")).reshape(3, 4)
    assert close(y, cumsum(x, 0, False, True), x, 0)


def test_rank_beyond_eight(tallyd):
    x = np.arange(2 ** 10, dtype=np.int16).reshape((2,) * 10)
    for axis in (0, 4, 9, -10):
        status, _, body = post_npy(tallyd, x, "?axis=%d" % axis)
        assert status == 200
        assert np.array_equal(np.load(io.BytesIO(body)), cumsum(x, axis))


def test_gzip_and_deflate_requests(tallyd):
    body = json.dumps({"dtype": "int32", "shape": [4], "data": [1, 2, 3, 4]}).encode()
    for coding, data in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body)),
                         ("deflate", zlib.compress(body)[2:-4])):
        status, _, out = tallyd.request("POST", "/v1/cumsum", data,
                                        {"Content-Type": "application/json", "Content-Encoding": coding})
        assert status == 200, out
        assert json.loads(out)["data"] == [1, 3, 6, 10]


def test_gzip_responses(tallyd):
    x = np.arange(5000, dtype=np.int64)
    status, hdrs, body = tallyd.request("POST", "/v1/cumsum?dtype=int64&shape=5000", x.tobytes(),
                                        {"Content-Type": "application/octet-stream",
                                         "Accept-Encoding": "gzip"})
    assert status == 200 and hdrs.get("content-encoding") == "gzip"
    assert np.array_equal(np.frombuffer(gzip.decompress(body), dtype=np.int64), np.cumsum(x))
    # JSON streamed through gzip
    status, hdrs, body = tallyd.request("POST", "/v1/cumsum", json.dumps(
        {"dtype": "int64", "shape": [5000], "data": x.tolist()}),
        {"Content-Type": "application/json", "Accept-Encoding": "deflate, gzip;q=0.5"})
    assert hdrs.get("content-encoding") == "gzip"
    assert json.loads(gzip.decompress(body))["data"] == np.cumsum(x).tolist()
    # small answers and refusals go uncompressed
    status, hdrs, body = tallyd.request("POST", "/v1/cumsum?dtype=int64&shape=2", x[:2].tobytes(),
                                        {"Content-Type": "application/octet-stream",
                                         "Accept-Encoding": "gzip"})
    assert "content-encoding" not in hdrs
    status, hdrs, body = tallyd.request("POST", "/v1/cumsum?dtype=int64&shape=5000", x.tobytes(),
                                        {"Content-Type": "application/octet-stream",
                                         "Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in hdrs


def test_request_id_echo(tallyd):
    status, hdrs, _ = tallyd.post_json("/v1/cumsum", {"dtype": "int8", "shape": [1], "data": [1]},
                                       headers={"X-Request-Id": "my-id-42"})
    assert hdrs["x-request-id"] == "my-id-42"
    status, hdrs, _ = tallyd.post_json("/v1/cumsum", {"dtype": "int8", "shape": [1], "data": [1]})
    assert len(hdrs["x-request-id"]) == 16


def test_json_inferred_as_numpy_reads_it(tallyd):
    """Without dtype and shape, data is read as numpy.array reads it: the
    nesting gives the shape; integers give int64, and a fraction or an
    exponent anywhere gives float64."""
    seed = int(np.random.default_rng().integers(2**31))
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for case in range(24):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 5, size=rank))
        as_float = case % 2 == 1
        if as_float:
            x = rng.integers(-1000, 1000, size=shape) / 8.0
            x.flat[int(rng.integers(x.size))] += 0.5  # at least one fraction
        else:
            x = rng.integers(-10**12, 10**12, size=shape)
        axis = int(rng.integers(-rank, rank))
        reverse = bool(rng.integers(2))
        status, _, body = tallyd.post_json("/v1/cumsum", {
            "data": x.tolist(), "axis": axis, "reverse": reverse})
        want = np.array(x.tolist())  # numpy's own reading of the same data
        assert status == 200, (seed, body)
        assert body["dtype"] == str(want.dtype) and body["shape"] == list(shape), (seed, body)
        expect = cumsum(want, axis, False, reverse)
        if as_float:
            assert np.allclose(np.array(body["data"]), expect.ravel()), seed
        else:
            assert [int(v) for v in body["data"]] == [int(v) for v in expect.ravel()], seed


def test_json_inference_rules(tallyd):
    cases = [
        ({"data": [[1, 2, 3], [4, 5, 6]], "axis": 1}, "int64", [2, 3], [1, 3, 6, 4, 9, 15]),
        ({"data": [1e2, 3]}, "float64", [2], [100, 103]),
        ({"data": [1, 2.0]}, "float64", [2], [1, 3]),
        ({"data": []}, "float64", [0], []),
        ({"data": [[], []], "axis": 1}, "float64", [2, 0], []),
        # a dtype alone: the shape is inferred; a shape alone: the dtype
        ({"dtype": "float32", "data": [[1, 2], [3, 4]]}, "float32", [2, 2], [1, 2, 4, 6]),
        ({"shape": [2, 2], "data": [1, 2, 3, 4.5]}, "float64", [2, 2], [1, 2, 4, 6.5]),
        ({"shape": [2], "data": [5, 6]}, "int64", [2], [5, 11]),
    ]
    for body, dtype, shape, data in cases:
        status, _, out = tallyd.post_json("/v1/cumsum", body)
        assert status == 200, (body, out)
        assert (out["dtype"], out["shape"], out["data"]) == (dtype, shape, data), (body, out)
    # numpy reads these as numpy.array([np.nan, 1.0]): float64
    status, _, out = tallyd.post_json("/v1/cumsum", {"data": ["NaN", 1]})
    assert status == 200 and out["dtype"] == "float64" and out["data"] == ["NaN", "NaN"]


def test_json_from_curl_d(tallyd):
    """curl -d sends application/x-www-form-urlencoded; a JSON object is
    read as JSON, and form fields are refused with 415."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, body = tallyd.request("POST", "/v1/cumsum", b' {"data": [1, 2, 3]}', form)
    assert status == 200 and json.loads(body)["data"] == [1, 3, 6]
    status, _, body = tallyd.request("POST", "/v1/cumsum", b"data=1&data=2", form)
    assert status == 415 and "form fields" in json.loads(body)["error"]
    status, _, body = tallyd.request("POST", "/v1/cumsum", b'{"data": [1,', form)
    assert status == 400 and "invalid JSON" in json.loads(body)["error"]
