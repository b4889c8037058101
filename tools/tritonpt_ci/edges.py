"""The compat set's edge models: each calls an operator that entered or left torch between the minors it serves.

    edge_polar     torch.linalg.polar: aten::linalg_polar, new in torch 2.14 (a newer torch's export, older release)
    edge_cholesky  torch.cholesky: aten::cholesky, removed in torch 2.14 (an older torch's export, newer release)

`python -m tritonpt_ci.edges --repository DIR`, in an exporting torch's environment, exports (both formats) those
whose operator that torch has, kept in the export cache as the built-in set's are. Compat serves them beside the
built-in set and holds the doctor's prediction for each to what the server did (docs/reference/compat.md).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from tritonpt import caches
from tritonpt.export import cache as export_cache
from tritonpt.export.exporting import export_factory
from tritonpt.export.stamp import builtin_fingerprint, stamp_matches, write_stamp
from tritonpt.options import ModelFormat, add_arguments
from tritonpt.repository import ModelDir


def _square(batch: int = 2, size: int = 4) -> torch.Tensor:
    square: torch.Tensor = torch.randn(batch, size, size, generator=torch.Generator().manual_seed(0))
    return square


class _Polar(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torch 2.9's stubs have no linalg.polar (new in 2.14): this runs only where the registry has it.
        unitary, positive = torch.linalg.polar(x + 4 * torch.eye(x.shape[-1]))  # type: ignore[attr-defined]
        total: torch.Tensor = unitary + positive
        return total


class _Cholesky(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spd = x @ x.transpose(-1, -2) + x.shape[-1] * torch.eye(x.shape[-1])
        return torch.cholesky(spd)


def polar() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return _Polar().eval(), (_square(),)


def cholesky() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return _Cholesky().eval(), (_square(),)


@dataclass(frozen=True, kw_only=True)
class Edge:
    name: str  # the model's folder in the exported set
    factory: Callable[
        [], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]
    ]  # as `tritonpt export --model` takes
    operator: str  # what it calls, as the registries name it


EDGES = (
    Edge(name="edge_polar", factory=polar, operator="aten::linalg_polar"),
    Edge(name="edge_cholesky", factory=cholesky, operator="aten::cholesky"),
)


def export(repository: Path, *, say: Callable[[str], None] = print) -> list[str]:
    """Each edge whose operator this torch registers, in both formats, into ``repository``: kept where its stamp
    matches, copied from the export cache where it has it, else exported and stored there. The folders written."""
    registered = {s.name for s in torch._C._jit_get_all_schemas()}  # noqa: SLF001 - the registry itself
    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    written = []
    for edge in EDGES:
        if edge.operator not in registered:
            say(f"[{edge.name}] torch {torch.__version__} has no {edge.operator}: not exported by it")
            continue
        formats: tuple[tuple[ModelFormat, str], ...] = (
            ("torchscript", edge.name),
            ("pt2", f"{edge.name}_pt2"),
        )
        for model_format, folder in formats:
            model = ModelDir(root=repository / folder)
            machine = export_cache.machine() if model_format == "pt2" else ""
            fingerprint = builtin_fingerprint(f"{folder}:{model_format}:{source}", 0, machine=machine)
            written.append(folder)
            if stamp_matches(model, fingerprint):
                continue
            if export_cache.restore(fingerprint, model):
                caches.note("export", folder, hit=True, say=say)
                continue
            result = export_factory(
                edge.factory, name=folder, repository=repository, step=say, model_format=model_format
            )
            write_stamp(result.model, fingerprint, seconds=result.seconds)
            export_cache.store(result.model, fingerprint)
            caches.note("export", folder, hit=False, seconds=result.seconds, say=say)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.edges", description=__doc__.splitlines()[0])
    add_arguments(parser.add_argument, ("repository",))
    args = parser.parse_args(argv)
    export(Path(args.repository))
    return 0


if __name__ == "__main__":
    sys.exit(main())
