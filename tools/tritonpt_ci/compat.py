"""`nox -s compat`: every libtorch minor an NGC release bundles, served the exports of another torch, measured.

    python -m tritonpt_ci.compat [--write] [--reports reports/compat]    the whole run (what nox runs)
    python -m tritonpt_ci.compat --minor 2.15 [--write]                 the legs a new torch adds
    python -m tritonpt_ci.compat leg --repository DIR --out FILE         one pair, in the serving torch's env

Each leg serves one torch's exports on the official backend built against another torch and runs the matrix.
The verdicts are held to src/tritonpt/doctor/compat.json; ``--write`` records them there and in
docs/reference/compat.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tritonpt import backend, caches, reference, scratch
from tritonpt.doctor import compat, needs
from tritonpt.doctor.compat import NOT_BUILT
from tritonpt.errors import BackendError, BuildError, TritonPtError, first_line
from tritonpt.operators import calls, predict, registry
from tritonpt.options import add_arguments
from tritonpt.repository import ModelDir, pt2_models, read_config
from tritonpt.repository import models as models_of
from tritonpt.server.local import LocalServer, TritonFlags
from tritonpt.versions import VERSIONS, CompatTorch, minor_of
from tritonpt_ci import venvs

ROOT = Path(__file__).resolve().parents[2]
"""The checkout (compat runs from one: its environments are keyed by its pyproject.toml)."""
SIDE_BY_SIDE = 3
"""Legs at once: each is one server and one matrix, mostly starting (a torch of its own read from disk) or waiting
on each other; three finish first on two cores (134 s for the run with two, warm; see docs/figures/ci.md)."""


PARITY = "test_parity and not dynamic_batching"
"""The matrix's checks a leg runs: each model at each reference case over both protocols (its parity rows) and, for
a PT2 package, at every batch size; what a pair's verdict is made of. The rest of the matrix (health, errors,
batching) is the server's and the backend's, which `nox -s integration` holds on the project's own build."""


def _say(line: str) -> None:
    print(f"compat: {line}", file=sys.stderr, flush=True)


# --- One leg: in the environment of the serving torch ---------------------------------------------------------


def leg(repository: Path, out: Path, reports: Path) -> int:
    """Serve ``repository`` on this environment's torch with the official backend of its minor's line; write
    the pairs (one per format served) to ``out``."""
    torch = backend.Torch.locate()
    entry = VERSIONS.compat_torch(minor_of(torch.version))
    if entry is None:
        _say(f"torch {torch.version} has no line in versions.toml [compat]")
        return 2
    pins = VERSIONS.line(entry.line)
    serves_pt2 = pins is VERSIONS.pt2.build
    line = f"pytorch_backend {pins.pytorch_backend.ref} ({pins.pytorch_backend.commit[:7]})"
    exported = _exported_by(repository)
    pt2 = {m.name for m in pt2_models(repository)}
    models = [m.name for m in models_of(repository)]
    served = [m for m in models if serves_pt2 or m not in pt2]
    failed = _export_failures(repository)
    reports.mkdir(parents=True, exist_ok=True)
    try:
        built = backend.ensure(pins=pins, step=_say)
    except BackendError as exc:  # a verdict of its own: the torch (or this machine) cannot build this line
        first = exc.first_error if isinstance(exc, BuildError) else first_line(exc)
        _say(f"the build failed: {first}")
        error = f"{NOT_BUILT}: {first}"
        states: dict[str, tuple[bool, str]] = dict.fromkeys(served, (False, error))
        rows: dict[str, list[dict[str, object]]] = {}
    else:
        with scratch.folder("tritonpt-compat-") as view:
            for name in served:
                (view / name).symlink_to((repository / name).resolve(), target_is_directory=True)
            states, rows = _serve(view, built if serves_pt2 else None, built, reports)
    foretold = _predictions(repository, served, minor_of(torch.version))
    pairs = []
    for fmt in ("torchscript", "pt2") if serves_pt2 else ("torchscript",):
        results = [
            dataclasses.replace(
                model_result(name, states.get(name, (False, "")), rows.get(name, [])),
                predicted=foretold[name],
            )
            for name in served
            if (name in pt2) == (fmt == "pt2")
        ]
        results += [
            compat.ModelResult(model=name, loads=False, error=f"not exported: {why}")
            for name, why in failed.get(fmt, {}).items()
        ]
        if results:
            pairs.append(
                compat.Pair(
                    exported_by=exported,
                    served_by=torch.version,
                    line=line,
                    format=fmt,
                    models=tuple(results),
                )
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([p.to_dict() for p in pairs], indent=2) + "\n", encoding="utf-8")
    for p in pairs:
        _say(p.describe())
    return 0


