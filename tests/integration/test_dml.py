"""POST /v1/cumsum in DirectML's words: DML_CUMULATIVE_SUMMATION_OPERATOR_DESC
with strided buffer tensors, as JSON and as binary, checked against numpy
(numpy.lib.stride_tricks.as_strided builds every reference)."""
import json

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from reference import DTYPES, close, cumsum, random_tensor

SEED_INPUT = [[2, 1, 3, 5], [3, 8, 7, 3], [9, 6, 2, 4]]
# DirectML's four examples: (Axis, AxisDirection, HasExclusiveSum, output)
SEED_EXAMPLES = [
    (3, "DML_AXIS_DIRECTION_INCREASING", False,
     [[2, 3, 6, 11], [3, 11, 18, 21], [9, 15, 17, 21]]),
    (3, "DML_AXIS_DIRECTION_INCREASING", True,
     [[0, 2, 3, 6], [0, 3, 11, 18], [0, 9, 15, 17]]),
    (3, "DML_AXIS_DIRECTION_DECREASING", False,
     [[11, 9, 8, 5], [21, 18, 10, 3], [21, 12, 6, 4]]),
    (2, "DML_AXIS_DIRECTION_INCREASING", False,
     [[2, 1, 3, 5], [5, 9, 10, 8], [14, 15, 12, 12]]),
]
DML_NAME = {"float16": "FLOAT16", "float32": "FLOAT32", "float64": "FLOAT64",
            "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
            "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
            "uint64": "UINT64"}


def span(sizes, strides):
    return sum((s - 1) * st for s, st in zip(sizes, strides)) + 1


def min_bytes(sizes, strides, itemsize):
    return (span(sizes, strides) * itemsize + 3) // 4 * 4


def packed(sizes):
    out, step = [], 1
    for s in reversed(sizes):
        out.insert(0, step)
        step *= s
    return out


def operator(dtype, sizes, axis, in_strides=None, out_strides=None,
             decreasing=False, exclusive=False):
    t_in = {"DataType": dtype, "Sizes": list(sizes)}
    t_out = {"DataType": dtype, "Sizes": list(sizes)}
    if in_strides is not None:
        t_in["Strides"] = list(in_strides)
    if out_strides is not None:
        t_out["Strides"] = list(out_strides)
    return {"InputTensor": t_in, "OutputTensor": t_out, "Axis": axis,
            "AxisDirection": "DECREASING" if decreasing else "INCREASING",
            "HasExclusiveSum": exclusive}


def post_dml_json(d, op, data):
    body = dict(op)
    body["data"] = data
    return d.post_json("/v1/cumsum", body)


def post_dml_binary(d, op, raw):
    return d.request("POST", "/v1/cumsum", raw, {
        "Content-Type": "application/octet-stream",
        "DML-Operator": json.dumps(op)})


def expected_buffer(x, want, sizes, out_strides):
    """The output buffer: zeros, with want written through out_strides."""
    n = span(sizes, out_strides)
    buf = np.zeros(n, dtype=x.dtype)
    view = as_strided(buf, shape=sizes, strides=[s * buf.itemsize for s in out_strides])
    view[...] = want
    return buf


def hit_mask(sizes, strides):
    """Which elements of a buffer the strides address."""
    mask = np.zeros(span(sizes, strides), dtype=bool)
    view = as_strided(mask, shape=sizes, strides=list(strides))
    view[...] = True
    return mask


def as_list(a):
    return [float(v) for v in a] if a.dtype.kind == "f" else [int(v) for v in a]


# --------------------------------------------------------------------------
# The seed documents' examples, sent as DirectML descriptors.

