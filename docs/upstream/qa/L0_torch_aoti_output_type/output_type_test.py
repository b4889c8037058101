#!/usr/bin/env python3
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_output_type/.

import sys

sys.path.append("../common")

import unittest

import numpy as np
import test_util as tu
import tritonclient.http as http
from tritonclient.utils import InferenceServerException

MODEL_NAME = "torch_aoti_batch_float32"


class OutputTypeTest(tu.TestResultCollector):
    def test_the_error_names_the_output_and_the_server_lives(self):
        a = np.random.randn(2, 16).astype(np.float32)
        inputs = [http.InferInput("ARGS[0]", a.shape, "FP32"), http.InferInput("ARGS[1]", a.shape, "FP32")]
        inputs[0].set_data_from_numpy(a, binary_data=True)
        inputs[1].set_data_from_numpy(a, binary_data=True)
        outputs = [http.InferRequestedOutput("RESULT", binary_data=True)]
        with http.InferenceServerClient("localhost:8000") as client:
            for _ in range(2):  # the first error leaves nothing broken behind
                with self.assertRaises(InferenceServerException) as failed:
                    client.infer(MODEL_NAME, inputs, outputs=outputs)
                self.assertIn(
                    'output tensor "RESULT" has datatype TYPE_FP32 but model configuration expects TYPE_FP16',
                    failed.exception.message(),
                )
                self.assertTrue(client.is_server_live())


if __name__ == "__main__":
    unittest.main()