def _predictions(repository: Path, served: Sequence[str], minor: str) -> dict[str, str]:
    """The doctor's prediction for each model from its file's calls and the shipped registry of ``minor`` (our
    builds link no libtorchvision): "" where it loads, else the refusal it names."""
    shipped = registry.load()
    held = shipped.of_minor(minor) if shipped is not None else None
    if shipped is None or held is None:
        _say(f"no shipped registry of torch {minor}: every model is predicted to load")
        return dict.fromkeys(served, "")
    said = {}
    for name in served:
        model = ModelDir(root=repository / name)
        files = needs.model_files(model, read_config(model.config))
        predictions = [predict.predict(calls.of_file(f), held, shipped, torchvision=False) for f in files]
        said[name] = next((p.first_refusal for p in predictions if not p.loads), "")
    return said


def _serve(
    view: Path, pt2_build: backend.BuiltBackend | None, built: backend.BuiltBackend, reports: Path
) -> tuple[dict[str, tuple[bool, str]], dict[str, list[dict[str, object]]]]:
    """Each model's load state (ready, the server's reason) and its parity rows, from one server and one matrix."""
    server = LocalServer(
        TritonFlags(model_repository=view),
        pytorch_backend=built,
        pt2_backend=pt2_build,
        log_path=reports / "tritonserver.log",
    )
    with server, scratch.folder("tritonpt-compat-ready-") as ready:
        states = {m.name: (m.state == "READY", _first_words(m.reason)) for m in server.repository_index()}
        for name, (
            loaded,
            _,
        ) in states.items():  # the matrix holds every model of its repository to be served
            if loaded:
                (ready / name).symlink_to((view / name).resolve(), target_is_directory=True)
        command = [
            sys.executable, "-m", "tritonpt.matrix", "--target", "url",
            "--url", f"http://{server.endpoints.http}", "--grpc-url", server.endpoints.grpc,
            "--metrics-url", server.endpoints.metrics_url, "--repository", str(ready),
            "--reports", str(reports), "--skip-validation", "-q", "-p", "no:randomly", "-k", PARITY,
        ]  # fmt: skip
        with (reports / "matrix.log").open("wb") as log:
            subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    summary = reports / "summary.json"
    rows: dict[str, list[dict[str, object]]] = {}
    if summary.is_file():
        for row in json.loads(summary.read_text(encoding="utf-8")).get("parity", []):
            rows.setdefault(str(row["model"]), []).append(row)
    return states, rows


def _first_words(reason: str) -> str:
    """The server's reason on one line, without the C++ backtrace torch appends (``Exception raised from ...``)."""
    return " ".join(reason.split()).split(" Exception raised from ")[0][:500]


def model_result(name: str, state: tuple[bool, str], rows: list[dict[str, object]]) -> compat.ModelResult:
    loads, reason = state
    if not loads:
        return compat.ModelResult(model=name, loads=False, error=" ".join((reason or "not loaded").split()))
    bad = [r for r in rows if not r["ok"]]
    worst = max((float(r["max_abs_error"]) for r in rows), default=None)  # type: ignore[arg-type]
    if not rows:
        return compat.ModelResult(model=name, loads=True, error="loaded, but no parity check ran")
    detail = "; ".join(f"{r['case']} b{r['batch_size']} {r['protocol']}: {r['detail']}" for r in bad[:2])
    return compat.ModelResult(model=name, loads=True, parity=not bad, max_abs_error=worst, error=detail)


def _exported_by(repository: Path) -> str:
    versions = {
        reference.load(model).provenance.torch_version
        for model in models_of(repository)
        if reference.exists(model)
    }
    if len(versions) != 1:
        msg = f"{repository}: expected one exporting torch in its reference.json files, found {sorted(versions)}"
        raise TritonPtError(msg)
    return str(versions.pop())


FAILED = "export-failures.json"
"""Beside an exported set: the models the export could not make, by format, with why (the reverse leg's export
by a newer torch may refuse some; they are listed, not hidden)."""