@pytest.mark.parametrize("example", range(4))
def test_seed_examples_json(tallyd, example):
    axis, direction, exclusive, want = SEED_EXAMPLES[example]
    op = operator("FLOAT32", [1, 1, 3, 4], axis, exclusive=exclusive)
    op["AxisDirection"] = direction
    status, _, body = post_dml_json(tallyd, op, sum(SEED_INPUT, []))
    assert status == 200, body
    assert body["data"] == sum(want, [])
    echo = body["OutputTensor"]
    assert echo["Strides"] == [12, 12, 4, 1]
    assert echo["TotalTensorSizeInBytes"] == 48
    assert echo["DataType"] == "DML_TENSOR_DATA_TYPE_FLOAT32"
    assert echo["DimensionCount"] == 4 and echo["Sizes"] == [1, 1, 3, 4]


@pytest.mark.parametrize("example", range(4))
def test_seed_examples_transposed_both_ways(tallyd, example):
    """The same examples with the input stored column-major and the answer
    asked for column-major, as JSON and as binary."""
    axis, direction, exclusive, want = SEED_EXAMPLES[example]
    col = [12, 12, 1, 3]
    data = np.array(SEED_INPUT, dtype=np.float32).T.ravel()  # memory order
    op = operator("FLOAT32", [1, 1, 3, 4], axis, col, col, exclusive=exclusive)
    op["AxisDirection"] = direction
    status, _, body = post_dml_json(tallyd, op, [float(v) for v in data])
    assert status == 200, body
    assert body["data"] == [float(v) for v in np.array(want).T.ravel()]
    status, hdrs, raw = post_dml_binary(tallyd, op, data.tobytes())
    assert status == 200, raw
    assert np.frombuffer(raw, np.float32).tolist() == np.array(want, np.float32).T.ravel().tolist()
    assert json.loads(hdrs["dml-output-tensor"])["Strides"] == col


# --------------------------------------------------------------------------
# Random descriptors: every dtype, rank 1 to 8, permuted, padded and
# broadcast input strides, output layouts of their own.

def random_strides(rng, sizes, broadcast):
    order = rng.permutation(len(sizes))[::-1]
    strides = [0] * len(sizes)
    step = 1
    for k in order:
        if broadcast and rng.integers(5) == 0:
            strides[k] = 0
            continue
        strides[k] = step
        step = step * sizes[k] + (int(rng.integers(4)) if rng.integers(3) == 0 else 0)
    return strides


def random_sizes(rng, rank, budget=300):
    sizes, total = [], 1
    for _ in range(rank):
        s = int(rng.integers(1, 6))
        while s > 1 and total * s > budget:
            s -= 1
        sizes.append(s)
        total *= s
    return sizes


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_descriptors(tallyd, dtype):
    seed = int(np.random.default_rng().integers(2**31))
    print("seed", seed)
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    for rank in range(1, 9):
        for _ in range(2):
            sizes = random_sizes(rng, rank)
            axis = int(rng.integers(rank))
            exclusive, decreasing = bool(rng.integers(2)), bool(rng.integers(2))
            ins = random_strides(rng, sizes, True)
            outs = random_strides(rng, sizes, False)
            buf = random_tensor(rng, dtype, (span(sizes, ins),))
            x = as_strided(buf, shape=sizes, strides=[s * dt.itemsize for s in ins])
            want = cumsum(x, axis, exclusive, decreasing)
            expect = expected_buffer(x, want, sizes, outs)
            hit = hit_mask(sizes, outs)
            op = operator(DML_NAME[dtype], sizes, axis, ins, outs, decreasing, exclusive)
            what = (seed, sizes, ins, outs, axis, exclusive, decreasing)

            status, _, body = post_dml_json(tallyd, op, as_list(buf))
            assert status == 200, (what, body)
            got = np.array(body["data"], dtype=np.float64 if dt.kind == "f" else object)
            assert len(got) == len(expect), what
            assert all(v == 0 for v in got[~hit]), what
            if dt.kind == "f":
                g = as_strided(got.astype(dt), shape=sizes, strides=[s * dt.itemsize for s in outs])
                assert close(g, want, x, axis), what
            else:
                assert [int(v) for v in got] == [int(v) for v in expect], what
            assert body["OutputTensor"]["Strides"] == outs, what
            assert body["OutputTensor"]["TotalTensorSizeInBytes"] == min_bytes(sizes, outs, dt.itemsize)

            # binary, with the padding to 4 bytes sent or not
            raw = buf.tobytes()
            if rng.integers(2):
                raw += b"\0" * (min_bytes(sizes, ins, dt.itemsize) - len(raw))
            status, hdrs, out = post_dml_binary(tallyd, op, raw)
            assert status == 200, (what, out)
            assert len(out) == min_bytes(sizes, outs, dt.itemsize), what
            res = np.frombuffer(out[:len(expect) * dt.itemsize], dtype=dt)
            assert not res[~hit].any() and not any(out[len(expect) * dt.itemsize:]), what
            if dt.kind == "f":
                g = as_strided(res, shape=sizes, strides=[s * dt.itemsize for s in outs])
                assert close(g, want, x, axis), what
            else:
                assert res.tolist() == expect.tolist(), what


