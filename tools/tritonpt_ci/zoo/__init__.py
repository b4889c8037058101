"""The zoo: public architectures, as their libraries build them, exported and served by one real Triton.

    export_all(...)   each architecture through ``export_factory`` (``invoke export --model``), or its refusal
    serve_all(...)    one tritonserver loads every export; each reference case over HTTP and gRPC vs eager
    run(...)          both, as a ZooReport: reports/zoo/zoo.json and zoo.md (``--page``: the docs' table too)

`nox -s zoo` and `nox -s zoo-smoke` run it. It fails on a load or parity miss, a refusal that
EXPECTED_REFUSALS does not list (or a listed one that no longer happens), or under :data:`GOAL` with parity.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonpt import assertions, client, export, reference
from tritonpt.errors import ModelLoadError, TritonPtError
from tritonpt.repository import ModelDir
from tritonpt.server import LocalServer, TritonFlags
from tritonpt_ci.zoo.architectures import ARCHITECTURES, EXPECTED_REFUSALS, Architecture

GOAL = 0.9
"""The share of architectures that must be served with parity."""
PAGE = Path("docs/figures/zoo.md")
"""The zoo's page of the documentation site (relative to the repository root): its table is the zoo's."""
TABLE_START, TABLE_END = "<!-- zoo:start -->", "<!-- zoo:end -->"

Step = Callable[[str], None]


@dataclass(kw_only=True)
class Row:
    """One architecture: what export said, whether Triton served it, and how close it came to eager."""

    name: str
    library: str
    version: str
    family: str
    exported: bool = False
    refusal: str = ""  # export's reason, when it refused
    export_s: float = 0.0
    notes: list[str] = field(default_factory=list)  # what export did to serve it as given
    served: bool = False
    load_error: str = ""
    checks: int = 0  # reference cases x protocols sent
    max_abs_error: float = 0.0
    tolerance: str = ""  # of the worst output
    parity_failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exported and self.served and self.checks > 0 and not self.parity_failures


def _reason(exc: BaseException) -> str:
    """Export's message without the model's name in front and without the Hint: sentence."""
    text = str(exc).split("\nHint:", 1)[0].split(" Hint: ", 1)[0].strip()
    if text.startswith("Model '") and "': " in text:
        text = text.split("': ", 1)[1]
    return " ".join(text.split())


def _version(library: str) -> str:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def export_all(architectures: Sequence[Architecture], repository: Path, step: Step) -> list[Row]:
    rows = []
    for arch in architectures:
        row = Row(name=arch.name, library=arch.library, version=_version(arch.library), family=arch.family)
        started = time.perf_counter()
        try:
            result = export.export_factory(arch.build, name=arch.name, repository=repository)
        except (TritonPtError, ImportError) as exc:  # a refusal is a row, with export's reason
            row.refusal = _reason(exc)
            step(f"zoo: {arch.name}: refused: {row.refusal[:160]}")
        else:
            row.exported, row.notes = True, list(result.notes)
            step(f"zoo: {arch.name}: exported in {time.perf_counter() - started:.1f} s")
        row.export_s = round(time.perf_counter() - started, 2)
        rows.append(row)
    return rows


def serve_all(rows: Sequence[Row], repository: Path, reports: Path, step: Step) -> str:
    """Serve every exported model in one server and check parity; returns the server's description."""
    exported = [r for r in rows if r.exported]
    if not exported:
        return "no server: nothing was exported"
    flags = TritonFlags(model_repository=repository)
    with LocalServer(flags, log_path=reports / "tritonserver.log") as server:
        try:
            server.wait_models_ready([r.name for r in exported], timeout=600)
        except ModelLoadError as exc:
            for row in exported:
                row.load_error = exc.reasons.get(row.name, "")
        for row in exported:
            row.served = not row.load_error
            if row.served:
                _parity(row, ModelDir(root=repository / row.name), server.endpoints, server)
                step(f"zoo: {row.name}: {row.checks} checks, max abs error {row.max_abs_error:.3g}")
        origin = server.backend_origin()
        version = server.install.version if server.install else "unknown"
    return f"tritonserver {version}, {origin.describe() if origin else 'its own pytorch backend'}"


def _parity(row: Row, model: ModelDir, endpoints: client.Endpoints, server: LocalServer) -> None:
    ref = reference.load(model)
    config = server.model_config(row.name)
    gpu = assertions.served_on_gpu(config)
    names = [t.name for t in config.input]
    by_name = {info.name: i for i, info in enumerate(ref.inputs)}
    worst = -1.0
    for case in ref.cases:
        inputs = {n: case.inputs[by_name[n]] for n in names}
        for protocol in client.PROTOCOLS:
            try:
                got = client.infer(endpoints, protocol, row.name, inputs, [o.name for o in ref.outputs])
            except Exception as exc:
                row.parity_failures.append(f"{case.id} over {protocol}: {type(exc).__name__}: {exc}"[:300])
                continue
            row.checks += 1
            for comparison in assertions.compare_outputs(ref.outputs, got, case.outputs, gpu=gpu):
                if not comparison.ok:
                    row.parity_failures.append(f"{case.id} over {protocol}: {comparison.describe()}"[:300])
                if comparison.max_abs_error > worst:
                    worst = comparison.max_abs_error
                    row.tolerance = f"atol {comparison.tolerance.atol:g}, rtol {comparison.tolerance.rtol:g}"
    row.max_abs_error = max(worst, 0.0)


