"""One server interface whatever runs it: finding tritonserver, its flags, the backend it needs, a URL.

These use the real nvidia-pytriton install on disk without starting it; tests/system/test_local_server.py starts it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import client, server
from tritonpt.backend import toolchain
from tritonpt.errors import ServerError, ServerStartError
from tritonpt.server import LocalServer, TritonFlags, TritonInstall, UrlServer
from tritonpt.server.base import Endpoints, ModelState
from tritonpt.server.local import pytorch_backend_for, server_library_folder
from tritonpt.server.logtext import briefly, hint_for, worth_reading
from tritonpt.server.ports import free_ports
from tritonpt.server.url import parse_endpoints
from tritonpt.versions import VERSIONS

from .conftest import MakeBackend


def embedded() -> TritonInstall:
    install = TritonInstall.locate(os.environ.get("TRITONSERVER"))
    if install.version != VERSIONS.embedded.server:
        pytest.skip(
            f"these checks describe the nvidia-pytriton server; {install.binary} is {install.version}"
        )
    return install


# --- fast: no server started -----------------------------------------------------------------------------------


def test_flags_render_the_tritonserver_command_line(tmp_path: Path) -> None:
    flags = TritonFlags(
        model_repository=tmp_path, backend_directory=tmp_path / "b", http_port=1, grpc_port=2, metrics_port=3
    )
    assert flags.render() == [
        f"--model-repository={tmp_path}",
        f"--backend-directory={tmp_path / 'b'}",
        "--http-address=127.0.0.1",
        "--http-port=1",
        "--grpc-address=127.0.0.1",
        "--grpc-port=2",
        "--metrics-address=127.0.0.1",
        "--metrics-port=3",
        "--model-control-mode=explicit",
        "--load-model=*",
        "--strict-readiness=true",
        "--exit-on-error=false",
        "--log-verbose=0",
        "--exit-timeout-secs=10",
        "--disable-auto-complete-config",
    ]
    polled = TritonFlags(
        model_repository=tmp_path, model_control_mode="poll", exit_on_error=True, extra=("--x",)
    )
    rendered = polled.render()
    assert not any(arg.startswith("--load-model") for arg in rendered)
    assert "--exit-on-error=true" in rendered
    assert rendered[-1] == "--x"


def test_locate_prefers_argument_then_environment_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = embedded().binary
    monkeypatch.setenv("TRITONSERVER", str(tmp_path / "missing"))
    assert TritonInstall.locate(real).binary == real
    with pytest.raises(ServerStartError, match=r"\$TRITONSERVER .*no such file exists"):
        TritonInstall.locate()
    monkeypatch.delenv("TRITONSERVER")
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "tritonserver").symlink_to(real)
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    found = TritonInstall.locate()
    assert found.binary == real
    assert found.version == VERSIONS.embedded.server  # the link resolves to the wheel's binary


def test_the_wheels_server_is_the_embedded_default(monkeypatch: pytest.MonkeyPatch) -> None:
    if Path("/opt/tritonserver/bin/tritonserver").exists():
        pytest.skip("/opt/tritonserver/bin/tritonserver comes before the wheel's server on this machine")
    monkeypatch.delenv("TRITONSERVER", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    install = TritonInstall.locate()
    assert install.binary.parts[-4:] == ("pytriton", "tritonserver", "bin", "tritonserver")
    assert install.version == VERSIONS.embedded.server
    assert install.libraries is not None
    assert install.libraries.name == "nvidia_pytriton.libs"
    assert not install.official_pytorch


def test_without_a_built_backend_the_wheels_server_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install = embedded()
    monkeypatch.setenv("TRITONPT_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(
        ServerStartError, match=r"has no pytorch/libtriton_pytorch\.so and none is built"
    ) as failure:
        pytorch_backend_for(install)
    assert "Hint: build the official backend with `invoke build-backend`" in str(failure.value)
    repository = tmp_path / "repository"
    repository.mkdir()
    refused = LocalServer(TritonFlags(model_repository=repository))
    with pytest.raises(ServerStartError, match="invoke build-backend"):
        refused.start()
    assert refused.pid is None  # nothing else was started in its place


def test_a_sanitized_serve_takes_only_the_instrumented_build_and_preloads_its_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_backend: MakeBackend
) -> None:
    install = embedded()
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITONPT_CACHE", str(cache))
    monkeypatch.delenv("ASAN_OPTIONS", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    stock = make_backend(key="stock", cache=cache)
    found = pytorch_backend_for(install)
    assert found is not None
    assert found.key == stock.key
    with pytest.raises(ServerStartError, match="instrumented with the address sanitizer") as failure:
        pytorch_backend_for(install, sanitizer="address")  # the stock build is not taken in its place
    assert "`invoke build-backend --sanitize address`" in str(failure.value)
    instrumented = replace(stock, sanitizer="address", flavor="+asan")
    repository = tmp_path / "repository"
    repository.mkdir()
    local = LocalServer(TritonFlags(model_repository=repository), pytorch_backend=instrumented)
    local.install = install
    env = local._environment()
    assert env["LD_PRELOAD"].split(" ")[0] == str(toolchain.sanitizer_runtime("address"))
    assert "abort_on_error=1" in env["ASAN_OPTIONS"]
    plain = LocalServer(TritonFlags(model_repository=repository), pytorch_backend=stock)
    plain.install = install
    assert "ASAN_OPTIONS" not in plain._environment() or os.environ.get("ASAN_OPTIONS")


def test_the_wheels_server_library_gets_its_plain_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install = embedded()
    monkeypatch.setenv("TRITONPT_CACHE", str(tmp_path))
    folder = server_library_folder(install)
    assert folder is not None
    assert folder.parent == tmp_path / "server-libs"
    link = folder / "libtritonserver.so"
    assert link.is_symlink()
    assert link.resolve().parent == install.libraries
    assert link.resolve().name.startswith("libtritonserver-")
    assert server_library_folder(install) == folder  # the second start reuses it
    assert sorted(p.name for p in folder.iterdir()) == ["libtritonserver.so"]  # no staged link left


def test_two_venvs_of_one_wheel_keep_their_own_library_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two venvs with the same nvidia-pytriton (the same libtritonserver-<hash>.so) share one cache: each gets a
    link of its own, so removing one venv leaves the other's whole."""
    install = embedded()
    assert install.libraries is not None
    monkeypatch.setenv("TRITONPT_CACHE", str(tmp_path / "cache"))
    folders = []
    for venv in ("venv-a", "venv-b"):
        libraries = tmp_path / venv / install.libraries.name
        shutil.copytree(install.libraries, libraries, symlinks=True)
        folder = server_library_folder(replace(install, libraries=libraries))
        assert folder is not None
        assert (folder / "libtritonserver.so").resolve().parent == libraries.resolve()
        folders.append(folder)
    assert folders[0] != folders[1]
    shutil.rmtree(tmp_path / "venv-a")  # a job's workspace removed with its venv
    assert (folders[1] / "libtritonserver.so").resolve().is_file()


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(3)
    assert len(set(ports)) == 3
    assert all(1024 <= port <= 65535 for port in ports)


