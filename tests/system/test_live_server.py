"""A live server whose disk we cannot see, with its admin APIs behind a key: `tritonpt check --upload` sends each
model through the load API, runs the matrix, and takes the models back.

One real tritonserver per module, started as a staging server would be: explicit model control, nothing loaded,
its model-repository API restricted on HTTP and gRPC (``--http-restricted-api`` / ``--grpc-restricted-protocol``,
server 2.51.0), its own repository empty. The checks run through the front door (`python -m tritonpt.matrix`, what
`tritonpt check` runs) in a subprocess; the key travels in its environment only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritonpt import backend, client
from tritonpt.repository import ModelDir
from tritonpt.server.local import LocalServer
from tritonpt.server.upload import Upload

from ..helpers import ROOT, STAGING_KEY, ready_models, staging_flags, upload_command

pytestmark = pytest.mark.slow

KEY = STAGING_KEY


@pytest.fixture(scope="module")
def staging(
    tmp_path_factory: pytest.TempPathFactory,
    pytorch_backend: backend.BuiltBackend,
    pt2_backend: backend.BuiltBackend,
) -> Iterator[LocalServer]:
    """The staging server, with both builds (TorchScript as ``pytorch``, PT2 as ``pt2``: server 2.51.0 predates
    the native torch_aoti path)."""
    folder = tmp_path_factory.mktemp("staging")
    flags = staging_flags(folder, backend.backend_directory(pytorch_backend, pt2_backend))
    server = LocalServer(flags, pytorch_backend=pytorch_backend, log_path=folder / "tritonserver.log")
    with server:
        yield server


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory, exported_small: Path, exported_pt2: Path) -> Path:
    """Two TorchScript models and one PT2 package, as exported (the upload names the pt2 backend in a torch_aoti
    model's config for a server before Triton 26.03, as this one is)."""
    whole = tmp_path_factory.mktemp("ours") / "repository"
    for name in ("multi_io", "fixed_shape"):
        shutil.copytree(exported_small / name, whole / name)
    shutil.copytree(exported_pt2 / "multi_io_pt2", whole / "multi_io_pt2")
    return whole


NAMES = ("multi_io", "fixed_shape", "multi_io_pt2")


def _check(
    server: LocalServer, repository: Path, reports: Path, *args: str, key: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != client.ADMIN_KEY_ENV}
    if key is not None:
        env[client.ADMIN_KEY_ENV] = key
    return subprocess.run(
        upload_command(server.endpoints, repository, reports, *args),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


def test_without_the_key_the_upload_is_refused_in_the_servers_words(
    staging: LocalServer, ours: Path, tmp_path: Path
) -> None:
    done = _check(staging, ours, tmp_path / "reports", key=None)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    # the load request goes over gRPC; server 2.51.0's own words name the header it wanted
    assert "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'" in said
    assert client.ADMIN_KEY_ENV in said  # and how to give it
    assert not ready_models(staging.endpoints, NAMES)


def test_with_the_key_every_model_is_uploaded_checked_and_taken_back(
    staging: LocalServer, ours: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    done = _check(staging, ours, reports, key=KEY)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = (reports / "summary.json").read_text(encoding="utf-8")
    for name in NAMES:
        assert f'"model": "{name}"' in summary  # parity rows for each, both formats
    assert not ready_models(staging.endpoints, NAMES), "an upload was left loaded"
    written = [p for p in reports.rglob("*") if p.is_file()]
    assert all(KEY not in p.read_text(encoding="utf-8", errors="replace") for p in written)
    assert KEY not in done.stdout + done.stderr


def test_a_name_the_server_already_serves_is_not_replaced(
    staging: LocalServer, ours: Path, tmp_path: Path
) -> None:
    theirs = Upload.of(ModelDir(root=ours / "fixed_shape"))  # a model of the same name, loaded by its owner
    with client.grpc(staging.endpoints) as grpc:
        grpc.load_model(
            "fixed_shape",
            config=theirs.request_config(pt2_backend=None),
            files=dict(theirs.files),
            headers={"triton-grpc-protocol-admin-key": KEY},
        )
    try:
        done = _check(staging, ours, tmp_path / "reports", key=KEY)
        said = done.stdout + done.stderr
        assert done.returncode != 0
        assert "Cannot upload fixed_shape" in said
        assert "--replace-loaded" in said
        assert ready_models(staging.endpoints, NAMES) == ["fixed_shape"]  # theirs, untouched; nothing of ours
    finally:
        with httpclient.InferenceServerClient(staging.endpoints.http) as http:
            http.unload_model("fixed_shape", headers={"admin-key": KEY})


def test_a_restricted_request_without_the_key_names_the_header(staging: LocalServer) -> None:
    with (
        httpclient.InferenceServerClient(staging.endpoints.http) as http,
        pytest.raises(InferenceServerException) as refused,
    ):
        http.get_model_repository_index()
    assert refused.value.status() == "403"
    assert "expecting header 'admin-key'" in str(refused.value)
