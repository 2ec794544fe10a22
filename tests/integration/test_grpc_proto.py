"""proto/grpc_service.proto against the protocol as tritonclient ships it.

Every message, field (name, number, type, label, message or enum type),
enum value, and every RPC tally's .proto declares must be the same in
tritonclient.grpc's service_pb2 / model_config_pb2, so that no field
number can drift. tally declares a subset: what it leaves out is not
checked, what it declares must match."""
import os
import subprocess
import sys
import tempfile

import pytest

from google.protobuf import descriptor_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(ROOT, "proto", "grpc_service.proto")


def tally_file(proto=None):
    """tally's .proto compiled by grpcio-tools' protoc into a descriptor."""
    proto = proto or PROTO
    out = os.path.join(tempfile.mkdtemp(prefix="tally-proto-"), "fd.pb")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + os.path.dirname(proto),
                    "--descriptor_set_out=" + out, proto], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    assert len(fds.file) == 1
    return fds.file[0]


def triton_pool():
    from tritonclient.grpc import service_pb2, model_config_pb2  # noqa: F401
    return service_pb2.DESCRIPTOR.pool


def repeated(field):
    """Whether a runtime field descriptor is repeated (newer protobuf
    deprecates .label for is_repeated)."""
    if hasattr(type(field), "is_repeated"):
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def walk(prefix, messages):
    for m in messages:
        name = prefix + "." + m.name
        yield name, m
        yield from walk(name, m.nested_type)


def test_every_declared_message_and_field_matches_tritonclient(proto=None):
    mine = tally_file(proto)
    pool = triton_pool()
    assert mine.package == "inference"
    checked = 0
    for name, m in walk("inference", mine.message_type):
        theirs = pool.FindMessageTypeByName(name)
        by_name = {f.name: f for f in theirs.fields}
        for f in m.field:
            assert f.name in by_name, "%s.%s: not in tritonclient's %s" % (name, f.name, name)
            t = by_name[f.name]
            assert f.number == t.number, "%s.%s: number %d, tritonclient's is %d" % (
                name, f.name, f.number, t.number)
            assert f.type == t.type, "%s.%s: type %d, tritonclient's is %d" % (
                name, f.name, f.type, t.type)
            assert (f.label == f.LABEL_REPEATED) == repeated(t), \
                "%s.%s: repeated differs" % (name, f.name)
            if f.type_name:
                other = t.message_type or t.enum_type
                assert f.type_name.lstrip(".") == other.full_name, "%s.%s: type %s vs %s" % (
                    name, f.name, f.type_name, other.full_name)
            if f.HasField("oneof_index"):
                assert t.containing_oneof is not None
                assert m.oneof_decl[f.oneof_index].name == t.containing_oneof.name
            checked += 1
    for e in mine.enum_type:
        theirs = pool.FindEnumTypeByName("inference." + e.name)
        values = {v.name: v.number for v in theirs.values}
        for v in e.value:
            assert values.get(v.name) == v.number, "%s.%s" % (e.name, v.name)
    assert checked > 100, checked


def test_every_declared_rpc_matches_tritonclient():
    mine = tally_file()
    pool = triton_pool()
    assert [s.name for s in mine.service] == ["GRPCInferenceService"]
    theirs = pool.FindServiceByName("inference.GRPCInferenceService")
    methods = {m.name: m for m in theirs.methods}
    for m in mine.service[0].method:
        t = methods[m.name]
        assert m.input_type.lstrip(".") == t.input_type.full_name, m.name
        assert m.output_type.lstrip(".") == t.output_type.full_name, m.name
        assert m.client_streaming == t.client_streaming, m.name
        assert m.server_streaming == t.server_streaming, m.name
    # the nine RPCs the issue names are all served
    served = {m.name for m in mine.service[0].method}
    for need in ["ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
                 "ModelConfig", "ModelStatistics", "ModelInfer", "ModelStreamInfer"]:
        assert need in served


def test_a_drifted_field_is_caught(tmp_path):
    """The check can fail: a copy with one number changed is refused."""
    text = open(PROTO).read().replace("repeated bytes raw_input_contents = 7;",
                                      "repeated bytes raw_input_contents = 8;")
    assert "raw_input_contents = 8" in text
    bad = tmp_path / "grpc_service.proto"
    bad.write_text(text)
    with pytest.raises(AssertionError, match="raw_input_contents: number 8"):
        test_every_declared_message_and_field_matches_tritonclient(str(bad))
