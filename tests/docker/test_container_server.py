"""The container target for real: ContainerServer on our ngc recipe built on the offline stand-in.

Needs a Docker engine and the stand-in images (tests/docker/conftest.py builds or reuses them), and Python
3.11 here (the stand-in's Python backend runs this venv's torch, mounted read-only). Run with
``pytest tests/docker/test_container_server.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testcontainers.core.config import testcontainers_config

from tritonpt import assertions, client, export, reference, repository
from tritonpt.errors import ServerStartError
from tritonpt.server import reaper
from tritonpt.server.container import ContainerServer
from tritonpt.server.engine import (
    HARNESS,
    HARNESS_LABEL,
    LIVE,
    NVIDIA_DEVICE,
    RYUK_DISABLED_ENV,
    SESSION_ID,
    SESSION_LABEL,
    reaper_or_labels,
)
from tritonpt.server.local import TritonFlags
from tritonpt.versions import VERSIONS
from tritonpt_ci import procs, standin

from ..helpers import wait_for_text

pytestmark = pytest.mark.slow

PORTS = ("8000/tcp", "8001/tcp", "8002/tcp")
OTHER_SESSION = "an-earlier-session"


@pytest.fixture(scope="module")
def ngc_image(standin_images: dict[str, standin.StandinImage]) -> str:
    """docker/ngc.Dockerfile on the Triton stand-in: what the container lane serves from."""
    return standin_images["ngc"].tag


@pytest.fixture(scope="module")
def model_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """multi_io exported into a folder of its own: pytest's tmp folders are 0700, the folder below is 0755."""
    root = tmp_path_factory.mktemp("container") / "repository"
    export.export_builtin(["multi_io"], repository=root)
    return root


def session_containers(client: Any) -> list[Any]:
    return list(
        client.containers.list(
            all=True, filters={"label": f"{SESSION_LABEL}={SESSION_ID}"}, ignore_removed=True
        )
    )


@pytest.fixture(scope="module")
def served(
    ngc_image: str, model_repository: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ContainerServer]:
    """One container for the read-only checks below, stopped at the module's end."""
    log = tmp_path_factory.mktemp("served") / "reports" / "tritonserver.log"
    with ContainerServer(
        repository=model_repository, image=ngc_image, log_path=log, gpus="none", mounts=standin.host_mounts()
    ) as server:
        yield server


# --- a running container ---------------------------------------------------------------------------------------


def test_it_is_ready_and_runs_the_official_backend(served: ContainerServer) -> None:
    assert served.kind == "container"
    assert served.is_alive()
    assert served.is_ready()
    assert served.startup_seconds is not None
    assert served.mounts[1:] == standin.host_mounts()  # the stand-in runs the host's libtorch
    assert not served.gpus_requested
    assert served.wait_models_ready(["multi_io"])["multi_io"].ready
    runtime = served.model_runtime("multi_io")
    assert (runtime.platform, runtime.backend, runtime.library) == (
        "pytorch_libtorch",
        "pytorch",
        "libtriton_pytorch.so",
    )
    origin = served.backend_origin()
    assert origin is not None
    assert (origin.ref, origin.commit) == (
        VERSIONS.backend.pytorch_backend.ref,
        VERSIONS.backend.pytorch_backend.commit,
    )


@pytest.mark.parametrize("protocol", client.PROTOCOLS)
def test_an_inference_equals_the_reference(
    served: ContainerServer, model_repository: Path, protocol: str
) -> None:
    [model] = repository.models(model_repository)
    expected = reference.load(model)
    for case in expected.cases:
        inputs = {info.name: array for info, array in zip(expected.inputs, case.inputs, strict=True)}
        names = [o.name for o in expected.outputs]
        got = client.infer(served.endpoints, protocol, "multi_io", inputs, names)
        failures = assertions.mismatches(
            assertions.compare_outputs(expected.outputs, got, case.outputs, gpu=False)
        )
        assert not failures, f"{case.id}: " + "\n".join(failures)


def test_ports_are_published_on_127_0_0_1_only(served: ContainerServer, docker_client: Any) -> None:
    info = docker_client.api.inspect_container(served.container_id)
    bindings = info["HostConfig"]["PortBindings"]
    published = info["NetworkSettings"]["Ports"]
    assert set(bindings) == set(PORTS)
    for port in PORTS:
        assert [b["HostIp"] for b in bindings[port]] == ["127.0.0.1"], bindings
        assert [b["HostIp"] for b in published[port]] == ["127.0.0.1"], published
    host_ports = {port: published[port][0]["HostPort"] for port in PORTS}
    endpoints = served.endpoints
    assert endpoints.http == f"127.0.0.1:{host_ports['8000/tcp']}"
    assert endpoints.grpc == f"127.0.0.1:{host_ports['8001/tcp']}"
    assert endpoints.metrics_url == f"http://127.0.0.1:{host_ports['8002/tcp']}/metrics"


