#!/usr/bin/env python3
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/common/.
#
# The models of the L0_torch_aoti_* tests that go with the pytorch_backend patches in docs/upstream/ (of the
# tritonpt repository): an add model exported with a dynamic batch dimension and served with max_batch_size 8
# and dynamic batching, and the same model exported with a static batch of 1 and served with max_batch_size 4.
# Run as NVIDIA's CI runs qa/common/gen_qa_models.py: `python3 gen_qa_torch_aoti_batch_models.py
# --models_dir=/data/inferenceserver/${REPO_VERSION}/qa_model_repository`.

import argparse
import os

import torch

DIMS = 16
MAX_BATCH = 8


class AddNet(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def _package(models_dir, name, batch, dynamic):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    version = os.path.join(models_dir, name, "1")
    os.makedirs(version, exist_ok=True)
    example = tuple(torch.randn(batch, DIMS, device=device) for _ in range(2))
    shapes = None
    if dynamic:
        dim = torch.export.Dim("batch", min=1, max=MAX_BATCH)
        shapes = ({0: dim}, {0: dim})
    program = torch.export.export(AddNet().to(device).eval(), example, dynamic_shapes=shapes)
    torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(version, "model.pt2"))
    print(f"Created {version}/model.pt2 (batch {'1..%d' % MAX_BATCH if dynamic else batch})")


def _config(models_dir, name, max_batch_size, dynamic_batching):
    kind = "KIND_GPU" if torch.cuda.is_available() else "KIND_CPU"
    batching = "dynamic_batching { max_queue_delay_microseconds: 100000 }\n" if dynamic_batching else ""
    # The output block comes last: L0_torch_aoti_output_type changes its data type with sed from "output" on.
    config = f"""backend: "pytorch"
name: "{name}"
platform: "torch_aoti"
max_batch_size: {max_batch_size}
default_model_filename: "model.pt2"
{batching}instance_group [{{ kind: {kind} }}]
input [
  {{ name: "ARGS[0]" data_type: TYPE_FP32 dims: [ {DIMS} ] }},
  {{ name: "ARGS[1]" data_type: TYPE_FP32 dims: [ {DIMS} ] }}
]
output [
  {{ name: "RESULT" data_type: TYPE_FP32 dims: [ {DIMS} ] }}
]
"""
    with open(os.path.join(models_dir, name, "config.pbtxt"), "w") as file:
        file.write(config)
    print(f"Created {models_dir}/{name}/config.pbtxt")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--models_dir", required=True, help="Top-level model directory")
    FLAGS = parser.parse_args()
    # Dynamic batch dimension, max_batch_size 8, dynamic batching.
    _package(FLAGS.models_dir, "torch_aoti_batch_float32", batch=2, dynamic=True)
    _config(FLAGS.models_dir, "torch_aoti_batch_float32", MAX_BATCH, dynamic_batching=True)
    # Exported with a static batch of 1, served with max_batch_size 4: only batch 1 is the package's.
    _package(FLAGS.models_dir, "torch_aoti_static_batch_float32", batch=1, dynamic=False)
    _config(FLAGS.models_dir, "torch_aoti_static_batch_float32", 4, dynamic_batching=False)
