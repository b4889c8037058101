"""The doctor's judgements, on real files and real tool output: ELF version needs, models, driver, libraries.

No Docker needed (tests/docker/test_doctor_image.py runs the image checks against real images).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path

import pytest
from rich.console import Console

from tritonpt import doctor
from tritonpt.doctor import Backend, GlibcNeed, HostDriver, ImageFiles, Ran, Status, compat
from tritonpt.versions import VERSIONS, minor_of

from ..prerequisites import missing

DEFAULT = Backend.from_release(VERSIONS.triton)
HOST_GLIBC = doctor.parse_version(os.confstr("CS_GNU_LIBC_VERSION") or "")


def _pytriton_file(*parts: str) -> Path:
    spec = find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        missing("nvidia-pytriton", "install the project's dependencies (it is one)")
    path = Path(next(iter(spec.submodule_search_locations)), "tritonserver", *parts)
    if not path.is_file():
        missing(str(path), "the nvidia-pytriton install is incomplete; reinstall it")
    return path


def _glibc_strings(path: Path) -> tuple[int, ...]:
    """An independent oracle: the highest NUL-delimited ``GLIBC_x.y`` string anywhere in the file."""
    found = re.findall(rb"(?<=\x00)GLIBC_(\d+(?:\.\d+)+)(?=\x00)", path.read_bytes())
    return max(tuple(int(p) for p in v.decode().split(".")) for v in found)


# --- ELF version needs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/bin/ls", "/bin/true"])
def test_glibc_need_of_a_host_binary_matches_its_strings_and_this_glibc(path: str) -> None:
    need = doctor.glibc_needed_by(Path(path))
    assert need is not None
    assert need == _glibc_strings(Path(path))
    assert HOST_GLIBC is not None
    assert need <= HOST_GLIBC  # it runs here, so this glibc satisfies it


def test_glibc_need_of_the_pytriton_server_is_2_34() -> None:
    # objdump -T on the binary shows GLIBC_2.34 at most (seen on our machines).
    assert doctor.glibc_needed_by(_pytriton_file("bin", "tritonserver")) == (2, 34)


def test_glibc_need_of_the_pytriton_python_backend_is_at_most_2_34() -> None:
    need = doctor.glibc_needed_by(_pytriton_file("backends", "python", "libtriton_python.so"))
    assert need is not None
    assert need <= (2, 34)


def test_glibc_need_of_a_file_that_is_not_elf_names_the_file(tmp_path: Path) -> None:
    script = tmp_path / "tritonserver"
    script.write_text("#!/bin/sh\nexec true\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tritonserver: not a readable ELF file"):
        doctor.glibc_needed_by(script)


def test_parse_version_reads_the_forms_tools_print() -> None:
    assert doctor.parse_version("glibc 2.36") == (2, 36)
    assert doctor.parse_version("2.9.0a0+145a3a7bda") == (2, 9, 0)
    assert doctor.parse_version("2.9.1 (host, mounted)") == (2, 9, 1)
    assert doctor.parse_version("none") is None


# --- glibc: the server copied onto an older base ------------------------------------------------------------


def _files(*needs: GlibcNeed, paths: tuple[str, ...] = (doctor.SERVER_BINARY,)) -> ImageFiles:
    ordered = tuple(sorted(needs, key=lambda n: n.version, reverse=True))
    return ImageFiles(needs=ordered, elf_files=len(needs), paths=frozenset(paths))


def test_glibc_fails_naming_file_and_version_when_the_base_is_older() -> None:
    need = doctor.glibc_needed_by(_pytriton_file("bin", "tritonserver"))
    assert need is not None
    files = _files(GlibcNeed(file=doctor.SERVER_BINARY, version=need))
    result = doctor.check_glibc(tag="t:bullseye", glibc=(2, 31), files=files, glibc_error="", backend=DEFAULT)
    assert result.status is Status.FAIL
    assert doctor.SERVER_BINARY in result.finding
    assert "GLIBC_2.34" in result.finding
    assert "glibc 2.31" in result.finding
    assert "glibc >= 2.34" in result.fix


def test_glibc_fails_for_the_25_10_server_on_ubuntu_22_04() -> None:
    release = VERSIONS.release("25.10")
    files = _files(
        GlibcNeed(file=doctor.SERVER_BINARY, version=doctor.parse_version(release.glibc) or ()),
        GlibcNeed(file=doctor.PYTORCH_BACKEND, version=(2, 38)),
        GlibcNeed(file="/opt/tritonserver/lib/libtritonserver.so", version=(2, 34)),
    )
    result = doctor.check_glibc(
        tag="pytorch/pytorch+triton", glibc=(2, 35), files=files, glibc_error="", backend=DEFAULT
    )
    assert result.status is Status.FAIL
    assert f"{doctor.SERVER_BINARY} needs GLIBC_{release.glibc}" in result.finding
    assert doctor.PYTORCH_BACKEND in result.finding  # the other file that is too new
    assert "libtritonserver.so" not in result.finding  # 2.34 is fine on 2.35
    assert f"Ubuntu {release.ubuntu}, glibc {release.glibc}" in result.fix


def test_glibc_ok_names_the_highest_need() -> None:
    files = _files(
        GlibcNeed(file=doctor.SERVER_BINARY, version=(2, 34)),
        GlibcNeed(file="/x/libpython.so", version=(2, 35)),
    )
    result = doctor.check_glibc(tag="t", glibc=(2, 36), files=files, glibc_error="", backend=DEFAULT)
    assert result.status is Status.OK
    assert "GLIBC_2.35 (/x/libpython.so)" in result.finding


def test_glibc_fails_without_a_server_or_a_glibc() -> None:
    no_server = ImageFiles(needs=(), elf_files=0, paths=frozenset(), missing=(doctor.SERVER_BINARY,))
    result = doctor.check_glibc(tag="debian", glibc=(2, 36), files=no_server, glibc_error="", backend=DEFAULT)
    assert (result.status, "not a Triton server image") == (Status.FAIL, result.finding.split(": ", 1)[1])
    result = doctor.check_glibc(
        tag="alpine", glibc=None, files=_files(), glibc_error="getconf: not found", backend=DEFAULT
    )
    assert result.status is Status.FAIL
    assert "getconf: not found" in result.finding


# --- The pytorch backend's libraries (real ldd output) ------------------------------------------------------


def _ldd(path: Path) -> Ran:
    if shutil.which("ldd") is None:
        missing("ldd", "install libc-bin")
    done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
    return Ran(code=done.returncode, output=done.stdout + done.stderr)


BACKEND_FILES = frozenset({doctor.SERVER_BINARY, doctor.PYTORCH_BACKEND})


def test_backend_libraries_fail_listing_each_library_not_found(tmp_path: Path) -> None:
    # The Python backend's library copied away from the libraries its RPATH points at: a backend copied alone.
    lonely = tmp_path / "libtriton_pytorch.so"
    shutil.copy(_pytriton_file("backends", "python", "libtriton_python.so"), lonely)
    ldd = _ldd(lonely)
    files = ImageFiles(needs=(), elf_files=1, paths=BACKEND_FILES)
    result = doctor.check_pytorch_backend(tag="t", files=files, ldd=ldd)
    assert result.status is Status.FAIL
    missing = re.findall(r"^\s*(\S+) => not found", ldd.output, flags=re.MULTILINE)
    assert any(name.startswith("libtritonserver") for name in missing)
    for name in missing:
        assert name in result.finding
    assert "cannot open shared object file" in result.fix
    assert "$ORIGIN" in result.fix


def test_backend_libraries_ok_when_everything_resolves() -> None:
    ldd = _ldd(
        _pytriton_file("backends", "python", "libtriton_python.so")
    )  # its RPATH finds the wheel's libs
    files = ImageFiles(needs=(), elf_files=1, paths=BACKEND_FILES)
    result = doctor.check_pytorch_backend(tag="t", files=files, ldd=ldd)
    assert result.status is Status.OK, result.finding
    resolved = len(re.findall(r"=> /|^\s*/", ldd.output, flags=re.MULTILINE))  # the loader has no "=>"
    assert f"all {resolved} libraries" in result.finding


def test_backend_libraries_leave_driver_libraries_to_the_driver() -> None:
    ldd = _ldd(_pytriton_file("backends", "python", "libtriton_python.so"))
    with_driver = replace(ldd, output=ldd.output + "\tlibcuda.so.1 => not found\n")
    files = ImageFiles(needs=(), elf_files=1, paths=BACKEND_FILES)
    result = doctor.check_pytorch_backend(tag="t", files=files, ldd=with_driver)
    assert result.status is Status.OK
    assert "libcuda.so.1 come(s) from the NVIDIA driver" in result.finding


def test_backend_libraries_report_version_needs_ldd_prints() -> None:
    output = (
        "/opt/tritonserver/backends/pytorch/libtriton_pytorch.so: /lib/x86_64-linux-gnu/libstdc++.so.6: "
        "version `GLIBCXX_3.4.32' not found (required by /opt/tritonserver/backends/pytorch/libtorch_cpu.so)\n"
        "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n"
    )
    files = ImageFiles(needs=(), elf_files=1, paths=BACKEND_FILES)
    result = doctor.check_pytorch_backend(tag="t", files=files, ldd=Ran(code=1, output=output))
    assert result.status is Status.FAIL
    assert "GLIBCXX_3.4.32 (required by /opt/tritonserver/backends/pytorch/libtorch_cpu.so)" in result.finding


def test_no_backend_fails() -> None:
    result = doctor.check_pytorch_backend(tag="t", files=_files(), ldd=None)
    assert result.status is Status.FAIL
    assert "unable to find backend library for backend 'pytorch'" in result.finding


# --- Driver -------------------------------------------------------------------------------------------------


def test_the_doctor_lists_the_releases_that_serve_torch_aoti(tmp_path: Path) -> None:
    """On an image whose release has no PT2 path, the doctor names every release of versions.toml that has one."""
    results = doctor.check_models(_pt2_repository(tmp_path), DEFAULT)
    server = next(r for r in results if r.name == "model classifier_pt2 server")
    assert server.status is Status.FAIL
    serving = VERSIONS.torch_aoti_releases
    assert serving  # the table holds them: 26.03 on
    listed = ", ".join(f"Triton {r.ngc} (server {r.server})" for r in serving)
    assert f"whose own pytorch backend serves it: {listed}, each with the stock backend's known bugs" in (
        server.finding
    )
    assert "the validator's A rules apply" in server.finding
    assert "25.10 (server" not in server.finding.split("Images that serve it:")[1]
    assert f"--ngc {serving[0].ngc}" in server.fix
    assert all(r.ngc in server.fix for r in serving)


def test_driver_and_torch_not_stated_are_said_so() -> None:
    backend = Backend.from_release(
        VERSIONS.release("26.09")
    )  # notes name no driver; no branch names its torch
    assert (backend.min_driver, backend.torch, backend.cuda) == ("not stated", "not stated", "13.4.1")
    result = doctor.check_driver(HostDriver(nvidia_smi="nvidia-smi", versions=("580.95.05",)), backend)
    assert result.status is Status.WARN, result
    assert "minimum driver is not stated" in result.finding
    assert "CUDA 13.4.1" in result.fix
    skipped = doctor.check_driver(HostDriver(nvidia_smi=None), backend)
    assert skipped.status is Status.SKIP
    assert "not stated" in skipped.finding
    assert ">= not stated" not in skipped.finding


@pytest.mark.parametrize(
    ("host", "min_driver", "status"),
    [
        pytest.param(HostDriver(nvidia_smi=None), "580.65.06", Status.SKIP, id="no-nvidia-smi"),
        pytest.param(
            HostDriver(nvidia_smi="nvidia-smi", versions=("575.57.08",)), "580.65.06", Status.FAIL, id="older"
        ),
        pytest.param(
            HostDriver(nvidia_smi="nvidia-smi", versions=("580.95.05",)), "580.65.06", Status.OK, id="newer"
        ),
        pytest.param(
            HostDriver(nvidia_smi="nvidia-smi", versions=("580.95.05", "570.1.2")),
            "580.65.06",
            Status.FAIL,
            id="lowest-gpu-counts",
        ),
        pytest.param(
            HostDriver(nvidia_smi="nvidia-smi", error="NVIDIA-SMI has failed"),
            "580.65.06",
            Status.FAIL,
            id="smi-fails",
        ),
        pytest.param(HostDriver(nvidia_smi=None), "none", Status.OK, id="image-without-cuda"),
    ],
)
def test_driver(host: HostDriver, min_driver: str, status: Status) -> None:
    result = doctor.check_driver(host, replace(DEFAULT, min_driver=min_driver))
    assert result.status is status, result
    if status is Status.FAIL and host.versions:
        assert "570.1.2" in result.finding or "575.57.08" in result.finding
        assert f"driver {min_driver} or newer" in result.fix
    if status is not Status.OK:
        assert result.fix.endswith(".")


def test_host_driver_reads_nvidia_smi_and_its_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "nvidia-smi"
    monkeypatch.setenv("PATH", str(tmp_path))
    fake.write_text("#!/bin/sh\nprintf '580.95.05\\n580.95.05\\n'\n", encoding="utf-8")
    fake.chmod(0o755)
    assert doctor.host_driver() == HostDriver(nvidia_smi=str(fake), versions=("580.95.05", "580.95.05"))
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    fake.write_text(f'#!/bin/sh\necho "{message}"\nexit 9\n', encoding="utf-8")
    assert doctor.host_driver() == HostDriver(nvidia_smi=str(fake), error=message)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert doctor.host_driver() == HostDriver(nvidia_smi=None)


# --- Models -------------------------------------------------------------------------------------------------


def _set_exporter(model: Path, torch_version: str) -> None:
    path = model / "reference.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["provenance"]["torch_version"] = torch_version
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _measured(exported: str, backend_torch: str, fmt: str = "torchscript") -> compat.Pair:
    table = compat.load()
    assert table is not None, f"no {compat.TABLE}: `nox -s compat -- --write`"
    pair = table.pair(minor_of(exported), minor_of(backend_torch), fmt)
    assert pair is not None, f"{compat.TABLE} has no {exported} -> {backend_torch} {fmt} pair"
    return pair


def _status_of(pair: compat.Pair) -> Status:
    return Status.OK if pair.verdict == "parity" else Status.FAIL


def test_exported_models_pass_against_the_default_release(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    results = {r.name: r for r in doctor.check_models(repository, DEFAULT)}
    assert set(results) == {"model multi_io format", "model multi_io operators", "model multi_io torch"}
    assert f"up to {VERSIONS.pytorch.torchscript_max_format}" in results["model multi_io format"].finding
    pair = _measured(VERSIONS.pytorch.torch, DEFAULT.torch)
    assert pair.verdict == "parity", (
        pair.describe()
    )  # what nox -s compat measured: 2.9.1's exports on libtorch 2.9
    assert {r.status for r in results.values()} == {Status.OK}
    assert pair.describe() in results["model multi_io torch"].finding


def test_a_model_exported_by_the_newest_torch_is_judged_as_measured(
    repository_copy: Callable[..., Path],
) -> None:
    """The doctor's verdict on a newer torch's export is the compat run's, with its words, not a rule of thumb."""
    newest = max(VERSIONS.compat, key=lambda c: tuple(int(x) for x in c.torch.split(".")))
    repository = repository_copy("multi_io")
    _set_exporter(repository / "multi_io", newest.torch)
    report = doctor.run(image=None, repository=repository)
    result = report["model multi_io torch"]
    pair = _measured(newest.torch, VERSIONS.triton.backend_torch or "")
    assert result.status is _status_of(pair)
    assert "measured" in result.finding
    assert pair.describe() in result.finding
    assert report["model multi_io format"].status is Status.OK


