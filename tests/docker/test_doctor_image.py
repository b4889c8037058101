"""The doctor's image checks against real images: the stand-in, an image laid out like NVIDIA's, broken ones.

Needs a Docker engine (``.ci/docker-engine.sh``) and the Debian stand-in base (``python -m tritonpt_ci.standin``
builds it; it needs root and debootstrap the first time). Images this module builds are tagged
``tritonpt-doctor-test:*`` and removed at the end. Run with ``pytest tests/docker/test_doctor_image.py``.

- ``official``: the pytriton server (bin/tritonserver a symbolic link to it), its libraries on LD_LIBRARY_PATH and a real backend library at
  backends/pytorch/libtriton_pytorch.so, labelled as Triton 25.10: everything resolves.
- ``broken``: ``tritonserver`` is /bin/true with its GLIBC_2.34 need rewritten to GLIBC_2.99 (newer than the
  image's 2.36: the "server copied onto an older base" failure), and the backend library comes without the
  libraries it needs; labelled with a 2.8 libtorch, older than the torch the models were exported with.
- ``debian``: the plain base, no Triton at all; ``absent``: a tag the engine does not have.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonpt import doctor, image
from tritonpt.doctor import Report, Status, compat
from tritonpt.errors import ImageError
from tritonpt_ci import standin

pytestmark = pytest.mark.slow

TEST_REPOSITORY = "tritonpt-doctor-test"
ABSENT = f"{TEST_REPOSITORY}:absent"
HAS_GPU = shutil.which("nvidia-smi") is not None


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[Any]:
    """The session's client; the images this module built are removed at its end."""
    yield docker_client
    for built in docker_client.images.list(name=TEST_REPOSITORY):
        for tag in built.tags:
            docker_client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def base(standin_base: str) -> str:
    """The debootstrap Debian bookworm base of the stand-in (tests/docker/conftest.py builds it)."""
    return standin_base


def _pytriton() -> tuple[Path, Path]:
    try:
        return standin.pytriton_server()
    except ImageError as exc:
        pytest.skip(str(exc))


def _raise_glibc_need(source: Path) -> bytes:
    """``source`` with its highest GLIBC_2.xy need renamed GLIBC_2.99 (same length, so nothing else moves)."""
    need = doctor.glibc_needed_by(source)
    assert need is not None
    assert need[0] == 2
    old = ("GLIBC_" + ".".join(map(str, need))).encode()
    new = b"GLIBC_2." + b"9" * (len(old) - len(b"GLIBC_2."))
    data = source.read_bytes()
    patched = data.replace(b"\x00" + old + b"\x00", b"\x00" + new + b"\x00")
    assert patched != data
    return patched