def _export_failures(repository: Path) -> dict[str, dict[str, str]]:
    path = repository / FAILED
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


# --- The run: environments, exports, legs, the table ----------------------------------------------------------


def _env(entry: CompatTorch) -> venvs.Env:
    return venvs.shared(
        ROOT,
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        groups=("test",),
        packages=(f"cmake=={VERSIONS.backend.cmake}",),
        overrides=entry.pins,
        label=f"compat-torch{entry.torch}",
        say=_say,
    )


def _run_in(env: venvs.Env | None, args: Sequence[str], log: Path) -> int:
    python = env.python if env else sys.executable
    variables = {**os.environ, **(env.variables(ROOT) if env else {})}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        return subprocess.run(
            [python, *args], stdout=handle, stderr=subprocess.STDOUT, env=variables, check=False
        ).returncode


def _export(env: venvs.Env | None, into: Path, reports: Path, label: str) -> None:
    """The built-in set, both formats, exported by ``env``'s torch into ``into`` (the export cache's, where it
    has them); a model it cannot export is written to :data:`FAILED` with the export's last words."""
    log = reports / f"export-{label}.log"
    _say(f"exporting the built-in set and the edge models with torch {label} into {into}")
    edges = reports / f"export-edges-{label}.log"
    if _run_in(env, ["-m", "tritonpt_ci.edges", "--repository", str(into)], edges) != 0:
        msg = f"torch {label} could not export the edge models (tritonpt_ci.edges): see {edges}"
        raise TritonPtError(msg)
    code = _run_in(env, ["-m", "tritonpt", "export", "--format", "both", "--repository", str(into)], log)
    if code != 0:
        tail = " ".join(log.read_text(encoding="utf-8", errors="replace").split()[-40:])
        written = {m.name for m in models_of(into)}
        missing: dict[str, dict[str, str]] = {}
        for name in _builtin_names():
            for fmt, folder in (("torchscript", name), ("pt2", f"{name}_pt2")):
                if folder not in written:
                    missing.setdefault(fmt, {})[folder] = f"torch {label}'s export exited {code}: {tail}"
        into.mkdir(parents=True, exist_ok=True)
        (into / FAILED).write_text(json.dumps(missing, indent=2) + "\n", encoding="utf-8")


def _builtin_names() -> list[str]:
    from tritonpt import builtin  # noqa: PLC0415 - only where an export failed

    return sorted(builtin.BUILTIN)


