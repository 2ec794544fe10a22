"""A catalogue of malformed requests: each gets a 4xx with a JSON error that
names the problem, and a valid request still works afterwards."""
import gzip
import io
import json
import struct

import numpy as np
import pytest

from conftest import valid_request_works

J = {"Content-Type": "application/json"}
N = {"Content-Type": "application/x-npy"}
R = {"Content-Type": "application/octet-stream"}


def jb(**kw):
    base = {"dtype": "int32", "shape": [3], "data": [1, 2, 3]}
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def npy(dict_text, data=b"", version=1, hlen=None):
    d = dict_text.encode()
    if version == 1:
        pre = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d) if hlen is None else hlen)
    else:
        pre = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(d) if hlen is None else hlen)
    return pre + d + data


def good_npy(x):
    buf = io.BytesIO()
    np.save(buf, x)
    return buf.getvalue()


F4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
KS = "/v2/models/cumsum/infer"


def ks(obj):
    return json.dumps(obj)


X = {"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}

# (name, method, path, headers, body, status, words the error must contain)
CATALOGUE = [
    # native JSON: syntax
    ("broken json", "POST", "/v1/cumsum", J, '{"dtype":', 400, "invalid JSON"),
    ("not an object", "POST", "/v1/cumsum", J, "[1, 2]", 400, "object"),
    ("empty body", "POST", "/v1/cumsum", J, "", 400, "empty"),
    ("trailing text", "POST", "/v1/cumsum", J, jb() + " x", 400, "after the object"),
    ("bare NaN token in an integer tensor", "POST", "/v1/cumsum", J,
     '{"dtype":"int32","shape":[1],"data":[NaN]}', 400, "NaN is not a value of int32"),
    ("a word that is not NaN", "POST", "/v1/cumsum", J,
     '{"dtype":"float32","shape":[1],"data":[nan]}', 400, "data[0] must be a number"),
    ("bad escape", "POST", "/v1/cumsum", J, '{"dtype":"int\\q8","shape":[1],"data":[1]}', 400, "escape"),
    ("control character", "POST", "/v1/cumsum", J, '{"dtype":"int\n8","shape":[1],"data":[1]}', 400, "control"),
    ("deep nesting", "POST", "/v1/cumsum", J, '{"dtype":"int8","shape":[1],"data":' + "[" * 500 + "]" * 500 + "}",
     400, "data[0] is an array"),
    ("deep nesting, data first", "POST", "/v1/cumsum", J,
     '{"data":' + "[" * 500 + "]" * 500 + ',"dtype":"int8","shape":[1]}', 400, "nested"),
    ("not JSON's number grammar", "POST", "/v1/cumsum", J,
     '{"dtype":"int8","shape":[2],"data":[01,2]}', 400, "01 is not a number in JSON's grammar"),
    ("a number run into bytes that are not UTF-8", "POST", "/v1/cumsum", J,
     b'{"dtype":"int8","shape":[2],"data":[1\xff\xfe,2]}', 400, "invalid JSON"),
    ("half a float run into bytes that are not UTF-8", "POST", "/v1/cumsum", J,
     b'{"dtype":"float32","shape":[2],"data":[1.\xff\xfe,2]}', 400, "1. is not a number"),
    ("bare Infinity in an integer tensor, data first", "POST", "/v1/cumsum", J,
     '{"data":[Infinity],"dtype":"uint8","shape":[1]}', 400, "Infinity is not a value of uint8"),
    ("unterminated string", "POST", "/v1/cumsum", J, '{"dtype":"int8', 400, "unterminated"),
    # native JSON: members
    # without dtype and shape both are read off the data (test_native.py);
    # what numpy.array would refuse or could not type is refused
    ("ragged without a shape", "POST", "/v1/cumsum", J, '{"data":[[1,2],[3]]}', 400, "data[1] has 1 element "),
    ("number beside arrays", "POST", "/v1/cumsum", J, '{"data":[[1,2],3]}', 400, "data[1] is a number"),
    ("array beside numbers", "POST", "/v1/cumsum", J, '{"data":[3,[1,2]]}', 400, "data[1] is an array"),
    ("ragged deep", "POST", "/v1/cumsum", J, '{"data":[[[1]],[2]]}', 400, "data[1][0] is a number"),
    ("empty beside numbers", "POST", "/v1/cumsum", J, '{"data":[[1],[]]}', 400, "data[1]"),
    ("scalar data without a shape", "POST", "/v1/cumsum", J, '{"data":5}', 400, "must be an array"),
    ("inferred nesting too deep", "POST", "/v1/cumsum", J, '{"data":' + "[" * 70 + "]" * 70 + "}", 400,
     "deeper than 64"),
    ("beyond int64 without a dtype", "POST", "/v1/cumsum", J, '{"data":[9223372036854775808]}', 400, "int64"),
    ("bad number without a dtype", "POST", "/v1/cumsum", J, '{"data":[1,"x"]}', 400, "data[1]"),
    ("form fields", "POST", "/v1/cumsum", {"Content-Type": "application/x-www-form-urlencoded"}, "a=1", 415,
     "form fields"),
    ("missing data", "POST", "/v1/cumsum", J, jb(data=None), 400, "data"),
    ("unknown dtype", "POST", "/v1/cumsum", J, jb(dtype="float128"), 400, "float128"),
    ("dtype not a string", "POST", "/v1/cumsum", J, jb(dtype=32), 400, "string"),
    ("bool dtype", "POST", "/v1/cumsum", J, jb(dtype="bool"), 400, "bool"),
    ("shape not an array", "POST", "/v1/cumsum", J, jb(shape=3), 400, "shape"),
    ("negative dimension", "POST", "/v1/cumsum", J, jb(shape=[-3]), 400, "negative"),
    ("fractional dimension", "POST", "/v1/cumsum", J, jb(shape=[2.5]), 400, "shape[0]"),
    ("dimension as string", "POST", "/v1/cumsum", J, jb(shape=["3"]), 400, "shape[0]"),
    ("rank 0", "POST", "/v1/cumsum", J, jb(shape=[], data=[]), 400, "rank 0"),
    ("data not an array", "POST", "/v1/cumsum", J, jb(data="abc"), 400, "data must be an array"),
    ("data too short", "POST", "/v1/cumsum", J, jb(data=[1, 2]), 400, "2 elements"),
    ("data too long", "POST", "/v1/cumsum", J, jb(data=[1, 2, 3, 4]), 400, "more than"),
    ("ragged nesting", "POST", "/v1/cumsum", J, jb(shape=[2, 2], data=[[1, 2], [3]]), 400, "data[1]"),
    ("nesting deeper than shape", "POST", "/v1/cumsum", J, jb(shape=[2], data=[[1], [2]]), 400, "array"),
    ("300 in int8", "POST", "/v1/cumsum", J, jb(dtype="int8", data=[1, 300, 2]), 400, "data[1]: 300"),
    ("-1 in uint32", "POST", "/v1/cumsum", J, jb(dtype="uint32", data=[0, 1, -1]), 400, "data[2]: -1"),
    ("2.5 in int32", "POST", "/v1/cumsum", J, jb(data=[2.5, 1, 1]), 400, "data[0]: 2.5"),
    ("2^64 in uint64", "POST", "/v1/cumsum", J,
     '{"dtype":"uint64","shape":[1],"data":[18446744073709551616]}', 400, "uint64"),
    ("1e39 in float32", "POST", "/v1/cumsum", J, jb(dtype="float32", data=[1, 1e39, 1]), 400, "float32"),
    ("number in a string", "POST", "/v1/cumsum", J, jb(data=[1, "2", 3]), 400, "data[1]"),
    ("boolean element", "POST", "/v1/cumsum", J, jb(data=[1, True, 3]), 400, "data[1] must be a number"),
    ("null element", "POST", "/v1/cumsum", J, jb(data=[1, None, 3]), 400, "data[1] must be a number"),
    ("NaN in an integer", "POST", "/v1/cumsum", J, jb(data=[1, "NaN", 3]), 400, "int32"),
    ("axis out of range", "POST", "/v1/cumsum", J, jb(axis=1), 400, "rank 1"),
    ("axis as string", "POST", "/v1/cumsum", J, jb(axis="0"), 400, "axis must be an integer"),
    ("axis fractional", "POST", "/v1/cumsum", J, jb(axis=0.5), 400, "axis must be an integer"),
    ("exclusive as string", "POST", "/v1/cumsum", J, jb(exclusive="true"), 400, "exclusive"),
    ("reverse as number", "POST", "/v1/cumsum", J, jb(reverse=1), 400, "reverse"),
    ("bad direction", "POST", "/v1/cumsum", J, jb(direction="up"), 400, "direction"),
    ("direction disagrees", "POST", "/v1/cumsum", J, jb(direction="increasing", reverse=True), 400, "disagrees"),
    ("unknown member", "POST", "/v1/cumsum", J, jb(axes=0), 400, "axes"),
    ("duplicate member", "POST", "/v1/cumsum", J, '{"dtype":"int8","dtype":"int8","shape":[1],"data":[1]}',
     400, "twice"),
    ("oversized declared shape", "POST", "/v1/cumsum", J, jb(shape=[2 ** 40, 2 ** 40], data=[]), 413, "overflows"),
    ("tensor beyond the limit", "POST", "/v1/cumsum", J, jb(dtype="float64", shape=[2 ** 34], data=[]), 413,
     "more than"),
    ("query with JSON", "POST", "/v1/cumsum?axis=0", J, jb(), 400, "members of the JSON"),
    # content types and encodings
    ("no content type", "POST", "/v1/cumsum", {}, jb(), 415, "Content-Type"),
    ("text/plain", "POST", "/v1/cumsum", {"Content-Type": "text/plain"}, jb(), 415, "text/plain"),
    ("unknown encoding", "POST", "/v1/cumsum", dict(J, **{"Content-Encoding": "br"}), jb(), 415, "br"),
    ("gzip that is not", "POST", "/v1/cumsum", dict(J, **{"Content-Encoding": "gzip"}), jb(), 400, "gzip"),
    ("truncated gzip", "POST", "/v1/cumsum", dict(J, **{"Content-Encoding": "gzip"}),
     gzip.compress(jb().encode())[:20], 400, "gzip"),
    # .npy
    ("bad magic", "POST", "/v1/cumsum", N, b"PK\x03\x04" + b"\x00" * 20, 400, "not a .npy"),
    ("truncated preamble", "POST", "/v1/cumsum", N, b"\x93NUMPY\x01", 400, "not a .npy"),
    ("header length lies", "POST", "/v1/cumsum", N, npy(F4, hlen=5000), 400, "claims"),
    ("huge header length", "POST", "/v1/cumsum", N, npy(F4, version=2, hlen=2 ** 31), 400, "more than"),
    ("unsupported version", "POST", "/v1/cumsum", N, npy(F4, version=9), 400, "version"),
    ("header not a dict", "POST", "/v1/cumsum", N, npy("['<f4']", b"\x00" * 12), 400, "dict"),
    ("header unknown key", "POST", "/v1/cumsum", N,
     npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", b"\x00" * 12), 400, "unknown"),
    ("header missing key", "POST", "/v1/cumsum", N, npy("{'descr': '<f4', 'shape': (3,)}", b"\x00" * 12), 400,
     "required"),
    ("complex descr", "POST", "/v1/cumsum", N,
     npy("{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }", b"\x00" * 48), 400, "c16"),
    ("bool descr", "POST", "/v1/cumsum", N,
     npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b"\x00" * 3), 400, "b1"),
    ("npy rank 0", "POST", "/v1/cumsum", N,
     npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", b"\x00" * 4), 400, "rank 0"),
    ("npy data short", "POST", "/v1/cumsum", N, npy(F4, b"\x00" * 8), 400, "12 bytes"),
    ("npy data long", "POST", "/v1/cumsum", N, npy(F4, b"\x00" * 16), 400, "12 bytes"),
    ("npy overflowing shape", "POST", "/v1/cumsum", N,
     npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"), 413, "overflows"),
    ("npy unknown query", "POST", "/v1/cumsum?axes=1", N, good_npy(np.zeros(3, np.float32)), 400, "axes"),
    ("npy bad axis text", "POST", "/v1/cumsum?axis=abc", N, good_npy(np.zeros(3, np.float32)), 400, "axis"),
    ("npy axis out of range", "POST", "/v1/cumsum?axis=-2", N, good_npy(np.zeros(3, np.float32)), 400, "rank 1"),
    ("npy bad bool", "POST", "/v1/cumsum?exclusive=maybe", N, good_npy(np.zeros(3, np.float32)), 400, "exclusive"),
    ("npy dtype override", "POST", "/v1/cumsum?dtype=int8", N, good_npy(np.zeros(3, np.float32)), 400, "dtype"),
    ("bfloat16 of 4 bytes", "POST", "/v1/cumsum?dtype=bfloat16", N, good_npy(np.zeros(3, np.float32)), 400,
     "2-byte"),
    # raw
    ("raw without dtype", "POST", "/v1/cumsum?shape=3", R, b"\x00" * 12, 400, "dtype and shape"),
    ("raw without shape", "POST", "/v1/cumsum?dtype=float32", R, b"\x00" * 12, 400, "dtype and shape"),
    ("raw bad shape", "POST", "/v1/cumsum?dtype=float32&shape=3,x", R, b"\x00" * 12, 400, "comma-separated"),
    ("raw empty shape", "POST", "/v1/cumsum?dtype=float32&shape=", R, b"", 400, "rank 0"),
    ("raw negative shape", "POST", "/v1/cumsum?dtype=float32&shape=-3", R, b"\x00" * 12, 400, "comma-separated"),
    ("raw unknown dtype", "POST", "/v1/cumsum?dtype=complex64&shape=3", R, b"\x00" * 24, 400, "complex64"),
    ("raw length lies", "POST", "/v1/cumsum?dtype=float32&shape=3,4", R, b"\x00" * 40, 400, "48"),
    ("raw bad direction", "POST", "/v1/cumsum?dtype=float32&shape=3&direction=down", R, b"\x00" * 12, 400,
     "direction"),
    # KServe
    ("kserve broken json", "POST", KS, {}, "{", 400, "invalid JSON"),
    ("kserve no inputs", "POST", KS, {}, ks({}), 400, "inputs"),
    ("kserve input without name", "POST", KS, {}, ks({"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]}),
     400, "no name"),
    ("kserve unknown input", "POST", KS, {}, ks({"inputs": [dict(X, name="z")]}), 400, "unknown input"),
    ("kserve unknown output", "POST", KS, {}, ks({"inputs": [X], "outputs": [{"name": "z"}]}), 400,
     "unknown output"),
    ("kserve BYTES", "POST", KS, {}, ks({"inputs": [dict(X, datatype="BYTES")]}), 400, "BYTES"),
    ("kserve shape mismatch", "POST", KS, {}, ks({"inputs": [dict(X, shape=[3])]}), 400, "elements"),
    ("kserve axis input FP32", "POST", KS, {},
     ks({"inputs": [X, {"name": "axis", "shape": [1], "datatype": "FP32", "data": [0]}]}), 400, "INT32 or INT64"),
    ("kserve negative timeout", "POST", KS, {}, ks({"inputs": [X], "parameters": {"timeout": -5}}), 400,
     "negative"),
    ("kserve binary size lies", "POST", KS, {"Inference-Header-Content-Length": "0"}, b"", 400, "empty"),
    ("kserve header length too big", "POST", KS, {"Inference-Header-Content-Length": "999"}, ks({"inputs": [X]}),
     400, "999"),
    ("kserve header length text", "POST", KS, {"Inference-Header-Content-Length": "ten"}, ks({"inputs": [X]}), 400,
     "Inference-Header-Content-Length"),
    ("kserve binary without header", "POST", KS, {},
     ks({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}), 400,
     "no Inference-Header-Content-Length"),
    ("kserve query string", "POST", KS + "?x=1", {}, ks({"inputs": [X]}), 400, "unknown query"),
    # routes and methods
    ("GET on the scan route", "GET", "/v1/cumsum", {}, None, 405, "POST"),
    ("POST on health", "POST", "/v2/health/live", {}, "", 405, "GET"),
    ("PUT on infer", "PUT", KS, {}, "", 405, "POST"),
    ("unknown path", "GET", "/nope", {}, None, 404, "no route"),
    ("unknown model", "POST", "/v2/models/resnet/infer", {}, ks({"inputs": [X]}), 404, "resnet"),
    ("unknown version", "POST", "/v2/models/cumsum/versions/7/infer", {}, ks({"inputs": [X]}), 404, "version"),
    ("versioned config", "GET", "/v2/models/cumsum/versions/1/config", {}, None, 404, "no route"),
    ("bad timeout header", "POST", "/v1/cumsum", dict(J, **{"X-Timeout-Ms": "soon"}), jb(), 400, "X-Timeout-Ms"),
    ("negative timeout header", "POST", "/v1/cumsum", dict(J, **{"X-Timeout-Ms": "-1"}), jb(), 400,
     "negative"),
]


def test_catalogue_is_large_enough():
    assert len(CATALOGUE) >= 60


@pytest.mark.parametrize("case", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_bad_request(tallyd, case):
    name, method, path, headers, body, status, words = case
    got, hdrs, raw = tallyd.request(method, path, body, headers)
    assert got == status, (name, raw)
    assert hdrs["content-type"] == "application/json"
    err = json.loads(raw)["error"]
    assert words in err, (name, err)
    if status == 405:
        assert "allow" in hdrs
    valid_request_works(tallyd)


def test_limits(spawn):
    d = spawn("--max-body-bytes", "64KiB")
    # declared too large: refused before the body is read
    status, _, raw = d.request("POST", "/v1/cumsum?dtype=int8&shape=70000", b"\x00" * 70000, R)
    assert status == 413 and "64" not in "" and "more than the 65536" in json.loads(raw)["error"]
    valid_request_works(d)
    # chunked, without a Content-Length: refused when it passes the limit
    conn = d.connect()
    conn.putrequest("POST", "/v1/cumsum?dtype=int8&shape=70000")
    conn.putheader("Content-Type", "application/octet-stream")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for _ in range(7):
        chunk = b"\x00" * 10000
        conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    assert resp.status == 413 and "more than" in json.loads(resp.read())["error"]
    conn.close()
    valid_request_works(d)
    # a gzip bomb: small on the wire, too large once decoded
    bomb = gzip.compress(b"0" * 1000000)
    status, _, raw = d.request("POST", "/v1/cumsum", bomb, dict(J, **{"Content-Encoding": "gzip"}))
    assert status == 413 and "expands" in json.loads(raw)["error"]
    # JSON whose tensor would pass the limit
    status, _, raw = d.post_json("/v1/cumsum", {"dtype": "float64", "shape": [10000], "data": []})
    assert status == 413
    valid_request_works(d)


def raw_request(d, head, body=b""):
    """Sends bytes as they are (http.client would refuse some of them) and
    returns the status, the headers and the body of the answer."""
    import socket
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.sendall(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head_text, _, rest = data.partition(b"\r\n\r\n")
    lines = head_text.split(b"\r\n")
    status = int(lines[0].split()[1])
    hdrs = {k.strip().lower().decode(): v.strip() for k, _, v in
            (line.partition(b":") for line in lines[1:])}
    return status, hdrs, rest


def test_bytes_that_are_not_utf8(tallyd):
    """Whatever bytes a request holds, the answer is JSON (valid UTF-8) with
    the status the mistake deserves, not a 500; and the access log stays
    JSON too."""
    cases = [
        (b"GET /nope\xff\xfe HTTP/1.1\r\nHost: x\r\n", b"", 404, "no route"),
        (b"POST /v1/cumsum HTTP/1.1\r\nHost: x\r\nContent-Type: text/\xff\xfe\r\n", b"1", 415,
         "Content-Type"),
        (b"POST /v1/cumsum HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
         b'{"dtype":"int\xc0\x80","shape":[1],"data":[1]}', 400, "dtype"),
        (b"POST /v2/models/cumsum/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
         b'{"id":"a\xed\xa0\x80b","inputs":[{"name":"x","shape":[1],"datatype":"FP32",'
         b'"data":[1]}]}', 400, "id must be valid UTF-8"),
    ]
    for head, body, status, words in cases:
        got, hdrs, raw = raw_request(tallyd, head, body)
        assert got == status, (head, raw)
        err = json.loads(raw.decode("utf-8"))["error"]  # strict: UTF-8 and JSON
        assert words in err, (head, err)
    # an id that is valid UTF-8 comes back as it was sent
    got, _, raw = raw_request(
        tallyd, b"POST /v2/models/cumsum/infer HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\n",
        '{"id":"caf\u00e9 \\u00e9","inputs":[{"name":"x","shape":[1],"datatype":"FP32",'
        '"data":[1]}]}'.encode("utf-8"))
    assert got == 200 and json.loads(raw.decode("utf-8"))["id"] == "caf\u00e9 \u00e9"
    for line in tallyd.log().splitlines():
        if line.startswith("{"):
            json.loads(line)  # every log line is JSON
    valid_request_works(tallyd)


def test_accept_encoding_as_rfc_9110_says(tallyd):
    body = json.dumps({"dtype": "int32", "shape": [400], "data": list(range(400))})
    for accept, gzipped in (("gzip;q=0, *", False), ("*, gzip;q=0", False),
                            ("identity,\t\t*", True), ("deflate,\tgzip", True),
                            ("*;q=0", False), ("br", False), ("gzip;q=0.001", True)):
        status, hdrs, _ = tallyd.request("POST", "/v1/cumsum", body, dict(
            J, **{"Accept-Encoding": accept}))
        assert status == 200
        assert (hdrs.get("content-encoding") == "gzip") == gzipped, accept


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.concurrency
def test_memory_follows_the_bytes_that_arrive(spawn):
    """Clients that announce a large body and send little make tallyd hold
    little: 100 connections announcing 64 MiB and sending 4 KiB each.
    (Each took a 2 MiB huge page when the whole length was reserved up
    front: 200 MB here.) Once they go, a request is answered as usual."""
    import socket
    import time
    d = spawn()
    valid_request_works(d)
    before = rss_kib(d.proc.pid)
    socks = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(b"POST /v1/cumsum?dtype=int8&shape=67108864 HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/octet-stream\r\n"
                  b"Content-Length: 67108864\r\n\r\n" + b"\x01" * 4096)
        socks.append(s)
    time.sleep(1.5)  # read by now
    grew = rss_kib(d.proc.pid) - before
    for s in socks:
        s.close()
    assert grew < 64 * 1024, "RSS grew by %d KiB for 100 x 4 KiB sent" % grew
    time.sleep(0.3)
    valid_request_works(d)


@pytest.mark.concurrency
def test_buffered_bodies_have_a_budget(spawn):
    """Past --max-buffered-bytes of bodies held at once, a request gets 503
    with Retry-After (and the budget is given back when it is done)."""
    d = spawn("--max-buffered-bytes", "1MiB")
    big = b"\x00" * (2 << 20)
    for _ in range(2):
        status, hdrs, raw = d.request("POST", "/v1/cumsum?dtype=int8&shape=%d" % len(big), big, R)
        assert status == 503 and hdrs.get("retry-after") == "1", raw
        assert "max-buffered-bytes" in json.loads(raw)["error"]
    small = b"\x01" * 100000
    for _ in range(3):  # given back each time
        status, _, raw = d.request("POST", "/v1/cumsum?dtype=int8&shape=%d" % len(small), small, R)
        assert status == 200, raw


def test_answers_from_the_headers_keep_the_connection(spawn, tmp_path):
    """404, 405, 401 and a CORS preflight, for a request without a body, go
    out on a connection that stays open for the next request; with a body
    on its way, the connection closes rather than read it."""
    import http.client
    tokens = tmp_path / "tokens"
    tokens.write_text("t\n")
    d = spawn("--auth-token-file", str(tokens), "--cors-origins", "http://a.example")
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    asks = [("GET", "/nope", {}, 404), ("DELETE", "/v1/cumsum", {}, 405),
            ("GET", "/v2", {}, 401),
            ("OPTIONS", "/v1/cumsum", {"Origin": "http://a.example",
                                       "Access-Control-Request-Method": "POST"}, 204),
            ("GET", "/v2", {"Authorization": "Bearer t"}, 200)]
    for method, path, headers, want in asks:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status == want, (method, path, resp.status)
        assert (resp.getheader("Connection") or "").lower() != "close", (method, path)
        assert not resp.will_close, (method, path)
    conn.close()
    # a body announced: answered at once, and the connection closed
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.request("DELETE", "/v1/cumsum", body=b"x" * 100000)
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 405 and resp.will_close
    conn.close()
    st, _, body = d.post_json("/v1/cumsum", {"data": [1, 2, 3]}, {"Authorization": "Bearer t"})
    assert st == 200 and body["data"] == [1, 3, 6]
