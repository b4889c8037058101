"""Offline stand-ins for the NGC Triton image, so CI builds and runs our real recipe without any registry.

    debootstrap Debian bookworm -> docker import          (the base:   tritonpt-standin:base-bookworm-<hash>)
      -> tritonpt_ci/standin.Dockerfile + the pytriton server  (the Triton: tritonpt-standin:triton-2.51.0-<hash>)
         + the official libtriton_pytorch.so that tritonpt.backend built for the host's torch
      -> docker/ngc.Dockerfile built FROM the stand-in     (what CI tests: tritonpt-standin:ngc-<hash>)
    base -> tritonpt_ci/standin-pytorch.Dockerfile + host torch  (tritonpt-standin:pytorch-devel-<torch>-<hash>, the
                                                          base on which CI builds docker/pytorch.Dockerfile's
                                                          backend stage)

Nothing is pulled: the base comes from the Debian mirror apt already uses (``/etc/apt/sources.list.d/``), the
server and its libraries from the installed ``nvidia-pytriton`` wheel (server 2.51.0), and the pytorch backend
from :func:`tritonpt.backend.ensure`, the same build `invoke build-backend` makes (no second recipe). Each image
is tagged with a hash of its inputs and is not rebuilt while that tag exists (``--force`` rebuilds).

torch is not in the images (the wheel and its CUDA libraries are gigabytes): run the container with the
host venv's site-packages mounted read-only at ``/opt/tritonpt/site-packages``, see
:func:`run_settings`; the image's ``LD_LIBRARY_PATH`` names its ``torch/lib``, where the backend finds libtorch.
The image's Python does not matter for that: only torch's shared libraries are used.

Needs root (debootstrap), ``debootstrap`` and ``tar`` on PATH, and a Docker engine (``.ci/docker-engine.sh``).
Usage: ``python -m tritonpt_ci.standin --help``. The rooms (everything public is also here):

    images    what every stand-in shares: the repository and label, tags by a hash of the inputs, reuse, pruning
    debian    the base: Debian bookworm from debootstrap, imported as an image
    ngc       the stand-in of NGC's Triton image, docker/ngc.Dockerfile built on it, and build_all (all three)
    pytorch   the stand-in of pytorch/pytorch's devel image, and docker/pytorch.Dockerfile's backend stage on it
    running   how a container of a stand-in runs: the host's site-packages and the repository mounted
    cli       the command line (``__main__``), and ``--why-not``: why the stand-ins cannot be built here

The Dockerfiles and ``standin-entrypoint.sh`` are package data of :mod:`tritonpt_ci`, beside this package.
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
