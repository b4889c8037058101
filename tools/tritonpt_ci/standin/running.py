"""How a container of a stand-in (or of our recipe built on one) runs: the mounts, ports and environment.

torch is not in the images (the wheel and its CUDA libraries are gigabytes): the host venv's site-packages is
mounted read-only at ``/opt/tritonpt/site-packages`` (:func:`host_mounts`, :func:`run_settings`); the image's
``LD_LIBRARY_PATH`` names its ``torch/lib``, where the backend finds libtorch. The image's Python does not matter
for that: only torch's shared libraries are used.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tritonpt import backend
from tritonpt.client import GRPC_PORT, HTTP_PORT, METRICS_PORT
from tritonpt.errors import ImageError
from tritonpt.image import MODELS_MOUNT
from tritonpt.options import Mount

CONTAINER_SITE_PACKAGES = "/opt/tritonpt/site-packages"
"""Where the host's site-packages goes; the stand-in's LD_LIBRARY_PATH names its torch/lib."""
CONTAINER_MODELS = MODELS_MOUNT


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """How a container from a stand-in (or from our recipe built on one) must be run."""

    mounts: tuple[Mount, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = (HTTP_PORT, GRPC_PORT, METRICS_PORT)

    def docker_run(self, tag: str, command: Sequence[str] = ()) -> list[str]:
        """A ``docker run`` command line with random 127.0.0.1 host ports, for people and logs."""
        args = ["docker", "run", "--rm", "-d"]
        for port in self.ports:
            args += ["-p", f"127.0.0.1::{port}"]
        for mount in self.mounts:
            args += ["-v", mount.volume()]
        for key, value in self.environment.items():
            args += ["-e", f"{key}={value}"]
        return [*args, tag, *command]


def torch_site_packages() -> Path:
    """The site-packages folder holding the torch this process would import (without importing it)."""
    torch = backend.package_folder("torch")
    if torch is None:
        msg = f"Cannot find torch in {sys.prefix}: the stand-in container needs the host's torch mounted."
        raise ImageError(msg)
    return torch.parent


def host_mounts(*, site_packages: Path | None = None) -> tuple[Mount, ...]:
    """What a container of a stand-in image needs besides the repository: the host's site-packages."""
    site = site_packages or torch_site_packages()
    return (Mount(source=site.resolve(), target=CONTAINER_SITE_PACKAGES),)


def run_settings(repository: Path, *, site_packages: Path | None = None) -> RunSettings:
    """Mounts and environment for running a stand-in based container on ``repository``.

    - the model repository, read-only, at ``/models`` (it must be readable by uid 1000, the image's user);
    - the host's site-packages, read-only, at ``/opt/tritonpt/site-packages``: the backend's libtorch is its
      ``torch/lib`` (on the image's ``LD_LIBRARY_PATH``), which finds its CUDA libraries beside it.
    """
    return RunSettings(
        mounts=(
            Mount(source=repository.resolve(), target=CONTAINER_MODELS),
            *host_mounts(site_packages=site_packages),
        ),
    )


def run_settings_example() -> list[str]:
    """The documented ``docker run`` line, with placeholders."""
    settings = RunSettings(
        mounts=(
            Mount(source=Path("<model repository>"), target=CONTAINER_MODELS),
            Mount(source=Path("<venv>/lib/python3.X/site-packages"), target=CONTAINER_SITE_PACKAGES),
        ),
    )
    return settings.docker_run("<tag>")