def test_bfloat16_and_name_forms(tallyd):
    """tally's own dtype names, DirectML's enum numbers, and short forms."""
    op = operator("bfloat16", [2, 3], 1, [1, 2], [3, 1])
    op["AxisDirection"] = 1
    op["HasExclusiveSum"] = 0
    status, _, body = post_dml_json(tallyd, op, [1, 2, 3, 4, 5, 6])
    assert status == 200, body
    # rows are (1,3,5) and (2,4,6), decreasing
    assert body["data"] == [9, 8, 5, 12, 10, 6]
    assert body["OutputTensor"]["DataType"] == "bfloat16"
    op = operator(11, [3], 0)  # DML_TENSOR_DATA_TYPE_INT64
    op["OutputTensor"]["DataType"] = "DML_TENSOR_DATA_TYPE_INT64"
    op["AxisDirection"] = "DML_AXIS_DIRECTION_INCREASING"
    op["HasExclusiveSum"] = 1
    status, _, body = post_dml_json(tallyd, op, [5, 6, 7])
    assert status == 200, body
    assert body["data"] == [0, 5, 11]
    assert body["OutputTensor"]["DataType"] == "DML_TENSOR_DATA_TYPE_INT64"


def test_large_strided_request_is_queued(tallyd):
    """Past --inline-max-elements the scan runs on a device worker."""
    sizes = [300, 200]
    ins, outs = [1, 301], [200, 1]  # column-major, padded; answer row-major
    rng = np.random.default_rng(7)
    buf = rng.integers(-100, 100, size=span(sizes, ins), dtype=np.int32)
    x = as_strided(buf, shape=sizes, strides=[s * 4 for s in ins])
    for axis in (0, 1):
        op = operator("INT32", sizes, axis, ins, outs)
        status, _, out = post_dml_binary(tallyd, op, buf.tobytes())
        assert status == 200, out
        assert np.frombuffer(out, np.int32).reshape(sizes).tolist() == cumsum(x, axis).tolist()


def test_broadcast_input(tallyd):
    op = operator("INT32", [3, 4], 0, [0, 1], None)
    status, _, body = post_dml_json(tallyd, op, [1, 2, 3, 4])
    assert status == 200, body
    assert body["data"] == [1, 2, 3, 4, 2, 4, 6, 8, 3, 6, 9, 12]


def test_total_size_and_padding_echoed(tallyd):
    op = operator("INT8", [3], 0, [2], [3])
    op["InputTensor"]["TotalTensorSizeInBytes"] = 16
    op["OutputTensor"]["TotalTensorSizeInBytes"] = 12
    status, hdrs, out = post_dml_binary(tallyd, op, bytes([1, 9, 2, 9, 3]) + bytes(11))
    assert status == 200, out
    assert list(out) == [1, 0, 0, 3, 0, 0, 6] + [0] * 5
    echo = json.loads(hdrs["dml-output-tensor"])
    assert echo["TotalTensorSizeInBytes"] == 12 and echo["Strides"] == [3]
    status, _, body = post_dml_json(tallyd, op, [1, 9, 2, 9, 3])
    assert status == 200, body
    assert body["data"] == [1, 0, 0, 3, 0, 0, 6]  # the span; padding not listed


