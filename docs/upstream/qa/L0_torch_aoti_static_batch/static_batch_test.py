#!/usr/bin/env python3
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_static_batch/.

import sys

sys.path.append("../common")

import unittest

import numpy as np
import test_util as tu
import tritonclient.http as http
from tritonclient.utils import InferenceServerException

MODEL_NAME = "torch_aoti_static_batch_float32"


def _infer(client, rows):
    a = np.arange(rows * 16, dtype=np.float32).reshape(rows, 16)
    b = np.ones((rows, 16), dtype=np.float32)
    inputs = [http.InferInput("ARGS[0]", a.shape, "FP32"), http.InferInput("ARGS[1]", b.shape, "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=True)
    result = client.infer(MODEL_NAME, inputs, outputs=[http.InferRequestedOutput("RESULT", binary_data=True)])
    return result.as_numpy("RESULT"), a + b


class StaticBatchTest(tu.TestResultCollector):
    def test_the_packages_batch_is_served(self):
        with http.InferenceServerClient("localhost:8000") as client:
            got, expected = _infer(client, 1)
        self.assertEqual(got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-6)

    def test_another_batch_is_refused(self):
        # The package computes one row whatever the batch; answering a batch of 4 with it is wrong.
        with http.InferenceServerClient("localhost:8000") as client:
            with self.assertRaises(InferenceServerException) as refused:
                _infer(client, 4)
        self.assertIn("batch size", refused.exception.message())


if __name__ == "__main__":
    unittest.main()
