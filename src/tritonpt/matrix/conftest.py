"""The integration matrix's harness: validate, start one Triton for the session, collect the report.

What the run is asked to do comes typed from its door (:class:`tritonpt.matrix.settings.Settings`, stashed by the
plugin ``python -m tritonpt.matrix`` hands pytest): what runs the server, the repository and the reports folder,
the backend builds and a shard of the models. The harness parses no option.
"""

from __future__ import annotations

import contextlib
import platform
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
import torch
from tritonclient.utils import InferenceServerException

from tritonpt import client, in_process, reference, repository, server, shards, stopping
from tritonpt.backend import PT2_NAME
from tritonpt.errors import InProcessError, ReferenceDataError, TritonPtError, first_line
from tritonpt.export.stamp import export_seconds
from tritonpt.options import Pt2Build
from tritonpt.reporting.report import Report, shard_identity
from tritonpt.selection import select
from tritonpt.server.base import Server
from tritonpt.server.logtext import load_seconds
from tritonpt.server.watchdog import Ending, Watchdog, end_now, left_behind
from tritonpt.versions import VERSIONS

from . import crash, run
from .models import PROBES, Model, OwnFile, held_to
from .settings import KEY, Settings

FAILURE_GRACE_S = 8.0
"""After a failed check, how long the run waits while the server does not answer, so that a server going down
ends the run with the watchdog's one paragraph rather than a failure per check (longer than the watchdog's
five missed probes)."""

REPORT = pytest.StashKey[Report]()
MODELS = pytest.StashKey[list["Model"]]()
UNCHECKED = pytest.StashKey[str]()  # the models of the repository the matrix could not check, and why
OWN_FILES = pytest.StashKey[
    list[OwnFile]
]()  # the models held to their own file in-process, or that could not be
WATCHDOG = pytest.StashKey[Watchdog]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "probe(kind): a check sent to the probe model of that kind (matrix.PROBES)"
    )
    if config.option.help:
        return
    if KEY not in config.stash:
        pytest.exit(
            "The matrix's tests take their settings from its launcher, so run them through it: "
            "`python -m tritonpt.matrix --repository DIR` (or `tritonpt check`, or `nox -s integration`), "
            "with pytest's own options after them.",
            returncode=4,
        )
    # SIGTERM, SIGHUP and a SIGINT ignored on entry (a background job) end the run as Ctrl-C does: pytest's
    # teardown stops the server or the container.
    stopping.install_stop_signals()
    started = time.perf_counter()
    given = config.stash[KEY]
    folder = given.repository
    held = repository.models(folder)
    try:
        chosen = select(folder, shard=given.shard, costs=given.costs, pt2_build=given.pt2_build)
    except TritonPtError as exc:
        pytest.exit(str(exc), returncode=4)
    shard = given.shard
    if shard is not None and not chosen.names:
        _nothing_to_run(config, shard, chosen.total, given.costs)
    if chosen.errors and not given.skip_validation:
        rendered = "\n\n".join(p.render() for p in chosen.errors)
        pytest.exit(
            f"The model repository {folder} fails validation; no server was started.\n\n{rendered}",
            returncode=1,
        )
    models, unchecked, own_files = [], [], []
    for m in held:
        if m.name not in chosen.names:
            continue
        model_config = repository.read_config(m.config)
        none = not m.reference_json.exists() and not m.reference_npz.exists()
        if none and repository.serves_pytorch(model_config) and in_process.numeric(model_config):
            # No reference data (a repository made without tritonpt): the model's own file in-process is the
            # reference, on its samples.npz or on inputs generated from its config.
            try:
                derived = in_process.reference_of(m, model_config)
            except InProcessError as exc:
                own_files.append(OwnFile(name=m.name, error=str(exc)))
                continue
            except (
                Exception
            ) as exc:  # a config --skip-validation let through: the run goes on, the check fails
                said = f"{m.root}: run in-process: {type(exc).__name__}: {first_line(exc)}"
                own_files.append(OwnFile(name=m.name, error=said))
                continue
            own_files.append(OwnFile(name=m.name, held_to=derived.provenance.held_to()))
            models.append(Model(name=m.name, config=model_config, reference=derived))
            continue
        try:
            models.append(Model(name=m.name, config=model_config, reference=reference.load(m)))
        except (
            ReferenceDataError
        ) as exc:  # D002 (or no reference for an ensemble): Triton serves it, parity has nothing
            unchecked.append(f"{m.name} ({exc.path.name}: {exc.detail.rstrip('.')})")
    if unchecked:
        said = (
            f"not checked by the matrix, for want of usable reference data (rule D002; an ensemble has none, and a "
            f"model with string tensors has none in-process): "
            f"{', '.join(unchecked)}. The server loads them all the same; `invoke export` records the reference "
            "data of a model it exports, and a model without any is held to its own file in-process."
        )
        if not models and not own_files:
            pytest.exit(f"No model of {folder} can be checked: {said}", returncode=4)
        config.stash[UNCHECKED] = said[0].upper() + said[1:]
    config.stash[MODELS] = models
    config.stash[OWN_FILES] = own_files
    report = Report()
    report.held_to = {m.name: held_to(m) for m in models}
    report.held_to.update({o.name: {"held_to": "nothing", "error": o.error} for o in own_files if o.error})
    for kind, pick in PROBES.items():  # the models bad requests go to (the merge of shards needs to know)
        probe = pick(models)
        if probe is not None:
            report.probes[kind] = {"model": probe.name, "batches": probe.batching}
    report.timings["validation"] = time.perf_counter() - started
    if shard is not None:
        report.shard = shard_identity(shard, chosen.names, chosen.total, given.costs)
    report.costs = {
        m.name: {"export_s": export_seconds(m) or 0.0, "load_s": 0.0, "matrix_s": 0.0}
        for m in held
        if m.name in chosen.names
    }
    config.stash[REPORT] = report


