"""What the Docker tests share: one engine client and the offline stand-in images, built once per session.

Every test in this folder needs a Docker engine; without one each is skipped, saying how to start one. The
stand-in base is made with debootstrap the first time (root and debootstrap needed, else the tests that need
it are skipped, saying which is missing); later runs reuse every image, as their tags hash their inputs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from importlib.util import find_spec
from typing import Any

import pytest

from tritonpt import image
from tritonpt.errors import DockerUnavailable, ImageError
from tritonpt.testing import standin


@pytest.fixture(scope="session", autouse=True)
def docker_client() -> Iterator[Any]:
    """A docker-py client for the engine at DOCKER_HOST (or the local socket); every test here needs one."""
    try:
        client = image.docker_client()
    except DockerUnavailable as exc:
        pytest.skip(f"no Docker engine answers at {image.docker_host()}; run .ci/docker-engine.sh ({exc})")
    yield client
    client.close()


@pytest.fixture(scope="session")
def standin_base(docker_client: Any) -> str:
    """The debootstrap Debian bookworm base of the stand-ins (built here when root and debootstrap allow)."""
    try:
        tag = standin.base_tag(standin.debian_mirror())
    except ImageError as exc:
        pytest.skip(f"no Debian mirror to name the stand-in base: {exc}")
    if not docker_client.images.list(name=tag):
        if shutil.which("debootstrap") is None:
            pytest.skip(f"{tag} is not built and debootstrap is missing: apt-get install -y debootstrap")
        if os.geteuid() != 0:
            pytest.skip(
                f"{tag} is not built and debootstrap needs root: run python -m tritonpt.testing.standin as root"
            )
        standin.build_base(docker_client)
    return tag


@pytest.fixture(scope="session")
def standin_images(docker_client: Any, standin_base: str) -> dict[str, standin.StandinImage]:
    """Base, Triton stand-in and recipes/ngc.Dockerfile on it, by role; reused when their inputs did not change."""
    if find_spec("pytriton") is None:
        pytest.skip("nvidia-pytriton is not installed: the stand-in takes its server from it")
    return {b.role: b for b in standin.build_all(docker_client)}