@pytest.mark.parametrize(
    "given",
    [
        "http://triton.local:9002",
        "http://triton.local:9002/",
        "http://triton.local:9002/metrics",
        "triton.local:9002",
    ],
)
def test_a_metrics_url_names_the_port_or_the_path(given: str) -> None:
    """`--metrics-url http://host:8002`, in the same form as `--url http://host:8000`, once failed every
    metrics check (Triton answers `/` on that port with an empty 200)."""
    assert parse_endpoints("http://triton.local:8000", metrics_url=given).metrics_url == (
        "http://triton.local:9002/metrics"
    )


def test_a_metrics_url_with_another_path_is_kept() -> None:
    assert client.metrics_url("http://proxy.local/triton/metrics") == "http://proxy.local/triton/metrics"


def test_endpoints_from_a_url() -> None:
    assert parse_endpoints("http://triton.local:9000") == Endpoints(
        http="triton.local:9000", grpc="triton.local:8001", metrics_url="http://triton.local:8002/metrics"
    )
    assert parse_endpoints("10.0.0.5", grpc="grpc://10.0.0.5:9001").grpc == "10.0.0.5:9001"
    assert parse_endpoints("http://[::1]:8000").http == "[::1]:8000"
    with pytest.raises(ValueError, match="not http://HOST"):
        parse_endpoints("https://triton.example.com")
    assert (
        Endpoints.on_host("127.0.0.1", http_port=1, grpc_port=2, metrics_port=3).http_url
        == "http://127.0.0.1:1"
    )


