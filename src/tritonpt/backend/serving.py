"""One ``--backend-directory`` for both builds: the TorchScript backend as ``pytorch``, the PT2 one beside it.

    <cache>/served/<pytorch key>+<pt2 key>/
      pytorch/              -> the TorchScript build's pytorch/ (libtriton_pytorch.so, r25.10)
      pt2/libtriton_pt2.so  -> the PT2 build's libtriton_pytorch.so (r26.05)

:func:`backend_directory` makes it once per pair, staged and renamed into place. Where one build serves both,
``pt2/`` holds a copy of the library, not a link, so that the two names do not share one library's globals.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from tritonpt import scratch, stopping
from tritonpt.backend.cache import BuiltBackend
from tritonpt.backend.layout import LIBRARY
from tritonpt.versions import VERSIONS

PT2_NAME = VERSIONS.pt2.backend_name
PT2_LIBRARY = f"libtriton_{PT2_NAME}.so"


def backend_directory(pytorch: BuiltBackend, pt2: BuiltBackend | None = None) -> Path:
    """The folder to serve with: the TorchScript build's own, or the pair's (made here once)."""
    if pt2 is None:
        return pytorch.directory
    root = pytorch.directory.parent.parent / "served"  # the cache the builds live in
    folder = root / f"{pytorch.key}+{pt2.key}"
    if _whole(folder, pytorch, pt2):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with scratch.folder(f".{folder.name}-", inside=root) as staging:
        made = staging / "made"
        (made / PT2_NAME).mkdir(parents=True)
        (made / "pytorch").symlink_to(pytorch.directory / "pytorch", target_is_directory=True)
        if _same(pytorch, pt2):
            shutil.copy2(pt2.library, made / PT2_NAME / PT2_LIBRARY)
        else:
            (made / PT2_NAME / PT2_LIBRARY).symlink_to(pt2.library)
        with stopping.ctrl_c_held():
            if folder.is_dir() and not folder.is_symlink():  # stale: its links name builds that moved or went
                with contextlib.suppress(
                    OSError
                ):  # (a pair of the same keys from elsewhere: a taken-out copy)
                    folder.replace(staging / "stale")  # removed with the staging folder
            with contextlib.suppress(OSError):  # another process made it meanwhile: fine
                made.replace(folder)
    if not _whole(folder, pytorch, pt2):
        msg = f"Cannot make the backend directory {folder} for the TorchScript and PT2 builds."
        raise OSError(msg)
    return folder


def _same(pytorch: BuiltBackend, pt2: BuiltBackend) -> bool:
    return pytorch.library.resolve() == pt2.library.resolve()


def _whole(folder: Path, pytorch: BuiltBackend, pt2: BuiltBackend) -> bool:
    second = folder / PT2_NAME / PT2_LIBRARY
    if (folder / "pytorch" / LIBRARY).resolve() != pytorch.library.resolve():
        return False
    if _same(pytorch, pt2):  # a copy of the one build
        return (
            second.is_file()
            and not second.is_symlink()
            and second.stat().st_size == pt2.library.stat().st_size
        )
    return second.resolve() == pt2.library.resolve()
