"""Lock-down, kept true: our containers run as a non-root user, publish their ports on 127.0.0.1 only and mount the
model repository read-only; the workflows have no zizmor finding of medium severity or worse.

Each is checked on a real running container (docker/ngc.Dockerfile on the offline stand-in, started by
ContainerServer as every run starts it), both as ``docker inspect`` reports it and from inside the container.
Every test here is one check of the reliability part ``lockdown`` (tests/docker/conftest.py writes it).
Run with ``pytest tests/docker/test_lockdown.py``.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonpt import assertions, client, export, reference
from tritonpt.repository import ModelDir
from tritonpt.server.container import CONTAINER_MODELS, ContainerServer
from tritonpt.server.engine import HARNESS, HARNESS_LABEL, SESSION_ID, SESSION_LABEL
from tritonpt_ci import standin

from ..prerequisites import missing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
PROBE = ".tritonpt-write-probe"
ZIZMOR_GATE = ("--offline", "--min-severity", "medium", "--format", "json")
"""zizmor's regular persona (the default), findings of medium severity or worse; exit 0 only without one."""
MEDIUM_OR_WORSE = {"Medium", "High"}
UID_LISTING = "grep -sH '^Uid:' /proc/[0-9]*/status"  # -s: a process that ended meanwhile is no error


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """multi_io exported into a folder of its own (0755 below pytest's 0700 tmp folder), mounted at /models."""
    root = tmp_path_factory.mktemp("lockdown") / "repository"
    export.export_builtin(["multi_io"], repository=root)
    return root


def _ngc(
    images: dict[str, standin.StandinImage], repository: Path, logs: Path, **more: Any
) -> ContainerServer:
    """The ngc recipe's stand-in image, started as every run starts it (``more``: ContainerServer's other options)."""
    return ContainerServer(
        repository=repository,
        image=images["ngc"].tag,
        log_path=logs / "tritonserver.log",
        gpus="none",
        mounts=standin.host_mounts(),
        **more,
    )


@pytest.fixture(scope="module")
def running(
    standin_images: dict[str, standin.StandinImage],
    repository: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ContainerServer]:
    with _ngc(standin_images, repository, tmp_path_factory.mktemp("lockdown-log")) as server:
        yield server


@pytest.fixture(scope="module")
def inspected(running: ContainerServer, docker_client: Any) -> dict[str, Any]:
    return dict(docker_client.api.inspect_container(running.container_id))


def run_inside(
    docker_client: Any, container_id: str, command: list[str], outputs: list[str], *, user: str = ""
) -> tuple[int, str]:
    """``docker exec`` in a running container (as its image's user unless ``user`` is given)."""
    code, output = docker_client.containers.get(container_id).exec_run(command, user=user)
    text = output.decode(errors="replace")
    outputs.append(text)
    return int(code), text


# --- What each check finds wrong (empty: nothing) -------------------------------------------------------------------


def user_problems(inspected: dict[str, Any]) -> list[str]:
    user = str(inspected["Config"]["User"])
    if not user:
        return ["the container has no User: it runs as root"]
    name = user.partition(":")[0]
    return [f"the container runs as {user!r}"] if name in {"0", "root"} else []


def root_processes(listing: str) -> list[str]:
    """The /proc/<pid>/status files (``grep -H '^Uid:'`` output) with uid 0 among their real, effective, saved
    or filesystem uids."""
    rows = [line.split(":Uid:", 1) for line in listing.splitlines() if ":Uid:" in line]
    return [path for path, uids in rows if "0" in uids.split()]


def port_problems(inspected: dict[str, Any]) -> list[str]:
    bindings = inspected["HostConfig"]["PortBindings"] or {}
    published = inspected["NetworkSettings"]["Ports"] or {}
    if not bindings:
        return ["the container publishes no port: the checks could not reach it"]
    found = []
    for port, where in {**bindings, **published}.items():
        hosts = sorted({binding["HostIp"] for binding in where or []})
        if hosts and hosts != ["127.0.0.1"]:  # none: exposed by the image, not published on the host
            found.append(f"{port} is published on {hosts}, not only on 127.0.0.1")
    return found


def mount_problems(inspected: dict[str, Any], repository: Path) -> list[str]:
    mounts = {m["Destination"]: m for m in inspected["Mounts"]}
    if CONTAINER_MODELS not in mounts:
        return [f"nothing is mounted at {CONTAINER_MODELS}: {sorted(mounts)}"]
    found = [f"mounted read-write: {target}" for target, m in mounts.items() if m["RW"]]
    if mounts[CONTAINER_MODELS]["Source"] != str(repository.resolve()):
        found.append(f"{CONTAINER_MODELS} mounts {mounts[CONTAINER_MODELS]['Source']}, not {repository}")
    return found


def write_inside(docker_client: Any, container_id: str, outputs: list[str], *, user: str) -> tuple[int, str]:
    return run_inside(
        docker_client, container_id, ["touch", f"{CONTAINER_MODELS}/{PROBE}"], outputs, user=user
    )


