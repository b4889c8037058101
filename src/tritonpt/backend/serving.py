"""One ``--backend-directory`` for both builds: the TorchScript backend as ``pytorch``, the PT2 one beside it.

Server 2.51.0's core refuses ``backend: "pytorch"`` with ``platform: "torch_aoti"`` and takes any platform for a
backend name it does not know, and the backend looks only at the platform to pick its PT2 path. So the PT2 build
is installed a second time under its own name (versions.toml [pt2] backend_name):

    <cache>/served/<pytorch key>+<pt2 key>/
      pytorch/           -> the TorchScript build's pytorch/ (libtriton_pytorch.so, r25.10)
      pt2/libtriton_pt2.so -> the PT2 build's libtriton_pytorch.so (r26.05)

Made once per pair, staged and renamed into place (a pair folder whose links name other copies of the same
builds, one left by an earlier run, is replaced); both libraries load into one server (each dlopened with its
own symbols). Where one build serves both (a line with the PT2 path, r26.03 on, as `nox -s compat` serves it),
``pt2/`` holds a copy of the library, not a link: the loader gives one file one handle, and the backend's globals
would then be shared by both names (seen: a TorchScript model reloaded through the PT2 path, "Failed to find a
generated cpp file or so file", with both names linked to one r26.05 build).
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
