"""Which torch's exports each libtorch minor serves, as `nox -s compat` measured it: the table the doctor reads.

    TABLE                     src/tritonpt/doctor/compat.json: written by tritonpt_ci.compat, nothing else
    load() -> Table           typed; Table.pair(exported, served_minor, fmt) -> the measured Pair or None
    render(table) -> str      docs/reference/compat.md (a unit test holds the committed page equal to it)

`python -m tritonpt.doctor.compat` rewrites docs/reference/compat.md from the table; with `--check` it exits 1
when the committed page is stale.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from tritonpt import pages
from tritonpt.versions import VERSIONS, TritonRelease, Versions, minor_of, version_key

TABLE = Path(__file__).with_name("compat.json")
PAGE = Path("docs/reference/compat.md")  # relative to the repository root
REGENERATE = "python -m tritonpt.doctor.compat"
FORMATS = {
    "torchscript": "TorchScript (`model.pt`, pytorch_libtorch)",
    "pt2": "PT2 (`model.pt2`, torch_aoti)",
}

Verdict = Literal["parity", "refused at load", "outputs differ", "partly served", "not exported", "not built"]
NOT_BUILT = "not built"
"""How a model's error starts where the backend could not be built against the serving torch (the compiler's
first error follows)."""
OPERATOR_REFUSALS = ("Unknown builtin op", "Could not find schema", "undefined symbol")
"""How a server's load error starts where the serving libtorch lacks what the file calls (tritonpt.operators.calls)."""


@dataclass(frozen=True, kw_only=True)
class ModelResult:
    """One model of a pair: whether the server loaded it, its own words where it did not, and its parity."""

    model: str
    loads: bool
    parity: bool = False
    max_abs_error: float | None = None
    error: str = ""  # the server's load error, the export's, or the checks that failed
    predicted: str = ""  # the doctor's prediction from the file's calls: "" loads, else the refusal it names

    @property
    def disagrees(self) -> bool:
        """Whether the server did other than the doctor predicted: refused what was to load for a missing
        operator, or loaded what was to be refused."""
        if self.error.startswith(("not exported", NOT_BUILT)):
            return False
        if self.predicted:
            return self.loads or self.predicted not in self.error
        return not self.loads and any(word in self.error for word in OPERATOR_REFUSALS)


@dataclass(frozen=True, kw_only=True)
class Pair:
    exported_by: str  # torch.__version__ of the export: "2.9.1+cu128"
    served_by: str  # the torch the backend was built against and serves with: "2.12.1+cu130"
    line: str  # "pytorch_backend r26.05 (55bbe27)"
    format: Literal["torchscript", "pt2"]
    models: tuple[ModelResult, ...]

    @property
    def exported_minor(self) -> str:
        return minor_of(self.exported_by)

    @property
    def served_minor(self) -> str:
        return minor_of(self.served_by)

    @property
    def expected(self) -> tuple[ModelResult, ...]:
        """The models the doctor predicts to load: a pair's verdict is theirs (an edge model whose operator the
        serving libtorch lacks is a refusal foretold, shown per model)."""
        return tuple(m for m in self.models if not m.predicted)

    @property
    def disagreements(self) -> tuple[ModelResult, ...]:
        return tuple(m for m in self.models if m.disagrees)

    @property
    def verdict(self) -> Verdict:
        exported = [m for m in self.expected if not m.error.startswith("not exported")]
        loaded = [m for m in exported if m.loads]
        if not exported:
            return "not exported"
        if all(m.error.startswith(NOT_BUILT) for m in exported):
            return "not built"
        if not loaded:
            return "refused at load"
        if any(not m.parity for m in loaded):
            return "outputs differ"
        return "parity" if len(loaded) == len(self.expected) else "partly served"

    def describe(self) -> str:
        """One sentence: what was served, on what, and what came of it."""
        served = f"{len(self.expected)} {FORMATS[self.format].split(' ')[0]} models"
        head = f"torch {self.exported_by}'s exports on {self.line} against libtorch {self.served_by}"
        refused = (
            "; refused as the doctor predicted: "
            + "; ".join(f"{m.model} ({m.predicted})" for m in self.foretold)
            if self.foretold
            else ""
        )
        if self.verdict == "parity":
            worst = max((m.max_abs_error or 0.0) for m in self.expected)
            return f"{head}: {served} loaded and served with parity (max abs error {worst:.2g}){refused}"
        problems = "; ".join(
            f"{m.model}: {m.error or 'outputs differ'}" for m in self.expected if not (m.loads and m.parity)
        )
        return f"{head}: {self.verdict} ({problems}){refused}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Pair:
        return cls(**{**raw, "models": tuple(ModelResult(**m) for m in raw["models"])})

    @property
    def first_error(self) -> str:
        """The first error of a model the doctor predicted to load."""
        return next((m.error for m in self.expected if m.error), "")

    @property
    def foretold(self) -> tuple[ModelResult, ...]:
        """The models refused as the doctor predicted from their calls."""
        return tuple(m for m in self.models if m.predicted and not m.loads and not m.disagrees)


