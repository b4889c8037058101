"""``python -m tritonpt.bench``: one run of the bench (every case of every chosen model: eager, then one server
for the served sides, then eager again) and its reports."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import torch

from tritonpt import perf_analyzer, repository, stopping
from tritonpt.bench.measure import (
    BenchError,
    Measurement,
    Pinning,
    cases_for,
    eager,
    first_requests,
    pace,
    served,
    windows_for,
)
from tritonpt.bench.report import BenchReport
from tritonpt.client import PROTOCOLS
from tritonpt.errors import TritonPtError
from tritonpt.export.builtin_set import export_builtin_set
from tritonpt.options import Pt2Build, add_arguments
from tritonpt.versions import VERSIONS


def run(
    repository_dir: Path,
    *,
    names: Sequence[str] = (),
    eager_seconds: float = 3.0,
    requests: int = 200,
    servers: int = 3,
    pin: Pinning | None = None,
    step: Callable[[str], None] = lambda _: None,
    pt2_build: Pt2Build = "stock",
) -> BenchReport:
    """Measure every case of every chosen model: eager, then one server for the served sides (its PT2 models
    served by the PT2 build ``pt2_build``), then eager again."""
    from tritonpt.server import LocalServer, TritonFlags  # noqa: PLC0415

    chosen = [m for m in repository.models(repository_dir) if not names or m.name in names]
    missing = sorted(set(names) - {m.name for m in chosen})
    if missing or not chosen:
        msg = f"Cannot benchmark {', '.join(missing) or 'anything'}: {repository_dir} holds {', '.join(m.name for m in repository.models(repository_dir)) or 'no models'}."
        raise BenchError(msg)
    tool = perf_analyzer.locate(step)  # fetched on first use; fails before anything is measured
    configs = {m.name: repository.read_config(m.config) for m in chosen}
    measured: list[Measurement] = []

    def eager_sides(after: bool) -> None:
        """Each case's eager side; once before the served sides and once after them, so that a ratio is taken
        against both and a machine that changed speed in between shows in the report."""
        for model in chosen:
            for case in cases_for(configs[model.name]):
                step(
                    f"[{model.name}] {case.id}: eager at batch {case.eager_batch}{', again' if after else ''}"
                )
                one = eager(
                    model,
                    case,
                    seconds=eager_seconds,
                    config=configs[model.name],
                    cores=pin.server if pin else (),
                )
                measured.append(replace(one, after=after))

    eager_sides(after=False)
    # requests a second a served case can at best reach, by (model, case): what picks its windows
    cases = {(model.name, c.id): c for model in chosen for c in cases_for(configs[model.name])}
    paces = {(m.model, m.case): pace(m, cases[m.model, m.case], configs[m.model]) for m in measured}
    with LocalServer(
        TritonFlags(model_repository=repository_dir), cpus=pin.server if pin else (), pt2_build=pt2_build
    ) as server:
        server.wait_models_ready([m.name for m in chosen])
        for model in chosen:
            for case in cases_for(configs[model.name]):
                for protocol in PROTOCOLS:
                    step(f"[{model.name}] {case.id}: {protocol} (perf_analyzer)")
                    measured.append(
                        served(
                            server.endpoints,
                            protocol,
                            model,
                            configs[model.name],
                            case,
                            windows=windows_for(requests, case.batch, paces[model.name, case.id]),
                            tool=tool,
                            cores=pin.client if pin else (),
                        )
                    )
        origin, pt2 = server.backend_origin(), server.pt2_origin()
        version = server.install.version if server.install else "unknown"
    eager_sides(after=True)
    cold = []
    for model in chosen:
        for warmup in (False, True) if configs[model.name].model_warmup else (False,):
            step(f"[{model.name}] first request after a load, {'with' if warmup else 'without'} model_warmup")
            cold.append(
                first_requests(
                    model, configs[model.name], warmup=warmup, servers=servers, pt2_build=pt2_build
                )
            )
    environment = {
        "torch": torch.__version__,
        "eager": "the config's INTRA_OP_THREAD_COUNT (else "
        + (
            f"one thread per pinned core, {len(pin.server)}"
            if pin
            else f"torch's default, {torch.get_num_threads()}"
        )
        + ") and its optimized execution, as the backend runs it",
        "cores": str(os.cpu_count()),
        "pinning": f"server and eager on cores {list(pin.server)}, perf_analyzer on {list(pin.client)}"
        if pin
        else "none (server, perf_analyzer and eager share every core)",
        "perf_analyzer": f"tritonclient {VERSIONS.bench.tritonclient}",
        "server": f"tritonserver {version}",
        "pytorch backend": origin.describe() if origin else "the server's own",
        **({"pt2 backend": f"{pt2.describe()}, as backends/pt2/"} if pt2 else {}),
    }
    return BenchReport(environment=environment, measurements=tuple(measured), first_requests=tuple(cold))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt.bench``: served vs eager, with ratios; or install perf_analyzer from its wheel."""
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt.bench",
        description="What serving costs against eager PyTorch, measured side by side with NVIDIA's perf_analyzer.",
    )
    add_arguments(
        parser.add_argument,
        ("repository", "pt2_build", "export_builtin", "reports", "smoke"),
        defaults={"reports": "reports/bench"},
    )
    # not the registry's --model (MODULE:ATTR): a model of the repository, by name, as `nox -s bench` has always taken it
    parser.add_argument("--model", action="append", default=[], help="benchmark only this model (repeatable)")
    parser.add_argument(
        "--pin",
        metavar="SERVER:CLIENT",
        help="pin the server (and eager) and perf_analyzer to separate cores with taskset, e.g. 1:0",
    )
    parser.add_argument(
        "--install-perf-analyzer",
        type=Path,
        metavar="WHEEL",
        help="install perf_analyzer from this wheel (the pinned tritonclient's) and stop; otherwise it is fetched on first use",
    )
    options = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        with stopping.stop_signals_interrupt():
            return _main(options, say)
    except KeyboardInterrupt as interrupt:
        say("bench: interrupted; the server was stopped and no report was written")
        return stopping.exit_code(interrupt)


def _main(options: argparse.Namespace, say: Callable[[str], None]) -> int:
    try:
        if options.install_perf_analyzer:
            say(f"perf_analyzer installed at {perf_analyzer.install(options.install_perf_analyzer)}")
            return 0
        if options.export_builtin:
            export_builtin_set(Path(options.repository), pt2_build=options.pt2_build, step=say)
        report = run(
            Path(options.repository),
            names=options.model,
            eager_seconds=0.5 if options.smoke else 3.0,
            requests=20 if options.smoke else 200,
            servers=1 if options.smoke else 3,
            pin=Pinning.parse(options.pin) if options.pin else None,
            step=say,
            pt2_build=options.pt2_build,
        )
        written = report.write(options.reports)
    except TritonPtError as exc:
        say(f"error: {exc}")
        return 1
    print(report.to_markdown())
    say("written: " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
