"""A second gRPC client for tally, independent of tritonclient: stubs that
grpcio-tools generated from proto/grpc_service.proto (on PYTHONPATH).

    python3 grpc_stub_client.py HOST:PORT typed

Checks typed contents for every dtype that has a typed field, the
parameters, the errors for bad counts and values, and the other RPCs;
exits 1 with a message on the first failure."""
import sys

import grpc
import numpy as np

import grpc_service_pb2 as pb
import grpc_service_pb2_grpc as rpc

from reference import KSERVE, close, cumsum, random_tensor

FIELDS = {"float32": "fp32_contents", "float64": "fp64_contents",
          "int8": "int_contents", "int16": "int_contents", "int32": "int_contents",
          "int64": "int64_contents", "uint8": "uint_contents", "uint16": "uint_contents",
          "uint32": "uint_contents", "uint64": "uint64_contents"}


def expect_error(stub, req, code, text):
    try:
        stub.ModelInfer(req, timeout=10)
    except grpc.RpcError as e:
        assert e.code() == code, (e.code(), e.details())
        assert text in e.details(), e.details()
        return
    raise AssertionError("no error for %s" % text)


def typed(stub):
    rng = np.random.default_rng(5)
    for dtype, field in FIELDS.items():
        x = random_tensor(rng, dtype, (3, 5))
        req = pb.ModelInferRequest(model_name="cumsum", id="t-" + dtype)
        inp = req.inputs.add(name="x", datatype=KSERVE[dtype], shape=[3, 5])
        getattr(inp.contents, field).extend(x.ravel().tolist())
        req.parameters["axis"].int64_param = 1
        req.parameters["reverse"].bool_param = True
        res = stub.ModelInfer(req, timeout=10)
        assert res.id == "t-" + dtype and res.outputs[0].datatype == KSERVE[dtype]
        assert list(res.outputs[0].shape) == [3, 5]
        y = np.frombuffer(res.raw_output_contents[0], dtype=dtype).reshape(3, 5)
        assert close(y, cumsum(x, 1, False, True), x, 1), dtype
    req = pb.ModelInferRequest(model_name="cumsum")
    req.inputs.add(name="x", datatype="INT32", shape=[4]).contents.int_contents.extend([1, 2])
    expect_error(stub, req, grpc.StatusCode.INVALID_ARGUMENT, "int_contents has 2 elements")
    req = pb.ModelInferRequest(model_name="cumsum")
    req.inputs.add(name="x", datatype="INT8", shape=[1]).contents.int_contents.extend([300])
    expect_error(stub, req, grpc.StatusCode.INVALID_ARGUMENT, "does not fit in INT8")
    req = pb.ModelInferRequest(model_name="cumsum")
    req.inputs.add(name="x", datatype="FP16", shape=[1]).contents.fp32_contents.extend([1])
    expect_error(stub, req, grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents")
    req = pb.ModelInferRequest(model_name="cumsum")
    req.inputs.add(name="x", datatype="FP32", shape=[2]).contents.fp32_contents.extend([1, 2])
    req.parameters["exclusive"].string_param = "yes"
    expect_error(stub, req, grpc.StatusCode.INVALID_ARGUMENT, "bool_param")
    # raw contents given for one input of two
    req = pb.ModelInferRequest(model_name="cumsum")
    req.inputs.add(name="x", datatype="FP32", shape=[1])
    req.inputs.add(name="axis", datatype="INT64", shape=[1])
    req.raw_input_contents.append(np.float32(1).tobytes())
    expect_error(stub, req, grpc.StatusCode.INVALID_ARGUMENT,
                 "for every input not in shared memory, or for none")
    assert stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name="cumsum"), timeout=10).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10)
    assert meta.name == "tally"
    config = stub.ModelConfig(pb.ModelConfigRequest(name="cumsum"), timeout=10).config
    assert config.input[0].data_type == pb.TYPE_FP32
    stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="cumsum"), timeout=10)
    assert stats.model_stats[0].inference_stats.success.count >= len(FIELDS)
    # a stream of two, answered in order
    reqs = []
    for i in range(2):
        r = pb.ModelInferRequest(model_name="cumsum", id="s%d" % i)
        r.inputs.add(name="x", datatype="INT32", shape=[3]).contents.int_contents.extend([i, 1, 1])
        reqs.append(r)
    answers = list(stub.ModelStreamInfer(iter(reqs), timeout=10))
    assert [a.infer_response.id for a in answers] == ["s0", "s1"]
    assert [a.error_message for a in answers] == ["", ""]
    print("typed contents: %d dtypes ok" % len(FIELDS))


def main():
    channel = grpc.insecure_channel(sys.argv[1])
    stub = rpc.GRPCInferenceServiceStub(channel)
    {"typed": typed}[sys.argv[2]](stub)
    channel.close()


if __name__ == "__main__":
    main()
