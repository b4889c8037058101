"""The container lane without a registry: offline stand-ins, our ngc recipe built on them, served for real.

Needs a Docker engine (``.ci/docker-engine.sh``) and, the first time, root and debootstrap for the base image
(later runs reuse the images: their tags are hashes of their inputs). Run with ``pytest tests/docker``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tritonpt import image
from tritonpt.backend import BuiltBackend
from tritonpt.errors import ImageError
from tritonpt.options import Mount
from tritonpt.versions import VERSIONS
from tritonpt_ci import standin

pytestmark = pytest.mark.slow

TEST_LABEL = "io.tritonpt.test"
READY_TIMEOUT_S = 120.0
HEALTHY_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[Any]:
    """The session's client; the containers this module ran are removed at its end."""
    yield docker_client
    for container in docker_client.containers.list(all=True, filters={"label": f"{TEST_LABEL}=standin"}):
        container.remove(force=True)


@pytest.fixture(scope="module")
def built(standin_images: dict[str, standin.StandinImage]) -> dict[str, standin.StandinImage]:
    """Base, Triton stand-in and docker/ngc.Dockerfile on it (tests/docker/conftest.py builds them)."""
    return standin_images


@pytest.fixture(scope="module")
def empty_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repository = tmp_path_factory.mktemp("empty") / "repository"
    repository.mkdir()
    repository.chmod(0o755)  # the container runs as uid 1000
    return repository


