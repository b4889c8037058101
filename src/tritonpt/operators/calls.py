"""What a model file calls at load and at run time, read from the file without running it.

    of_file(path) -> Calls   TorchScript (model.pt): every operator its code names, in every method and module,
                             read with ast from <archive>/code/ (``torch.X`` is aten::X, ``ops.NS.X`` is NS::X),
                             so a newer torch's file reads too; an AOTInductor package (model.pt2): what it calls
                             outside its compiled kernels, its proxy executor's operators (its ``*.json``) and the
                             aoti_torch_* shims its ``.so`` imports

Each :class:`Call` knows the server's words where a libtorch lacks it; what cannot be read is said in ``unread``.
"""

from __future__ import annotations

import ast
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from tritonpt.operators.registry import SHIM_PREFIX

Kind = Literal["builtin", "proxy", "shim", "class"]
"""How the file reaches libtorch: a TorchScript builtin (resolved by name at load), an operator the AOTI proxy
executor looks up (by name and overload), a shim function its shared library imports, or a TorchBind class a
TorchScript file names (``__torch__.torch.classes.NS.Class``)."""


@dataclass(frozen=True, kw_only=True, order=True)
class Call:
    """One thing the file needs of libtorch, and the first place it names it."""

    name: (
        str  # "aten::linalg_polar", "torchvision::roi_align", "aoti_torch_cpu_addmm_out", "quantized::Conv2d"
    )
    kind: Kind
    where: str  # "code/__torch__.py:12", "data/aotinductor/model/….json", "data/aotinductor/model/….so"

    @property
    def namespace(self) -> str:
        return self.name.partition("::")[0] if "::" in self.name else ""

    @property
    def refusal(self) -> str:
        """What the server says where the serving libtorch lacks it."""
        if self.kind == "builtin":
            return f"Unknown builtin op: {self.name}."
        if self.kind == "proxy":
            return f"Could not find schema for {self.name}."
        if self.kind == "shim":
            return f"undefined symbol: {self.name}"
        return f"Unknown type name '__torch__.torch.classes.{self.name.replace('::', '.')}'"


@dataclass(frozen=True, kw_only=True)
class Calls:
    """Everything one file calls, and what in it could not be read."""

    path: Path
    format: Literal["torchscript", "pt2"]
    calls: tuple[Call, ...] = ()
    unread: tuple[str, ...] = ()

    def names(self, kind: Kind | None = None) -> list[str]:
        return sorted({c.name for c in self.calls if kind is None or c.kind == kind})