def test_the_container_runs_our_command_mounts_and_labels(
    served: ContainerServer, model_repository: Path, docker_client: Any
) -> None:
    info = docker_client.api.inspect_container(served.container_id)
    command = info["Config"]["Cmd"]
    assert command == served.command
    assert {"--model-repository=/models", "--model-control-mode=explicit", "--load-model=*"} <= set(command)
    labels = info["Config"]["Labels"]
    assert labels[HARNESS_LABEL] == HARNESS
    assert labels[SESSION_LABEL] == SESSION_ID
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    assert mounts["/models"]["Source"] == str(model_repository.resolve())
    assert mounts[standin.CONTAINER_SITE_PACKAGES]["Source"] == str(standin.torch_site_packages().resolve())
    assert not any(m["RW"] for m in mounts.values())
    assert info["Config"]["User"] == "1000:1000"


def test_log_tail_reads_the_running_container(served: ContainerServer) -> None:
    tail = served.log_tail(200)
    assert "Started HTTPService" in tail
    assert len(served.log_tail(3).splitlines()) == 3


# --- a whole life: leftovers, stop, log, cleanup -----------------------------------------------------------------


def test_start_removes_exited_leftovers_and_stop_leaves_nothing(
    ngc_image: str, model_repository: Path, docker_client: Any, tmp_path: Path
) -> None:
    others = {HARNESS_LABEL: HARNESS, SESSION_LABEL: OTHER_SESSION}
    exited = docker_client.containers.run(ngc_image, ["true"], detach=True, labels=others)
    exited.wait(timeout=60)
    running = docker_client.containers.run(ngc_image, ["sleep", "300"], detach=True, labels=others)
    try:
        log = tmp_path / "reports" / "tritonserver.log"
        log.parent.mkdir(parents=True)
        log.write_text("a stale line of an earlier run\n", encoding="utf-8")
        server = ContainerServer(
            repository=model_repository,
            image=ngc_image,
            log_path=log,
            gpus="none",
            mounts=standin.host_mounts(),
        )
        server.start()
        try:
            ids = {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}
            assert exited.id not in ids, "an exited container of an earlier session must be removed at start"
            assert running.id in ids, "a running container of another session must be left alone"
            assert server.log_path == log
            # copied as it runs, from the start of this container's log: never stale
            assert wait_for_text(log, "Started HTTPService", 10)
            assert "a stale line" not in log.read_text(encoding="utf-8")
        finally:
            server.stop()
        assert not server.is_alive()
        server.stop()  # twice is fine
        text = log.read_text(encoding="utf-8")
        assert text.count("Started HTTPService") == 1, "the log is copied once, whole"
        assert "successfully unloaded 'multi_io'" in text  # stopped gracefully before the log was taken
        assert server.log_tail(2) == "\n".join(text.rstrip("\n").splitlines()[-2:])
        left = {c.id for c in session_containers(docker_client)}
        assert server.container_id not in left
        assert left <= {getattr(s, "container_id", None) for s in LIVE}, (
            "only containers of running servers remain"
        )
    finally:
        running.remove(force=True)
        if exited.id in {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}:
            exited.remove(force=True)


