"""kserve_cumsum.py - a numpy cumulative sum as a KServe Python ModelServer
model: model cumsum, input x, output y, float32, the sum along the last
axis, over the v2 protocol on REST and gRPC.

usage: python kserve_cumsum.py HTTP_PORT GRPC_PORT   (make bench-peers starts it)
"""
import sys

import numpy as np
from kserve import InferRequest, InferResponse, Model, ModelServer
from kserve.model_server import app
from kserve.protocol.infer_type import InferOutput


@app.get("/v2/models/cumsum/config")
def config():
    # perf_analyzer reads Triton's model configuration, which KServe does
    # not serve. A batch dimension of 1, as for MLServer (mlserver/): x is
    # [1, N], and perf_analyzer's JSON mode sends all of it.
    return {"name": "cumsum", "max_batch_size": 1,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1]}]}


class Cumsum(Model):
    def __init__(self):
        super().__init__("cumsum")
        self.ready = True

    def get_input_types(self):
        return [{"name": "x", "datatype": "FP32", "shape": [-1, -1]}]

    def get_output_types(self):
        return [{"name": "y", "datatype": "FP32", "shape": [-1, -1]}]

    def predict(self, payload: InferRequest, headers=None) -> InferResponse:
        x = payload.inputs[0].as_numpy().astype(np.float32, copy=False)
        y = np.cumsum(x, axis=-1, dtype=np.float32)
        out = InferOutput(name="y", shape=list(y.shape), datatype="FP32")
        out.set_data_from_numpy(y)  # as KServe's examples do
        # binary (REST) or raw (gRPC) outputs when the request asks for them
        return InferResponse(model_name=self.name, infer_outputs=[out],
                             response_id=payload.id or "",
                             use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=payload.request_outputs)


if __name__ == "__main__":
    ModelServer(http_port=int(sys.argv[1]), grpc_port=int(sys.argv[2]),
                workers=1).start([Cumsum()])