def _nothing_to_run(
    config: pytest.Config, shard: shards.Shard, total: int, costs: shards.Costs | None
) -> None:
    """A shard the split gave no model (more shards than models): its report says so, with an empty junit.xml,
    and it ends passing without starting a server, so that merge-reports finds it whole."""
    reports = config.stash[KEY].reports
    report = Report(shard=shard_identity(shard, [], total, costs))
    report.write(reports)
    xml = getattr(config.option, "xmlpath", None)
    if xml:
        Path(xml).parent.mkdir(parents=True, exist_ok=True)
        Path(xml).write_text(
            '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" '
            'skipped="0" tests="0" time="0"/></testsuites>\n',
            encoding="utf-8",
        )
    pytest.exit(
        f"{shard.describe()} has no model: the split gave all {total} to the other shards.", returncode=0
    )


def _models(config: pytest.Config) -> list[Model]:
    return config.stash[MODELS]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    models = _models(metafunc.config)
    names = set(metafunc.fixturenames)
    if "case" in names:
        pairs = [(m, c.id) for m in models for c in m.reference.cases]
        metafunc.parametrize(("model", "case"), pairs, ids=[f"{m.name}-{c}" for m, c in pairs])
    elif "batched_model" in names:  # and the PT2 models that batch: the test says why they are not served so
        chosen = [m for m in models if m.dynamic_batching or (m.model_format == "pt2" and m.batching)]
        metafunc.parametrize("batched_model", chosen, ids=[m.name for m in chosen])
    elif "pt2_model" in names:  # a PT2 model that batches
        chosen = [m for m in models if m.model_format == "pt2" and m.batching]
        metafunc.parametrize("pt2_model", chosen, ids=[m.name for m in chosen])
    elif "pt2_any" in names:  # every PT2 model
        chosen = [m for m in models if m.model_format == "pt2"]
        metafunc.parametrize("pt2_any", chosen, ids=[m.name for m in chosen])
    elif "model" in names:
        metafunc.parametrize("model", models, ids=[m.name for m in models])
    elif "own_file" in names:
        own_files = metafunc.config.stash[OWN_FILES]
        metafunc.parametrize("own_file", own_files, ids=[o.name for o in own_files])
    if "protocol" in names:
        metafunc.parametrize("protocol", client.PROTOCOLS)


