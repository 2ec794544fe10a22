"""Writes the seed corpus of fuzz_shm (tests/fuzz/fuzz_shm/): register
bodies, inference requests over REST and gRPC whose tensors name regions,
unregisters and statuses, each behind fuzz_shm's two bytes (operation,
region name). gRPC messages are built by tritonclient's own protobuf
classes.

    python3 tests/fuzz/make_shm_seeds.py"""
import json
import os

from tritonclient.grpc import service_pb2 as pb

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_shm")


def kserve(x_region=None, y_region=None, x_off=0, y_off=0, n=16, dt="FP32", size=4):
    x = {"name": "x", "datatype": dt, "shape": [n]}
    if x_region:
        x["parameters"] = {"shared_memory_region": x_region, "shared_memory_offset": x_off,
                           "shared_memory_byte_size": n * size}
    else:
        x["data"] = list(range(n))
    req = {"inputs": [x], "parameters": {"axis": 0}}
    if y_region:
        req["outputs"] = [{"name": "y", "parameters": {
            "shared_memory_region": y_region, "shared_memory_offset": y_off,
            "shared_memory_byte_size": n * size}}]
    return json.dumps(req).encode()


def grpc(x_region=None, y_region=None, x_off=0, y_off=0, n=16):
    m = pb.ModelInferRequest(model_name="cumsum")
    x = m.inputs.add(name="x", datatype="FP32", shape=[n])
    if x_region:
        x.parameters["shared_memory_region"].string_param = x_region
        x.parameters["shared_memory_offset"].int64_param = x_off
        x.parameters["shared_memory_byte_size"].int64_param = 4 * n
    else:
        m.raw_input_contents.append(bytes(4 * n))
    if y_region:
        y = m.outputs.add(name="y")
        y.parameters["shared_memory_region"].string_param = y_region
        y.parameters["shared_memory_offset"].int64_param = y_off
        y.parameters["shared_memory_byte_size"].int64_param = 4 * n
    return m.SerializeToString()


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "register_r0": b"\x00\x00" + b'{"key": "/F", "offset": 0, "byte_size": 65536}',
        "register_r1_offset": b"\x00\x01" + b'{"key": "/F", "offset": 4096, "byte_size": 1024}',
        "register_bad_key": b"\x00\x02" + b'{"key": "/a/..", "byte_size": 4}',
        "register_overflow": b"\x00\x03" + b'{"key": "/F", "offset": 9223372036854775800, '
                             b'"byte_size": 64}',
        "unregister_r0": b"\x01\x00",
        "unregister_all": b"\x01\x80",
        "kserve_both": b"\x02\x00" + kserve("r0", "r1"),
        "kserve_in_place": b"\x02\x00" + kserve("r0", "r0", 64, 64),
        "kserve_overlap": b"\x02\x00" + kserve("r0", "r0", 0, 4),
        "kserve_output_only": b"\x02\x00" + kserve(None, "r1"),
        "kserve_past_end": b"\x02\x00" + kserve("r1", None, 1020),
        "grpc_both": b"\x03\x00" + grpc("r0", "r1"),
        "grpc_input_only": b"\x03\x00" + grpc("r0", None, 128),
        "grpc_output_only": b"\x03\x00" + grpc(None, "r0", 0, 256),
        "status_all": b"\x04\x80",
        "status_r1": b"\x04\x01",
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
