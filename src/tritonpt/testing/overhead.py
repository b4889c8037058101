"""What the test harness costs: `nox -s integration`'s matrix against a bare script, and the first command by stage.

    python -m tritonpt.testing.overhead [--repository DIR] [--reports DIR] [--nox "python3 -m nox"]

    harness   the matrix (python -m tritonpt.matrix) on the repository, as the integration session runs it, timed from
              launch to exit; its summary.json says how many inference requests each model was sent
    bare      ``python -m tritonpt.testing.overhead --bare SUMMARY``, timed the same way: start the same
              local server, ask the three ports once, send each model that many requests (the reference cases
              in turn, HTTP and gRPC alternately, every response compared with eager PyTorch), stop
    stages    the README's first command on a warm machine, each part timed as nox runs it: the environment
              (``nox -s integration --install-only``), ``invoke export``, ``invoke build-backend``, and the
              pytest run (server start to all models ready, the matrix, the rest: pytest, imports, validation)

Writes ``<reports>/harness.json`` and ``harness.md``. Only the checkout has tests/ and a noxfile, so this
lives with the test tooling, not with `nox -s bench`'s user-facing module.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonpt import checks, client, reference, repository
from tritonpt.errors import TritonPtError
from tritonpt.server import LocalServer, TritonFlags

GOAL = 1.2
"""The harness may take at most this many times the bare script's wall time (harness / bare)."""


class OverheadError(TritonPtError):
    """A step of the overhead measurement failed."""


def _timed(command: Sequence[str], *, what: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        msg = f"{what} failed (exit {done.returncode}): {shlex.join(command)}\n{tail}"
        raise OverheadError(msg)
    return seconds, done.stdout


# --- The bare script ---------------------------------------------------------------------------------------------


def bare(summary: Path, repository_dir: Path) -> int:
    """Start the server, ask the three ports, replay the matrix's request counts with parity; requests sent."""
    counts: dict[str, int] = json.loads(summary.read_text(encoding="utf-8"))["requests"]
    models = {m.name: m for m in repository.models(repository_dir)}
    missing = sorted(set(counts) - set(models))
    if missing:
        msg = f"{summary} names model(s) {', '.join(missing)} that {repository_dir} does not hold."
        raise OverheadError(msg)
    sent = 0
    with LocalServer(TritonFlags(model_repository=repository_dir)) as server:
        server.wait_models_ready(sorted(counts))
        endpoints = server.endpoints
        for protocol in client.PROTOCOLS:
            client.live_and_ready(endpoints, protocol)
        client.metrics(endpoints)
        for name, count in sorted(counts.items()):
            ref = reference.load(models[name])
            config = repository.read_config(models[name].config)
            names = [t.name for t in config.input]
            outputs = [o.name for o in ref.outputs]
            gpu = checks.served_on_gpu(config)
            plan = zip(
                itertools.cycle(ref.cases), itertools.cycle(client.PROTOCOLS), range(count), strict=False
            )
            for case, protocol, _ in plan:
                got = client.infer(
                    endpoints, protocol, name, dict(zip(names, case.inputs, strict=True)), outputs
                )
                failures = checks.mismatches(checks.compare_outputs(ref.outputs, got, case.outputs, gpu=gpu))
                if failures:
                    msg = f"{name} {case.id} over {protocol}: " + "; ".join(failures)
                    raise OverheadError(msg)
                sent += 1
    return sent


# --- The comparison and the stages ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Overhead:
    harness_s: float
    bare_s: float
    requests: int
    stages_s: dict[str, float]

    @property
    def ratio(self) -> float:
        return self.harness_s / self.bare_s

    def to_markdown(self) -> str:
        total = sum(self.stages_s.values())
        lines = [
            "# What the harness costs",
            "",
            "| | seconds |",
            "|---|---|",
            f"| the integration matrix (python -m tritonpt.matrix, launch to exit) | {self.harness_s:.1f} |",
            f"| a bare script: the same server, the same {self.requests} inference requests with parity | {self.bare_s:.1f} |",
            f"| **harness / bare** | **{self.ratio:.2f}** ({'within' if self.ratio <= GOAL else 'above'} the {GOAL}x goal) |",
            "",
            "## The first command on a warm machine (`nox -s integration`)",
            "",
            "| stage | seconds | share |",
            "|---|---|---|",
            *(f"| {k} | {v:.1f} | {v / total:.0%} |" for k, v in self.stages_s.items()),
            f"| **total** | **{total:.1f}** | |",
        ]
        return "\n".join(lines) + "\n"


def measure(repository_dir: Path, reports: Path, nox: Sequence[str]) -> Overhead:
    python = sys.executable
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    say("environment: nox -s integration --install-only")
    environment, _ = _timed([*nox, "-s", "integration", "--install-only"], what="the environment")
    say("invoke export")
    export_s, _ = _timed(
        [python, "-m", "invoke", "export", "--repository", str(repository_dir)], what="invoke export"
    )
    say("invoke build-backend")
    backend_s, _ = _timed([python, "-m", "invoke", "build-backend"], what="invoke build-backend")
    with tempfile.TemporaryDirectory(prefix="tritonpt-overhead-") as folder:
        matrix_reports = Path(folder)
        say("the matrix: python -m tritonpt.matrix")
        harness_s, _ = _timed(
            [python, "-m", "tritonpt.matrix", "-q",
             "--repository", str(repository_dir), "--reports", str(matrix_reports)],
            what="the integration matrix",
        )  # fmt: skip
        summary = json.loads((matrix_reports / "summary.json").read_text(encoding="utf-8"))
        say("the bare script")
        bare_s, out = _timed(
            [python, "-m", "tritonpt.testing.overhead", "--bare", str(matrix_reports / "summary.json"),
             "--repository", str(repository_dir)],
            what="the bare script",
        )  # fmt: skip
    timings = summary["timings_s"]
    start = timings.get("server start to all models ready", 0.0)
    matrix = timings.get("matrix wall time", 0.0)
    stages = {
        "environment (uv venv, install)": environment,
        "invoke export": export_s,
        "invoke build-backend": backend_s,
        "pytest: server start to all models ready": start,
        "pytest: the matrix": matrix,
        "pytest: the rest (interpreter, imports, validation, teardown)": max(0.0, harness_s - start - matrix),
    }
    result = Overhead(harness_s=harness_s, bare_s=bare_s, requests=int(out.split()[-1]), stages_s=stages)
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "harness.json").write_text(
        json.dumps({**asdict(result), "ratio": result.ratio}, indent=2) + "\n", encoding="utf-8"
    )
    (reports / "harness.md").write_text(result.to_markdown(), encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt.testing.overhead", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--repository", type=Path, default=repository.DEFAULT_REPOSITORY)
    parser.add_argument("--reports", type=Path, default=Path("reports/bench"))
    parser.add_argument(
        "--nox", default=f"{sys.executable} -m nox", help="how to run nox (default: this Python's)"
    )
    parser.add_argument(
        "--bare", type=Path, metavar="SUMMARY", help="run the bare script for this summary.json"
    )
    options = parser.parse_args(argv)
    try:
        if options.bare:
            print(f"requests sent: {bare(options.bare, options.repository)}")
            return 0
        result = measure(options.repository, options.reports, shlex.split(options.nox))
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(result.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