def of_file(path: Path) -> Calls:
    """The calls of ``path``: an AOTInductor package where the archive holds ``data/aotinductor``, else TorchScript.
    Raises ``ValueError`` for a file that is not a zip archive."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile as exc:
        msg = f"{path} is not a zip archive (TorchScript and AOTInductor packages both are): {exc}"
        raise ValueError(msg) from exc
    if any("/data/aotinductor/" in f"/{n}" for n in names):
        return of_pt2(path)
    return of_torchscript(path)


# --- TorchScript ---------------------------------------------------------------------------------------------


def of_torchscript(path: Path) -> Calls:
    calls: dict[tuple[str, Kind], Call] = {}
    unread: list[str] = []
    with zipfile.ZipFile(path) as archive:
        sources = [n for n in archive.namelist() if _inside(n, "code") and n.endswith(".py")]
        if not sources:
            unread.append(f"{path.name} holds no code/ folder: not a TorchScript archive this reader knows")
        for name in sorted(sources):
            where = _short(name)
            try:
                tree = ast.parse(archive.read(name).decode("utf-8"), filename=where)
            except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
                unread.append(
                    f"{where} does not parse as Python ({type(exc).__name__}: {exc}); its calls are unread"
                )
                continue
            for found, line in _builtins(tree):
                calls.setdefault(
                    (found[0], found[1]), Call(name=found[0], kind=found[1], where=f"{where}:{line}")
                )
    return Calls(path=path, format="torchscript", calls=tuple(sorted(calls.values())), unread=tuple(unread))


def _inside(member: str, folder: str) -> bool:
    """Whether an archive member lies in ``<archive>/<folder>/`` (the archive's own top folder is any name)."""
    parts = PurePosixPath(member).parts
    return len(parts) > 2 and parts[1] == folder


def _short(member: str) -> str:
    """``code/__torch__.py`` of ``resnet18/code/__torch__.py``."""
    return str(PurePosixPath(*PurePosixPath(member).parts[1:]))


def _builtins(tree: ast.AST) -> Iterator[tuple[tuple[str, Kind], int]]:
    """Each operator a TorchScript source names: ``torch.X(...)`` (aten), ``ops.NS.X(...)`` and
    ``torch.ops.NS.X(...)``; each TorchBind class it names (``__torch__.torch.classes.NS.Class``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            chain = _chain(node.func)
            if len(chain) == 2 and chain[0] == "torch":
                yield (f"aten::{chain[1]}", "builtin"), node.lineno
            elif len(chain) == 3 and chain[0] == "ops":
                yield (f"{chain[1]}::{chain[2]}", "builtin"), node.lineno
            elif len(chain) == 4 and chain[:2] == ["torch", "ops"]:
                yield (f"{chain[2]}::{chain[3]}", "builtin"), node.lineno
        elif isinstance(node, ast.Attribute):
            chain = _chain(node)
            if len(chain) >= 5 and chain[:3] == ["__torch__", "torch", "classes"]:
                yield (f"{chain[3]}::{chain[4]}", "class"), node.lineno


def _chain(node: ast.expr) -> list[str]:
    """``["torch", "ops", "aten", "add"]`` of ``torch.ops.aten.add``; empty where the base is not a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    return [node.id, *reversed(parts)]


# --- AOTInductor packages ------------------------------------------------------------------------------------


def of_pt2(path: Path) -> Calls:
    calls: dict[tuple[str, Kind], Call] = {}
    unread: list[str] = []
    with zipfile.ZipFile(path) as archive:
        members = [n for n in archive.namelist() if "/data/aotinductor/" in f"/{n}"]
        libraries = [n for n in members if n.endswith(".so")]
        if not libraries:
            unread.append(
                f"{path.name} holds no compiled shared library (a package written with package_cpp_only?): "
                "the shim functions it would import are unread"
            )
        for name in libraries:
            try:
                with archive.open(name) as raw:
                    imported = _imports(raw)
            except ValueError as exc:
                unread.append(f"{_short(name)}: {exc}")
                continue
            for shim in imported:
                calls.setdefault((shim, "shim"), Call(name=shim, kind="shim", where=_short(name)))
        for name in (n for n in members if n.endswith(".json") and not n.endswith("_metadata.json")):
            try:
                raw = json.loads(archive.read(name))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                unread.append(f"{_short(name)} is not JSON ({exc}): its proxy calls are unread")
                continue
            nodes = raw.get("nodes", []) if isinstance(raw, dict) else []
            for node in nodes:
                target = (node.get("node") or {}).get("target") if isinstance(node, dict) else None
                if isinstance(target, str) and "::" in target:
                    calls.setdefault((target, "proxy"), Call(name=target, kind="proxy", where=_short(name)))
    return Calls(path=path, format="pt2", calls=tuple(sorted(calls.values())), unread=tuple(unread))


def _imports(stream: IO[bytes]) -> set[str]:
    """The shim functions an ELF shared library imports (undefined ``aoti_torch_*`` dynamic symbols). A stored zip
    member is read in place (only its headers and symbol table); a compressed one, whole."""
    try:
        elf = ELFFile(stream if stream.seekable() else io.BytesIO(stream.read()))
        table = elf.get_section_by_name(".dynsym")
        if not isinstance(table, SymbolTableSection):
            return set()
        return {
            s.name
            for s in table.iter_symbols()
            if s.name.startswith(SHIM_PREFIX) and s["st_shndx"] == "SHN_UNDEF"
        }
    except ELFError as exc:
        msg = f"not a readable ELF file ({exc})"
        raise ValueError(msg) from exc
