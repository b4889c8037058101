"""The stand-in of pytorch/pytorch's devel image, and docker/pytorch.Dockerfile's backend stage built on it.

    base -> standin-pytorch.Dockerfile + g++ + Python headers + the host's torch
                                             (tritonpt-standin:pytorch-devel-<torch>-<hash>)
         -> docker/pytorch.Dockerfile's ``backend`` stage (CPU variant) FROM it  (tritonpt-standin:pytorch-backend-stage)

The devel stand-in is tagged by the torch build and its recipe; the backend stage has one fixed tag.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tritonpt import backend, image
from tritonpt.image import DockerClient
from tritonpt_ci.standin.images import (
    BACKEND_STAGE_TAG,
    HERE,
    REPOSITORY,
    StandinImage,
    digest,
    existing,
    image_of,
    place,
)

PYTORCH_DEVEL_DOCKERFILE = HERE / "standin-pytorch.Dockerfile"


def build_pytorch_devel(
    client: DockerClient,
    *,
    base: str,
    workdir: Path | None = None,
    force: bool = False,
    on_line: image.OnLine | None = None,
) -> StandinImage:
    """The stand-in of the pytorch recipe's devel base: ``base`` + g++ + Python headers + the host's torch.

    Tagged by the torch build (version and git commit) and the recipe text, not by hashing gigabytes of files.
    """
    torch = backend.Torch.locate()
    recipe = PYTORCH_DEVEL_DOCKERFILE.read_text(encoding="utf-8")
    inputs = {"base": base, "torch": [torch.version, torch.git_version], "recipe": recipe}
    tag = f"{REPOSITORY}:pytorch-devel-{torch.version.replace('+', '-')}-{digest(inputs)}"
    if not force and existing(client, tag) is not None:
        return image_of(client, "pytorch-devel", tag, cached=True, seconds=0.0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tritonpt-standin-devel-", dir=workdir) as tmp:
        context = Path(tmp)
        place(PYTORCH_DEVEL_DOCKERFILE, context / "Dockerfile")
        for path in sorted(torch.root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                place(path, context / "torch" / path.relative_to(torch.root))
        args = {"STANDIN_BASE": base, "TORCH_VERSION": torch.version}
        image.run_build(client, tag=tag, build_args=args, context=context, on_line=on_line)
    return image_of(client, "pytorch-devel", tag, cached=False, seconds=time.perf_counter() - started)


def build_pytorch_backend_stage(
    client: DockerClient,
    *,
    devel: str,
    sources: Path | None = None,
    on_line: image.OnLine | None = None,
) -> image.BuiltImage:
    """docker/pytorch.Dockerfile's ``backend`` stage (CPU variant) built FROM the devel stand-in, as CI runs it."""
    return image.build_image(
        recipe="pytorch",
        tag=BACKEND_STAGE_TAG,
        target="backend",
        build_args={"PYTORCH_DEVEL_IMAGE": devel, "BACKEND_VARIANT": "cpu"},
        sources=sources,
        on_line=on_line,
        client=client,
    )
