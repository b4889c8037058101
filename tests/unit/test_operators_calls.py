"""tritonpt.operators.calls: what a model file calls, read without running it, held to what real torch does with the
same file (the graphs torch.jit.load builds, the error it raises, the shims a package's library needs)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch
import torchvision

from tritonpt.operators import calls, registry
from tritonpt.versions import minor_of

SYNTAX = {
    "aten::Bool",
    "aten::Int",
    "aten::Float",
    "aten::len",
    "aten::__getitem__",
    "aten::append",
    "aten::size",
}
"""Operators TorchScript code writes as Python syntax or builtins (``bool(t)``, ``len(xs)``, ``xs[i]``,
``xs.append(v)``, ``t.shape``), not as a named call: the language's own, in every registry."""


class _Gate(torch.nn.Module):
    """Submodules, data-dependent control flow, a loop and a second exported method."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.norm(self.linear(x))
        if bool(out.sum() > 0):
            out = torch.nn.functional.gelu(out)
        else:
            out = torch.linalg.norm(x, dim=1, keepdim=True).expand(-1, 4)
        parts = []
        for i in range(int(x.shape[0])):
            parts.append(out[i].clamp(min=0.0))
        return torch.stack(parts)

    @torch.jit.export
    def describe(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, 0).flip(0)


class _Vision(torch.nn.Module):
    def forward(self, x: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        return torchvision.ops.roi_align(x, boxes, [2, 2])


@pytest.fixture(scope="module")
def here() -> registry.Registry:
    """This torch's registry as compat read it (test_operators_registry holds it equal to this torch's own)."""
    shipped = registry.load()
    held = shipped.of_minor(minor_of(torch.__version__)) if shipped is not None else None
    assert held is not None, f"no shipped registry of torch {torch.__version__}"
    return held


def _graph_kinds(module: torch.jit.ScriptModule) -> set[str]:
    """Every node kind of every method's inlined graph, blocks included, outside ``prim::``."""
    kinds: set[str] = set()

    def walk(block: torch._C.Block | torch._C.Graph) -> None:
        for node in block.nodes():
            kinds.add(node.kind())
            for inner in node.blocks():
                walk(inner)

    for name in module._c._method_names():
        walk(getattr(module, name).inlined_graph)
    return {k for k in kinds if not k.startswith("prim::")}


@pytest.mark.parametrize("how", ["script", "trace"])
def test_the_file_names_every_operator_its_graphs_run(
    tmp_path: Path, how: str, here: registry.Registry
) -> None:
    if how == "script":
        saved = torch.jit.script(_Gate().eval())
    else:
        saved = torch.jit.trace(torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 32, 32))
    path = tmp_path / "model.pt"
    torch.jit.save(saved, str(path))
    read = calls.of_file(path)
    assert read.format == "torchscript"
    assert read.unread == ()
    graphs = _graph_kinds(torch.jit.load(str(path)))
    named = set(read.names("builtin"))
    assert graphs - SYNTAX <= named, f"run but not read: {sorted(graphs - SYNTAX - named)}"
    assert all(here.has(name) for name in named), [n for n in named if not here.has(n)]
    if how == "script":  # the second method's, the submodules', both branches'
        assert {"aten::cumsum", "aten::flip", "aten::linalg_norm", "aten::gelu", "aten::layer_norm"} <= named


def _rewritten(source: Path, target: Path, old: str, new: str) -> Path:
    """``source``'s archive with ``old`` replaced by ``new`` in its code: a file of another torch, made here."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for item in original.infolist():
            data = original.read(item)
            if "/code/" in item.filename and item.filename.endswith(".py"):
                data = data.replace(old.encode(), new.encode())
            copy.writestr(item, data)
    return target


class _Polarish(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matrix_exp(x)


def test_a_file_this_torch_cannot_load_is_read_and_refused_in_torchs_own_words(tmp_path: Path) -> None:
    """A newer torch's file: torch 2.9 refuses it at load; the reader reads it all the same, and the refusal the
    doctor predicts is the first line torch itself raises."""
    traced = torch.jit.trace(_Polarish(), torch.randn(2, 3, 3))
    torch.jit.save(traced, str(tmp_path / "exp.pt"))
    newer = _rewritten(
        tmp_path / "exp.pt", tmp_path / "polar.pt", "torch.linalg_matrix_exp(", "torch.linalg_polar("
    )
    with pytest.raises(RuntimeError) as raised:
        torch.jit.load(str(newer))
    read = calls.of_file(newer)
    polar = next(c for c in read.calls if c.name == "aten::linalg_polar")
    assert polar.kind == "builtin"
    assert polar.where.startswith("code/__torch__")
    assert polar.refusal in str(raised.value)


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # roi_align's trace reads a tensor's value
def test_operators_outside_aten_are_named_with_their_namespace(tmp_path: Path) -> None:
    boxes = torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]])
    torch.jit.save(torch.jit.trace(_Vision(), (torch.randn(1, 3, 8, 8), boxes)), str(tmp_path / "roi.pt"))
    read = calls.of_file(tmp_path / "roi.pt")
    assert read.names("builtin") == ["torchvision::roi_align"]
    assert read.calls[0].namespace == "torchvision"


def test_code_that_does_not_parse_is_said_not_guessed(tmp_path: Path) -> None:
    torch.jit.save(torch.jit.trace(_Polarish(), torch.randn(2, 3, 3)), str(tmp_path / "exp.pt"))
    broken = _rewritten(tmp_path / "exp.pt", tmp_path / "broken.pt", "def forward(", "def forward((")
    read = calls.of_file(broken)
    assert read.calls == ()
    assert len(read.unread) == 1
    assert "does not parse as Python" in read.unread[0]


def test_a_file_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a zip archive"):
        calls.of_file(path)