def _build(client: Any, tag: str, context: Path, dockerfile: str) -> str:
    (context / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    image.run_build(client, tag=tag, build_args={}, context=context)
    return tag


@pytest.fixture(scope="module")
def official(client: Any, base: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    server, libs = _pytriton()
    context = tmp_path_factory.mktemp("official")
    shutil.copytree(libs, context / "lib")
    shutil.copy(server / "bin" / "tritonserver", context / "tritonserver")
    shutil.copy(server / "backends" / "python" / "libtriton_python.so", context / "libtriton_pytorch.so")
    return _build(
        client,
        f"{TEST_REPOSITORY}:official",
        context,
        f"FROM {base}\n"
        "COPY lib/ /opt/tritonserver/lib/\n"
        "COPY tritonserver /opt/tritonserver/bin/tritonserver-2.51.0\n"
        "RUN ln -s tritonserver-2.51.0 /opt/tritonserver/bin/tritonserver\n"
        "COPY libtriton_pytorch.so /opt/tritonserver/backends/pytorch/libtriton_pytorch.so\n"
        "ENV LD_LIBRARY_PATH=/opt/tritonserver/lib\n"
        'LABEL io.tritonpt.ngc="25.10" io.tritonpt.backend-torch="2.9.0a0+145a3a7bda" '
        'io.tritonpt.min-driver="580.65.06" io.tritonpt.cuda="13.0.2"\n',
    )


@pytest.fixture(scope="module")
def broken(client: Any, base: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    server, _libs = _pytriton()
    context = tmp_path_factory.mktemp("broken")
    patched = _raise_glibc_need(Path("/bin/true"))
    (context / "tritonserver").write_bytes(patched)
    assert doctor.glibc_needed_by(context / "tritonserver") == (2, 99)
    shutil.copy(server / "backends" / "python" / "libtriton_python.so", context / "libtriton_pytorch.so")
    return _build(
        client,
        f"{TEST_REPOSITORY}:broken",
        context,
        f"FROM {base}\n"
        "COPY tritonserver /opt/tritonserver/bin/tritonserver\n"
        "COPY libtriton_pytorch.so /opt/tritonserver/backends/pytorch/libtriton_pytorch.so\n"
        'LABEL io.tritonpt.backend-torch="2.8.0a0+5228986c39" io.tritonpt.min-driver="580.65.06"\n',
    )


@pytest.fixture(scope="module")
def standin_ngc(standin_images: dict[str, standin.StandinImage]) -> str:
    """docker/ngc.Dockerfile built on the Triton stand-in (reused when its inputs did not change)."""
    return standin_images["ngc"].tag


@pytest.fixture(scope="module")
def repository(exported_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("doctor") / "repository"
    shutil.copytree(exported_small / "multi_io", target / "multi_io")
    return target


@pytest.fixture(scope="module")
def report_of(request: pytest.FixtureRequest, repository: Path, client: Any) -> Callable[[str], Report]:
    """The doctor's report on one of this module's images, made once per image."""
    made: dict[str, Report] = {}

    def report(kind: str) -> Report:
        if kind not in made:
            tag = {"debian": "base", "standin": "standin_ngc"}.get(kind, kind)
            image_tag = ABSENT if kind == "absent" else request.getfixturevalue(tag)
            mounts = standin.host_mounts() if kind == "standin" else ()
            made[kind] = doctor.run(image=image_tag, repository=repository, mounts=mounts, client=client)
        return made[kind]

    return report


def _measured(exported: str, served: str) -> tuple[Status, list[str]]:
    table = compat.load()
    pair = table.pair(exported, served, "torchscript") if table else None
    assert pair is not None, f"{compat.TABLE} has no {exported} -> {served} pair: `nox -s compat -- --write`"
    return (Status.OK if pair.verdict == "parity" else Status.FAIL), ["measured", pair.describe()]


EXPECTED = [
    ("standin", "glibc", Status.OK, ["glibc 2.36", "need at most GLIBC_2.3"]),
    (
        "standin",
        "pytorch backend",
        Status.OK,
        ["libraries of /opt/tritonserver/backends/pytorch/libtriton_pytorch.so resolve"],
    ),
    ("standin", "driver", Status.OK, ["needs no NVIDIA driver"]),
    ("standin", "model multi_io torch", Status.OK, ["measured", "served with parity"]),
    ("official", "image", Status.OK, ["Triton 25.10", "2.9.0a0+145a3a7bda", "labels of"]),
    ("official", "glibc", Status.OK, ["glibc 2.36", "need at most GLIBC_2.3"]),
    (
        "official",
        "pytorch backend",
        Status.OK,
        ["libraries of /opt/tritonserver/backends/pytorch/libtriton_pytorch.so resolve"],
    ),
    ("official", "model multi_io format", Status.OK, ["reads up to"]),
    ("official", "model multi_io torch", Status.OK, ["measured", "served with parity"]),
    (
        "broken",
        "glibc",
        Status.FAIL,
        [f"{doctor.SERVER_BINARY} needs GLIBC_2.99", "has glibc 2.36", "not found"],
    ),
    ("broken", "pytorch backend", Status.FAIL, ["not found: libtritonserver-", "libcudart-", "libarchive-"]),
    # a torch 2.9.1 export on libtorch 2.8: the verdict `nox -s compat` measured (src/tritonpt/doctor/compat.json)
    ("broken", "model multi_io torch", *_measured("2.9", "2.8")),
    ("debian", "image", Status.WARN, ["declares no Triton release"]),
    ("debian", "glibc", Status.FAIL, ["not a Triton server image"]),
    ("debian", "pytorch backend", Status.FAIL, ["no pytorch backend", "unable to find backend library"]),
    ("absent", "image", Status.FAIL, [f"no image {ABSENT}"]),
    ("absent", "glibc", Status.SKIP, [f"no image {ABSENT}"]),
]


@pytest.mark.parametrize(
    ("kind", "check", "status", "words"),
    [pytest.param(*row, id=f"{row[0]}-{row[1].replace(' ', '-')}") for row in EXPECTED],
)
def test_check(
    report_of: Callable[[str], Report], kind: str, check: str, status: Status, words: list[str]
) -> None:
    result = report_of(kind)[check]
    assert result.status is status, result
    for word in words:
        assert word in result.finding, result
    if status is not Status.OK:
        assert result.fix.endswith("."), result


@pytest.mark.parametrize("kind", ["standin", "official", "broken"])
def test_gpu_checks_skip_without_a_gpu_and_exit_code_follows_failures(
    report_of: Callable[[str], Report], kind: str
) -> None:
    report = report_of(kind)
    if not HAS_GPU:
        for name in ("nvidia runtime", "gpu in container"):
            assert report[name].status is Status.SKIP, report[name]
    assert report.exit_code == (1 if kind == "broken" else 0), [r for r in report if r.status is Status.FAIL]


def test_image_files_follow_a_linked_server_and_read_every_elf_file(client: Any, official: str) -> None:
    _server, libs = _pytriton()
    files = doctor.image_files(client, official)
    needs = {need.file: need.version for need in files.needs}
    assert needs["/opt/tritonserver/bin/tritonserver-2.51.0"] == (2, 34)
    assert doctor.PYTORCH_BACKEND in needs
    assert "/opt/tritonserver/bin/tritonserver" in files.paths  # the link itself
    elf_libraries = [p for p in libs.iterdir() if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    assert files.elf_files == len(elf_libraries) + 2  # the server, the backend
    assert files.missing == ()
    assert files.unreadable == ()


def test_without_an_nvidia_runtime_the_gpu_container_fails_with_the_toolkit_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, client: Any, official: str, repository: Path
) -> None:
    """A host whose driver answers (a stand-in nvidia-smi) but whose Docker cannot hand out GPUs: the engine's
    own refusal of ``--gpus all`` must come back as FAIL with the NVIDIA Container Toolkit fix."""
    if HAS_GPU:
        pytest.skip("this host has nvidia-smi: the real GPU path runs in the other tests")
    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the nvidia runtime registered")
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 580.95.05\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    report = doctor.run(image=official, repository=repository, client=client)
    gpu = report["gpu in container"]
    assert gpu.status is Status.FAIL, gpu
    assert "--gpus all failed" in gpu.finding
    assert "nvidia-ctk runtime configure" in gpu.fix
    assert report["nvidia runtime"].status is Status.FAIL
    assert report["driver"].status is Status.OK  # 580.95.05 >= the label's 580.65.06
    assert report.exit_code == 1


def test_no_container_is_left_behind(report_of: Callable[[str], Report], client: Any) -> None:
    report_of("broken")
    assert client.containers.list(all=True, filters={"label": doctor.CONTAINER_LABEL}) == []
