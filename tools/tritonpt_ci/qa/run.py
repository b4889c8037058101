"""Running one suite of Triton's QA tests: each pinned test.sh as NVIDIA's CI runs it, against our builds.

    run_plan(plan, ...)   the pinned files unpacked and adapted, the models, the builds, then every test
    run_test(...)         ``bash test.sh`` in a scratch folder, with the server wrapper and the ledger's shims
    run_control(...)      a negative control, which must fail by exactly one check

A test that lost a known upstream race (RACES) runs once more. `nox -s triton-qa` runs it.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tritonpt import backend, repository, scratch
from tritonpt.backend import BuiltBackend, Step
from tritonpt.backend.serving import PT2_NAME, backend_directory
from tritonpt.backend.sources import fetch_source, sources_folder, unpack_source
from tritonpt.errors import HINT, QaError
from tritonpt.server.local import TritonInstall, library_folders
from tritonpt.server.ports import free_ports
from tritonpt.versions import VERSIONS
from tritonpt_ci import procs
from tritonpt_ci.qa import adapt, generate, ledger
from tritonpt_ci.qa.plan import CHECKOUT, Control, Plan, UpstreamTest, lay_overlay

TEST_TIMEOUT_S = 600
SERVER_TIMEOUT_S = 120  # util.sh's wait for a ready server (its default)
SHIMS = ("pip", "pip3", "gdb")
TOOLS = ("bash", "curl", "jq", "sed")
FAILURE_MARK = "***"
EXPECTED = "failed, as on stock"
"""One of our tests of the PT2 fixes on the stock build: it fails there, showing the bug its patch fixes."""


@dataclass(frozen=True)
class KnownRace:
    """An upstream race that a test can lose by chance, seen by a mark in the logs it kept, with its
    reproduction: a test that failed and shows it runs once more, and the report says so."""

    name: str
    mark: str
    reproduction: str


RACES = (
    KnownRace(
        "torch-aoti-load-race", "No device information found.", "docs/upstream/torch-aoti-load-race.md"
    ),
    KnownRace(
        "torch-aoti-load-race",
        "[json.exception.type_error.302] type must be string, but is null",
        "docs/upstream/torch-aoti-load-race.md",
    ),
)
"""torch's AOTIModelPackageLoader parses every package's JSON into one static object; two torch_aoti models
loaded at once (Triton loads models in parallel) can read each other's, or an empty one."""


@dataclass(kw_only=True)
class QaResult:
    test: str
    ref: str
    build: str  # what it ran against, in words
    checks: int  # what the plan counts
    how_counted: str
    adaptations: list[str]
    status: str  # "passed", "failed", "timed out", "not run", or EXPECTED for ours on the stock build
    pt2_build: str = ""  # the PT2 build it ran against (PT2 suites): stock or patched
    seconds: float = 0.0
    exit_code: int | None = None
    unittest: dict[str, int] = field(default_factory=dict)  # totals of the unittest cases its clients ran
    checks_run: int = 0  # checks seen to run (the ledger)
    checks_passed: int = 0  # of them, those that held
    said: list[str] = field(default_factory=list)  # its failure lines, when it failed
    reason: str = ""  # why not run
    leftovers: int = 0  # processes of its group alive after it ended (killed)
    control: str = ""  # for a negative control: the check it breaks
    log: str = ""
    rerun: str = ""  # the known race its first run lost, with its reproduction, where it ran once more

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def as_it_must(self) -> bool:
        """Passed, or (ours, on the stock build) failed: it shows the bug its patch fixes."""
        return self.status in ("passed", EXPECTED, "not run")


def _tools_present() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        msg = (
            f"Cannot run Triton's QA tests: {', '.join(missing)} not on PATH (their test.sh and util.sh call "
            f"{', '.join(TOOLS)}).\n{HINT} install them (Debian/Ubuntu: apt-get install {' '.join(missing)})."
        )
        raise QaError(msg)


def builds(plan: Plan, step: Step, pt2_build: str) -> tuple[BuiltBackend, BuiltBackend | None]:
    """The r25.10 build, and for a PT2 suite the PT2 build (stock or patched), from the cache or built from the
    pinned sources."""
    pytorch = backend.ensure(step=step)
    pins = VERSIONS.pt2.build
    pt2 = (
        backend.ensure(pins=pins, step=step, flavor=backend.of_pt2_build(pt2_build, pins))
        if plan.suite.backend == PT2_NAME
        else None
    )
    return pytorch, pt2