# --- The container every run starts --------------------------------------------------------------------------------


def test_the_container_is_configured_to_run_as_a_non_root_user(inspected: dict[str, Any]) -> None:
    assert not user_problems(inspected)


def test_no_process_in_the_container_runs_as_root(
    docker_client: Any, running: ContainerServer, lockdown_outputs: list[str]
) -> None:
    code, uid = run_inside(docker_client, running.container_id, ["id", "-u"], lockdown_outputs)
    assert code == 0, uid
    assert uid.strip() != "0", "docker exec runs as root: the image's user is root"
    # Every process, the server included: the real, effective, saved and filesystem uids from /proc.
    code, listing = run_inside(
        docker_client, running.container_id, ["sh", "-c", UID_LISTING], lockdown_outputs
    )
    assert code == 0, listing
    assert listing.count(":Uid:") >= 2, f"expected the server and this shell in the listing:\n{listing}"
    assert not root_processes(listing), listing
    _, command = run_inside(docker_client, running.container_id, ["cat", "/proc/1/cmdline"], lockdown_outputs)
    assert "tritonserver" in command, "the server is not the container's first process"


def test_every_published_port_is_bound_to_127_0_0_1(inspected: dict[str, Any]) -> None:
    assert not port_problems(inspected)


def test_the_repository_is_mounted_read_only(inspected: dict[str, Any], repository: Path) -> None:
    assert not mount_problems(inspected, repository)


@pytest.mark.parametrize("who", ["image-user", "root"])
def test_a_write_into_the_repository_fails_inside(
    docker_client: Any, running: ContainerServer, repository: Path, lockdown_outputs: list[str], who: str
) -> None:
    """Even root inside the container cannot write there: the mount refuses, not only the file modes."""
    code, output = write_inside(
        docker_client, running.container_id, lockdown_outputs, user="0" if who == "root" else ""
    )
    assert code != 0, f"touch {CONTAINER_MODELS}/{PROBE} succeeded as {who}"
    assert "Read-only file system" in output, output
    assert not (repository / PROBE).exists()


# --- The images' admin lock (tritonpt-serve) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def locked(
    standin_images: dict[str, standin.StandinImage],
    repository: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ContainerServer, str]]:
    """The ngc image run through its own tritonpt-serve, the operator's key in its environment (and in this
    process's, for the harness's own readiness checks, which read the repository index)."""
    key = secrets.token_hex(16)
    log = tmp_path_factory.mktemp("locked-log")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(client.ADMIN_KEY_ENV, key)
        with _ngc(
            standin_images, repository, log, program="tritonpt-serve", environment={client.ADMIN_KEY_ENV: key}
        ) as server:
            yield server, key


def test_the_image_serves_clients_and_locks_the_admin_apis_behind_the_operators_key(
    locked: tuple[ContainerServer, str],
) -> None:
    server, key = locked
    e = server.endpoints
    with httpclient.InferenceServerClient(e.http) as http:  # tritonclient's own, with no header of ours
        assert http.is_server_ready()
        assert http.get_model_metadata("multi_io")["name"] == "multi_io"
        assert http.get_inference_statistics("multi_io")["model_stats"]
        with pytest.raises(InferenceServerException) as refused:
            http.get_model_repository_index()
        assert refused.value.status() == "403"
        assert "expecting header 'admin-key'" in str(refused.value)
        with pytest.raises(InferenceServerException):
            http.get_trace_settings()
        assert http.get_model_repository_index(headers={"admin-key": key})
        assert http.get_log_settings(headers={"admin-key": key})
    with grpcclient.InferenceServerClient(e.grpc) as grpc:
        assert grpc.is_model_ready("multi_io")
        with pytest.raises(InferenceServerException) as refused:
            grpc.get_model_repository_index()
        assert "triton-grpc-protocol-admin-key" in str(refused.value)
        assert grpc.get_model_repository_index(headers={"triton-grpc-protocol-admin-key": key}).models
    reference_case = reference.load(ModelDir(root=server.repository / "multi_io"))
    case = reference_case.cases[0]
    got = client.infer(
        e,
        "grpc",
        "multi_io",
        {i.name: a for i, a in zip(reference_case.inputs, case.inputs, strict=True)},
        [o.name for o in reference_case.outputs],
    )
    assert not assertions.mismatches(
        assertions.compare_outputs(reference_case.outputs, got, case.outputs, gpu=False)
    )
    assert key not in server.log_tail(lines=100_000)


