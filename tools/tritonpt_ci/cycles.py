"""`nox -s cycles`: load, infer with parity, unload, N times on one server: does Triton's PyTorch path give memory back?

    python -m tritonpt_ci.cycles [--cycles 50] [--models resnet18,resnet18_pt2] [--bound-mib 2.0] [--smoke]

Each cycle loads each model, infers one reference case held to eager, unloads it, then reads the server's RSS.
The growth per cycle after :data:`WARMUP` cycles must stay within ``--bound-mib`` (not judged with --smoke).
Writes cycles.json, cycles.md and, where matplotlib is installed, cycles.png.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonpt import assertions, client, reference, repository
from tritonpt.errors import TritonPtError
from tritonpt.export.builtin_set import export_builtin_set
from tritonpt.options import add_arguments
from tritonpt.server.local import LocalServer, TritonFlags
from tritonpt.server.memory import rss_mb
from tritonpt_ci.program import say, work

CYCLES = 50
SMOKE_CYCLES = 6
"""The smoke (CI): every load, parity and unload checked, the growth reported and not judged (too few cycles)."""
WARMUP = 10
"""Cycles left out of the fit: the first loads grow the heap for good (allocator arenas, libtorch's one-time
state); here RSS rose from 583 to about 850 MiB over the first ten cycles, then stayed (docs/figures/load-unload.md)."""
BOUND_MIB = 2.0
"""Growth per cycle that fails the run: 100 MiB over 50 cycles. Measured here: +0.34 MiB per cycle for resnet18 and
its PT2 package together; #5841's loss, 1 GB over 50 cycles, is 20 MiB per cycle."""
MODELS = ("resnet18", "resnet18_pt2")


@dataclass(frozen=True, kw_only=True)
class Cycle:
    index: int
    rss_mib: float
    seconds: float
    gpu_mib: float | None = None


@dataclass(kw_only=True)
class Result:
    models: list[str]
    cycles: list[Cycle] = field(default_factory=list)
    bound_mib: float = BOUND_MIB
    warmup: int = WARMUP
    judged: bool = True
    gpu: str = ""

    @property
    def slope_mib(self) -> float | None:
        """Growth per cycle after the warm-up: the median of the slopes between every two cycles (Theil and Sen;
        RSS read after an unload swings by +-60 MiB here as the allocator keeps or returns arenas, which one
        outlier would tilt a least-squares line by); None with fewer than two cycles after the warm-up."""
        points = [(c.index, c.rss_mib) for c in self.cycles if c.index > self.warmup]
        slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :]]
        return statistics.median(slopes) if slopes else None

    @property
    def ok(self) -> bool:
        slope = self.slope_mib
        return not self.judged or (slope is not None and slope <= self.bound_mib)

    def verdict(self) -> str:
        slope = self.slope_mib
        if slope is None:
            return f"not fitted: {len(self.cycles)} cycles, the first {self.warmup} of them the warm-up (not judged)"
        said = f"{slope:+.3f} MiB per cycle after the first {self.warmup} (bound {self.bound_mib} MiB"
        if not self.judged:
            return f"{said}: a smoke, not judged)"
        return f"{said}: {'met' if self.ok else 'EXCEEDED'})"

    def to_markdown(self) -> str:
        first, last = self.cycles[0], self.cycles[-1]
        lines = [
            "# Load, infer, unload: the server's memory per cycle",
            "",
            f"Models: {', '.join(self.models)}; {len(self.cycles)} cycles on one server; every inference held to "
            "the export's eager outputs.",
            "",
            f"- resident memory after cycle 1: {first.rss_mib:.1f} MiB; after cycle {last.index}: {last.rss_mib:.1f} MiB",
            f"- growth per cycle (median of pairwise slopes over cycles {self.warmup + 1}-{last.index}): "
            f"**{self.verdict()}**",
            f"- GPU: {self.gpu or 'none on this machine: only host memory was read'}",
            "",
            "| cycle | RSS MiB | seconds |",
            "|---:|---:|---:|",
            *(f"| {c.index} | {c.rss_mib:.1f} | {c.seconds:.2f} |" for c in self.cycles),
        ]
        return "\n".join(lines) + "\n"


def _unloaded(server: LocalServer, name: str) -> bool | None:
    return None if client.is_model_ready(server.endpoints, name) else True


