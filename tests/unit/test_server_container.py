"""The container target's pure parts: its command, readiness pattern, user and permission checks, arguments.

Nothing here talks to Docker; tests/docker/test_container_server.py runs real containers.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tritonpt import server
from tritonpt.errors import ServerError, ServerStartError
from tritonpt.server.container import (
    CONTAINER_MODELS,
    ENGINE_GONE,
    ContainerServer,
    check_readable,
    container_flags,
    image_user,
    started_pattern,
    unreadable_paths,
)
from tritonpt.server.local import TritonFlags
from tritonpt.server.logtext import STARTED_LINES

TRITON_START = (
    'I1130 10:12:53.027363 1 grpc_server.cc:2558] "Started GRPCInferenceService at 0.0.0.0:8001"\n'
    'I1130 10:12:53.027789 1 http_server.cc:4713] "Started HTTPService at 0.0.0.0:8000"\n'
    'I1130 10:12:53.071595 1 http_server.cc:362] "Started Metrics Service at 0.0.0.0:8002"\n'
)


def test_container_flags_point_inside_the_container_and_keep_the_rest() -> None:
    given = TritonFlags(
        model_repository=Path("/host/repo"),
        backend_directory=Path("/host/backends"),
        http_port=9000,
        exit_on_error=True,
        log_verbose=1,
    )
    flags = container_flags(given)
    args = flags.render()
    assert f"--model-repository={CONTAINER_MODELS}" in args
    assert not any(a.startswith("--backend-directory") for a in args)
    assert {"--http-address=0.0.0.0", "--grpc-address=0.0.0.0", "--metrics-address=0.0.0.0"} <= set(args)
    assert {"--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"} <= set(args)
    assert {
        "--model-control-mode=explicit",
        "--load-model=*",
        "--exit-on-error=true",
        "--log-verbose=1",
    } <= set(args)
    assert not any("shm-region-prefix" in a for a in args)


def test_the_default_command_matches_what_the_local_target_runs(tmp_path: Path) -> None:
    container = ContainerServer(repository=tmp_path, image="tritonpt:ngc-25.10")
    local = TritonFlags(model_repository=tmp_path).render()
    assert container.command[0] == "tritonserver"
    skip = ("--model-repository", "--http", "--grpc", "--metrics")
    assert [a for a in container.command[1:] if not a.startswith(skip)] == [
        a for a in local if not a.startswith(skip)
    ]


def test_started_pattern_needs_all_three_lines_in_any_order() -> None:
    pattern = started_pattern(TritonFlags(model_repository=Path("/m")))
    lines = TRITON_START.splitlines(keepends=True)
    assert pattern.search(TRITON_START)
    assert pattern.search("".join(reversed(lines)))
    for missing in range(3):
        assert not pattern.search("".join(line for i, line in enumerate(lines) if i != missing))


def test_started_pattern_skips_an_endpoint_turned_off() -> None:
    flags = TritonFlags(model_repository=Path("/m"), extra=("--allow-metrics=false",))
    without_metrics = "".join(
        line for line in TRITON_START.splitlines(keepends=True) if "Metrics" not in line
    )
    assert started_pattern(flags).search(without_metrics)
    assert STARTED_LINES["metrics"] not in started_pattern(flags).pattern


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("", None),
        ("root", None),
        ("0:0", None),
        ("1000:1000", (1000, 1000)),
        ("1001", (1001, 1001)),
        ("1000:50", (1000, 50)),
        ("triton-server", (1000, 1000)),
    ],
)
def test_image_user(user: str, expected: tuple[int, int] | None) -> None:
    assert image_user(user) == expected


def test_unreadable_paths_follow_owner_group_and_other_bits(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "m" / "1").mkdir(parents=True)
    model = root / "m" / "1" / "model.pt"
    model.write_bytes(b"x")
    config = root / "m" / "config.pbtxt"
    config.write_text("", encoding="utf-8")
    for folder in (root, root / "m", root / "m" / "1"):
        folder.chmod(0o755)
    model.chmod(0o644)
    config.chmod(0o644)
    assert unreadable_paths(root, 1000, 1000) == []

    model.chmod(0o600)
    assert unreadable_paths(root, 1000, 1000) == [model]
    owner = model.stat().st_uid
    assert unreadable_paths(root, owner, 12345) == []  # the owner's bits apply to the owner

    model.chmod(0o644)
    (root / "m").chmod(0o750)  # others may not enter: below it nothing more is listed
    assert unreadable_paths(root, 1000, 1000) == [root / "m"]
    group = (root / "m").stat().st_gid
    assert unreadable_paths(root, 1000, group) == []  # the group's bits apply to the group


def test_check_readable_names_the_paths_and_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    root.chmod(0o700)
    with pytest.raises(ServerStartError) as failure:
        check_readable(root, "1000:1000")
    message = str(failure.value)
    assert f"Cannot serve {root} from the container" in message
    assert "uid 1000, gid 1000" in message
    assert "mode 0700" in message
    assert f"chmod -R a+rX {root}" in message
    check_readable(root, "root")  # root reads everything: no check


def test_constructor_refuses_a_missing_image_and_unknown_gpus(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match=r"without an image.*invoke build-image --recipe ngc"):
        ContainerServer(repository=tmp_path, image=None)
    with pytest.raises(ServerError, match=r"Cannot use gpus 'some': choose one of auto, all, none"):
        ContainerServer(repository=tmp_path, image="t", gpus="some")  # type: ignore[arg-type]


def test_create_builds_an_unstarted_container_server(tmp_path: Path) -> None:
    made = server.create("auto", repository=tmp_path, image="tritonpt:ngc-25.10", gpus="none")
    assert isinstance(made, ContainerServer)
    assert (made.kind, made.gpus, made.image) == ("container", "none", "tritonpt:ngc-25.10")
    assert not made.is_alive()
    assert "not started" in made.describe()
    with pytest.raises(ServerError, match="has not been started"):
        _ = made.endpoints
    made.stop()  # nothing to stop: no error
    assert server.GPUS == ("auto", "all", "none")


# docker-py leaves its socket open when a connection fails (see image.docker_client); collected here.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_an_engine_that_no_longer_answers_is_a_verdict_with_its_own_hint(tmp_path: Path) -> None:
    """docker-py against a socket nobody listens on, as after the engine stopped: the engine went away."""
    import docker  # noqa: PLC0415 - the real client, talking to a socket that is not there

    gone = docker.DockerClient(base_url=f"unix://{tmp_path / 'docker.sock'}", version="1.41", timeout=5)
    container = ContainerServer(repository=tmp_path, image="tritonpt:ngc-25.10")
    container._client, container._id = gone, "0123456789ab"
    try:
        ended = container._exit_state()
    finally:
        gone.close()
        gc.collect()
    assert ended is not None
    assert ended.startswith(ENGINE_GONE)
    assert "No such file or directory" in ended
    assert "start the engine again" in (container._verdict_hint() or "")
