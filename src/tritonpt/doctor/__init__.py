"""Stage "doctor": will this host, this image and these models work together? Each check says why, and how to fix.

    host:   Docker engine -> NVIDIA runtime -> a GPU inside a ``--gpus all`` container -> driver vs the image's CUDA
    image:  what it is (labels) -> its glibc vs the GLIBC_x.y the server and backends need
            -> every library of the pytorch backend resolves inside it
    models: TorchScript file format and the exporting torch vs the backend's libtorch

Each check gathers facts (a command, a file read) and then judges them in a pure function (``check_*``), so the
judging is unit-tested with real files and real tool output, without a GPU or a broken image at hand. Without
``--image`` the host and model checks run, against the default release of versions.toml; the checks that need a
GPU are SKIP on hosts without ``nvidia-smi``.

    report = run(image="tritonpt:ngc-25.10", repository=Path("model_repository"))
    render(report)
    sys.exit(report.exit_code)

Files are copied out of the image (docker-py ``get_archive``) and their ELF version needs read with pyelftools,
never with ``objdump`` (images may lack binutils). Commands run inside the image with its entrypoint replaced,
its own environment (``LD_LIBRARY_PATH`` included) and no network, and their containers are always removed.
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
from tritonpt.doctor.judge import check_driver, check_glibc, check_models, check_pytorch_backend
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
