"""What each libtorch registers, read from PyPI's torch of each minor that `nox -s compat` builds against.

    read_here() -> Registry    this torch's operators (name, overload, arguments), the aoti_torch_* shims its
                               libraries export, torchvision's operators where it imports beside it
    load() -> Registries       the shipped set (registries.json.gz, written by tritonpt_ci.compat alone)
    render(registries) -> str  docs/reference/operators.md: what each minor added and removed

`python -m tritonpt.operators.registry read --out FILE` writes this torch's (compat runs it in each environment);
without `read` it writes (or `--check`s) the page. Compact: every schema and shim once, a bit mask per torch.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gzip
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tritonpt import pages
from tritonpt.versions import minor_of, version_key

REGISTRIES = Path(__file__).with_name("registries.json.gz")
PAGE = Path("docs/reference/operators.md")  # relative to the repository root
REGENERATE = "python -m tritonpt.operators.registry"
SHIM_PREFIX = "aoti_torch_"
"""The C functions an AOTInductor package's shared library calls into libtorch for (its ``shim.h``)."""
SHIM_LIBRARIES = ("libtorch_cpu.so", "libtorch_cuda.so")
"""Where libtorch exports them: the CPU shims and the common ones, and the CUDA shims where the wheel has CUDA."""
TORCHVISION = "torchvision"
"""The namespace of torchvision's C++ operators (libtorchvision), which a backend links or not."""


def op_name(schema: str) -> str:
    """``aten::add.Tensor`` of ``aten::add.Tensor(Tensor self, ...) -> Tensor``."""
    return schema.partition("(")[0]


def base_name(qualified: str) -> str:
    """``aten::add`` of ``aten::add.Tensor``: what a TorchScript file names (its overload is chosen at load)."""
    namespace, _, rest = qualified.partition("::")
    return f"{namespace}::{rest.partition('.')[0]}"


@dataclass(frozen=True, kw_only=True)
class Registry:
    """One torch's registry: what a libtorch of its minor resolves at load."""

    torch: str  # torch.__version__: "2.14.1+cu130"
    torchvision: str = ""  # torchvision.__version__ where it imported beside it, else ""
    schemas: frozenset[str] = frozenset()  # "aten::linalg_polar(Tensor self) -> (Tensor U, Tensor P)"
    torchvision_schemas: frozenset[str] = frozenset()  # torchvision's (namespace torchvision::) schemas
    shims: frozenset[str] = frozenset()  # aoti_torch_* functions libtorch exports

    @property
    def minor(self) -> str:
        return minor_of(self.torch)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """Every ``ns::name.overload`` (``ns::name`` for the default overload), torchvision's not included."""
        return frozenset(op_name(s) for s in self.schemas)

    @functools.cached_property
    def base_names(self) -> frozenset[str]:
        return frozenset(base_name(n) for n in self.names)

    @functools.cached_property
    def torchvision_names(self) -> frozenset[str]:
        return frozenset(op_name(s) for s in self.torchvision_schemas)

    @functools.cached_property
    def torchvision_base_names(self) -> frozenset[str]:
        return frozenset(base_name(n) for n in self.torchvision_names)

    def has(self, op: str, *, torchvision: bool = False) -> bool:
        """Whether ``op`` resolves: ``ns::name`` (any overload, as TorchScript names it) or ``ns::name.overload``;
        ``torchvision``: the backend links libtorchvision of this minor."""
        qualified = "." in op.partition("::")[2]
        if op in (self.names if qualified else self.base_names):
            return True
        return torchvision and op in (self.torchvision_names if qualified else self.torchvision_base_names)


