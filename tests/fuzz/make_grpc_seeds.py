"""Writes the seed corpus of fuzz_grpc (tests/fuzz/fuzz_grpc/): what
clients send after HTTP/2's preface, frame by frame, with messages built
by tritonclient's own protobuf classes.

    python3 tests/fuzz/make_grpc_seeds.py"""
import gzip
import os
import struct
import sys

import numpy as np
from tritonclient.grpc import service_pb2 as pb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from test_grpc_abuse import (CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS,  # noqa: E402
                             PING, RST_STREAM, SETTINGS, frame, request_headers)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_grpc")


def message(m, compressed=False):
    body = m.SerializeToString()
    if compressed:
        body = gzip.compress(body)
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(body)) + body


def call(sid, method, m, extra=(), end=True, compressed=False):
    return frame(HEADERS, END_HEADERS, sid, request_headers(method, extra)) + \
        frame(DATA, END_STREAM if end else 0, sid, message(m, compressed))


def infer(x, dtype="FP32", **params):
    r = pb.ModelInferRequest(model_name="cumsum", id="seed")
    r.inputs.add(name="x", datatype=dtype, shape=list(x.shape))
    r.raw_input_contents.append(x.tobytes())
    for k, v in params.items():
        if isinstance(v, bool):
            r.parameters[k].bool_param = v
        else:
            r.parameters[k].int64_param = v
    return r


def main():
    os.makedirs(OUT, exist_ok=True)
    s = frame(SETTINGS, 0, 0)
    x4 = np.arange(4, dtype=np.float32)
    typed = pb.ModelInferRequest(model_name="cumsum")
    t = typed.inputs.add(name="x", datatype="INT32", shape=[2, 3])
    t.contents.int_contents.extend([1, 2, 3, 4, 5, 6])
    typed.parameters["axis"].int64_param = 1
    typed.parameters["exclusive"].bool_param = True
    typed.parameters["reverse"].bool_param = True
    seeds = {
        "infer_fp32": s + call(1, b"ModelInfer", infer(x4)),
        "infer_params": s + call(1, b"ModelInfer", infer(np.ones((3, 4), np.int64), "INT64",
                                                          axis=1, exclusive=True)),
        "infer_typed": s + call(1, b"ModelInfer", typed),
        "infer_queued": s + call(1, b"ModelInfer", infer(np.ones(1000, np.float64), "FP64")),
        "infer_gzip": s + call(1, b"ModelInfer", infer(x4), extra=[(b"grpc-encoding", b"gzip")],
                               compressed=True),
        "infer_timeout": s + call(1, b"ModelInfer", infer(x4), extra=[(b"grpc-timeout", b"50m")]),
        "health": s + call(1, b"ServerLive", pb.ServerLiveRequest()) +
        call(3, b"ServerReady", pb.ServerReadyRequest()) +
        call(5, b"ModelReady", pb.ModelReadyRequest(name="cumsum")),
        "metadata": s + call(1, b"ServerMetadata", pb.ServerMetadataRequest()) +
        call(3, b"ModelMetadata", pb.ModelMetadataRequest(name="cumsum")) +
        call(5, b"ModelConfig", pb.ModelConfigRequest(name="cumsum")) +
        call(7, b"ModelStatistics", pb.ModelStatisticsRequest(name="")),
        "shm": s + call(1, b"SystemSharedMemoryUnregister",
                        pb.SystemSharedMemoryUnregisterRequest()) +
        call(3, b"SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest()),
        "stream": s + frame(HEADERS, END_HEADERS, 1, request_headers(b"ModelStreamInfer")) +
        frame(DATA, 0, 1, message(infer(x4))) +
        frame(DATA, END_STREAM, 1, message(infer(np.ones(100, np.int16), "INT16", axis=0))),
        "unknown_method": s + call(1, b"RepositoryIndex", pb.RepositoryIndexRequest()),
        "reset": s + frame(HEADERS, END_HEADERS, 1, request_headers()) +
        frame(RST_STREAM, 0, 1, struct.pack(">I", 8)) + frame(PING, 0, 0, b"abcdefgh"),
        "continuation": s + frame(HEADERS, 0, 1, request_headers()[:20]) +
        frame(CONTINUATION, END_HEADERS, 1, request_headers()[20:]) +
        frame(DATA, END_STREAM, 1, message(infer(x4))),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("fuzz_grpc: %d seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
