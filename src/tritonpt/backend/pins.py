"""What a pinned source is: the files of one commit, wherever its tarball came from.

A tarball's sha256 pins one compression, so the pin that matters is over the unpacked files: a manifest (one
line per file: content sha256, mode, path; only below a source's ``paths`` where it has them) whose sha256 is
the ``tree`` in versions.toml. Manifests are kept in ``trees/<name>-<commit>.txt``, so that a tarball whose
files differ is refused with the files named (:func:`tree_of`, :func:`differences`);
``python -m tritonpt.backend --pin-trees DIR`` writes them (:func:`write_manifests`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tritonpt.errors import BackendError
from tritonpt.versions import Source

TREES = Path(__file__).with_name("trees")
SHOWN = 5


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One file of a source tree."""

    digest: str  # sha256 of its content (a link: of its target)
    kind: str  # "644", "755" or "link"

    def line(self, path: str) -> str:
        return f"{self.digest}  {self.kind}  {path}"


Tree = dict[str, Entry]


def within(path: str, paths: tuple[str, ...]) -> bool:
    """Whether ``path`` lies below one of ``paths`` (each a path whose parts may be globs: ``qa/L0_libtorch_*``);
    every path when ``paths`` is empty."""
    if not paths:
        return True
    parts = path.split("/")
    for pattern in paths:
        wanted = pattern.split("/")
        if len(parts) >= len(wanted) and all(
            fnmatch.fnmatchcase(a, b) for a, b in zip(parts[: len(wanted)], wanted, strict=True)
        ):
            return True
    return False


def tree_of(tarball: Path, top_folder: str, paths: tuple[str, ...] = ()) -> Tree:
    """The files of ``tarball`` below ``top_folder`` (and below one of ``paths``, when given); ``BackendError`` for
    what no git archive holds."""
    files: Tree = {}
    try:
        with tarfile.open(tarball) as archive:
            for member in archive:
                parts = PurePosixPath(member.name).parts
                if member.isdir() or not parts:
                    continue
                if parts[0] != top_folder or len(parts) < 2 or ".." in parts:
                    msg = f"Cannot use {tarball}: it holds {member.name!r}, outside {top_folder}/."
                    raise BackendError(msg)
                path = "/".join(parts[1:])
                if not within(path, paths):
                    continue
                if member.issym():
                    files[path] = Entry(
                        digest=hashlib.sha256(member.linkname.encode()).hexdigest(), kind="link"
                    )
                    continue
                extracted = archive.extractfile(member) if member.isfile() else None
                if extracted is None:
                    msg = f"Cannot use {tarball}: {member.name!r} is neither a file nor a link."
                    raise BackendError(msg)
                with extracted:
                    content = hashlib.sha256(extracted.read()).hexdigest()
                files[path] = Entry(digest=content, kind="755" if member.mode & 0o111 else "644")
    except (tarfile.TarError, OSError, EOFError) as exc:
        msg = f"Cannot read {tarball} as a tarball ({exc})."
        raise BackendError(msg) from exc
    return files


def manifest(tree: Mapping[str, Entry]) -> str:
    return "".join(tree[path].line(path) + "\n" for path in sorted(tree))


def digest(tree: Mapping[str, Entry]) -> str:
    """The ``tree`` pin of a set of files."""
    return hashlib.sha256(manifest(tree).encode()).hexdigest()


def manifest_path(source: Source) -> Path:
    return TREES / f"{source.name}-{source.commit}.txt"


def pinned_tree(source: Source) -> Tree | None:
    """The kept manifest of ``source``, when it exists and its digest is the pin (else None: it names nothing)."""
    path = manifest_path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    if hashlib.sha256(text.encode()).hexdigest() != source.tree:
        return None
    files: Tree = {}
    for line in text.splitlines():
        entry_digest, kind, name = line.split("  ", 2)
        files[name] = Entry(digest=entry_digest, kind=kind)
    return files


def differences(found: Mapping[str, Entry], pinned: Mapping[str, Entry]) -> str:
    """What differs between two trees, in words, the first few files named."""
    changed = sorted(p for p in found.keys() & pinned.keys() if found[p] != pinned[p])
    missing = sorted(pinned.keys() - found.keys())
    extra = sorted(found.keys() - pinned.keys())
    said = []
    for label, paths in (("other contents in", changed), ("no", missing), ("files the commit lacks:", extra)):
        if paths:
            shown = ", ".join(paths[:SHOWN]) + (
                f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
            )
            said.append(f"{label} {shown}")
    return "; ".join(said) or "the same files (the manifest itself must be damaged)"


def write_manifests(folder: Path, sources: tuple[Source, ...]) -> dict[str, str]:
    """Write ``trees/<name>-<commit>.txt`` for each source from its tarball in ``folder`` (a maintainer's step
    after a pin moved); return each source's ``tree`` digest for versions.toml."""
    TREES.mkdir(exist_ok=True)
    digests = {}
    for source in sources:
        tree = tree_of(folder / source.tarball, source.top_folder, source.paths)
        manifest_path(source).write_text(manifest(tree), encoding="utf-8")
        digests[source.name] = digest(tree)
    return digests
