"""fastapi_cumsum.py - what a Python user would write instead of tally: a
numpy cumulative sum behind FastAPI and uvicorn, speaking as much of the
KServe v2 protocol as perf_analyzer needs (model cumsum, input x, output
y, float32, the sum along the last axis), JSON and binary tensors.

usage: python fastapi_cumsum.py PORT   (make bench-peers starts it)
"""
import json
import sys

import numpy as np
import uvicorn
from fastapi import FastAPI, Request, Response

app = FastAPI()
META = {"name": "cumsum", "versions": ["1"], "platform": "fastapi",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, -1]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, -1]}]}


@app.get("/v2")
def server_metadata():
    return {"name": "fastapi-cumsum", "version": "1", "extensions": ["binary_tensor_data"]}


@app.get("/v2/health/ready")
def ready():
    return {"ready": True}


@app.get("/v2/models/cumsum/ready")
def model_ready():
    return {"name": "cumsum", "ready": True}


@app.get("/v2/models/cumsum")
def metadata():
    return META


@app.get("/v2/models/cumsum/config")
def config():
    # perf_analyzer reads Triton's model configuration. A batch dimension
    # of 1, as for MLServer (mlserver/): x is [1, N], and perf_analyzer's
    # JSON mode sends all of it.
    return {"name": "cumsum", "max_batch_size": 1,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1]}]}


@app.post("/v2/models/cumsum/infer")
async def infer(request: Request):
    body = await request.body()
    hlen = int(request.headers.get("inference-header-content-length", len(body)))
    head = json.loads(body[:hlen])
    x = head["inputs"][0]
    if "binary_data_size" in x.get("parameters", {}):
        a = np.frombuffer(body[hlen:], dtype=np.float32)
    else:
        a = np.asarray(x["data"], dtype=np.float32)
    y = np.cumsum(a.reshape(x["shape"]), axis=-1, dtype=np.float32)
    out = {"name": "y", "datatype": "FP32", "shape": list(y.shape)}
    answer = {"model_name": "cumsum", "model_version": "1", "id": head.get("id", ""),
              "outputs": [out]}
    asked = (head.get("outputs") or [{}])[0].get("parameters", {})
    if not asked.get("binary_data", head.get("parameters", {}).get("binary_data_output", False)):
        out["data"] = y.ravel().tolist()
        return answer
    out["parameters"] = {"binary_data_size": y.nbytes}
    text = json.dumps(answer).encode()
    return Response(text + y.tobytes(), media_type="application/octet-stream",
                    headers={"Inference-Header-Content-Length": str(len(text))})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