@dataclass(frozen=True, kw_only=True)
class Table:
    measured: str  # the date of the run
    server: str  # the embedded tritonserver that served every pair
    lines: dict[str, str] = field(default_factory=dict)  # line -> its pinned pytorch_backend commit
    pairs: tuple[Pair, ...] = ()

    def pair(self, exported_minor: str, served_minor: str, fmt: str) -> Pair | None:
        """The measured pair of these minors and format, or None: not measured."""
        return next(
            (
                p
                for p in self.pairs
                if p.exported_minor == exported_minor and p.served_minor == served_minor and p.format == fmt
            ),
            None,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Table:
        raw = json.loads(text)
        pairs = tuple(Pair.from_dict(p) for p in raw.pop("pairs", ()))
        return cls(**raw, pairs=pairs)

    def verdicts(self) -> dict[str, str]:
        """Each pair's verdict and each model's, by a key that does not hold the date or the figures: what a fresh
        measurement is held equal to."""
        said: dict[str, str] = {}
        for p in self.pairs:
            key = f"{p.exported_minor} -> {p.served_minor} {p.format}"
            said[key] = p.verdict
            for m in p.models:
                said[f"{key} {m.model}"] = (
                    "parity" if m.loads and m.parity else ("loads" if m.loads else "refused")
                )
        return said


def load(path: Path = TABLE) -> Table | None:
    """The shipped table, or None where there is none (a checkout before the first `nox -s compat -- --write`)."""
    try:
        return Table.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _releases(minor: str, model_format: str, versions: Versions) -> list[TritonRelease]:
    """The NGC Triton releases whose pytorch backend bundles libtorch of this minor and serves ``model_format``
    (a PT2 package only where the release's backend serves ``torch_aoti``)."""
    return [
        r for r in versions.triton_releases if r.backend_torch and minor_of(r.backend_torch) == minor
        and (model_format != "pt2" or r.serves_torch_aoti)
    ]  # fmt: skip


def releases_of(minor: str, versions: Versions = VERSIONS, *, model_format: str = "torchscript") -> list[str]:
    """The NGC releases (``26.03``) whose libtorch is this minor and whose backend serves ``model_format``."""
    return [r.ngc for r in _releases(minor, model_format, versions)]


def stands_in_for(pair: Pair, versions: Versions = VERSIONS) -> list[str]:
    """The branches (``r26.07``) of the releases of the pair's serving minor that serve its format and are not the
    line it was served on: the rows the measured line stands in for."""
    entry = versions.compat_torch(pair.served_minor)
    line = entry.line if entry else ""
    return [r.line for r in _releases(pair.served_minor, pair.format, versions) if r.line != line]


def render(table: Table | None, versions: Versions = VERSIONS) -> str:
    """docs/reference/compat.md."""
    lines = [
        "# Which PyTorch exports each Triton release serves",
        "",
        f"<!-- Written by `{REGENERATE}` from src/tritonpt/doctor/compat.json; do not edit by hand. -->",
        "",
        "Measured by `nox -s compat` (CI runs it on every run): for each libtorch minor an NGC Triton release's",
        "pytorch backend bundles, the official backend of the line NGC ships with it, built from the pinned sources",
        "against PyPI's torch of that minor (CPU variant), served the built-in set exported by another torch on",
        "the embedded tritonserver, and the integration matrix judged it: loaded or refused (the server's own",
        "words), parity with the exporting torch's eager outputs or not. `tritonpt doctor` reads the same table.",
        "",
        "A pair is measured for these models; a model of yours is judged by what its own file calls (`tritonpt",
        "doctor`, [the operators each libtorch registers](operators.md)). So each set also holds edge models",
        "(tools/tritonpt_ci/edges.py), each calling an operator that entered or left torch between these minors,",
        "exported by the torches that have it: `edge_polar` calls `aten::linalg_polar` (new in 2.14), exported",
        "by torch 2.15; `edge_cholesky` calls `aten::cholesky` (gone in 2.14), exported by torch 2.9.1. For every",
        "model served, the doctor's prediction from the file is held to what the server did, and the run fails",
        "on any disagreement. A pair's verdict is that of the models predicted to load; a refusal the doctor",
        "foretold is shown beside it, in the server's words.",
        "",
    ]
    if table is None or not table.pairs:
        return "\n".join([*lines, "Nothing measured yet: run `nox -s compat -- --write`.", ""])
    lines += [
        f"Measured {table.measured} on tritonserver {table.server} (CPU). Lines: "
        + ", ".join(f"pytorch_backend {ref} at `{commit}`" for ref, commit in sorted(table.lines.items()))
        + ".",
        "",
        "| exported by | served by libtorch (NGC releases of that minor) | backend | format | verdict |",
        "|---|---|---|---|---|",
    ]
    for p in sorted(table.pairs, key=_order):
        found = releases_of(p.served_minor, versions, model_format=p.format)
        releases = ", ".join(found) or (
            "no release of it serves torch_aoti"
            if releases_of(p.served_minor, versions)
            else "no release states it"
        )
        verdict = p.verdict if p.verdict == "parity" else f"{p.verdict}: {_cell(p.first_error)}"
        if p.foretold:
            verdict += "; refused as the doctor predicted: " + ", ".join(
                f"{m.model} (`{m.predicted}`)" for m in p.foretold
            )
        if p.disagreements:
            verdict += "; **against the doctor's prediction**: " + ", ".join(m.model for m in p.disagreements)
        line = p.line + (f", standing in for {', '.join(s)}" if (s := stands_in_for(p, versions)) else "")
        lines.append(
            f"| torch {p.exported_by} | {p.served_by} ({releases}) | {line} | {p.format} | {verdict} |"
        )
    lines += [
        "",
        "What NGC ships is not what was served here: NGC bundles pre-release libtorch snapshots (`2.x.0a0+<commit>`),",
        "built with CUDA; PyPI has the minor's release. The same minor is the closest pair a CPU machine can build.",
        "Each release is served on the pinned line nearest its own branch: the stored pytorch_backend sources end",
        "at r26.05, so r26.05 stands in for every release after it, and r25.10 for the releases around it; the",
        "backend column names the branches each row stands in for. PT2 is served only where the line has the PT2",
        "path (r26.03 on). Models, per pair:",
        "",
    ]
    for p in sorted(table.pairs, key=_order):
        lines.append(
            f"- torch {p.exported_by} -> {p.served_by}, {p.format}: "
            + ", ".join(_model_cell(m) for m in p.models)
        )
    return "\n".join(lines) + "\n"


def _order(pair: Pair) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """Exporting torch, then serving minor, oldest first; TorchScript before PT2."""
    return (
        version_key(pair.exported_minor),
        version_key(pair.served_minor),
        "b" if pair.format == "pt2" else "a",
    )


def _cell(text: str) -> str:
    one = " ".join(text.split())
    return (one[:160] + "...") if len(one) > 160 else one.replace("|", "\\|")


def _model_cell(m: ModelResult) -> str:
    if m.disagrees:
        return f"{m.model} {'loads' if m.loads else 'refused'}, against the doctor's prediction ({m.predicted or 'loads'})"
    if m.loads and m.parity:
        return f"{m.model} parity ({m.max_abs_error or 0.0:.2g})"
    if not m.loads and m.predicted:
        return f"{m.model} refused as the doctor predicted (`{m.predicted}`)"
    return f"{m.model} {'loads, outputs differ' if m.loads else 'refused'}"


def main(argv: list[str] | None = None) -> int:
    return pages.main(
        argv, prog=REGENERATE, description=__doc__.splitlines()[0], page=PAGE, render=lambda: render(load())
    )


if __name__ == "__main__":
    sys.exit(main())