@pytest.fixture(scope="session")
def models(pytestconfig: pytest.Config) -> list[Model]:
    return _models(pytestconfig)


@pytest.fixture(scope="session")
def settings(pytestconfig: pytest.Config) -> Settings:
    """What this run was asked to do (tritonpt.matrix.settings)."""
    return pytestconfig.stash[KEY]


@pytest.fixture(scope="session")
def report(pytestconfig: pytest.Config) -> Report:
    return pytestconfig.stash[REPORT]


def _lost_at_start(instance: Server, exc: Exception) -> str:
    """Why a server that was ready stopped answering before the matrix began: how it ended, else that it hangs."""
    ended = instance.exit_state(wait=3.0)
    if ended:
        return instance.failure(f"{instance.describe()} {ended} as its models became ready")
    return instance.failure(f"{instance.describe()} stopped answering as its models became ready ({exc})")


@pytest.fixture(scope="session")
def triton(pytestconfig: pytest.Config, report: Report) -> Iterator[Server]:
    """One Triton for the whole session, started on free ports and always torn down."""
    given = pytestconfig.stash[KEY]
    reports = given.reports
    reports.mkdir(parents=True, exist_ok=True)
    models = [m.name for m in _models(pytestconfig)]
    instance = server.create(
        given.target,
        repository=given.repository,
        url=given.url,
        grpc_url=given.grpc_url,
        metrics_url=given.metrics_url,
        image=given.image,
        tritonserver=given.tritonserver,
        log_path=reports / "tritonserver.log",
        gpus=given.gpus,
        mounts=given.mounts,
        memory=given.memory,
        models=models if given.shard else (),
        upload=given.upload,
        replace=given.replace_loaded,
        pt2_build=given.pt2_build,
        sanitizer=given.sanitize,
    )
    started = time.perf_counter()
    try:
        instance.start()
        instance.wait_ready(given.start_timeout)
        report.timings["server start to ready"] = time.perf_counter() - started
        instance.wait_models_ready(models, given.start_timeout)
        report.timings["server start to all models ready"] = time.perf_counter() - started
        # The server can die between its readiness and the watchdog's start: a failure here is a start failure.
        metadata = client.server_metadata(instance.endpoints)
        for name, seconds in load_seconds(instance.log_tail(lines=100_000)).items():
            if name in report.costs:
                report.costs[name]["load_s"] = seconds
    except (TritonPtError, OSError, InferenceServerException) as exc:
        said = str(exc) if isinstance(exc, TritonPtError) else _lost_at_start(instance, exc)
        instance.stop()
        said += f"\n{left}" if (left := left_behind(instance)) else ""
        # One message and exit 1, instead of the same setup error repeated for every check.
        report.aborted = f"Triton did not come up with every model, so no check ran.\n\n{said}"
        pytest.exit(report.aborted, returncode=1)
    except BaseException:  # Ctrl-C while starting: nothing may be left running
        instance.stop()
        raise
    try:
        report.environment.update(
            {
                "target": instance.kind,
                "server": f"{metadata.get('name', 'triton')} {metadata.get('version', '?')}",
                "torch (references)": torch.__version__,
                "python": platform.python_version(),
                "host GPU": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            }
        )
        origin = instance.backend_origin()
        report.backend = origin
        report.environment["pytorch backend"] = (
            origin.describe() if origin is not None else "the server's own (origin not known to this runner)"
        )
        pt2 = instance.pt2_origin()
        report.pt2_backend = pt2
        if pt2 is not None:
            report.environment["pt2 backend"] = (
                f"{pt2.describe()}, installed as backends/{PT2_NAME}/ for torch_aoti models: server "
                f"{metadata.get('version', '?')} predates Triton {VERSIONS.pt2.native_ngc}, whose core refuses backend "
                "pytorch with platform torch_aoti, so the server is given a copy of the repository whose torch_aoti "
                f"configs name backend {PT2_NAME} (the repository's own configs are as NVIDIA documents them)"
            )
        matrix_started = time.perf_counter()
        with Watchdog(
            instance,
            lambda ending: _abort(pytestconfig, instance, report, reports, ending),
            what="while the matrix ran",
        ) as watchdog:
            pytestconfig.stash[WATCHDOG] = watchdog
            yield instance
        report.timings["matrix wall time"] = time.perf_counter() - matrix_started
        report.server_memory_mb = instance.memory_mb()
        with contextlib.suppress(
            TritonPtError, OSError, InferenceServerException
        ):  # the bare script replays these
            report.requests = {
                name: client.statistics(instance.endpoints, name).requests
                for name in models
                if instance.is_alive()
            }
    finally:
        instance.stop()
        if left := left_behind(instance):
            _say(pytestconfig, left)