# --------------------------------------------------------------------------
# Every rule, each refused with a 400 (or 413) that names the field.

def bad(field, mutate, status=400):
    def make():
        op = operator("FLOAT32", [2, 3], 1)
        mutate(op)
        return op
    return pytest.param(make, field, status, id=field + ":" + mutate.__name__)


def out_dtype(op): op["OutputTensor"]["DataType"] = "FLOAT64"
def out_sizes(op): op["OutputTensor"]["Sizes"] = [3, 2]
def out_rank(op): op["OutputTensor"]["Sizes"] = [2, 3, 1]
def out_overlap(op): op["OutputTensor"]["Strides"] = [1, 1]
def out_broadcast(op): op["OutputTensor"]["Strides"] = [0, 1]
def in_total_small(op): op["InputTensor"]["TotalTensorSizeInBytes"] = 20
def out_total_small(op): op["OutputTensor"]["TotalTensorSizeInBytes"] = 23
def in_strides_count(op): op["InputTensor"]["Strides"] = [3]
def dim_count(op): op["InputTensor"]["DimensionCount"] = 3
def zero_size(op): op["InputTensor"]["Sizes"] = [0, 3]; op["OutputTensor"]["Sizes"] = [0, 3]
def empty_sizes(op): op["InputTensor"]["Sizes"] = []; op["OutputTensor"]["Sizes"] = []
def axis_range(op): op["Axis"] = 2
def axis_negative(op): op["Axis"] = -1
def axis_missing(op): del op["Axis"]
def output_missing(op): del op["OutputTensor"]
def data_type(op): op["InputTensor"]["DataType"] = "FLOAT8"
def data_type_number(op): op["InputTensor"]["DataType"] = 12
def direction(op): op["AxisDirection"] = "SIDEWAYS"
def direction_number(op): op["AxisDirection"] = 2
def exclusive(op): op["HasExclusiveSum"] = 2
def flags(op): op["InputTensor"]["Flags"] = 2
def unknown(op): op["Bias"] = 1
def unknown_in_tensor(op): op["InputTensor"]["Offset"] = 4
def too_many_dims(op): op["InputTensor"]["Sizes"] = [1] * 65; op["OutputTensor"]["Sizes"] = [1] * 65
def out_too_large(op): op["OutputTensor"]["TotalTensorSizeInBytes"] = 1 << 40
def in_span_large(op): op["InputTensor"]["Strides"] = [1 << 38, 1]


RULES = [
    bad("OutputTensor.DataType", out_dtype),
    bad("OutputTensor.Sizes", out_sizes),
    bad("OutputTensor.Sizes", out_rank),
    bad("OutputTensor.Strides", out_overlap),
    bad("OutputTensor.Strides", out_broadcast),
    bad("InputTensor.TotalTensorSizeInBytes", in_total_small),
    bad("OutputTensor.TotalTensorSizeInBytes", out_total_small),
    bad("InputTensor.Strides", in_strides_count),
    bad("InputTensor.DimensionCount", dim_count),
    bad("InputTensor.Sizes[0]", zero_size),
    bad("InputTensor.Sizes", empty_sizes),
    bad("Axis", axis_range),
    bad("Axis", axis_negative),
    bad("Axis", axis_missing),
    bad("OutputTensor", output_missing),
    bad("InputTensor.DataType", data_type),
    bad("InputTensor.DataType", data_type_number),
    bad("AxisDirection", direction),
    bad("AxisDirection", direction_number),
    bad("HasExclusiveSum", exclusive),
    bad("InputTensor.Flags", flags),
    bad("Bias", unknown),
    bad("Offset", unknown_in_tensor),
    bad("InputTensor.Sizes", too_many_dims),
    bad("OutputTensor", out_too_large, 413),
    bad("InputTensor", in_span_large, 413),
]