def _overlay(plan: Plan) -> Path | None:
    """Our files to lay over the pinned qa/ (docs/upstream/qa/ of the checkout this runs from)."""
    if not plan.overlay:
        return None
    folder = CHECKOUT / plan.overlay
    if not folder.is_dir():
        msg = (
            f"Cannot run the {plan.label} suite's tests of our PT2 fixes: {folder} is missing (they live in a "
            f"checkout of this repository, not in an installed package).\n{HINT} run `nox -s triton-qa` from a "
            "checkout."
        )
        raise QaError(msg)
    return folder


def _wrapper(
    at: Path, install: TritonInstall, directory: Path, libraries: list[str], ports: list[int]
) -> Path:
    """``at/bin/tritonserver``: the server as the tests' SERVER, its options first so that theirs win."""
    binary = at / "bin" / "tritonserver"
    binary.parent.mkdir(parents=True)
    options = [
        f"--backend-directory={directory}",
        "--http-address=127.0.0.1",
        f"--http-port={ports[0]}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={ports[1]}",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={ports[2]}",
    ]
    path = shlex.quote(os.pathsep.join(libraries))
    binary.write_text(
        "#!/bin/bash\n"
        "# tritonpt: Triton's QA tests run this as SERVER; exec keeps the pid they kill and wait for.\n"
        + ledger.server_line()
        + f"export LD_LIBRARY_PATH={path}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n"
        f'exec {shlex.quote(str(install.binary))} {" ".join(shlex.quote(o) for o in options)} "$@"\n',
        encoding="utf-8",
    )
    binary.chmod(0o755)
    return binary


def _shims(at: Path) -> Path:
    at.mkdir()
    for name in SHIMS:
        shim = at / name
        shim.write_text(
            "#!/bin/sh\n"
            f'echo "tritonpt: {name} is disabled in Triton\'s QA tests (the environment is pinned): $*" >&2\n'
            "exit 1\n",
            encoding="utf-8",
        )
        shim.chmod(0o755)
    return at


@contextmanager
def prepared(
    plan: Plan, *, logs: Path, step: Step, pt2_build: str = "stock"
) -> Iterator[tuple[Path, dict[str, str]]]:
    """A scratch copy of the suite's qa/ with everything in place; yields it and the tests' environment."""
    _tools_present()
    source = plan.suite.source
    tarball = fetch_source(source, sources_folder(), step=step)
    pytorch, pt2 = builds(plan, step, pt2_build)
    install = TritonInstall.locate()
    ports = _leg_ports()
    overlay = _overlay(plan)
    with scratch.folder("tritonpt-qa-") as work:
        qa = unpack_source(source, tarball, work / "src") / "qa"
        if overlay is not None:
            lay_overlay(plan, qa)
        wrapper = _wrapper(
            work / "triton",
            install,
            backend_directory(pytorch, pt2),
            library_folders(install, pytorch, pt2),
            ports,
        )
        logs.mkdir(parents=True, exist_ok=True)
        values = {"SERVER": str(wrapper), "HTTP_PORT": str(ports[0])}
        generation = tuple(s for s in adapt.for_ref(source.ref) if adapt.GENERATION in s.tests)
        adapt.apply(qa, generation, values)
        models = generate.models(plan, qa / "common", log=logs / "generation.log", step=step)
        data = models
        if pt2 is not None:  # the models as server 2.51.0 serves PT2: torch_aoti configs name backend pt2
            data = work / "data"
            for folder in sorted(p for p in models.iterdir() if p.is_dir()):
                (data / folder.name).mkdir(parents=True)
                repository.write_served_copy(folder, data / folder.name, pt2_backend=PT2_NAME)
        values["DATA"] = str(data)
        tests = tuple(s for s in adapt.for_ref(source.ref) if adapt.GENERATION not in s.tests)
        adapt.apply(qa, tests, values)
        grep = shutil.which("grep") or "/usr/bin/grep"
        shims = _shims(work / "shims")
        recording = ledger.shims(shims, grep=grep)
        path = os.pathsep.join([str(shims), str(Path(sys.executable).parent), os.environ["PATH"]])
        env = {
            **os.environ,
            **recording,
            "PATH": path,
            "TRITONSERVER_IPADDR": "127.0.0.1",
            "SERVER_TIMEOUT": str(SERVER_TIMEOUT_S),
            "DATADIR": str(data),  # read by L0_torch_aoti (${DATADIR:=...}); the others have it substituted
            "TRITON_DIR": str(wrapper.parent.parent),
        }
        env.pop("MODELDIR", None)
        yield qa, env


