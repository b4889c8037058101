"""The pinned sources: a folder of git-archive tarballs or GitHub at the pinned commits; every one checked
against its pins (the tarball's sha256, else the digest of its files: :mod:`tritonpt.backend.pins`)."""

from __future__ import annotations

import contextlib
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path

from tritonpt import fetch
from tritonpt.backend import pins
from tritonpt.backend.layout import SOURCES_ENV, Step, cache_root, quiet
from tritonpt.errors import HINT, BackendError
from tritonpt.versions import VERSIONS, Backend, Source

# --- Sources ------------------------------------------------------------------------------------------------


def sources_folder(explicit: Path | str | None = None) -> Path | None:
    """``--sources DIR``, else ``$TRITONPT_SOURCES``, else None (download from GitHub)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(SOURCES_ENV)
    return Path(env) if env else None


def _archived_commit(path: Path) -> str:
    """The commit ``git archive`` recorded in the tarball's pax header, or "" when there is none."""
    with contextlib.suppress(tarfile.TarError, OSError), tarfile.open(path) as archive:
        return str(archive.pax_headers.get("comment", ""))
    return ""


def verify(source: Source, path: Path, *, where: str, shown: str | None = None) -> None:
    """Raise ``BackendError`` unless ``path`` holds the files of the pinned commit of ``source``.

    The tarball's sha256 is the fast path (our mirror's bytes); any other compression of the same files (GitHub's
    archive, another gzip level) is accepted by the digest of its unpacked files (:mod:`tritonpt.backend.pins`).
    A refusal names the files that differ, and the file as ``shown`` (a download's URL, not its partial file).
    """
    if fetch.sha256(path) == source.sha256:
        return
    try:
        found = pins.tree_of(path, source.top_folder, source.paths)
    except BackendError as exc:
        reason = (
            str(exc).removeprefix(f"Cannot use {path}: ").removeprefix(f"Cannot read {path} as ").rstrip(".")
        )
        detail = f"it is not a git archive of it ({reason})"
    else:
        if pins.digest(found) == source.tree:
            return
        pinned = pins.pinned_tree(source)
        detail = (
            f"it holds {pins.differences(found, pinned)}"
            if pinned is not None
            else f"the digest of its files is {pins.digest(found)}, not the pinned {source.tree}"
        )
    commit = _archived_commit(path)
    what = f"; it is an archive of commit {commit}" if commit and commit != source.commit else ""
    msg = (
        f"Cannot use {shown or path} ({where}) as the {source.name} source, as its files are not those of "
        f"{source.repository} {source.commit}: {detail}{what}.\n"
        f"{HINT} replace it with {source.url}, or fix the pin in versions.toml [backend] if the commit changed on "
        "purpose (`python -m tritonpt.backend --pin-trees DIR` prints the digests)."
    )
    raise BackendError(msg)


def fetch_sources(
    folder: Path | None,
    *,
    cache: Path | None = None,
    step: Step = quiet,
    backend: Backend = VERSIONS.backend,
) -> dict[str, Path]:
    """Each pinned source's tarball, verified: from ``folder``, or downloaded into the cache once."""
    return {source.name: fetch_source(source, folder, cache=cache, step=step) for source in backend.sources}


def fetch_source(
    source: Source, folder: Path | None, *, cache: Path | None = None, step: Step = quiet
) -> Path:
    """One pinned source's tarball, verified: ``folder/<name>-<commit>.tar.gz``, or downloaded into the cache once."""
    if folder is not None:
        if not folder.is_dir():
            msg = (
                f"Cannot read the pinned sources from {folder}, as it is not a folder (--sources / ${SOURCES_ENV}).\n"
                f"{HINT} point it at a folder of <name>-<commit>.tar.gz tarballs, or leave both unset to download them."
            )
            raise BackendError(msg)
        path = folder / source.tarball
        if not path.is_file():
            msg = (
                f"Cannot find the {source.name} source: there is no {source.tarball} in {folder} "
                f"(--sources / ${SOURCES_ENV}).\n{HINT} put {source.url} there under that name, or unset "
                f"${SOURCES_ENV} to download every source."
            )
            raise BackendError(msg)
        verify(source, path, where=f"in {folder}")
        return path
    downloads = (cache or cache_root()) / "sources"
    downloads.mkdir(parents=True, exist_ok=True)
    path = downloads / source.tarball
    if not path.is_file():
        step(f"downloading {source.name} {source.commit[:7]} from {source.url}")
        _download(source, path)
    verify(source, path, where="downloaded")
    return path


def _download(source: Source, target: Path) -> None:
    fetch.download(
        source.url,  # https://github.com/..., built from the pins
        target,
        check=lambda partial: verify(source, partial, where="downloaded", shown=source.url),
        what=f"the {source.name} source",
        offline=f"without GitHub, give a folder of the tarballs with --sources DIR or ${SOURCES_ENV} (files named "
        f"<name>-<commit>.tar.gz, e.g. {source.tarball}).",
        error=BackendError,
    )


def unpack(
    tarballs: Mapping[str, Path], into: Path, step: Step, *, backend: Backend = VERSIONS.backend
) -> dict[str, Path]:
    step(f"unpacking {len(tarballs)} sources")
    into.mkdir(parents=True)
    folders: dict[str, Path] = {}
    for source in backend.sources:
        with tarfile.open(tarballs[source.name]) as archive:
            _extract(archive, into, tarballs[source.name])
        folder = into / source.top_folder
        if not folder.is_dir():
            msg = f"Cannot find {source.top_folder}/ in {tarballs[source.name]}: it is not {source.repository}'s archive."
            raise BackendError(msg)
        folders[source.name] = folder
    return folders


def unpack_source(source: Source, tarball: Path, into: Path) -> Path:
    """Unpack the pinned part of ``source`` (its ``paths``, or all of it) from its verified ``tarball`` into the
    empty folder ``into``; returns ``into/<repo>-<commit>``."""
    with tarfile.open(tarball) as archive:
        _extract(archive, into, tarball, paths=source.paths, top=source.top_folder)
    folder = into / source.top_folder
    if not folder.is_dir():
        msg = f"Cannot find {source.top_folder}/ in {tarball}: it is not {source.repository}'s archive."
        raise BackendError(msg)
    return folder


def _extract(
    archive: tarfile.TarFile, into: Path, path: Path, *, paths: tuple[str, ...] = (), top: str = ""
) -> None:
    """Unpack with tarfile's ``data`` filter; on Pythons without it (Debian 12's 3.11.2), refuse the same things.
    With ``paths``, only the members below them (paths inside ``top``, the archive's top folder)."""
    members = [
        member
        for member in archive.getmembers()
        if not paths or pins.within(member.name.removeprefix(f"{top}/"), paths)
    ]
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, members=members, filter="data")
        return
    for member in members:
        name = Path(member.name)
        if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
            msg = f"Cannot unpack {path}: it holds {member.name!r}, which is not a plain file or folder inside it."
            raise BackendError(msg)
    archive.extractall(into, members=members)  # noqa: S202 - every member was checked above