@dataclass(kw_only=True)
class ZooReport:
    rows: list[Row]
    server: str
    seconds: float

    @property
    def served_share(self) -> float:
        return sum(r.ok for r in self.rows) / len(self.rows) if self.rows else 0.0

    def problems(self) -> list[str]:
        found = [
            f"{r.name}: exported, but Triton did not load it: {r.load_error}"
            for r in self.rows
            if r.exported and not r.served
        ]
        found += [f"{r.name}: {f}" for r in self.rows if r.served for f in r.parity_failures]
        found += refusal_problems(self.rows)
        if self.served_share < GOAL:
            found.append(
                f"{self.served_share:.0%} of the architectures are served with parity; the goal is {GOAL:.0%}"
            )
        return found

    def table(self) -> str:
        lines = [
            "| architecture | library | exported | served | parity: max abs error (tolerance) | export s |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            exported = (
                "yes" + (f" ({'; '.join(r.notes)})" if r.notes else "") if r.exported else f"no: {r.refusal}"
            )
            served = "yes" if r.served else (f"no: {r.load_error}" if r.exported else "")
            parity = (
                f"{r.max_abs_error:.2g} ({r.tolerance}), {r.checks} checks"
                if r.ok
                else "; ".join(r.parity_failures[:2])
                if r.parity_failures
                else ""
            )
            lines.append(
                f"| {r.name} ({r.family}) | {r.library} {r.version} | {exported.replace('|', '/')} | "
                f"{served.replace('|', '/')} | {parity.replace('|', '/')} | {r.export_s:.1f} |"
            )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        served = sum(r.ok for r in self.rows)
        return (
            f"# The zoo\n\n{served} of {len(self.rows)} architectures ({self.served_share:.0%}) exported and served "
            f"with parity by {self.server}, in {self.seconds:.0f} s. Random weights; every reference case over "
            "HTTP and gRPC against eager PyTorch with the tolerances export recorded.\n\n" + self.table()
        )

    def write(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        data = {"server": self.server, "seconds": round(self.seconds, 1), "served_share": self.served_share,
                "goal": GOAL, "rows": [asdict(r) for r in self.rows]}  # fmt: skip
        (folder / "zoo.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        (folder / "zoo.md").write_text(self.to_markdown(), encoding="utf-8")
        return [folder / "zoo.json", folder / "zoo.md"]

    def into_page(self, page: Path) -> None:
        text = page.read_text(encoding="utf-8")
        start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
        summary = (
            f"\n{sum(r.ok for r in self.rows)} of {len(self.rows)} served with parity ({self.served_share:.0%}), "
            f"{self.server}, {self.seconds:.0f} s on this machine (`nox -s zoo`).\n\n"
        )
        page.write_text(text[:start] + summary + self.table() + text[end:], encoding="utf-8")


def refusal_problems(rows: Sequence[Row]) -> list[str]:
    """Refusals that are not the expected ones, and expected ones that no longer happen."""
    found = []
    for r in rows:
        expected = EXPECTED_REFUSALS.get(r.name)
        if not r.exported and expected is None:
            found.append(
                f"{r.name}: export refused it, and no refusal of it is expected (zoo/architectures.py "
                f"EXPECTED_REFUSALS): {r.refusal}"
            )
        elif not r.exported and expected is not None and expected.says not in r.refusal:
            found.append(
                f"{r.name}: export refused it for another reason than the expected one ({expected.says!r}): "
                f"{r.refusal}"
            )
        elif r.exported and expected is not None:
            found.append(
                f"{r.name}: EXPECTED_REFUSALS says export refuses it ({expected.why}), and export took it: take it "
                "off the list if it now serves"
            )
    return found


def run(architectures: Sequence[Architecture], *, reports: Path, step: Step) -> ZooReport:
    started = time.perf_counter()
    repository = reports / "repository"
    rows = export_all(architectures, repository, step)
    server = serve_all(rows, repository, reports, step)
    return ZooReport(rows=rows, server=server, seconds=time.perf_counter() - started)


def chosen(*, smoke: bool, only: Sequence[str]) -> list[Architecture]:
    known = {a.name: a for a in ARCHITECTURES}
    unknown = [n for n in only if n not in known]
    if unknown:
        msg = f"unknown architecture(s) {', '.join(unknown)}; the zoo has {', '.join(known)}"
        raise SystemExit(msg)
    if only:
        return [known[n] for n in only]
    return [a for a in ARCHITECTURES if a.smoke or not smoke]
