"""tritonpt: take PyTorch 2.9 models to NVIDIA Triton Inference Server and know that they work.

The pipeline, one module per stage, in the order a model travels:

    spec / builtin -> what a model is: module, example inputs, axes, tolerances
    export         -> TorchScript + config.pbtxt + eager reference outputs
    repository     -> the model repository on disk (config.pbtxt via Triton's own schema)
    validate       -> every rule Triton or the pytorch backend would otherwise fail on later
    backend        -> the official libtriton_pytorch.so, built from pinned sources against this torch
    image          -> Docker recipes in docker/, built with their versions
    client         -> one way to talk to a running Triton (tritonclient)
    server         -> a running Triton: local process | container | URL, one interface
    parity         -> eager vs served outputs, with per-dtype tolerances
    report         -> JUnit, Markdown, JSON
    bench          -> served vs eager, measured with perf_analyzer
    doctor         -> host and image diagnosis
"""

__version__ = "0.1.0"