@pytest.mark.parametrize(
    ("exported", "backend_torch", "measured"),
    [
        pytest.param("2.9.1", "2.9.0a0+145a3a7bda", True, id="2.9.1-on-2.9.0a0"),
        pytest.param("2.9.1", "2.8.0a0+34c6371d24", True, id="2.9.1-on-2.8"),
        pytest.param("2.9.1", "2.12.0a0+0291f960b6", True, id="2.9.1-on-2.12"),
        pytest.param("2.9.1", "2.9.1 (host, mounted)", True, id="stand-in-label"),
        pytest.param("2.8.2", "2.9.0a0+145a3a7bda", False, id="older-minor-not-measured"),
        pytest.param("2.10.0", "2.9.0a0+145a3a7bda", False, id="newer-minor-not-measured"),
        pytest.param("3.0.0", "2.9.0a0+145a3a7bda", False, id="newer-major-not-measured"),
    ],
)
def test_exporting_torch_against_the_backend(
    repository_copy: Callable[..., Path], exported: str, backend_torch: str, measured: bool
) -> None:
    repository = repository_copy("multi_io")
    _set_exporter(repository / "multi_io", exported)
    result = {r.name: r for r in doctor.check_models(repository, replace(DEFAULT, torch=backend_torch))}[
        "model multi_io torch"
    ]
    if measured:
        pair = _measured(exported, backend_torch)
        assert result.status is _status_of(pair)
        assert pair.describe() in result.finding
    else:
        assert result.status is Status.WARN
        assert "not measured" in result.finding
        assert str(compat.PAGE) in result.finding


