"""tritonpt: take PyTorch 2.9 models to NVIDIA Triton Inference Server and know that they work.

The pipeline, one module or subpackage per stage, in the order a model travels: ``spec`` / ``builtin`` ->
``export`` -> ``repository`` -> ``validate`` -> ``backend`` -> ``image`` -> ``server`` (through ``client``)
-> ``parity`` -> ``report``; beside it ``bench``, ``tune`` and ``doctor``. docs/guide/pipeline.md draws it.
"""

__version__ = "0.1.0"
