#!/usr/bin/env python3
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_statistics/.

import sys

sys.path.append("../common")

import unittest

import numpy as np
import test_util as tu
import tritonclient.http as http

MODEL_NAME = "torch_aoti_batch_float32"
REQUESTS = 10


class StatisticsTest(tu.TestResultCollector):
    def test_the_split_fits_inside_the_requests(self):
        a = np.random.randn(2, 16).astype(np.float32)
        inputs = [http.InferInput("ARGS[0]", a.shape, "FP32"), http.InferInput("ARGS[1]", a.shape, "FP32")]
        inputs[0].set_data_from_numpy(a, binary_data=True)
        inputs[1].set_data_from_numpy(a, binary_data=True)
        with http.InferenceServerClient("localhost:8000") as client:
            for _ in range(REQUESTS):
                client.infer(MODEL_NAME, inputs)
            stats = client.get_inference_statistics(MODEL_NAME)["model_stats"][0]["inference_stats"]
        self.assertEqual(int(stats["success"]["count"]), REQUESTS)
        request_ns = int(stats["success"]["ns"])
        parts = {
            key: int(stats[key]["ns"])
            for key in ("queue", "compute_input", "compute_infer", "compute_output")
        }
        # Each part is a span between timestamps that fall within each request (exec start, compute start,
        # compute end, exec end): together they cannot be longer than the requests.
        self.assertLessEqual(sum(parts.values()), request_ns, parts)
        self.assertGreater(parts["compute_infer"], 0)


if __name__ == "__main__":
    unittest.main()
