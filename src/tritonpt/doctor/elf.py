"""Reading ELF files with pyelftools: the highest GLIBC_x.y symbol version a binary needs (never objdump: images may lack binutils)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

from tritonpt.doctor.results import GLIBC_SYMBOL, Version

# --- ELF version needs --------------------------------------------------------------------------------------


def glibc_needed(stream: IO[bytes]) -> Version | None:
    """The highest ``GLIBC_x.y`` an ELF file's version needs (``.gnu.version_r``) name; None when it names none.

    That is what the dynamic loader compares with the C library it finds: a need the library lacks ends the
    program with ``version `GLIBC_2.39' not found``. ``GLIBC_PRIVATE`` and other libraries' versions
    (``GLIBCXX_*``, ``CXXABI_*``) are not glibc releases and are ignored. Raises ``ValueError`` for a file that
    is not ELF.
    """
    try:
        elf = ELFFile(stream)
        highest: Version | None = None
        for section in elf.iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for _needed, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    match = GLIBC_SYMBOL.match(aux.name)
                    if match:
                        version = tuple(int(p) for p in match.group(1).split("."))
                        highest = version if highest is None else max(highest, version)
    except ELFError as exc:
        msg = f"not a readable ELF file ({exc})"
        raise ValueError(msg) from exc
    return highest


def glibc_needed_by(path: Path) -> Version | None:
    """:func:`glibc_needed` of a file on this machine."""
    with path.open("rb") as handle:
        try:
            return glibc_needed(handle)
        except ValueError as exc:
            msg = f"{path}: {exc}"
            raise ValueError(msg) from exc