def run_test(
    plan: Plan,
    test: UpstreamTest,
    qa: Path,
    env: dict[str, str],
    *,
    logs: Path,
    build: str,
    folder: Path | None = None,
    pt2_build: str = "",
) -> QaResult:
    """``bash test.sh <version>`` in the test's folder (``folder``: a copy of it), in its own process group; what
    it said, which checks ran and held, and what it left."""
    result = QaResult(
        test=test.name,
        ref=plan.suite.source.ref,
        build=build,
        checks=test.checks,
        how_counted=test.how_counted,
        adaptations=[
            s.key for s in adapt.SUBSTITUTIONS if s.ref == plan.suite.source.ref and test.name in s.tests
        ]
        + [a.key for a in adapt.AROUND if a.tests == "all" or fnmatch.fnmatchcase(test.name, a.tests)],
        status="not run",
        reason=test.not_run,
        pt2_build=pt2_build,
    )
    if test.not_run:
        result.adaptations = []
        return result
    folder = folder or qa / test.name
    out, record = folder / "test.out", folder / "tritonpt-ledger.jsonl"
    record.unlink(missing_ok=True)
    started = time.monotonic()
    with out.open("w", encoding="utf-8") as stream:
        process = subprocess.Popen(
            ["bash", "test.sh", plan.suite.repo_version],
            cwd=folder,
            env={**env, ledger.LEDGER_ENV: str(record)},
            stdout=stream,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            result.exit_code = _wait(process, TEST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            result.status = "timed out"
        finally:
            result.leftovers = _end_group(process)
    result.seconds = round(time.monotonic() - started, 1)
    entries = ledger.read(record)
    result.unittest = _unittest_totals(entries)
    seen = ledger.tally(test, entries)
    result.checks_run, result.checks_passed = seen.ran, seen.held
    text = out.read_text(encoding="utf-8", errors="replace")
    if result.status != "timed out":
        result.status = _status(result, seen)
    if test.fixed_by and pt2_build == "stock":  # ours: it must fail on stock, showing its bug
        result.status = EXPECTED if result.status == "failed" else f"{result.status} on stock"
    if not result.passed:
        result.said = [line.strip() for line in text.splitlines() if FAILURE_MARK in line and "ail" in line][
            :10
        ]
        result.said += seen.said
        if seen.ran != test.checks:
            result.said.append(f"{seen.ran} of the {test.checks} checks the plan counts ran")
        if result.leftovers:
            result.said.append(
                f"{result.leftovers} of its processes were still running after it ended (killed)"
            )
    result.log = str(_keep_logs(folder, logs / folder.name))
    return result


def _status(result: QaResult, seen: ledger.Tally) -> str:
    """Passed: exit 0, every check of the plan seen to run and hold, nothing of it left running."""
    whole = seen.ran == result.checks and seen.held == result.checks
    return "passed" if result.exit_code == 0 and whole and not result.leftovers else "failed"


def run_control(
    plan: Plan, control: Control, qa: Path, env: dict[str, str], *, logs: Path, build: str
) -> QaResult:
    """The control's copy of its test (beside it, so that ../common holds), one check made to fail, run as the
    tests run; it holds when it fails with exactly one check of the plan short."""
    test = next(t for t in plan.tests if t.name == control.test)
    copy = qa / f"{control.test}.control"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(qa / control.test, copy, symlinks=True)
    script = copy / "test.sh"
    text = script.read_text(encoding="utf-8")
    if text.count(control.old) != 1:
        msg = (
            f"Cannot make the negative control of {control.test}: its test.sh holds {text.count(control.old)} x "
            f"{control.old!r}, not 1.\n{HINT} the pinned files changed: review the control in "
            "tools/tritonpt_ci/qa/plan.py."
        )
        raise QaError(msg)
    script.write_text(text.replace(control.old, control.new), encoding="utf-8")
    result = run_test(plan, test, qa, env, logs=logs, build=build, folder=copy)
    result.control = control.what
    return result


def control_held(result: QaResult) -> bool:
    """The control failed, every check ran, and exactly one did not hold."""
    return (
        result.status == "failed"
        and result.exit_code not in (0, None)
        and result.checks_run == result.checks
        and result.checks_passed == result.checks - 1
    )


_HANDED_OUT: set[int] = set()
_PORTS = threading.Lock()


def _leg_ports() -> list[int]:
    """Three free ports for a leg's servers, none handed to another leg of this run (legs run at once, and each
    keeps its ports for every server its tests start)."""
    with _PORTS:
        while True:
            ports = free_ports(3)
            if not _HANDED_OUT.intersection(ports):
                _HANDED_OUT.update(ports)
                return ports


STOP = threading.Event()
"""Set by the runner when it is stopped: every leg's test running in a thread of its own ends (its group killed)."""


def _wait(process: subprocess.Popen[bytes], timeout: float) -> int:
    """The test's exit code; ``KeyboardInterrupt`` once :data:`STOP` is set (the leg runs in a worker thread,
    where no signal arrives), ``TimeoutExpired`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return process.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if STOP.is_set():
                raise KeyboardInterrupt from None
            if time.monotonic() >= deadline:
                raise


def _end_group(process: subprocess.Popen[bytes]) -> int:
    """Kill what is left of the test's process group (a server it did not stop); how many were alive."""
    if process.poll() is None:
        process.kill()
        process.wait()
    alive = 0
    for pid in procs.group(process.pid):
        alive += 1
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            alive -= 1
    return alive


def _unittest_totals(entries: list[dict[str, object]]) -> dict[str, int]:
    """The unittest cases its clients reported, over every client run (each run writes its own test_results.txt
    over the last one, so the file left at the end holds the last run only)."""
    totals = {"total": 0, "errors": 0, "failures": 0}
    for entry in entries:
        results = entry.get("results") if entry.get("kind") == "client" else None
        if isinstance(results, dict):
            for name in totals:
                totals[name] += int(results.get(name, 0))
    return totals if totals["total"] else {}


def _keep_logs(folder: Path, into: Path) -> Path:
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for path in [folder / "test.out", *sorted(folder.glob("*.log"))]:
        if path.is_file():
            shutil.copy2(path, into / path.name)
    return into


def run_plan(
    plan: Plan, *, reports: Path, step: Step, pt2_build: str = "stock"
) -> tuple[list[QaResult], list[QaResult]]:
    """Every test of the plan, then its negative controls: (the tests' results, the controls'); a PT2 suite
    against the PT2 build ``pt2_build`` (stock or patched)."""
    pt2 = plan.suite.backend == PT2_NAME
    ref = f"{plan.suite.source.ref}{'-' + pt2_build if pt2 else ''}"
    logs = reports / "triton-qa" / "logs" / ref
    results, controls = [], []
    with prepared(plan, logs=logs, step=step, pt2_build=pt2_build) as (qa, env):
        build = _describe_build(plan, pt2_build)
        for test in plan.tests:
            if test.not_run:
                step(f"{ref} {test.name}: not run ({test.not_run.split(',')[0]})")
            else:
                step(f"{ref} {test.name}: bash test.sh {plan.suite.repo_version}")
            result = run_test(plan, test, qa, env, logs=logs, build=build, pt2_build=pt2_build if pt2 else "")
            race = lost_race(result)
            if race is not None:
                step(
                    f"{ref} {test.name}: failed, and lost the known race {race.name} ({race.reproduction}): once more"
                )
                _set_aside(Path(result.log))
                result = run_test(
                    plan, test, qa, env, logs=logs, build=build, pt2_build=pt2_build if pt2 else ""
                )
                result.rerun = f"{race.name}, {race.reproduction}"
            if not test.not_run:
                step(
                    f"{ref} {test.name}: {result.status} in {result.seconds:.1f} s, "
                    f"{result.checks_passed}/{result.checks} checks"
                )
            results.append(result)
        for control in plan.controls:
            step(f"{ref} {control.test}, negative control ({control.what})")
            result = run_control(plan, control, qa, env, logs=logs, build=build)
            held = "as it must" if control_held(result) else "NOT as it must"
            step(f"{ref} {control.test}, negative control: {result.status}, {result.checks_passed}/{result.checks} "
                 f"checks ({held})")  # fmt: skip
            controls.append(result)
    return results, controls


def _set_aside(logs: Path) -> None:
    """A test's kept logs moved beside them (``<test>.first-run``), so that a second run keeps its own."""
    aside = logs.with_name(f"{logs.name}.first-run")
    if aside.exists():
        shutil.rmtree(aside)
    logs.rename(aside)


def lost_race(result: QaResult) -> KnownRace | None:
    """The known race (RACES) a failed test's kept logs show it lost, else None (a failure that counts)."""
    if result.status != "failed" or not result.log:
        return None
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in Path(result.log).glob("*"))
    return next((race for race in RACES if race.mark in text), None)


def _describe_build(plan: Plan, pt2_build: str = "stock") -> str:
    pt2 = plan.suite.backend == PT2_NAME
    pins = VERSIONS.pt2.build if pt2 else VERSIONS.backend
    source = pins.pytorch_backend
    flavor = backend.of_pt2_build(pt2_build, pins).label if pt2 else ""
    how = f", installed as backends/{PT2_NAME}/" if pt2 else ""
    return (
        f"pytorch_backend {source.ref}{flavor} ({source.commit[:7]}){how}, server {VERSIONS.embedded.server}"
    )