def _say(config: pytest.Config, text: str) -> None:
    """``text`` on stderr past pytest's capture (a test or a fixture in progress has it captured), which stays
    suspended: what is said after is said too."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=False)
    sys.stderr.write(text)
    sys.stderr.flush()


def _abort(config: pytest.Config, instance: Server, report: Report, reports: Path, ending: Ending) -> None:
    """The server died or hung: the reports say so, the paragraph is said once (past pytest's capture), the
    server is stopped (killed, if it hung) and the run ends now (:func:`tritonpt.server.watchdog.end_now`).
    pytest's own junit.xml is not written; summary.md and summary.json are."""
    report.aborted = ending.paragraph
    _say(config, "")

    def write() -> str:
        report.write(reports)
        return str(reports)

    def say(text: str) -> None:
        sys.stderr.write(f"{text}\n")
        sys.stderr.flush()

    def policy() -> None:  # the one rerun after a known crash, for every way of running the matrix
        crash.after_abort(reports, run.RERUN_COMMAND if config.stash[KEY].rerun else None, say=say)

    end_now(instance, ending, what="run", write_reports=write, then=policy)


def pytest_runtest_call(item: pytest.Item) -> None:
    """A fault test's pause at a check it names (``$TRITONPT_HOLD_AT``: ``check `` for the first, the server up and
    watched; ``test_parity.py::`` for one mid-matrix), else nothing (tritonpt.stopping.hold_at)."""
    stopping.hold_at(f"check {item.nodeid}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if REPORT in item.config.stash:
        collected = item.config.stash[REPORT]
        if report.when == "call":
            _add_matrix_seconds(item, collected, report.duration)
        category, _, _ = item.config.hook.pytest_report_teststatus(report=report, config=item.config)
        if category:  # as pytest's own summary counts it (a setup or teardown that passed says nothing)
            collected.checks.setdefault(item.nodeid, []).append(str(category))
    watchdog = item.config.stash.get(WATCHDOG, None)
    if report.failed and watchdog is not None:
        watchdog.hold_while_unanswered(FAILURE_GRACE_S)  # a dying server: the watchdog ends the run meanwhile
    return report


EMPTY_PARAMETER_SET = "got empty parameter set"
KINDS = {
    "model": "model",
    "case": "model",
    "batched_model": "model that batches under dynamic batching (or PT2 model that batches)",
    "pt2_model": "PT2 model that batches",
    "pt2_any": "PT2 model",
}
"""The kind of model each parametrized argument takes (pytest_generate_tests), for the skip's reason."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A check of a kind of model the repository (or the shard) has none of (no PT2 model, none that batches) is
    reported skipped, saying so: a model filter that stops matching shows up as a skip, not as nothing. (The merge
    of shards counts such a check only where no shard ran it on a model, as one unsharded run would.)"""
    where = (
        "this shard's models"
        if KEY in config.stash and config.stash[KEY].shard
        else "the repository's models"
    )
    # Where every model has reference data (an export's), none is held to its own file: that check is left out,
    # not skipped, since there is nothing it could have run on in a repository of exports.
    own = [i for i in items if "own_file" in getattr(i, "fixturenames", ())]
    if own and not config.stash.get(OWN_FILES, []):
        config.hook.pytest_deselected(items=own)
        items[:] = [i for i in items if i not in own]
    for item in items:
        empty = [
            m
            for m in item.iter_markers("skip")
            if str(m.kwargs.get("reason", "")).startswith(EMPTY_PARAMETER_SET)
        ]
        if empty:
            taken = [KINDS[name] for name in KINDS if name in getattr(item, "fixturenames", ())]
            kind = taken[0] if taken else "model"
            reason = f"{EMPTY_PARAMETER_SET}: there is no {kind} among {where}, so this check has nothing to run on"
            item.add_marker(pytest.mark.skip(reason=reason), append=False)
        probe = item.get_closest_marker("probe")
        if probe is not None and REPORT in config.stash:
            config.stash[REPORT].probe_checks[item.nodeid] = str(probe.args[0])


def _add_matrix_seconds(item: pytest.Item, report: Report, seconds: float) -> None:
    """A check's time goes to the model it checks (its ``model``-like parameter); others to none."""
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        if isinstance(value, Model) and value.name in report.costs:
            report.costs[value.name]["matrix_s"] += seconds


@pytest.fixture(scope="session", autouse=True)
def _shard_in_junit(pytestconfig: pytest.Config, record_testsuite_property: object) -> None:
    """The shard's identity in junit.xml, as testsuite properties, for a reader of one shard's junit.xml
    (merge-reports takes it from summary.json)."""
    shard = pytestconfig.stash[REPORT].shard if REPORT in pytestconfig.stash else None
    if shard is not None and callable(record_testsuite_property):
        record_testsuite_property("tritonpt.shard", f"{shard['index']}/{shard['count']}")
        record_testsuite_property("tritonpt.shard.models", ",".join(shard["models"]))


@pytest.fixture(scope="session")
def gpus_expected(triton: Server) -> bool:
    """Whether this server was given GPUs: a container with a GPU request, or a local server on a GPU host."""
    if triton.kind == "container":
        return bool(getattr(triton, "gpus_requested", False))
    if triton.kind == "local":
        return torch.cuda.is_available()
    return False  # a server at a URL: we cannot tell what it was given


@pytest.fixture(scope="session")
def pt2_build(pytestconfig: pytest.Config) -> Pt2Build:
    """The PT2 build this run asked for (--pt2-build): what a server we start serves torch_aoti models with."""
    return pytestconfig.stash[KEY].pt2_build


@pytest.fixture(scope="session")
def strict_backend(pytestconfig: pytest.Config) -> bool:
    """The official libtriton_pytorch.so must serve every model, unless --no-strict-backend says otherwise."""
    return pytestconfig.stash[KEY].strict_backend


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if REPORT not in config.stash:
        return
    report = config.stash[REPORT]
    report.outcomes = {
        key: len(terminalreporter.stats.get(key, []))
        for key in ("passed", "failed", "skipped", "error")
        if terminalreporter.stats.get(key)
    }
    markdown, data = report.write(config.stash[KEY].reports)
    terminalreporter.write_sep("=", "Triton integration report")
    terminalreporter.write(report.to_markdown())
    terminalreporter.write_line(f"written: {markdown}, {data}")
    if UNCHECKED in config.stash:
        terminalreporter.write_line(config.stash[UNCHECKED], yellow=True)
