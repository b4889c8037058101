"""Faults of a live server while `tritonpt check --url ... --upload` (the matrix's ``--upload``) works on it.

The staging server is a real tritonserver run by this module as a cluster runs one (tests.helpers.staging_flags:
explicit model control, its model-repository API behind a key). Each fault must end the run with one paragraph,
exit 1, and leave none of the run's uploads loaded there (the ``loaded_models`` leftover):

- the gRPC connection dropped during an upload (a relay between the check and the server resets it mid-request,
  after the first model was loaded);
- the server restarted between the upload and the checks (it loses every model loaded through its API);
- an upload the server refuses halfway (the second model's file is not TorchScript).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import backend, client
from tritonpt.server.local import LocalServer, TritonFlags

from ..helpers import STAGING_KEY, staging_flags, upload_command
from .injector import MATRIX_MOMENTS, FaultRun, Outcome, Uploads
from .relay import Relay

pytestmark = pytest.mark.slow

NAMES = ("fixed_shape", "multi_io")
"""Uploaded in this order (the repository's, by name): the faults land on multi_io, after fixed_shape loaded."""
UPLOAD_BOUND_S = 15.0
"""From the fault to the exit: the uploads before it unloaded, the paragraph said."""
START_TIMEOUT_S = 240.0


class Staging:
    """The staging server, which a fault may restart on the same ports (a pod restarted behind its service)."""

    def __init__(self, folder: Path, pytorch_backend: backend.BuiltBackend) -> None:
        self.folder = folder
        self.pytorch_backend = pytorch_backend
        self.server = self._start(staging_flags(folder, backend.backend_directory(pytorch_backend)))

    def _start(self, flags: TritonFlags) -> LocalServer:
        server = LocalServer(
            flags, pytorch_backend=self.pytorch_backend, log_path=self.folder / "tritonserver.log"
        )
        server.start()
        return server

    def restart(self) -> None:
        """Stop it (SIGTERM, as an orchestrator does) and start it again where it answered."""
        flags = self.server.flags  # with the ports it was given
        self.server.stop()
        self.server = self._start(flags)

    def uploads(self) -> Uploads:
        return Uploads(server=lambda: self.server.endpoints, names=NAMES, headers={"admin-key": STAGING_KEY})


@pytest.fixture(scope="module")
def staging(
    tmp_path_factory: pytest.TempPathFactory, pytorch_backend: backend.BuiltBackend
) -> Iterator[Staging]:
    made = Staging(tmp_path_factory.mktemp("staging"), pytorch_backend)
    try:
        yield made
    finally:
        made.server.stop()


@pytest.fixture
def ours(exported_small: Path, tmp_path: Path) -> Path:
    """fixed_shape and multi_io, as exported."""
    repository = tmp_path / "ours"
    for name in NAMES:
        shutil.copytree(exported_small / name, repository / name)
    return repository


def _upload_fault(fault: Callable[..., FaultRun], staging: Staging, ours: Path, what: str) -> FaultRun:
    return fault(
        what,
        "check --upload (url)",
        UPLOAD_BOUND_S,
        repository=ours,
        cache=ours.parent / "cache",  # its own: a check at a URL writes nothing there; other workers may
        env={client.ADMIN_KEY_ENV: STAGING_KEY},
        uploads=staging.uploads(),
    )


def _said_once(outcome: Outcome, *phrases: str) -> bool:
    """The paragraph said what happened, with a hint, once."""
    return all(p in outcome.output for p in phrases) and outcome.output.count("Hint:") >= 1


def test_a_connection_dropped_during_an_upload_ends_the_run(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], staging: Staging, ours: Path
) -> None:
    run = _upload_fault(fault, staging, ours, "gRPC connection reset during an upload")
    endpoints = staging.server.endpoints
    host, port = endpoints.grpc.rsplit(":", 1)
    with Relay((host, int(port)), cut_at=NAMES[1].encode()) as relay:
        through = replace(endpoints, grpc=f"127.0.0.1:{relay.port}")
        run.start(upload_command(through, ours, run.folder / "reports"))
        run.inject(lambda: run.require(relay.cut.wait(START_TIMEOUT_S), "the upload never reached multi_io"))
        outcome = run.finish(expected_exit=(1,))
    log = staging.server.log_tail(100_000)
    outcome.extra_ok = _said_once(
        outcome, "Cannot upload multi_io", "the connection was lost during the upload", "no check ran"
    ) and ("successfully unloaded 'fixed_shape'" in log)  # it was loaded first, and taken back
    record(outcome)
    assert outcome.passed, outcome.explain()


def test_a_server_restarted_between_upload_and_check_ends_the_run(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], staging: Staging, ours: Path
) -> None:
    run = _upload_fault(fault, staging, ours, "server restarted after the upload")
    run.hold(MATRIX_MOMENTS["at start"])  # uploaded, ready, watched: the first check
    run.start(upload_command(staging.server.endpoints, ours, run.folder / "reports"))
    run.wait_held(START_TIMEOUT_S)
    run.require(staging.uploads().ready() == list(NAMES), "the uploads were not ready at the first check")
    run.inject(staging.restart)
    outcome = run.finish(expected_exit=(1,))
    summary = run.folder / "reports" / "summary.md"
    outcome.extra_ok = (
        _said_once(outcome, "lost a model this run uploaded", "was restarted after the upload")
        and summary.is_file()
        and "The run was aborted" in summary.read_text(encoding="utf-8")
    )
    record(outcome)
    assert outcome.passed, outcome.explain()


def test_an_upload_refused_halfway_ends_the_run(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], staging: Staging, ours: Path
) -> None:
    (ours / NAMES[1] / "1" / "model.pt").write_bytes(
        b"not TorchScript"
    )  # refused by Triton, after fixed_shape
    run = _upload_fault(fault, staging, ours, "upload refused by the server halfway")
    run.start(upload_command(staging.server.endpoints, ours, run.folder / "reports", "--skip-validation"))
    run.inject(lambda: run.wait_output("Cannot upload multi_io", START_TIMEOUT_S))
    outcome = run.finish(expected_exit=(1,))
    outcome.extra_ok = _said_once(
        outcome, "Cannot upload multi_io", "the server could not load it", "no check ran"
    )
    record(outcome)
    assert outcome.passed, outcome.explain()