@pytest.fixture(scope="module")
def linear_repository(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """``lin``: a traced torch.nn.Linear(4, 2) as platform pytorch_libtorch, with an input and its eager output."""
    root = tmp_path_factory.mktemp("linear") / "repository"
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 2).eval()
    example = torch.randn(3, 4)
    version = root / "lin" / "1"
    version.mkdir(parents=True)
    torch.jit.trace(module, example).save(str(version / "model.pt"))
    (root / "lin" / "config.pbtxt").write_text(
        'name: "lin" platform: "pytorch_libtorch" max_batch_size: 8\n'
        'input [{name: "INPUT__0" data_type: TYPE_FP32 dims: [4]}]\n'
        'output [{name: "OUTPUT__0" data_type: TYPE_FP32 dims: [2]}]\n',
        encoding="utf-8",
    )
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    with torch.no_grad():
        expected = module(example).numpy()
    return root, example.numpy(), expected


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http://127.0.0.1 only
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextmanager
def serve(client: Any, tag: str, settings: standin.RunSettings) -> Iterator[tuple[Any, str]]:
    """Run ``tag`` with random 127.0.0.1 host ports; yield the container and its HTTP base URL once ready."""
    container = client.containers.run(
        tag,
        detach=True,
        ports={f"{port}/tcp": ("127.0.0.1", None) for port in settings.ports},
        volumes={
            str(m.source): {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in settings.mounts
        },
        environment=dict(settings.environment),
        labels={TEST_LABEL: "standin"},
    )
    try:
        container.reload()
        host_port = container.ports["8000/tcp"][0]["HostPort"]
        url = f"http://127.0.0.1:{host_port}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        status = 0
        while time.monotonic() < deadline:
            container.reload()
            if container.status == "exited":
                break
            try:
                status, _ = _get(f"{url}/v2/health/ready")
            except OSError:
                status = 0
            if status == 200:
                break
            time.sleep(0.25)
        if status != 200:
            logs = container.logs(tail=40).decode(errors="replace")
            pytest.fail(
                f"{tag} did not answer /v2/health/ready with 200 within {READY_TIMEOUT_S:.0f}s "
                f"(container {container.status}, last status {status}). Last log lines:\n{logs}\n"
                "Hint: 'failed to load' above names the model; the repository must be readable by uid 1000."
            )
        yield container, url
    finally:
        container.remove(force=True)


def test_standins_are_built_and_labelled(client: Any, built: dict[str, standin.StandinImage]) -> None:
    assert set(built) == {"base", "triton", "ngc"}
    info = client.api.inspect_image(built["ngc"].tag)
    labels = info["Config"]["Labels"]
    assert labels["io.tritonpt.recipe"] == "ngc"
    assert labels["io.tritonpt.triton-server"] == VERSIONS.embedded.server
    assert labels["io.tritonpt.ngc"] == VERSIONS.embedded.ngc
    assert labels["io.tritonpt.torch"] == VERSIONS.pytorch.torch
    assert labels["org.opencontainers.image.base.name"] == built["triton"].tag
    assert info["Config"]["User"] == "1000:1000"
    assert "/v2/health/ready" in " ".join(info["Config"]["Healthcheck"]["Test"])
    assert set(info["Config"]["ExposedPorts"]) == {"8000/tcp", "8001/tcp", "8002/tcp"}


def test_described_image_reads_labels_back(client: Any, built: dict[str, standin.StandinImage]) -> None:
    described = image.describe(client, built["ngc"].tag)
    assert described.id == built["ngc"].id
    assert described.size == built["ngc"].size > 0
    assert described.recipe == "ngc"
    assert described.labels["io.tritonpt.backend-torch"].startswith(VERSIONS.pytorch.torch)
    assert all(key.startswith("io.tritonpt.") for key in described.labels)


def test_second_build_reuses_every_image(client: Any, built: dict[str, standin.StandinImage]) -> None:
    again = {b.role: b for b in standin.build_all(client)}
    assert all(b.cached for b in again.values()), again
    assert {r: b.id for r, b in again.items()} == {r: b.id for r, b in built.items()}


def test_recipe_build_streams_its_output(
    client: Any, built: dict[str, standin.StandinImage], pytorch_backend: BuiltBackend
) -> None:
    lines: list[str] = []
    rebuilt = standin.build_ngc_on(
        client, triton=built["triton"].tag, pytorch_backend=pytorch_backend, force=True, on_line=lines.append
    )
    assert any(line.startswith("Step 1/") for line in lines), lines[:5]
    assert rebuilt.id == built["ngc"].id, "a rebuild from the layer cache must give the same image"


def test_recipe_refuses_a_base_of_another_release(
    client: Any, built: dict[str, standin.StandinImage], pytorch_backend: BuiltBackend
) -> None:
    overrides = {
        **standin.ngc_build_args(built["triton"].tag, pytorch_backend),
        "TRITON_NGC": VERSIONS.triton.ngc,
    }
    with pytest.raises(ImageError, match=rf"is Triton {VERSIONS.embedded.ngc}, not {VERSIONS.triton.ngc}"):
        image.build_image(recipe="ngc", tag="tritonpt-standin:refused", build_args=overrides, client=client)
    assert not client.images.list(name="tritonpt-standin:refused")


def test_recipe_on_standin_is_ready_and_healthy(
    client: Any, built: dict[str, standin.StandinImage], empty_repository: Path
) -> None:
    settings = standin.RunSettings(mounts=(Mount(source=empty_repository, target=standin.CONTAINER_MODELS),))
    with serve(client, built["ngc"].tag, settings) as (container, url):
        status, body = _get(f"{url}/v2")
        assert status == 200
        assert json.loads(body)["version"] == VERSIONS.embedded.server
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        health = ""
        while time.monotonic() < deadline:
            container.reload()
            health = container.attrs["State"].get("Health", {}).get("Status", "")
            if health == "healthy":
                break
            time.sleep(1)
        assert health == "healthy", container.attrs["State"].get("Health")
        assert container.exec_run(["id", "-u"]).output.strip() == b"1000"


def test_recipe_on_standin_serves_a_traced_model(
    client: Any,
    built: dict[str, standin.StandinImage],
    linear_repository: tuple[Path, np.ndarray, np.ndarray],
) -> None:
    repository, inputs, expected = linear_repository
    with serve(client, built["ngc"].tag, standin.run_settings(repository)) as (_, url):
        status, body = _get(f"{url}/v2/models/lin/config")
        assert status == 200
        config = json.loads(body)
        # The official backend: server 2.51.0 reports an empty runtime for it.
        assert (config["platform"], config["backend"], config["runtime"]) == (
            "pytorch_libtorch",
            "pytorch",
            "",
        )
        request = {
            "inputs": [
                {
                    "name": "INPUT__0",
                    "shape": list(inputs.shape),
                    "datatype": "FP32",
                    "data": inputs.ravel().tolist(),
                }
            ]
        }
        post = urllib.request.Request(  # noqa: S310 - http://127.0.0.1 only
            f"{url}/v2/models/lin/infer",
            data=json.dumps(request).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(post, timeout=30) as response:  # noqa: S310
            outputs = {o["name"]: o for o in json.loads(response.read())["outputs"]}
        got = np.asarray(outputs["OUTPUT__0"]["data"], dtype=np.float32).reshape(
            outputs["OUTPUT__0"]["shape"]
        )
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
