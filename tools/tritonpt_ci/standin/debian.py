"""The stand-in base: Debian bookworm (minbase, python3 and ca-certificates) from debootstrap, off the mirror apt
already uses (``/etc/apt/sources.list.d/``), imported into the engine as ``tritonpt-standin:base-bookworm-<hash>``.

Needs root, and ``debootstrap`` and ``tar`` on PATH (:func:`cannot_debootstrap` says what is missing, with the fix).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tritonpt import image
from tritonpt.errors import ImageError
from tritonpt.image import DockerClient
from tritonpt_ci.standin.images import LABEL, REPOSITORY, StandinImage, digest, existing, image_of

SUITE = "bookworm"
PACKAGES = ("python3", "ca-certificates")
"""python3 runs the recipes' health check (and the pytorch recipe's backend build)."""

_SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))


def debian_mirror(sources: Sequence[Path] = _SOURCES, suite: str = SUITE) -> str:
    """The first Debian mirror apt uses for ``suite`` (deb822 ``.sources`` or one-line ``.list`` files)."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(p for p in source.iterdir() if p.suffix in {".sources", ".list"})
        elif source.is_file():
            files.append(source)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".sources":
            for stanza in text.split("\n\n"):
                fields = _deb822(stanza)
                if "deb" in fields.get("types", "").split() and suite in fields.get("suites", "").split():
                    uris = fields.get("uris", "").split()
                    if uris:
                        return uris[0]
        else:
            for line in text.splitlines():
                words = [w for w in line.split() if not w.startswith("[")]
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    where = ", ".join(str(s) for s in sources)
    msg = f"Cannot find a Debian mirror for {suite} in {where}: pass one with --mirror http://deb.debian.org/debian."
    raise ImageError(msg)


def _deb822(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line.startswith("#") or ":" not in line or line[:1].isspace():
            continue
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    return fields


def base_tag(mirror: str, suite: str = SUITE) -> str:
    """``tritonpt-standin:base-<suite>-<hash of suite, variant, packages, mirror>``."""
    inputs = {"suite": suite, "variant": "minbase", "packages": sorted(PACKAGES), "mirror": mirror}
    return f"{REPOSITORY}:base-{suite}-{digest(inputs)}"


def cannot_debootstrap() -> str:
    """Why this process cannot build the base (a tool missing, not root), with the command that fixes it; ""."""
    missing = [tool for tool in ("debootstrap", "tar") if shutil.which(tool) is None]
    if missing:
        return (
            f"Cannot build the stand-in base without {' and '.join(missing)}: install it "
            f"(sudo apt-get install -y {' '.join(missing)}), then run this again."
        )
    if os.geteuid() != 0:
        return (
            "Cannot run debootstrap as a normal user: build the stand-in base once as root "
            "(sudo python -m tritonpt_ci.standin), then run this again."
        )
    return ""


def build_base(
    client: DockerClient,
    *,
    mirror: str | None = None,
    workdir: Path | None = None,
    force: bool = False,
    on_line: image.OnLine | None = None,
    suite: str = SUITE,
) -> StandinImage:
    """Debian ``suite`` (minbase + PACKAGES; bookworm for the stand-ins) from debootstrap, imported as an image;
    skipped if already there. Another suite comes from the same mirror as bookworm's (one archive)."""
    mirror = mirror or debian_mirror()
    tag = base_tag(mirror, suite)
    role = "base" if suite == SUITE else f"base {suite}"
    if not force and existing(client, tag) is not None:
        return image_of(client, role, tag, cached=True, seconds=0.0)
    reason = cannot_debootstrap()
    if reason:
        raise ImageError(reason)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tritonpt-standin-", dir=workdir) as tmp:
        root = Path(tmp) / "rootfs"
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            suite,
            str(root),
            mirror,
        ]
        _stream_process(command, on_line=on_line, what=f"debootstrap {suite} from {mirror}")
        # Downloaded .deb files and package lists are half the size and no use in the image.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (root / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        _import_rootfs(client, root, tag, mirror=mirror)
    return image_of(client, role, tag, cached=False, seconds=time.perf_counter() - started)


def _stream_process(command: Sequence[str], *, on_line: image.OnLine | None, what: str) -> None:
    recent: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None  # noqa: S101 - stdout=PIPE above
        for raw in proc.stdout:
            line = raw.rstrip()
            recent = [*recent[-19:], line]
            if on_line is not None and line:
                on_line(line)
        code = proc.wait()
    if code != 0:
        tail = "\n".join(recent[-12:])
        msg = f"Cannot {what}: `{' '.join(command)}` exited with {code}.\nLast output:\n{tail}"
        raise ImageError(msg)


def _import_rootfs(client: DockerClient, root: Path, tag: str, *, mirror: str) -> None:
    repository, _, version = tag.partition(":")
    changes = [
        f"LABEL {LABEL}=base",
        f"LABEL {LABEL}.mirror={mirror}",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8",
        'CMD ["/bin/bash"]',
    ]
    with subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE
    ) as tar:
        assert tar.stdout is not None  # noqa: S101 - stdout=PIPE above
        stream = tar.stdout

        def chunks() -> Iterator[bytes]:
            while block := stream.read(1 << 20):
                yield block

        client.api.import_image(
            src=chunks(), stream_src=True, repository=repository, tag=version, changes=changes
        )
        code = tar.wait()
    if code != 0:
        msg = f"Cannot import {root} as {tag}: tar exited with {code}."
        raise ImageError(msg)
