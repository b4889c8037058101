"""What every stand-in image shares: the repository its tags belong to and the label it carries, a tag named by
a hash of its inputs and reused while that tag exists, the build contexts' hard links, and the pruning of the tags
of older inputs.

The stand-ins' Dockerfiles (``standin.Dockerfile``, ``standin-pytorch.Dockerfile``) and ``standin-entrypoint.sh``
are package data of :mod:`tritonpt_ci`, beside this package (:data:`HERE`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tritonpt import caches, image
from tritonpt.image import DockerClient

REPOSITORY = "tritonpt-standin"
"""Every stand-in image is a tag of this repository (``docker images tritonpt-standin`` lists them)."""

HERE = Path(str(resources.files("tritonpt_ci")))
"""Where the stand-ins' Dockerfiles and entrypoint are (``resources.files('tritonpt_ci')``)."""
BACKEND_STAGE_TAG = f"{REPOSITORY}:pytorch-backend-stage"
"""docker/pytorch.Dockerfile's backend stage as CI builds it on the devel stand-in."""
LABEL = image.LABEL_STANDIN
"""Label of the stand-in images (``base`` or ``triton``; images built FROM them inherit it).
``python -m tritonpt_ci.standin --prune`` removes the tags of older inputs."""


@dataclass(frozen=True, kw_only=True)
class StandinImage:
    """One stand-in image as it is in the engine."""

    role: str
    """``base``, ``triton``, ``ngc`` or ``pytorch-devel``."""
    tag: str
    id: str
    size: int
    cached: bool
    """True when the tag already existed and nothing was built."""
    seconds: float


def digest(payload: object) -> str:
    """12 hex digits of the sha256 of ``payload`` as sorted JSON: the part of a tag that names its inputs."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def existing(client: DockerClient, tag: str) -> dict[str, object] | None:
    """The engine's inspection of ``tag``, or None when no image has it (then it is to be built)."""
    try:
        return dict(client.api.inspect_image(tag))
    except image.docker_module().errors.ImageNotFound:
        return None


def image_of(client: DockerClient, role: str, tag: str, *, cached: bool, seconds: float) -> StandinImage:
    """The :class:`StandinImage` that ``tag`` is in the engine now (the lookup noted in the run's cache ledger)."""
    caches.note("image", f"{role} {tag}", hit=cached, seconds=seconds)
    info = client.api.inspect_image(tag)
    return StandinImage(
        role=role, tag=tag, id=str(info["Id"]), size=int(info["Size"]), cached=cached, seconds=seconds
    )


def place(source: Path, target: Path) -> None:
    """Hard-link ``source`` to ``target`` (same file system), else copy it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def prune(client: DockerClient, *, keep: Sequence[str]) -> list[str]:
    """Remove every ``tritonpt-standin`` tag except ``keep`` (older inputs pile up otherwise), and untagged
    images carrying the stand-in label; return what was removed."""
    removed: list[str] = []
    keep = [*keep, BACKEND_STAGE_TAG]  # one fixed tag, overwritten by each build: it cannot pile up
    for found in client.images.list(name=REPOSITORY):
        for tag in found.tags:
            if tag.startswith(f"{REPOSITORY}:") and tag not in keep:
                client.images.remove(tag, noprune=False)
                removed.append(tag)
    # Untagged leftovers of failed builds on a stand-in inherit its label; nothing else of the host's is touched.
    pruned = client.images.prune(filters={"dangling": True, "label": LABEL})
    removed += [entry["Deleted"] for entry in pruned.get("ImagesDeleted") or [] if "Deleted" in entry]
    return removed