def plan(minors: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The legs to run, as (exporting torch, serving minor): pytorch.torch's exports on every minor of the table,
    and the newest torch's on the reverse minors; with ``minors``, only the legs that serve on one of them or
    whose exports are made by one of them (what a new torch or a new release adds)."""
    here, newest = VERSIONS.pytorch.torch, VERSIONS.newest_compat
    legs = [(here, c.minor) for c in VERSIONS.compat]
    legs += [(newest.torch, minor) for minor in VERSIONS.compat_reverse]
    if not minors:
        return legs
    return [(made, on) for made, on in legs if on in minors or minor_of(made) in minors]


def run(reports: Path, *, write: bool, minors: Sequence[str] = ()) -> int:
    reports.mkdir(parents=True, exist_ok=True)
    scratch.remove(
        reports / "legs"
    )  # the pairs of this run's legs only: an earlier run's (other legs) would stay
    unknown = sorted(set(minors) - {c.minor for c in VERSIONS.compat})
    if unknown:
        known = ", ".join(c.minor for c in VERSIONS.compat)
        _say(f"--minor {', '.join(unknown)}: versions.toml [compat] has no such torch (it has {known})")
        return 2
    here = VERSIONS.pytorch.torch
    legs = plan(minors)
    by_torch = {c.torch: c for c in VERSIONS.compat}
    needed = {on for _, on in legs} | {minor_of(made) for made, _ in legs}
    envs = {c.minor: (None if c.torch == here else _env(c)) for c in VERSIONS.compat if c.minor in needed}
    exports = {made: reports / f"exported-{made}" for made in dict.fromkeys(made for made, _ in legs)}
    read = reports / "registries"
    scratch.remove(read)
    with concurrent.futures.ThreadPoolExecutor(
        2
    ) as pool:  # each mostly the export cache's copy and validation
        jobs = [
            pool.submit(_export, envs[by_torch[made].minor], folder, reports, made)
            for made, folder in exports.items()
        ]
        jobs += [
            pool.submit(read_registry, env, read / f"{minor}.json.gz", reports) for minor, env in envs.items()
        ]
        for done in jobs:
            done.result()
    registries = _registries(read)

    def one(made: str, minor: str) -> tuple[str, int]:
        name = f"{made}-on-{minor}"
        _say(f"serving torch {made}'s exports on libtorch {minor}")
        args = ["-m", "tritonpt_ci.compat", "leg", "--repository", str(exports[made])]
        args += ["--out", str(reports / "legs" / f"{name}.json"), "--reports", str(reports / name)]
        return name, _run_in(envs[minor], args, reports / name / "leg.log")

    with concurrent.futures.ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        ended = list(pool.map(lambda leg: one(*leg), legs))
    broken = [f"{name} (exit {code}, {reports / name / 'leg.log'})" for name, code in ended if code != 0]
    if broken:
        _say("a leg did not measure: " + "; ".join(broken))
        return 1
    table = _table(reports / "legs")
    if minors:  # the other legs' pairs as the shipped table has them
        table = _merged(compat.load(), table)
    (reports / "compat.json").write_text(table.to_json(), encoding="utf-8")
    for pair in table.pairs:
        _say(f"{pair.verdict}: {pair.describe()}")
    foretold = _foretold(table)
    if write:
        compat.TABLE.write_text(table.to_json(), encoding="utf-8")
        (ROOT / compat.PAGE).write_text(compat.render(table), encoding="utf-8")
        registry.REGISTRIES.write_bytes(registries.to_bytes())
        (ROOT / registry.PAGE).write_text(registry.render(registries), encoding="utf-8")
        _say(f"written: {compat.TABLE}, {compat.PAGE}, {registry.REGISTRIES}, {registry.PAGE}")
        return foretold
    return max(held(table), held_registries(registries), foretold)


def read_registry(env: venvs.Env | None, out: Path, reports: Path) -> None:
    """The registry of ``env``'s torch (tritonpt.operators.registry read), into ``out``: read once per environment
    and reader. An environment never changes once made (its folder is named by the key of what it holds), so its
    registry is kept in the cache under that name and the reader's digest, as an export is kept."""
    location = env.location if env else Path(sys.prefix)
    reader = hashlib.sha256(Path(registry.__file__).read_bytes()).hexdigest()[:16]
    kept = caches.root() / "registries" / f"{location.name}-{reader}.json.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    if kept.is_file():
        shutil.copyfile(kept, out)
        caches.note("registry", location.name, hit=True, say=_say)
        return
    log = reports / f"registry-{out.name.removesuffix('.json.gz')}.log"
    started = time.perf_counter()
    if _run_in(env, ["-m", "tritonpt.operators.registry", "read", "--out", str(out)], log) != 0:
        msg = f"the registry of {location} could not be read: see {log}"
        raise TritonPtError(msg)
    kept.parent.mkdir(parents=True, exist_ok=True)
    staged = kept.with_name(f".{kept.name}.{os.getpid()}")
    shutil.copyfile(out, staged)
    staged.replace(kept)
    caches.note("registry", location.name, hit=False, seconds=time.perf_counter() - started, say=_say)


def _registries(read: Path) -> registry.Registries:
    """The shipped registries with those this run read in their place (a --minor run reads only its own)."""
    found = [
        r
        for path in sorted(read.glob("*.json.gz"))
        for r in registry.Registries.from_bytes(path.read_bytes()).registries
    ]
    shipped = registry.load() or registry.Registries(read="")
    return shipped.with_registries(found)


def held_registries(measured: registry.Registries) -> int:
    """Exit 0 when every registry read equals the shipped one; else name what each torch added or lost."""
    shipped = registry.load()
    if shipped is None:
        _say(
            f"no shipped registries at {registry.REGISTRIES}: run `nox -s compat -- --write` and commit them"
        )
        return 1
    changed = []
    for now in measured.registries:
        then = shipped.of_minor(now.minor)
        if then is None:
            changed.append(f"torch {now.torch}: no shipped registry of {now.minor}")
            continue
        for what, a, b in (
            ("schemas", then.schemas, now.schemas),
            ("torchvision schemas", then.torchvision_schemas, now.torchvision_schemas),
            ("shims", then.shims, now.shims),
        ):
            if a != b or then.torch != now.torch:
                gained, lost = sorted(b - a), sorted(a - b)
                changed.append(
                    f"torch {then.torch} -> {now.torch} {what}: +{len(gained)} {gained[:3]} -{len(lost)} {lost[:3]}"
                )
    if changed:
        _say(
            f"the registries read differ from {registry.REGISTRIES} (read {shipped.read}):\n  "
            + "\n  ".join(changed)
            + "\nIf the change is expected (a torch pin moved), `nox -s compat -- --write` records it; commit it."
        )
        return 1
    _say(
        f"every registry read equals the shipped one ({len(measured.registries)} torches, read {shipped.read})"
    )
    return 0


def _foretold(table: compat.Table) -> int:
    """Exit 1 where a server did other than the doctor predicted from a model's calls, naming each."""
    wrong = [
        f"{p.exported_by} -> {p.served_by} {p.format} {m.model}: predicted {m.predicted or 'loads'}, the server "
        f"{'loaded it' if m.loads else 'refused it: ' + m.error}"
        for p in table.pairs
        for m in p.disagreements
    ]
    if wrong:
        _say("the doctor's prediction differs from the server's verdict:\n  " + "\n  ".join(wrong))
        return 1
    predicted = sum(1 for p in table.pairs for m in p.models if m.predicted)
    _say(f"the doctor's prediction held for every model served ({predicted} refusals foretold and seen)")
    return 0


def _merged(shipped: compat.Table | None, measured: compat.Table) -> compat.Table:
    """``measured``'s pairs, and the shipped table's pairs of the legs it did not run."""
    if shipped is None:
        return measured
    ran = {(p.exported_minor, p.served_minor) for p in measured.pairs}
    kept = tuple(p for p in shipped.pairs if (p.exported_minor, p.served_minor) not in ran)
    return dataclasses.replace(measured, pairs=kept + measured.pairs)


def _table(legs: Path) -> compat.Table:
    pairs = []
    for path in sorted(legs.glob("*.json")):
        for raw in json.loads(path.read_text(encoding="utf-8")):
            pairs.append(compat.Pair.from_dict(raw))
    lines = {b.pytorch_backend.ref: b.pytorch_backend.commit for b in (VERSIONS.backend, VERSIONS.pt2.build)}
    return compat.Table(
        measured=datetime.date.today().isoformat(),
        server=VERSIONS.embedded.server,
        lines=lines,
        pairs=tuple(pairs),
    )


def held(table: compat.Table) -> int:
    """Exit 0 when every verdict equals the shipped table's; else name each that changed."""
    shipped = compat.load()
    if shipped is None:
        _say(f"no shipped table at {compat.TABLE}: run `nox -s compat -- --write` and commit it")
        return 1
    now, then = table.verdicts(), shipped.verdicts()
    changed = [
        f"{key}: shipped {then.get(key, 'not measured')}, measured {now.get(key, 'not measured')}"
        for key in sorted(set(now) | set(then))
        if now.get(key) != then.get(key)
    ]
    if changed:
        _say(
            f"the measurement differs from {compat.TABLE} (measured {shipped.measured}):\n  "
            + "\n  ".join(changed)
            + "\nIf the change is expected (a pin moved), `nox -s compat -- --write` records it; commit both files."
        )
        return 1
    _say(f"every verdict equals the shipped table's ({len(then)} verdicts, measured {shipped.measured})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.compat", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("leg", help="serve one exported set on this environment's torch")
    add_arguments(one.add_argument, ("repository", "reports"))
    one.add_argument("--out", type=Path, required=True)
    add_arguments(parser.add_argument, ("reports",), defaults={"reports": "reports/compat"})
    parser.add_argument(
        "--write", action="store_true", help="write the table and its page instead of holding the run to them"
    )
    parser.add_argument(
        "--minor",
        action="append",
        default=[],
        dest="minors",
        metavar="MINOR",
        help="only the legs that serve on this torch minor or whose exports it makes (repeatable); the other "
        "pairs are the shipped table's",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "leg":
            return leg(Path(args.repository), args.out, Path(args.reports))
        return run(Path(args.reports), write=args.write, minors=args.minors)
    except TritonPtError as exc:
        _say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