def test_a_torchscript_format_newer_than_libtorch_reads_fails(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    model_file = repository / "multi_io" / "1" / "model.pt"
    newer = VERSIONS.pytorch.torchscript_max_format + 1
    rewritten = io.BytesIO()
    with zipfile.ZipFile(model_file) as source, zipfile.ZipFile(rewritten, "w") as target:
        for entry in source.infolist():
            data = source.read(entry)
            if entry.filename.endswith("/version") or entry.filename.endswith("/.data/version"):
                data = f"{newer}\n".encode()
            target.writestr(entry, data)
    model_file.write_bytes(rewritten.getvalue())
    result = {r.name: r for r in doctor.check_models(repository, DEFAULT)}["model multi_io format"]
    assert result.status is Status.FAIL
    assert str(model_file) in result.finding
    assert f"file format {newer}" in result.finding
    assert f"up to {VERSIONS.pytorch.torchscript_max_format}" in result.finding


def test_a_model_file_that_is_not_torchscript_fails(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    model_file = repository / "multi_io" / "1" / "model.pt"
    model_file.write_bytes(b"\x80\x04not a zip")
    result = {r.name: r for r in doctor.check_models(repository, DEFAULT)}["model multi_io format"]
    assert result.status is Status.FAIL
    assert "is not a TorchScript archive" in result.finding


def test_a_model_without_reference_json_warns(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    (repository / "multi_io" / "reference.json").unlink()
    result = {r.name: r for r in doctor.check_models(repository, DEFAULT)}["model multi_io torch"]
    assert result.status is Status.WARN
    assert "does not record it" in result.finding


def test_models_of_other_backends_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "python_model" / "1").mkdir(parents=True)
    (tmp_path / "python_model" / "config.pbtxt").write_text('backend: "python"\n', encoding="utf-8")
    [result] = doctor.check_models(tmp_path, DEFAULT)
    assert (result.name, result.status) == ("model python_model", Status.SKIP)


def test_missing_or_empty_repository_is_skipped(tmp_path: Path) -> None:
    [missing] = doctor.check_models(tmp_path / "nowhere", DEFAULT)
    [empty] = doctor.check_models(tmp_path, DEFAULT)
    assert (missing.status, empty.status) == (Status.SKIP, Status.SKIP)
    assert "invoke export" in missing.fix


# --- The whole run ------------------------------------------------------------------------------------------


def test_without_docker_the_docker_checks_fail_or_skip_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    report = doctor.run(image="tritonpt:ngc-25.10", repository=tmp_path / "repository")
    assert report["docker"].status is Status.FAIL
    assert "no-engine.sock" in report["docker"].finding
    assert "sudo bash .ci/docker-engine.sh" in report["docker"].fix
    for name in ("image", "glibc", "pytorch backend", "nvidia runtime", "gpu in container"):
        assert report[name].status is Status.SKIP, report[name]
    assert report.exit_code == 1


def test_render_shows_every_check_its_fix_and_a_summary(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    _set_exporter(repository / "multi_io", "2.11.0")  # not measured: a warning, with its fix
    (repository / "multi_io" / "1" / "model.pt").write_bytes(b"not a zip")  # a failure
    report = doctor.run(image=None, repository=repository)
    console = Console(record=True, width=400, file=io.StringIO())
    doctor.render(report, console)
    text = console.export_text()
    for result in report:
        assert result.name in text
    assert "FAIL" in text
    assert "Re-export with torch 2.9.x" in text
    assert f"{report.count(Status.FAIL)} fail" in text
    assert "problems found" in text


def test_exit_code_counts_failures_only() -> None:
    ok = doctor.Result(name="a", status=Status.OK, finding="fine")
    warn = doctor.Result(name="b", status=Status.WARN, finding="hm", fix="Look.")
    skip = doctor.Result(name="c", status=Status.SKIP, finding="no gpu", fix="Use one.")
    fail = doctor.Result(name="d", status=Status.FAIL, finding="broken", fix="Mend it.")
    assert doctor.Report(image=None, repository=Path(), results=(ok, warn, skip)).exit_code == 0
    assert doctor.Report(image=None, repository=Path(), results=(ok, fail)).exit_code == 1


def test_the_format_check_reads_only_the_versions_the_policy_loads(
    repository_copy: Callable[..., Path],
) -> None:
    """An empty older 0/ under the default latest-1 policy: Triton serves the model (the differential suite's
    older_version_folder_empty), so the doctor passes it, as validate does; under `all` it reads 0/ too."""
    repository = repository_copy("multi_io")
    (repository / "multi_io" / "0").mkdir()
    result = {r.name: r for r in doctor.check_models(repository, DEFAULT)}["model multi_io format"]
    assert result.status is Status.OK, result.finding
    config = repository / "multi_io" / "config.pbtxt"
    config.write_text("version_policy { all { } }\n" + config.read_text(encoding="utf-8"), encoding="utf-8")
    result = {r.name: r for r in doctor.check_models(repository, DEFAULT)}["model multi_io format"]
    assert result.status is Status.FAIL
    assert "0/model.pt is missing" in result.finding


def _pt2_repository(tmp_path: Path) -> Path:
    """One torch_aoti model folder (the server check reads only its config)."""
    model = tmp_path / "repository" / "classifier_pt2"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('name: "classifier_pt2"\nplatform: "torch_aoti"\n', encoding="utf-8")
    return tmp_path / "repository"


@pytest.mark.parametrize(
    ("backend", "status", "words"),
    [
        (replace(DEFAULT, named=False), Status.SKIP, "embedded server"),
        (DEFAULT, Status.FAIL, "torch_aoti needs Triton 26.03"),
        (replace(DEFAULT, pt2="r26.05 55bbe27"), Status.OK, "that build is stock (r26.05"),
        (
            replace(DEFAULT, pt2="r26.05+tritonpt.1 55bbe27"),
            Status.OK,
            "that build is patched (r26.05+tritonpt.1",
        ),
        (replace(DEFAULT, server="2.67.0", ngc="26.03"), Status.OK, "NVIDIA's stock PT2 path"),
        (Backend.from_release(VERSIONS.release("26.05")), Status.OK, "the stock backend's known bugs"),
    ],
    ids=["no-image", "ngc-25.10", "stand-in-with-pt2", "stand-in-with-patched-pt2", "ngc-26.03", "ngc-26.05"],
)
def test_a_pt2_model_needs_a_server_that_takes_torch_aoti(
    tmp_path: Path, backend: Backend, status: Status, words: str
) -> None:
    results = doctor.check_models(_pt2_repository(tmp_path), backend)
    server = next(r for r in results if r.name == "model classifier_pt2 server")
    assert server.status == status, server
    assert words in server.finding


@pytest.mark.parametrize(
    ("ngc", "status", "words"),
    [
        ("26.07", Status.OK, "on r26.05 standing in for r26.07"),
        ("26.08", Status.OK, "on r26.05 standing in for r26.08"),
        ("26.05", Status.OK, "measured"),
        ("26.10", Status.WARN, "the libtorch the backend bundles is not stated"),
    ],
)
def test_the_doctor_judges_a_repository_against_a_release_named_without_its_image(
    monkeypatch: pytest.MonkeyPatch,
    repository_copy: Callable[..., Path],
    tmp_path: Path,
    ngc: str,
    status: Status,
    words: str,
) -> None:
    """`tritonpt doctor --ngc RELEASE`: what a team asks before it picks a release it cannot pull here."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    repository = repository_copy("multi_io")
    report = doctor.run(image=None, repository=repository, ngc=ngc)
    result = report["model multi_io torch"]
    assert result.status is status, result
    assert words in result.finding
    assert f"versions.toml release {ngc}, named by --ngc" in result.finding
    if status is Status.OK:
        release = VERSIONS.release(ngc)
        assert _measured(VERSIONS.pytorch.torch, release.backend_torch or "").describe() in result.finding


def test_a_pt2_model_is_judged_against_the_named_releases_own_pt2_path(tmp_path: Path) -> None:
    results = doctor.check_models(_pt2_repository(tmp_path), Backend.from_release(VERSIONS.release("26.11")))
    server = next(r for r in results if r.name == "model classifier_pt2 server")
    assert server.status is Status.OK
    assert "Triton 26.11) serves it itself" in server.finding


@pytest.mark.parametrize(
    ("backend", "status", "words"),
    [
        (Backend.from_release(VERSIONS.release("26.11")), Status.OK, "Triton 26.11 serves BF16"),
        (
            Backend.from_release(VERSIONS.release("26.10")),
            Status.FAIL,
            "Triton 26.10 (versions.toml release 26.10)",
        ),
        (replace(DEFAULT, named=False), Status.FAIL, "the PT2 build here (pytorch_backend r26.05)"),
    ],
    ids=["26.11", "26.10", "embedded"],
)
def test_bf16_on_a_pt2_model_is_judged_by_the_release_that_serves_it(
    tmp_path: Path, backend: Backend, status: Status, words: str
) -> None:
    repository = _pt2_repository(tmp_path)
    config = repository / "classifier_pt2" / "config.pbtxt"
    config.write_text(
        config.read_text(encoding="utf-8")
        + 'input [ { name: "INPUT__0" data_type: TYPE_BF16 dims: [ 4 ] } ]\n'
        + 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]\n',
        encoding="utf-8",
    )
    results = {r.name: r for r in doctor.check_models(repository, backend)}
    bf16 = results["model classifier_pt2 bf16"]
    assert bf16.status is status, bf16
    assert words in bf16.finding
    assert "INPUT__0 TYPE_BF16" in bf16.finding
    assert "v2.75.0" in bf16.finding
    if status is Status.FAIL:
        assert "tritonpt doctor --ngc 26.11" in bf16.fix


def test_a_pt2_model_without_bf16_has_no_bf16_row(tmp_path: Path) -> None:
    results = doctor.check_models(_pt2_repository(tmp_path), Backend.from_release(VERSIONS.release("26.05")))
    assert "model classifier_pt2 bf16" not in {r.name for r in results}