def test_without_a_key_the_image_locks_them_behind_one_nobody_holds(
    docker_client: Any, locked: tuple[ContainerServer, str], lockdown_outputs: list[str]
) -> None:
    """tritonpt-serve itself, inside the image, with a stand-in tritonserver that prints what it was given."""
    server, key = locked
    show = (
        "mkdir -p /tmp/shown && printf '#!/bin/sh\\necho \"$@\"\\n' > /tmp/shown/tritonserver"
        " && chmod +x /tmp/shown/tritonserver && PATH=/tmp/shown:$PATH"
    )
    given = []
    for _ in range(2):
        code, said = run_inside(
            docker_client,
            server.container_id,
            ["sh", "-c", f"{show} env -u {client.ADMIN_KEY_ENV} tritonpt-serve --model-repository=/models"],
            lockdown_outputs,
        )
        assert code == 0, said
        given.append(said.split())
    for args in given:
        assert args[-1] == "--model-repository=/models"
        http, grpc = args[0], args[1]
        assert http.startswith(
            "--http-restricted-api=model-repository,shared-memory,trace,logging:admin-key="
        )
        assert grpc.startswith(
            "--grpc-restricted-protocol=model-repository,shared-memory,trace,logging:admin-key="
        )
        assert len(http.rsplit("=", 1)[1]) == 64  # 32 random bytes, hex
        assert key not in http
    assert given[0][0] != given[1][0], "the same key twice: not random"
    code, said = run_inside(
        docker_client,
        server.container_id,
        ["sh", "-c", f"{show} {client.ADMIN_KEY_ENV}=given tritonpt-serve"],
        lockdown_outputs,
    )
    assert said.split()[0].endswith(":admin-key=given"), said


def test_the_checks_fail_on_a_container_that_is_not_locked_down(
    docker_client: Any,
    standin_images: dict[str, standin.StandinImage],
    tmp_path: Path,
    lockdown_outputs: list[str],
) -> None:
    """A control: root, a port on every address, the repository read-write; each check above must say so."""
    folder = tmp_path / "writable"
    folder.mkdir()
    folder.chmod(0o777)
    loose = docker_client.containers.run(
        standin_images["ngc"].tag,
        ["sleep", "120"],
        detach=True,
        user="0",
        ports={"8000/tcp": ("0.0.0.0", None)},  # noqa: S104 - the point of the control
        volumes={str(folder): {"bind": CONTAINER_MODELS, "mode": "rw"}},
        labels={HARNESS_LABEL: HARNESS, SESSION_LABEL: SESSION_ID},
    )
    try:
        inspected = dict(docker_client.api.inspect_container(loose.id))
        assert user_problems(inspected) == ["the container runs as '0'"]
        assert port_problems(inspected) == ["8000/tcp is published on ['0.0.0.0'], not only on 127.0.0.1"]
        assert mount_problems(inspected, folder) == [f"mounted read-write: {CONTAINER_MODELS}"]
        _, listing = run_inside(docker_client, loose.id, ["sh", "-c", UID_LISTING], lockdown_outputs)
        assert root_processes(listing), listing
        code, output = write_inside(docker_client, loose.id, lockdown_outputs, user="")
        assert code == 0, output
        assert (folder / PROBE).exists()
    finally:
        loose.remove(force=True)


# --- workflows ------------------------------------------------------------------------------------------------------


def _zizmor(folder: Path, outputs: list[str]) -> tuple[int, list[dict[str, Any]]]:
    binary = shutil.which("zizmor")
    if binary is None:
        missing("zizmor", "uv pip install zizmor (the test and lint groups carry it)")
    done = subprocess.run(
        [binary, *ZIZMOR_GATE, str(folder)], capture_output=True, text=True, timeout=120, check=False
    )
    outputs.extend([done.stdout, done.stderr])
    return done.returncode, list(json.loads(done.stdout or "[]"))


def test_the_workflows_have_no_zizmor_finding_of_medium_or_worse(lockdown_outputs: list[str]) -> None:
    code, findings = _zizmor(WORKFLOWS, lockdown_outputs)
    serious = [
        f"{f['ident']} ({f['determinations']['severity']}): {f['desc']}"
        for f in findings
        if f["determinations"]["severity"] in MEDIUM_OR_WORSE
    ]
    assert not serious, "zizmor --min-severity medium:\n" + "\n".join(serious)
    assert code == 0, f"zizmor exited {code}"


def test_the_zizmor_gate_fails_on_a_medium_finding(tmp_path: Path, lockdown_outputs: list[str]) -> None:
    """The same command on a workflow with a known medium finding (a checkout that keeps its credentials)."""
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    (folder / "leaky.yml").write_text(
        textwrap.dedent(
            """\
            name: leaky
            on: [push]
            permissions: {}
            jobs:
              build:
                name: build
                runs-on: ubuntu-latest
                steps:
                  - uses: actions/checkout@08eba0b27e820071cde6df949e0beb9ba4906955 # v4.3.0
                  - run: echo built
            """
        ),
        encoding="utf-8",
    )
    code, findings = _zizmor(folder, lockdown_outputs)
    assert code != 0, "zizmor passed a workflow with a medium finding: the gate would not fail"
    assert {f["ident"] for f in findings} == {"artipacked"}
    assert {f["determinations"]["severity"] for f in findings} == {"Medium"}
