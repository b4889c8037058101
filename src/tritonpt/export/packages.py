"""AOTInductor packages kept by the exported program they compile, so that the same program compiles once.

    <cache>/packages/<key>/model.pt2      key: a digest of the program (its graph, signature, shapes' ranges and
                                          every weight), torch's build and the machine it was compiled for

A migration converts a file anew each run (cheap), and compiling it is most of its cost (resnet18: about a minute
on 2 cores): an unchanged file on an unchanged machine takes its package from here. An entry is written staged
and renamed, and copied (never linked) to where it is wanted.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch

from tritonpt import caches, scratch
from tritonpt.export.cache import machine

FILE = "model.pt2"


def key(program: torch.export.ExportedProgram) -> str | None:
    """The digest of what AOTInductor makes a package from (the graph with every tensor's device and strides, the
    weights and where they live), on this torch and this machine; None where a weight
    cannot be read as bytes (then nothing is kept: the package is compiled as if there were no cache)."""
    digest = hashlib.sha256()
    for part in (
        torch.__version__,
        torch.version.git_version,
        machine(),
        _graph(program),
        str(program.graph_signature),
        str(sorted((str(k), str(v)) for k, v in program.range_constraints.items())),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    try:
        for group in (program.state_dict, program.constants):
            for name in sorted(group):
                value = group[name]
                digest.update(name.encode())
                if isinstance(value, torch.Tensor):
                    tensor = (
                        value.detach().cpu().contiguous().reshape(-1)
                    )  # a scalar buffer has no axis to view
                    digest.update(f"{tensor.dtype}{list(value.shape)}{value.device}".encode())
                    digest.update(tensor.view(torch.uint8).numpy().tobytes())
                else:
                    digest.update(repr(value).encode())
    except (RuntimeError, TypeError, ValueError):  # a quantized, sparse or meta tensor: no bytes to hash
        return None
    return digest.hexdigest()[:24]


def _graph(program: torch.export.ExportedProgram) -> str:
    """The program's graph as code, every tensor with its dtype, shape, strides and device; without the comments
    that say which source line made each node (``# File: /path/model.py:4 in forward``), so that the same model in
    another checkout or folder is the same program."""
    readable = program.graph_module.print_readable(
        print_output=False, include_stride=True, include_device=True
    )
    return "\n".join(line for line in readable.splitlines() if not line.lstrip().startswith("#"))


def compile_package(
    program: torch.export.ExportedProgram, package: Path, *, what: str, say: Callable[[str], None]
) -> None:
    """``aoti_compile_and_package(program)`` into ``package``, or the cached package of the same program."""
    found = key(program)
    if found is None:
        torch._inductor.aoti_compile_and_package(program, package_path=str(package))
        return
    entry = caches.root() / "packages" / found
    if (entry / FILE).is_file():
        shutil.copyfile(entry / FILE, package)
        caches.note("package", what, hit=True, say=say)
        return
    started = time.perf_counter()
    torch._inductor.aoti_compile_and_package(program, package_path=str(package))
    seconds = time.perf_counter() - started
    entry.parent.mkdir(parents=True, exist_ok=True)
    with scratch.folder(f".{entry.name}-", inside=entry.parent) as staging:
        shutil.copyfile(package, staging / FILE)
        with contextlib.suppress(OSError):  # another process stored the same program first
            staging.replace(entry)
    caches.note("package", what, hit=False, seconds=seconds, say=say)