def owner_script(repository: Path, image: str, log: Path, *, then: str = "") -> str:
    """A process that starts a container server, prints its container id and session, then does ``then``."""
    return textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from tritonpt.server.container import ContainerServer
        from tritonpt.server.engine import SESSION_ID
        from tritonpt_ci import standin
        server = ContainerServer(repository=Path({str(repository)!r}), image={image!r},
                                 log_path=Path({str(log)!r}), gpus="none", mounts=standin.host_mounts())
        server.start()
        print(server.container_id, SESSION_ID, flush=True)
        {then}
        """
    )


def test_an_unstopped_server_is_stopped_at_exit(
    ngc_image: str, model_repository: Path, docker_client: Any, tmp_path: Path
) -> None:
    log = tmp_path / "tritonserver.log"
    script = owner_script(model_repository, ngc_image, log)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    container_id, session = done.stdout.strip().splitlines()[-1].split()
    assert container_id not in {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}
    assert "Started HTTPService" in log.read_text(encoding="utf-8")
    # The exit hook released the tether: it ends long before it would have waited out the engine (ENGINE_WAIT_S).
    assert client.poll_until(lambda: True if not tethers(session) else None, timeout=30), tethers(session)


def test_the_containers_of_a_killed_process_are_removed(
    ngc_image: str, model_repository: Path, docker_client: Any, tmp_path: Path
) -> None:
    """SIGKILL to the process and its whole group (a CI runner's tree kill): no exit hook runs, the tether
    (tritonpt.server.reaper) removes the container, and then ends itself."""
    with reaper_or_labels(docker_client) as ryuk:
        if ryuk:
            pytest.skip(
                "Ryuk runs here (its image is in the engine, or it was chosen): it removes these itself"
            )
    script = owner_script(model_repository, ngc_image, tmp_path / "tritonserver.log", then="time.sleep(600)")
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    ) as owner:
        try:
            assert owner.stdout is not None
            container_id, session = owner.stdout.readline().split()
            assert docker_client.containers.get(container_id).status == "running"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(owner.pid, signal.SIGKILL)

    def gone() -> bool | None:
        return (
            True
            if container_id
            not in {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}
            else None
        )

    assert client.poll_until(gone, timeout=30), (
        f"the container of a killed process still exists: {container_id}"
    )
    assert client.poll_until(lambda: True if not tethers(session) else None, timeout=10), (
        f"its tether runs: {tethers(session)}"
    )


def tethers(session: str) -> list[str]:
    """The tethers (tritonpt.server.reaper) of ``session`` that still run."""
    return [p.command for p in procs.every() if p.names(reaper.__file__) and p.names(session)]


# --- failures that teach ------------------------------------------------------------------------------------------


def test_a_container_that_exits_fails_fast_with_its_log_tail(
    ngc_image: str, model_repository: Path, docker_client: Any, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(model_repository, broken)
    (broken / "multi_io" / "1" / "model.pt").write_bytes(b"not a TorchScript archive")
    log = tmp_path / "tritonserver.log"
    server = ContainerServer(
        repository=broken,
        image=ngc_image,
        log_path=log,
        gpus="none",
        mounts=standin.host_mounts(),
        flags=TritonFlags(model_repository=broken, exit_on_error=True),
    )
    with pytest.raises(ServerStartError) as failure:
        server.start()
    message = str(failure.value)
    assert "exited with code 1 before Triton logged 'Started GRPCInferenceService'" in message
    assert "failed to load 'multi_io' version 1" in message  # Triton's own line, from the log tail
    assert "Hint: a model failed to load and --exit-on-error is on" in message
    assert "failed to load 'multi_io'" in log.read_text(encoding="utf-8")
    assert server.container_id not in {c.id for c in session_containers(docker_client)}


def test_a_repository_the_image_user_cannot_read_is_refused(
    ngc_image: str, model_repository: Path, docker_client: Any, tmp_path: Path
) -> None:
    private = tmp_path / "private"
    shutil.copytree(model_repository, private)
    private.chmod(0o700)
    before = {c.id for c in session_containers(docker_client)}
    with pytest.raises(
        ServerStartError, match=r"its user \(uid 1000, gid 1000\) cannot read 1 path"
    ) as failure:
        ContainerServer(repository=private, image=ngc_image, gpus="none").start()
    assert f"chmod -R a+rX {private}" in str(failure.value)
    assert {c.id for c in session_containers(docker_client)} == before


def test_an_image_the_engine_does_not_have_says_how_to_build_it(model_repository: Path) -> None:
    with pytest.raises(
        ServerStartError, match=r"tritonpt-standin:absent is not in the Docker engine"
    ) as failure:
        ContainerServer(repository=model_repository, image="tritonpt-standin:absent").start()
    assert "invoke build-image --recipe ngc" in str(failure.value)
    assert "python -m tritonpt_ci.standin" in str(failure.value)


def test_gpus_all_without_gpus_names_the_toolkit_and_the_doctor(
    ngc_image: str, model_repository: Path, docker_client: Any
) -> None:
    if "nvidia" in (docker_client.info().get("Runtimes") or {}) or NVIDIA_DEVICE.exists():
        pytest.skip("this engine can hand out GPUs: gpus='all' starts here")
    before = {c.id for c in session_containers(docker_client)}
    server = ContainerServer(repository=model_repository, image=ngc_image, gpus="all")
    with pytest.raises(ServerStartError, match=r"Cannot give the container GPUs \(gpus 'all'\)") as failure:
        server.start()
    message = str(failure.value)
    assert "NVIDIA Container Toolkit" in message
    assert f"invoke doctor --image {ngc_image}" in message
    assert {c.id for c in session_containers(docker_client)} == before


# --- Ryuk -----------------------------------------------------------------------------------------------------------


def test_ryuk_is_turned_off_only_around_our_start(
    monkeypatch: pytest.MonkeyPatch, docker_client: Any
) -> None:
    if docker_client.images.list(name=testcontainers_config.ryuk_image):
        pytest.skip(f"{testcontainers_config.ryuk_image} is in this engine: Ryuk runs as usual")
    monkeypatch.delenv(RYUK_DISABLED_ENV, raising=False)
    monkeypatch.setattr(testcontainers_config, "ryuk_disabled", False)
    with reaper_or_labels(docker_client) as ryuk:
        assert not ryuk
        assert testcontainers_config.ryuk_disabled
    assert not testcontainers_config.ryuk_disabled, "the process-wide setting must come back"

    monkeypatch.setenv(RYUK_DISABLED_ENV, "false")  # someone chose: Ryuk it is (testcontainers pulls it)
    with reaper_or_labels(docker_client) as ryuk:
        assert ryuk
        assert not testcontainers_config.ryuk_disabled
    assert os.environ[RYUK_DISABLED_ENV] == "false"
