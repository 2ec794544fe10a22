"""cumsum_runtime.py - a numpy cumulative sum as an MLServer runtime:
model cumsum, input x, output y, float32, the sum along the last axis
(make bench-peers serves it with `mlserver start`)."""
import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.handlers import custom_handler
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


class CumsumRuntime(MLModel):
    async def load(self) -> bool:
        return True

    @custom_handler(rest_path="/v2/models/cumsum/config", rest_method="GET")
    async def config(self) -> dict:
        # perf_analyzer reads Triton's model configuration, which MLServer
        # does not serve. A batch dimension of 1 (max_batch_size 1), because
        # MLServer's REST door takes JSON alone, and perf_analyzer's JSON
        # mode sends one element per input for a model without one
        # (docs/kserve.md): with it, x is [1, N] and the data whole.
        return {"name": "cumsum", "max_batch_size": 1,
                "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1]}],
                "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1]}]}

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0]).astype(np.float32, copy=False)
        y = np.cumsum(x, axis=-1, dtype=np.float32)
        # no output parameters: tritonclient's parser (perf_analyzer's)
        # looks for binary_data_size in any it finds
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=[ResponseOutput(
            name="y", datatype="FP32", shape=list(y.shape), data=y.ravel().tolist())])