def _gpu_mib() -> tuple[str, float | None]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "", None
    done = subprocess.run(
        [smi, "--query-gpu=name,memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if done.returncode != 0 or not done.stdout.strip():
        return "", None
    name, used = done.stdout.splitlines()[0].rsplit(",", 1)
    return name.strip(), float(used)


def run(
    folder: Path,
    *,
    names: Sequence[str],
    cycles: int,
    bound: float,
    reports: Path,
    say: Callable[[str], None],
    judged: bool = True,
) -> Result:
    models = {m.name: m for m in repository.models(folder)}
    missing = [n for n in names if n not in models or not reference.exists(models[n])]
    if missing:
        msg = (
            f"Cannot cycle {', '.join(missing)}: not in {folder} with reference data.\n"
            "Hint: export them first (`invoke export --format both`)."
        )
        raise TritonPtError(msg)
    references = {n: reference.load(models[n]) for n in names}
    result = Result(models=list(names), bound_mib=bound, judged=judged)
    reports.mkdir(parents=True, exist_ok=True)
    with LocalServer(
        TritonFlags(model_repository=folder, load_model=()), log_path=reports / "tritonserver.log"
    ) as server:
        pid = server.server_pid()
        assert pid is not None  # noqa: S101 - a started local server has its process
        for index in range(1, cycles + 1):
            began = time.perf_counter()
            for name in names:
                server.load_model(name)
                ref = references[name]
                case = ref.cases[0]
                got = client.infer(
                    server.endpoints,
                    "http" if index % 2 else "grpc",
                    name,
                    {i.name: a for i, a in zip(ref.inputs, case.inputs, strict=True)},
                    [o.name for o in ref.outputs],
                )
                wrong = assertions.mismatches(
                    assertions.compare_outputs(ref.outputs, got, case.outputs, gpu=False)
                )
                if wrong:
                    msg = f"cycle {index}: {name} answered wrong after its load:\n" + "\n".join(wrong)
                    raise TritonPtError(msg)
                with client.http(server.endpoints) as http:
                    http.unload_model(name)
                gone = client.poll_until(functools.partial(_unloaded, server, name), timeout=60)
                if not gone:
                    msg = f"cycle {index}: {name} was still ready 60 s after its unload"
                    raise TritonPtError(msg)
            gpu, used = _gpu_mib()
            result.gpu = gpu
            cycle = Cycle(
                index=index, rss_mib=rss_mb(pid)[0], seconds=time.perf_counter() - began, gpu_mib=used
            )
            result.cycles.append(cycle)
            say(f"cycle {index}/{cycles}: RSS {cycle.rss_mib:.1f} MiB ({cycle.seconds:.2f} s)")
    (reports / "cycles.json").write_text(
        json.dumps(
            {**asdict(result), "slope_mib": result.slope_mib, "ok": result.ok, "verdict": result.verdict()},
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    (reports / "cycles.md").write_text(result.to_markdown(), encoding="utf-8")
    _plot(result, reports / "cycles.png")
    return result


def _plot(result: Result, path: Path) -> None:
    try:
        import matplotlib as mpl  # noqa: PLC0415 - the bench group's; the smoke runs without it

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return
    figure, axes = plt.subplots(figsize=(7, 3.5))
    xs = [c.index for c in result.cycles]
    axes.plot(xs, [c.rss_mib for c in result.cycles], marker=".", label="server RSS")
    axes.set_xlabel("load / infer / unload cycle")
    axes.set_ylabel("MiB")
    axes.axvline(result.warmup + 0.5, color="grey", linestyle=":", label="end of the warm-up")
    axes.set_title(f"{', '.join(result.models)}: {result.verdict()}", fontsize=8)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.cycles", description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=None, help=f"default {CYCLES}; --smoke {SMOKE_CYCLES}")
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"comma-separated (default {','.join(MODELS)})"
    )
    add_arguments(
        parser.add_argument,
        ("repository", "export_builtin", "reports", "smoke"),
        defaults={"reports": "reports/cycles"},
    )
    parser.add_argument(
        "--bound-mib",
        type=float,
        default=BOUND_MIB,
        help=f"growth per cycle that fails (default {BOUND_MIB})",
    )
    options = parser.parse_args(argv)
    cycles = options.cycles or (SMOKE_CYCLES if options.smoke else CYCLES)
    if not options.smoke and cycles <= WARMUP + 1:
        parser.error(f"--cycles must be more than {WARMUP + 1}: the fit leaves out the first {WARMUP}")

    with work("cycles"):
        if options.export_builtin:
            export_builtin_set(Path(options.repository), pt2_build="stock", step=say)
        result = run(
            Path(options.repository),
            names=[n for n in options.models.split(",") if n],
            cycles=cycles,
            bound=options.bound_mib,
            reports=options.reports,
            say=say,
            judged=not options.smoke,
        )
    say(
        f"{len(result.cycles)} cycles, parity every time: {result.verdict()}; {options.reports / 'cycles.md'}"
    )
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
