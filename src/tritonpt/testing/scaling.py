"""How the main job's cost grows with the number of models, unsharded and as two shards side by side.

    python -m tritonpt.testing.scaling [--sizes 1,5,20,50] [--reports reports/scaling]   (nox -s bench-scaling)

    1. export: the largest size's models, for real (trace, eager references, validation), in one process:
       copies of the small built-in models under new names (s017_token_encoder), each with its own seed;
       each model's export seconds are in its stamp
    2. for each size N: a repository of the first N models (hard links), then the integration matrix on it
       - unsharded: one pytest, one server
       - 2 shards: `--shard 1/2` and `--shard 2/2` started together on this machine, each with its own server,
         then merged (tritonpt.merge) and held to the unsharded run case for case
    3. reports/scaling/scaling.json, scaling.md and scaling.png: wall time, seconds per model of each stage
       (validation, server start, model loads, the matrix, the rest of pytest), the server's memory, and what a
       linear fit predicts for 80 models on 8 runners

This is a benchmark: timings are printed, never asserted. What is judged is what the report claims beyond
timings: every run passes, and the merge of the two shards is the unsharded run case for case (exit 1 when
either does not hold, naming the size).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonpt import merge, repository
from tritonpt.errors import TritonPtError

SOURCES = ("multi_io", "token_encoder", "fixed_shape", "scripted_gate")
"""The built-in models copied: the small ones (resnet18 would measure resnet18)."""
SIZES = (1, 5, 20, 50)
ROOT = Path(__file__).resolve().parents[3]  # the checkout: the matrix is run from it
STAGES = ("validation", "server start and loads", "matrix", "rest of pytest")
"""Where a run's wall time goes. With --strict-readiness the server answers ready once every model loaded, so
its start and the loads are one stage; each model's own load time (from the server's log) is in load_s."""
PREDICT_MODELS, PREDICT_RUNNERS = 80, 8


class ScalingError(TritonPtError):
    """The scaling benchmark could not run."""


# --- 1. the models -----------------------------------------------------------------------------------------------


def make_models(count: int, into: Path) -> None:
    """Export ``count`` copies of the small built-in models into ``into`` (run in a process of its own)."""
    from tritonpt import builtin  # noqa: PLC0415 - torch loads in the export process only
    from tritonpt.export import export_factory  # noqa: PLC0415
    from tritonpt.export.stamp import write_stamp  # noqa: PLC0415

    for index in range(count):
        source = SOURCES[index % len(SOURCES)]
        name = f"s{index:03d}_{source}"
        result = export_factory(builtin.BUILTIN[source], name=name, repository=into, seed=index)
        write_stamp(result.model, f"scaling:{source}:{index}", seconds=result.seconds)
        print(f"exported {name} in {result.seconds:.2f} s", file=sys.stderr, flush=True)


def subset(models: Path, count: int, into: Path) -> Path:
    """A repository of the first ``count`` models, hard-linked (nothing is copied twice)."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for model in repository.models(models)[:count]:
        shutil.copytree(model.root, into / model.name, copy_function=os.link)
    return into


# --- 2. the runs ---------------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Run:
    """One pytest of the matrix: its wall time, what its summary.json says, and its junit cases."""

    label: str
    models: int
    wall_s: float
    exit_code: int
    stages: dict[str, float] = field(default_factory=dict)
    memory_mb: float | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    matrix_s_per_model: float = 0.0
    load_s_per_model: float = 0.0  # each model's load, from the server's log (loads overlap)


def _command(repo: Path, reports: Path, shard: str = "") -> list[str]:
    return [
        sys.executable, "-m", "tritonpt.matrix", "-q",
        "--repository", str(repo), "--reports", str(reports),
        *(["--shard", shard] if shard else []),
    ]  # fmt: skip