def test_model_state_summary_drops_the_stub_traceback() -> None:
    state = ModelState(
        name="m",
        version="1",
        state="UNAVAILABLE",
        reason="Internal: TritonModelException: boom\n\nAt:\n  x.py(1)",
    )
    assert state.summary == "Internal: TritonModelException: boom"
    assert state.describe() == "m (version 1, UNAVAILABLE): Internal: TritonModelException: boom"
    assert not state.ready
    assert ModelState(name="m").describe() == "m (not loaded)"


def test_hints_and_log_filtering() -> None:
    assert hint_for("error: creating server: Internal - failed to stat file /nope") is not None
    assert hint_for("nothing we know") is None
    heap = hint_for("malloc_consolidate(): unaligned fastbin chunk detected\nSignal (6) received.")
    assert "heap corrupted" in (heap or "")  # glibc's reason wins over the bare signal
    aborted = hint_for(
        "terminate called after throwing an instance of 'std::out_of_range'\nSignal (6) received."
    )
    assert "SIGABRT" in (aborted or "")
    assert "heap" not in (aborted or "")
    segv = hint_for("Signal (11) received.\n 0# 0x55 in tritonserver")
    assert "SIGSEGV" in (segv or "")
    lines = [
        "+------+",
        "| Model | Version |",
        "I1130 server.cc:604] ",
        'E1130 server.cc:241] "CudaDriverHelper has not been initialized."',
        "E1130 model_lifecycle.cc:642] \"failed to load 'm' version 1\"",
    ]
    assert worth_reading(lines) == ["E1130 model_lifecycle.cc:642] \"failed to load 'm' version 1\""]


def test_a_missing_repository_fails_before_any_process_starts(tmp_path: Path) -> None:
    local = LocalServer(TritonFlags(model_repository=tmp_path / "nope"))
    with pytest.raises(ServerStartError, match="is not a folder") as failure:
        local.start()
    assert "Hint:" in str(failure.value)
    assert local.pid is None


def test_an_unreachable_url_fails_with_a_hint() -> None:
    [port] = free_ports(1)
    unreachable = UrlServer(f"http://127.0.0.1:{port}", start_timeout=0.5)
    with pytest.raises(ServerStartError, match=r"Cannot reach .* within \d+ s") as failure:
        unreachable.start()
    assert "Hint: start the server first" in str(failure.value)
    assert not unreachable.is_alive()


def test_create_picks_the_runner(tmp_path: Path) -> None:
    assert isinstance(server.create("auto", repository=tmp_path, url="http://127.0.0.1:8000"), UrlServer)
    assert isinstance(server.create("auto", repository=tmp_path), LocalServer)
    assert (
        server.create("local", repository=tmp_path, log_path=tmp_path / "l.log").log_path
        == tmp_path / "l.log"
    )
    with pytest.raises(ServerError, match="without a URL"):
        server.create("url", repository=tmp_path)


def test_an_unstarted_local_server_has_no_endpoints(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="has not been started"):
        _ = LocalServer(TritonFlags(model_repository=tmp_path)).endpoints


def test_a_torch_error_is_said_without_its_cpp_backtrace() -> None:
    said = (
        "load failed for model 'm': version 1 is at UNAVAILABLE state: Internal: failed to load model 'm':\n"
        "PytorchStreamReader failed reading zip archive: not a ZIP archive Exception raised from valid at "
        "/pytorch/caffe2/serialize/inline_container.cc:238 (most recent call first):\nframe #0: c10::Error::Error"
    )
    short = briefly(said)
    assert short.startswith("load failed for model 'm': version 1 is at UNAVAILABLE state")
    assert short.endswith("not a ZIP archive (torch's C++ backtrace left out)")
    assert "\n" not in short
    assert briefly("a plain\nanswer") == "a plain answer"


def test_a_load_thread_count_is_rendered_only_when_set(tmp_path: Path) -> None:
    assert not any(
        a.startswith("--model-load-thread-count") for a in TritonFlags(model_repository=tmp_path).render()
    )
    one = TritonFlags(model_repository=tmp_path, model_load_thread_count=1).render()
    assert "--model-load-thread-count=1" in one
