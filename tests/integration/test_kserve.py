"""KServe v2 / Open Inference Protocol, through tritonclient.http and by hand."""
import json
import struct

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from reference import DTYPES, KSERVE, close, cumsum, random_tensor


@pytest.fixture
def client(tallyd):
    c = httpclient.InferenceServerClient("127.0.0.1:%d" % tallyd.port)
    yield c
    c.close()


def infer(client, x, binary=True, out_binary=True, axis=None, exclusive=None, reverse=None,
          axis_input=None, request_id=""):
    inp = httpclient.InferInput("x", list(x.shape), KSERVE[str(x.dtype)])
    inp.set_data_from_numpy(x, binary_data=binary)
    inputs = [inp]
    if axis_input is not None:
        a = httpclient.InferInput("axis", [1], "INT64")
        a.set_data_from_numpy(np.array([axis_input], dtype=np.int64), binary_data=binary)
        inputs.append(a)
    params = {}
    for k, v in (("axis", axis), ("exclusive", exclusive), ("reverse", reverse)):
        if v is not None:
            params[k] = v
    out = httpclient.InferRequestedOutput("y", binary_data=out_binary)
    return client.infer("cumsum", inputs, outputs=[out], parameters=params or None, request_id=request_id)


def test_health_and_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("cumsum")
    assert client.is_model_ready("cumsum", "1")
    meta = client.get_server_metadata()
    assert meta["name"] == "tally" and "binary_tensor_data" in meta["extensions"]
    model = client.get_model_metadata("cumsum")
    # "axis" is taken as an input but not advertised (perf_analyzer fills
    # every advertised input with random data)
    assert [i["name"] for i in model["inputs"]] == ["x"]
    assert model["outputs"][0]["name"] == "y"
    config = client.get_model_config("cumsum")
    assert config["max_batch_size"] == 0
    assert client.get_model_metadata("cumsum", "1")["name"] == "cumsum"


def test_unknown_model_and_version(client, tallyd):
    with pytest.raises(InferenceServerException):
        client.get_model_metadata("nope")
    status, _, body = tallyd.request("GET", "/v2/models/nope")
    assert status == 404 and "unknown model" in json.loads(body)["error"]
    status, _, body = tallyd.request("GET", "/v2/models/cumsum/versions/2")
    assert status == 404 and "no version" in json.loads(body)["error"]
    status, _, _ = tallyd.request("GET", "/v2/models/cumsum/versions/1/ready")
    assert status == 200


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("binary", [True, False])
def test_every_dtype(client, dtype, binary):
    if dtype == "float16" and not binary:
        pytest.skip("tritonclient sends no FP16 as JSON (tally takes it: see test_fp16_json)")
    x = random_tensor(np.random.default_rng(11), dtype, (4, 6))
    res = infer(client, x, binary=binary, out_binary=binary, axis=1, exclusive=True, reverse=True,
                request_id="req-%s" % dtype)
    y = res.as_numpy("y")
    assert y.dtype == x.dtype and y.shape == x.shape
    assert close(y, cumsum(x, 1, True, True), x, 1)
    assert res.get_response()["id"] == "req-%s" % dtype
    assert res.get_response()["model_name"] == "cumsum"


def test_axis_input_like_onnx(client):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axis in (-1, 0, 2):
        y = infer(client, x, axis_input=axis).as_numpy("y")
        assert np.array_equal(y, np.cumsum(x, axis=axis))
    with pytest.raises(InferenceServerException) as e:
        infer(client, x, axis_input=1, axis=2)
    assert "disagrees" in str(e.value)


def test_large_binary_in_place(client):
    x = np.random.default_rng(2).random((256, 4096), dtype=np.float32)
    y = infer(client, x, axis=0).as_numpy("y")
    assert close(y, cumsum(x, 0), x, 0)


def test_fp16_json(tallyd):
    status, _, body = tallyd.request("POST", "/v2/models/cumsum/infer", json.dumps({
        "inputs": [{"name": "x", "shape": [3], "datatype": "FP16", "data": [0.5, "Infinity", 1]}]}))
    assert status == 200, body
    out = json.loads(body)["outputs"][0]
    assert out["datatype"] == "FP16" and out["data"] == [0.5, "Infinity", "Infinity"]


def test_bf16_binary(tallyd):
    vals = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    header = json.dumps({"inputs": [{"name": "x", "shape": [3], "datatype": "BF16",
                                     "parameters": {"binary_data_size": 6}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    status, hdrs, body = tallyd.request("POST", "/v2/models/cumsum/versions/1/infer", header + bits,
                                        {"Inference-Header-Content-Length": str(len(header))})
    assert status == 200, body
    hl = int(hdrs["inference-header-content-length"])
    meta = json.loads(body[:hl])
    assert meta["outputs"][0]["parameters"]["binary_data_size"] == 6
    y = (np.frombuffer(body[hl:], dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    assert y.tolist() == [1.0, 3.0, 6.0]


def test_binary_data_output_parameter(tallyd):
    req = {"inputs": [{"name": "x", "shape": [2], "datatype": "INT32", "data": [5, 6]}],
           "parameters": {"binary_data_output": True}}
    status, hdrs, body = tallyd.request("POST", "/v2/models/cumsum/infer", json.dumps(req))
    hl = int(hdrs["inference-header-content-length"])
    assert struct.unpack("<2i", body[hl:]) == (5, 11)


def test_json_without_outputs_and_no_content_type(tallyd):
    req = {"id": "x1", "inputs": [{"name": "x", "shape": [2, 2], "datatype": "INT64", "data": [[1, 2], [3, 4]]}],
           "parameters": {"axis": 0}}
    status, hdrs, body = tallyd.request("POST", "/v2/models/cumsum/infer", json.dumps(req))
    assert status == 200
    out = json.loads(body)
    assert out["id"] == "x1" and out["outputs"][0]["data"] == [1, 2, 4, 6]
    assert out["outputs"][0]["shape"] == [2, 2]


def test_kserve_errors(tallyd):
    def post(obj, headers=None):
        status, _, body = tallyd.request("POST", "/v2/models/cumsum/infer", json.dumps(obj), headers or {})
        return status, json.loads(body)

    status, body = post({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]})
    assert status == 400 and "BYTES" in body["error"]
    status, body = post({"inputs": [{"name": "x", "shape": [2], "datatype": "INT8", "data": [1, 300]}]})
    assert status == 400 and "300" in body["error"] and "[1]" in body["error"]
    status, body = post({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}],
                         "parameters": {"axis": 3}})
    assert status == 400 and "rank 1" in body["error"]
