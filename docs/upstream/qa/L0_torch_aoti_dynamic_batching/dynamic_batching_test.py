#!/usr/bin/env python3
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_dynamic_batching/.

import sys

sys.path.append("../common")

import unittest

import numpy as np
import test_util as tu
import tritonclient.http as http

MODEL_NAME = "torch_aoti_batch_float32"
REQUESTS = 8


def _inputs(a, b):
    inputs = [http.InferInput("ARGS[0]", a.shape, "FP32"), http.InferInput("ARGS[1]", b.shape, "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=True)
    return inputs


class DynamicBatchingTest(tu.TestResultCollector):
    def test_each_merged_request_gets_its_own_rows(self):
        a = np.random.randn(REQUESTS, 16).astype(np.float32)
        b = np.random.randn(REQUESTS, 16).astype(np.float32)
        outputs = [http.InferRequestedOutput("RESULT", binary_data=True)]
        with http.InferenceServerClient("localhost:8000", concurrency=REQUESTS) as client:
            before = client.get_inference_statistics(MODEL_NAME)["model_stats"][0]["execution_count"]
            pending = [
                client.async_infer(MODEL_NAME, _inputs(a[i : i + 1], b[i : i + 1]), outputs=outputs)
                for i in range(REQUESTS)
            ]
            results = [p.get_result() for p in pending]
            after = client.get_inference_statistics(MODEL_NAME)["model_stats"][0]["execution_count"]
        # max_queue_delay_microseconds 100000: the batcher merges the concurrent requests.
        self.assertLess(int(after) - int(before), REQUESTS)
        for i, result in enumerate(results):
            got = result.as_numpy("RESULT")
            self.assertEqual(got.shape, (1, 16))
            np.testing.assert_allclose(got, a[i : i + 1] + b[i : i + 1], rtol=1e-6)


if __name__ == "__main__":
    unittest.main()
