"""Offline stand-ins for the NGC Triton image, so CI builds and runs our real recipe without any registry.

images    the repository and label every stand-in shares, tags by a hash of the inputs, reuse, pruning
debian    the base: Debian bookworm from debootstrap, imported as an image
ngc       the Triton stand-in (pytriton's server, our backend), docker/ngc.Dockerfile on it, build_all
pytorch   the stand-in of pytorch/pytorch's devel image, docker/pytorch.Dockerfile's backend stage on it
running   how a stand-in's container runs: the host's site-packages and the repository mounted
cli       ``python -m tritonpt_ci.standin`` (`nox -s container` runs it), and ``--why-not``
"""

from __future__ import annotations

from tritonpt_ci.standin.cli import WHY_NOT, main, why_not_base
from tritonpt_ci.standin.debian import PACKAGES, SUITE, base_tag, build_base, debian_mirror
from tritonpt_ci.standin.images import BACKEND_STAGE_TAG, HERE, LABEL, REPOSITORY, StandinImage, prune
from tritonpt_ci.standin.ngc import (
    STANDIN_DOCKERFILE,
    STANDIN_ENTRYPOINT,
    build_all,
    build_ngc_on,
    build_triton,
    ngc_build_args,
    pytriton_server,
    stage_triton_context,
    triton_build_args,
)
from tritonpt_ci.standin.pytorch import (
    PYTORCH_DEVEL_DOCKERFILE,
    build_pytorch_backend_stage,
    build_pytorch_devel,
)
from tritonpt_ci.standin.running import (
    CONTAINER_MODELS,
    CONTAINER_SITE_PACKAGES,
    RunSettings,
    host_mounts,
    run_settings,
    run_settings_example,
    torch_site_packages,
)

__all__ = [
    "BACKEND_STAGE_TAG",
    "CONTAINER_MODELS",
    "CONTAINER_SITE_PACKAGES",
    "HERE",
    "LABEL",
    "PACKAGES",
    "PYTORCH_DEVEL_DOCKERFILE",
    "REPOSITORY",
    "STANDIN_DOCKERFILE",
    "STANDIN_ENTRYPOINT",
    "SUITE",
    "WHY_NOT",
    "RunSettings",
    "StandinImage",
    "base_tag",
    "build_all",
    "build_base",
    "build_ngc_on",
    "build_pytorch_backend_stage",
    "build_pytorch_devel",
    "build_triton",
    "debian_mirror",
    "host_mounts",
    "main",
    "ngc_build_args",
    "prune",
    "pytriton_server",
    "run_settings",
    "run_settings_example",
    "stage_triton_context",
    "torch_site_packages",
    "triton_build_args",
    "why_not_base",
]