@dataclass(frozen=True, kw_only=True)
class Registries:
    """Every registry read, oldest torch first."""

    read: str  # the date of the reading
    registries: tuple[Registry, ...] = field(default_factory=tuple)

    def of_minor(self, minor: str) -> Registry | None:
        return next((r for r in self.registries if r.minor == minor), None)

    @property
    def minors(self) -> list[str]:
        return [r.minor for r in self.registries]

    @functools.cached_property
    def namespaces(self) -> frozenset[str]:
        """Every namespace a torch read registers, torchvision's included: the ones torch owns."""
        names = (n for r in self.registries for n in (*r.names, *r.torchvision_names))
        return frozenset(n.partition("::")[0] for n in names)

    def having(self, op: str, *, torchvision: bool = False) -> list[str]:
        """The minors whose registry resolves ``op``."""
        return [r.minor for r in self.registries if r.has(op, torchvision=torchvision)]

    def having_shim(self, shim: str) -> list[str]:
        return [r.minor for r in self.registries if shim in r.shims]

    def to_bytes(self) -> bytes:
        schemas = sorted({s for r in self.registries for s in (*r.schemas, *r.torchvision_schemas)})
        shims = sorted({s for r in self.registries for s in r.shims})
        raw = {
            "read": self.read,
            "schemas": schemas,
            "shims": shims,
            "torches": [
                {
                    "torch": r.torch,
                    "torchvision": r.torchvision,
                    "schemas": _mask(schemas, r.schemas),
                    "torchvision_schemas": _mask(schemas, r.torchvision_schemas),
                    "shims": _mask(shims, r.shims),
                }
                for r in self.registries
            ],
        }
        text = json.dumps(raw, indent=0, sort_keys=True) + "\n"
        return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes) -> Registries:
        raw = json.loads(gzip.decompress(data))
        schemas, shims = raw["schemas"], raw["shims"]
        return cls(
            read=raw["read"],
            registries=tuple(
                Registry(
                    torch=t["torch"],
                    torchvision=t["torchvision"],
                    schemas=_unmask(schemas, t["schemas"]),
                    torchvision_schemas=_unmask(schemas, t["torchvision_schemas"]),
                    shims=_unmask(shims, t["shims"]),
                )
                for t in raw["torches"]
            ),
        )

    def with_registries(self, found: Iterable[Registry]) -> Registries:
        """These registries, ``found`` replacing a registry of the same minor, ordered by torch."""
        by_minor = {r.minor: r for r in self.registries} | {r.minor: r for r in found}
        ordered = sorted(by_minor.values(), key=lambda r: version_key(r.minor))
        return Registries(read=datetime.date.today().isoformat(), registries=tuple(ordered))


def _mask(union: Sequence[str], members: frozenset[str]) -> str:
    """A hex bit mask over ``union``: bit i set where ``union[i]`` is a member."""
    bits = sum(1 << i for i, name in enumerate(union) if name in members)
    return format(bits, "x")


def _unmask(union: Sequence[str], mask: str) -> frozenset[str]:
    bits = int(mask, 16)
    return frozenset(name for i, name in enumerate(union) if bits >> i & 1)


def load(path: Path = REGISTRIES) -> Registries | None:
    """The shipped registries, or None where there are none (a checkout before the first compat --write)."""
    try:
        return Registries.from_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


# --- Reading this interpreter's torch ------------------------------------------------------------------------


def read_here() -> Registry:
    """This interpreter's torch: its schemas before torchvision is imported (what a libtorch without libtorchvision
    resolves), torchvision's own operators where it imports, and the shim functions libtorch's libraries export.
    What compat records is read in a fresh interpreter (``read --out``): one that imported more (torchvision, the
    inductor) holds the operators those register too."""
    import torch  # noqa: PLC0415 - the registry is the imported torch's

    schemas = frozenset(str(s) for s in torch._C._jit_get_all_schemas())  # noqa: SLF001 - the registry itself
    vision, vision_schemas = _torchvision(schemas)
    lib = Path(torch.__file__).parent / "lib"
    shims = frozenset(
        name for library in SHIM_LIBRARIES if (lib / library).is_file() for name in exported(lib / library)
    )
    return Registry(
        torch=str(torch.__version__),
        torchvision=vision,
        schemas=schemas,
        torchvision_schemas=vision_schemas,
        shims=shims,
    )