def _read(label: str, reports: Path, wall: float, code: int) -> Run:
    data = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    timings = data.get("timings_s", {})
    loaded = float(timings.get("server start to all models ready", timings.get("server start to ready", 0.0)))
    matrix = float(timings.get("matrix wall time", 0.0))
    validation = float(timings.get("validation", 0.0))
    costs = data.get("costs", {})
    stages = {
        "validation": validation,
        "server start and loads": loaded,
        "matrix": matrix,
        "rest of pytest": max(0.0, wall - validation - loaded - matrix),
    }
    return Run(
        label=label,
        models=len(costs),
        wall_s=round(wall, 2),
        exit_code=code,
        stages={k: round(v, 3) for k, v in stages.items()},
        memory_mb=data.get("server_memory_mb"),
        outcomes=data.get("outcomes", {}),
        matrix_s_per_model=round(sum(c.get("matrix_s", 0.0) for c in costs.values()) / max(1, len(costs)), 4),
        load_s_per_model=round(sum(c.get("load_s", 0.0) for c in costs.values()) / max(1, len(costs)), 4),
    )


def unsharded(repo: Path, reports: Path) -> Run:
    started = time.perf_counter()
    done = subprocess.run(_command(repo, reports), cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    (reports / "pytest.out").write_text(done.stdout + done.stderr, encoding="utf-8")
    return _read("unsharded", reports, wall, done.returncode)


def two_shards(repo: Path, reports: Path) -> tuple[float, list[Run]]:
    """Both shards started together; the wall time is the slower one's."""
    started = time.perf_counter()
    folders = [reports / f"shard-{k}-of-2" for k in (1, 2)]
    processes = []
    for k, folder in zip((1, 2), folders, strict=True):
        folder.mkdir(parents=True, exist_ok=True)
        out = (folder / "pytest.out").open("w", encoding="utf-8")
        processes.append(
            (
                subprocess.Popen(
                    _command(repo, folder, f"{k}/2"), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
                ),
                out,
            )
        )
    runs = []
    for (process, out), folder, k in zip(processes, folders, (1, 2), strict=True):
        code = process.wait()
        out.close()
        runs.append(_read(f"shard {k}/2", folder, time.perf_counter() - started, code))
    return time.perf_counter() - started, runs


def merged_equals_unsharded(whole: Path, shards: Sequence[Path]) -> tuple[bool, str]:
    """The merge of the shards against the unsharded run: the same cases, each with the same outcome."""
    merged = merge.merge(shards)
    mine = merge.cases(merged.junit)
    theirs = merge.cases(ET.parse(whole / "junit.xml").getroot())  # noqa: S314 - our own run's file
    counted = json.loads((whole / "summary.json").read_text(encoding="utf-8")).get("outcomes", {})
    if mine == theirs and merged.report.outcomes == counted and merged.complete:
        return True, f"{len(theirs)} cases, the same outcomes ({counted})"
    differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
    said = [f"{k}: {mine.get(k, 'absent')} merged, {theirs.get(k, 'absent')} unsharded" for k in differ[:3]]
    if merged.report.outcomes != counted:
        said.append(f"outcomes {merged.report.outcomes} merged, {counted} unsharded")
    return False, "; ".join(said + merged.problems)


# --- 3. the report ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Size:
    models: int
    export_s: float  # the sum of these models' export seconds (from one export process)
    unsharded: Run
    sharded_wall_s: float
    shards: list[Run]
    merged_equal: bool
    merged_detail: str
    reference_mb: float  # the reference data (reference.npz) the matrix reads for these models


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    return my - b * mx, b


def predict(sizes: Sequence[Size], export_start_s: float) -> dict[str, float | str]:
    fixed, per_model = _fit([s.models for s in sizes], [s.unsharded.wall_s for s in sizes])
    export_per_model = sum(s.export_s for s in sizes[-1:]) / max(1, sizes[-1].models)
    each = PREDICT_MODELS / PREDICT_RUNNERS
    one = fixed + per_model * PREDICT_MODELS + export_start_s + export_per_model * PREDICT_MODELS
    sharded = fixed + per_model * each + export_start_s + export_per_model * each
    return {
        "fixed_s": round(fixed, 2),
        "matrix_per_model_s": round(per_model, 3),
        "export_per_model_s": round(export_per_model, 3),
        "export_process_start_s": round(export_start_s, 2),
        "models": PREDICT_MODELS,
        "runners": PREDICT_RUNNERS,
        "one_runner_s": round(one, 1),
        "per_runner_s": round(sharded, 1),
        "speedup": round(one / sharded, 2) if sharded else 0.0,
    }


def to_markdown(sizes: Sequence[Size], prediction: dict[str, float | str], export_wall: float) -> str:
    lines = [
        "# Scaling: the main job against the number of models",
        "",
        f"Models: copies of {', '.join(SOURCES)} (TorchScript), exported for real in one process "
        f"({export_wall:.1f} s for {sizes[-1].models}). One machine, {os.cpu_count()} cores: the two shards share them.",
        "",
        "| models | export s | unsharded wall s | per model s | validation | server start and loads | matrix | rest | "
        "matrix s per model | load s per model | server MB | 2 shards wall s | ratio | merged = unsharded |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        u = s.unsharded
        st = u.stages
        mem = f"{u.memory_mb:.0f}" if u.memory_mb is not None else "?"
        lines.append(
            f"| {s.models} | {s.export_s:.1f} | {u.wall_s:.1f} | {u.wall_s / s.models:.2f} | {st['validation']:.1f} | "
            f"{st['server start and loads']:.1f} | {st['matrix']:.1f} | {st['rest of pytest']:.1f} | "
            f"{u.matrix_s_per_model:.3f} | {u.load_s_per_model:.2f} | {mem} | {s.sharded_wall_s:.1f} | "
            f"{u.wall_s / s.sharded_wall_s:.2f} | {'yes' if s.merged_equal else '**no**'} ({s.merged_detail}) |"
        )
    p = prediction
    lines += [
        "",
        f"Linear fit of the unsharded wall time: {p['fixed_s']} s fixed (interpreter, imports, server start) + "
        f"{p['matrix_per_model_s']} s per model; export {p['export_per_model_s']} s per model after "
        f"{p['export_process_start_s']} s of process start.",
        "",
        f"For {p['models']} models on {p['runners']} runners ({PREDICT_MODELS // PREDICT_RUNNERS} each, runners of "
        f"their own): about {p['per_runner_s']} s per runner against {p['one_runner_s']} s on one, "
        f"{p['speedup']}x.",
        "",
        "What stops it from scaling further: the fixed cost every runner pays before its first check "
        f"({p['fixed_s']} s here: the interpreter, torch's import, the server's start; on a fresh runner also the "
        "environment's install and the backend build, minutes each when its cache is cold); the export of PT2 models "
        "(AOTInductor compiles each: tens of seconds per model on 2 cores, as the export column of an integration "
        "run's summary.md shows, against the export seconds above for small TorchScript models); and the reference "
        "data each runner reads "
        f"({sizes[-1].reference_mb} MB for {sizes[-1].models} of these models; resnet18's alone is several MB). "
        "Per model, the matrix's cost stays flat from "
        f"{sizes[0].models} to {sizes[-1].models} models ({sizes[0].unsharded.matrix_s_per_model:.3f} and "
        f"{sizes[-1].unsharded.matrix_s_per_model:.3f} s), and the server's memory was "
        f"{_mb(sizes[-1].unsharded.memory_mb)} with {sizes[-1].models} ({_mb(sizes[0].unsharded.memory_mb)} with "
        f"{sizes[0].models}).",
        "",
    ]
    return "\n".join(lines)


def _mb(value: float | None) -> str:
    return f"{value:.0f} MB" if value is not None else "not read"


def plot(sizes: Sequence[Size], path: Path) -> None:
    import matplotlib  # noqa: PLC0415 - only the benchmark draws

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = [s.models for s in sizes]
    left.plot(xs, [s.unsharded.wall_s for s in sizes], "o-", label="unsharded")
    left.plot(xs, [s.sharded_wall_s for s in sizes], "s-", label="2 shards, side by side")
    left.set(xlabel="models", ylabel="wall seconds", title="The matrix")
    left.legend()
    bottom = [0.0] * len(sizes)
    for stage in STAGES:
        values = [s.unsharded.stages[stage] for s in sizes]
        right.bar([str(x) for x in xs], values, bottom=bottom, label=stage)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    right.set(xlabel="models", ylabel="seconds", title="Where the unsharded time goes")
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


# --- the command ------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt.testing.scaling", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="numbers of models (default 1,5,20,50)"
    )
    parser.add_argument("--reports", type=Path, default=Path("reports/scaling"))
    parser.add_argument("--make", nargs=2, metavar=("COUNT", "DIR"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.make:
        make_models(int(options.make[0]), Path(options.make[1]))
        return 0
    sizes = sorted({int(x) for x in options.sizes.split(",") if x.strip()})
    reports = options.reports.resolve()
    if reports.exists():
        shutil.rmtree(reports)
    models = reports / "work" / "models"
    models.mkdir(parents=True)

    def say(line: str) -> None:
        print(f"scaling: {line}", file=sys.stderr, flush=True)

    say(f"exporting {sizes[-1]} models (copies of {', '.join(SOURCES)}) into {models}")
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tritonpt.testing.scaling", "--make", str(sizes[-1]), str(models)], check=True
    )
    export_wall = time.perf_counter() - started
    seconds = [
        float(json.loads((m.root / ".export-stamp.json").read_text())["seconds"])
        for m in repository.models(models)
    ]
    export_start = max(0.0, export_wall - sum(seconds))
    results = []
    for n in sizes:
        repo = subset(models, n, reports / "work" / f"repo-{n}")
        say(f"{n} model(s): the matrix, unsharded")
        whole = unsharded(repo, reports / f"{n}" / "unsharded")
        say(
            f"{n} model(s): unsharded {whole.wall_s:.1f} s (exit {whole.exit_code}); now 2 shards side by side"
        )
        wall, shards = two_shards(repo, reports / f"{n}")
        equal, detail = merged_equals_unsharded(
            reports / f"{n}" / "unsharded", [reports / f"{n}" / f"shard-{k}-of-2" for k in (1, 2)]
        )
        say(f"{n} model(s): 2 shards {wall:.1f} s; merged = unsharded: {equal} ({detail})")
        reference_mb = sum(f.stat().st_size for f in repo.glob("*/reference.npz")) / 2**20
        results.append(
            Size(
                models=n,
                export_s=round(sum(seconds[:n]), 2),
                unsharded=whole,
                sharded_wall_s=round(wall, 2),
                shards=shards,
                merged_equal=equal,
                merged_detail=detail,
                reference_mb=round(reference_mb, 2),
            )
        )
    prediction = predict(results, export_start)
    markdown = to_markdown(results, prediction, export_wall)
    (reports / "scaling.md").write_text(markdown, encoding="utf-8")
    body = {
        "sizes": [asdict(s) for s in results],
        "prediction": prediction,
        "export_wall_s": round(export_wall, 2),
    }
    (reports / "scaling.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    plot(results, reports / "scaling.png")
    print(markdown)
    problems = verdict(results)
    for problem in problems:
        print(f"error: {problem}; see {reports}/<N>/*/pytest.out", file=sys.stderr)
    return 1 if problems else 0


def verdict(sizes: Sequence[Size]) -> list[str]:
    """What the report claims that did not hold: a run that failed, a merge that is not the unsharded run."""
    problems = [
        f"the matrix failed at {s.models} models" for s in sizes
        if s.unsharded.exit_code != 0 or any(r.exit_code for r in s.shards)
    ]  # fmt: skip
    problems += [
        f"at {s.models} models the merged shards are not the unsharded run: {s.merged_detail}"
        for s in sizes
        if not s.merged_equal
    ]
    return problems


if __name__ == "__main__":
    sys.exit(main())