@pytest.mark.parametrize("make,field,status", RULES)
def test_rules_json(tallyd, still_healthy, make, field, status):
    got, _, body = post_dml_json(tallyd, make(), [1, 2, 3, 4, 5, 6])
    assert got == status, body
    assert field in body["error"], body
    still_healthy()


@pytest.mark.parametrize("make,field,status", RULES)
def test_rules_binary(tallyd, still_healthy, make, field, status):
    got, _, body = post_dml_binary(tallyd, make(), np.arange(6, dtype=np.float32).tobytes())
    assert got == status, body
    assert field in json.loads(body)["error"], body
    still_healthy()


def test_data_count_must_match_the_span(tallyd, still_healthy):
    op = operator("INT32", [2, 3], 1, [4, 1], None)  # padded rows: span 7
    for data in ([1] * 6, [1] * 8):
        status, _, body = post_dml_json(tallyd, op, data)
        assert status == 400, body
        assert "data" in body["error"] and "7" in body["error"], body
    status, _, body = post_dml_json(tallyd, op, [1] * 7)
    assert status == 200, body
    still_healthy()


@pytest.mark.parametrize("length,total,ok", [
    (28, None, True),    # the addressed bytes: 7 int32
    (28, 28, True),
    (24, None, False),   # short
    (32, None, False),   # more than DMLCalcBufferTensorSize
    (32, 32, True),      # TotalTensorSizeInBytes given: exactly that
    (28, 32, False),
])
def test_binary_body_length_rule(tallyd, length, total, ok):
    op = operator("INT32", [2, 3], 1, [4, 1], None)
    if total is not None:
        op["InputTensor"]["TotalTensorSizeInBytes"] = total
    status, _, body = post_dml_binary(tallyd, op, bytes(length))
    assert (status == 200) == ok, body
    if not ok:
        assert status == 400 and "the body has %d bytes" % length in json.loads(body)["error"]


def test_binary_descriptor_refuses_data_and_query(tallyd):
    op = operator("INT32", [3], 0)
    op["data"] = [1, 2, 3]
    status, _, body = post_dml_binary(tallyd, op, bytes(12))
    assert status == 400 and "DML-Operator" in json.loads(body)["error"]
    del op["data"]
    status, _, body = tallyd.request("POST", "/v1/cumsum?axis=0", bytes(12), {
        "Content-Type": "application/octet-stream", "DML-Operator": json.dumps(op)})
    assert status == 400 and "axis" in json.loads(body)["error"]
    status, _, body = tallyd.request("POST", "/v1/cumsum", bytes(12), {
        "Content-Type": "application/octet-stream", "DML-Operator": "{not json"})
    assert status == 400, body


def test_duplicate_members(tallyd):
    text = ('{"InputTensor": {"DataType": "INT32", "Sizes": [2]}, "Axis": 0, '
            '"OutputTensor": {"DataType": "INT32", "Sizes": [2]}, "Axis": 0, "data": [1, 2]}')
    status, _, body = tallyd.request("POST", "/v1/cumsum", text, {"Content-Type": "application/json"})
    assert status == 400 and "twice" in json.loads(body)["error"]


def test_openapi_examples(tallyd):
    """The DirectML examples of proto/openapi.yaml answer as it says."""
    import os
    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "proto", "openapi.yaml")) as f:
        spec = yaml.safe_load(f)
    post = spec["paths"]["/v1/cumsum"]["post"]
    examples = post["requestBody"]["content"]["application/json"]["examples"]
    answers = post["responses"]["200"]["content"]["application/json"]["examples"]
    status, _, body = tallyd.post_json("/v1/cumsum", examples["directml"]["value"])
    assert status == 200 and body == answers["directml"]["value"], body
    status, _, body = tallyd.post_json("/v1/cumsum", examples["directml_transposed_answer"]["value"])
    assert status == 200 and body["data"] == [0, 0, 1, 4, 3, 9], body
    assert body["OutputTensor"]["Strides"] == [1, 2]
