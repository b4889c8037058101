"""Stage "doctor": will this host, this image and these models work together? Each check says why, and how to fix.

    host:   Docker engine -> NVIDIA runtime -> a GPU in a ``--gpus all`` container -> driver vs image CUDA
    image:  its labels -> its glibc vs what the server and backends need -> the backend's libraries resolve
    models: TorchScript file format and the exporting torch vs the backend's libtorch

:func:`run` gathers facts (``facts``, ``elf``), pure ``check_*`` functions judge them (``judge``), and
:func:`render` writes the report; ``compat`` holds the measured table of which torch each libtorch serves.
"""

from tritonpt.doctor.elf import glibc_needed, glibc_needed_by
from tritonpt.doctor.facts import (
    backend_of,
    host_driver,
    image_files,
    image_glibc,
    ldd_in_image,
    run_in_image,
)
from tritonpt.doctor.judge import check_driver, check_glibc, check_pytorch_backend
from tritonpt.doctor.models import check_models
from tritonpt.doctor.render import render
from tritonpt.doctor.results import (
    BACKENDS,
    CONTAINER_LABEL,
    PYTORCH_BACKEND,
    SERVER_BINARY,
    SERVER_LIBRARIES,
    Backend,
    GlibcNeed,
    HostDriver,
    ImageFiles,
    Ran,
    Report,
    Result,
    Status,
    parse_version,
)
from tritonpt.doctor.run import run

__all__ = [
    "BACKENDS",
    "CONTAINER_LABEL",
    "PYTORCH_BACKEND",
    "SERVER_BINARY",
    "SERVER_LIBRARIES",
    "Backend",
    "GlibcNeed",
    "HostDriver",
    "ImageFiles",
    "Ran",
    "Report",
    "Result",
    "Status",
    "backend_of",
    "check_driver",
    "check_glibc",
    "check_models",
    "check_pytorch_backend",
    "glibc_needed",
    "glibc_needed_by",
    "host_driver",
    "image_files",
    "image_glibc",
    "ldd_in_image",
    "parse_version",
    "render",
    "run",
    "run_in_image",
]
