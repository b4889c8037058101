"""The pinned sources: a folder of git-archive tarballs or GitHub at the pinned commits; every sha256 checked."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from tritonpt.backend.layout import DOWNLOAD_TIMEOUT_S, SOURCES_ENV, Step, _quiet, cache_root
from tritonpt.errors import HINT, BackendError
from tritonpt.versions import VERSIONS, Backend, Source

# --- Sources ------------------------------------------------------------------------------------------------


def sources_folder(explicit: Path | str | None = None) -> Path | None:
    """``--sources DIR``, else ``$TRITONPT_SOURCES``, else None (download from GitHub)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(SOURCES_ENV)
    return Path(env) if env else None


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _archived_commit(path: Path) -> str:
    """The commit ``git archive`` recorded in the tarball's pax header, or "" when there is none."""
    with contextlib.suppress(tarfile.TarError, OSError), tarfile.open(path) as archive:
        return str(archive.pax_headers.get("comment", ""))
    return ""


def verify(source: Source, path: Path, *, where: str) -> None:
    """Raise ``BackendError`` unless ``path`` is the pinned tarball of ``source`` (sha256)."""
    digest = _sha256(path)
    if digest == source.sha256:
        return
    commit = _archived_commit(path)
    what = f"it is an archive of commit {commit}" if commit else "it is not a git archive tarball"
    msg = (
        f"Cannot use {path} ({where}) as the {source.name} source, as its sha256 is {digest}, not the pinned "
        f"{source.sha256} ({source.repository} {source.commit}); {what}.\n"
        f"{HINT} replace it with {source.url}, or fix the pin in versions.toml [backend] if the commit changed on purpose."
    )
    raise BackendError(msg)


def fetch_sources(
    folder: Path | None,
    *,
    cache: Path | None = None,
    step: Step = _quiet,
    backend: Backend = VERSIONS.backend,
) -> dict[str, Path]:
    """Each pinned source's tarball, verified: from ``folder``, or downloaded into the cache once."""
    found: dict[str, Path] = {}
    if folder is not None:
        if not folder.is_dir():
            msg = (
                f"Cannot read the backend sources from {folder}, as it is not a folder (--sources / ${SOURCES_ENV}).\n"
                f"{HINT} point it at a folder of <name>-<commit>.tar.gz tarballs, or leave both unset to download them."
            )
            raise BackendError(msg)
        for source in backend.sources:
            path = folder / source.tarball
            if not path.is_file():
                msg = (
                    f"Cannot find the {source.name} source: there is no {source.tarball} in {folder} "
                    f"(--sources / ${SOURCES_ENV}).\n{HINT} put {source.url} there under that name, or unset "
                    f"${SOURCES_ENV} to download every source."
                )
                raise BackendError(msg)
            verify(source, path, where=f"in {folder}")
            found[source.name] = path
        return found
    downloads = (cache or cache_root()) / "sources"
    downloads.mkdir(parents=True, exist_ok=True)
    for source in backend.sources:
        path = downloads / source.tarball
        if not path.is_file():
            step(f"downloading {source.name} {source.commit[:7]} from {source.url}")
            _download(source, path)
        verify(source, path, where="downloaded")
        found[source.name] = path
    return found


def _download(source: Source, target: Path) -> None:
    handle, name = tempfile.mkstemp(prefix=f".{source.tarball}.", dir=target.parent)
    partial = Path(name)
    try:
        url = source.url  # https://github.com/..., built from the pins
        with os.fdopen(handle, "wb") as out:
            response = urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S)  # noqa: S310
            with response:
                shutil.copyfileobj(response, out)
        verify(source, partial, where=f"downloaded from {source.url}")
        partial.replace(target)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        msg = (
            f"Cannot download the {source.name} source from {source.url}, as {reason}.\n"
            f"{HINT} without GitHub, give a folder of the tarballs with --sources DIR or ${SOURCES_ENV} "
            f"(files named <name>-<commit>.tar.gz, e.g. {source.tarball})."
        )
        raise BackendError(msg) from exc
    finally:
        partial.unlink(missing_ok=True)


def _unpack(tarballs: Mapping[str, Path], into: Path, step: Step) -> dict[str, Path]:
    step(f"unpacking {len(tarballs)} sources")
    into.mkdir(parents=True)
    folders: dict[str, Path] = {}
    for source in VERSIONS.backend.sources:
        with tarfile.open(tarballs[source.name]) as archive:
            _extract(archive, into, tarballs[source.name])
        folder = into / source.top_folder
        if not folder.is_dir():
            msg = f"Cannot find {source.top_folder}/ in {tarballs[source.name]}: it is not {source.repository}'s archive."
            raise BackendError(msg)
        folders[source.name] = folder
    return folders


def _extract(archive: tarfile.TarFile, into: Path, path: Path) -> None:
    """Unpack with tarfile's ``data`` filter; on Pythons without it (Debian 12's 3.11.2), refuse the same things."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    for member in archive.getmembers():
        name = Path(member.name)
        if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
            msg = f"Cannot unpack {path}: it holds {member.name!r}, which is not a plain file or folder inside it."
            raise BackendError(msg)
    archive.extractall(into)  # noqa: S202 - every member was checked above