def _torchvision(before: frozenset[str]) -> tuple[str, frozenset[str]]:
    """torchvision's version and the ``torchvision::`` schemas its import adds; nothing where it does not import."""
    import torch  # noqa: PLC0415 - as read_here

    try:
        import torchvision  # noqa: PLC0415 - registers its operators at import
    except Exception:
        return "", frozenset()
    after = {str(s) for s in torch._C._jit_get_all_schemas()}  # noqa: SLF001
    return str(torchvision.__version__), frozenset(
        s for s in after - before if s.startswith(f"{TORCHVISION}::")
    )


def exported(library: Path, prefix: str = SHIM_PREFIX) -> set[str]:
    """The functions whose names start with ``prefix`` that ``library`` defines in its dynamic symbol table."""
    from elftools.elf.elffile import ELFFile  # noqa: PLC0415 - only where a registry is read
    from elftools.elf.sections import SymbolTableSection  # noqa: PLC0415

    with library.open("rb") as handle:
        table = ELFFile(handle).get_section_by_name(".dynsym")
        if not isinstance(table, SymbolTableSection):
            return set()
        return {
            s.name for s in table.iter_symbols() if s.name.startswith(prefix) and s["st_shndx"] != "SHN_UNDEF"
        }


# --- The page ------------------------------------------------------------------------------------------------


def render(registries: Registries | None) -> str:
    """docs/reference/operators.md."""
    lines = [
        "# The operators each libtorch registers",
        "",
        f"<!-- Written by `{REGENERATE}` from src/tritonpt/operators/registries.json.gz; do not edit by hand. -->",
        "",
        "Read by `nox -s compat` from PyPI's torch of each minor its legs build against:",
        "`torch._C._jit_get_all_schemas()` before torchvision is imported (what the pytorch backend's libtorch",
        "resolves when a TorchScript file names an operator, and what an AOTInductor package's proxy executor looks",
        "up), the `torchvision::` operators torchvision of the same minor adds, and the `aoti_torch_*` functions",
        "`libtorch_cpu.so` and `libtorch_cuda.so` export (what a package's shared library imports). `tritonpt doctor`",
        "holds each model's own calls to the minor of the release it is asked about. NGC bundles pre-release",
        "snapshots (`2.14.0a0+…`); the PyPI release of the same minor stands in for each.",
        "",
    ]
    if registries is None or not registries.registries:
        return "\n".join([*lines, "Nothing read yet: run `nox -s compat -- --write`.", ""])
    lines += [
        f"Read {registries.read}.",
        "",
        "| torch | torchvision | schemas | added since the minor before | removed | shim functions |",
        "|---|---|---|---|---|---|",
    ]
    before: Registry | None = None
    changes: list[str] = []
    for r in registries.registries:
        added = sorted(r.names - before.names) if before else []
        removed = sorted(before.names - r.names) if before else []
        lines.append(
            f"| {r.torch} | {r.torchvision or 'none'} | {len(r.schemas):,} | "
            f"{len(added) if before else ''} | {len(removed) if before else ''} | {len(r.shims):,} |"
        )
        if before is not None and (added or removed):
            changes.append(f"## {before.minor} → {r.minor}")
            changes.append("")
            if added:
                changes.append(f"Added ({len(added)}): " + ", ".join(f"`{n}`" for n in added))
                changes.append("")
            if removed:
                changes.append(f"Removed ({len(removed)}): " + ", ".join(f"`{n}`" for n in removed))
                changes.append("")
        before = r
    return "\n".join([*lines, "", *changes]).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["read"]:
        parser = argparse.ArgumentParser(prog=f"{REGENERATE} read", description="this interpreter's registry")
        parser.add_argument(
            "--out", type=Path, required=True, help="the file to write (as registries.json.gz)"
        )
        out: Path = parser.parse_args(args[1:]).out
        out.parent.mkdir(parents=True, exist_ok=True)
        today = datetime.date.today().isoformat()
        out.write_bytes(Registries(read=today, registries=(read_here(),)).to_bytes())
        return 0
    return pages.main(
        args, prog=REGENERATE, description=__doc__.splitlines()[0], page=PAGE, render=lambda: render(load())
    )


if __name__ == "__main__":
    sys.exit(main())
