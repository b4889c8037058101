"""The export cache: a built-in export made once is copied into any other repository, whole and unchanged; a damaged
entry is made again; --force exports; each model keeps its newest entries. In this tier's private cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tritonpt import caches, export
from tritonpt.export import cache as export_cache
from tritonpt.export.stamp import STAMP, builtin_fingerprint


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(caches.LEDGER_ENV, str(path))
    return path


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(caches.CACHE_ENV, str(root))
    return root


def test_an_export_made_once_is_copied_into_another_repository(
    empty_cache: Path, ledger: Path, tmp_path: Path
) -> None:
    (first,) = export.export_builtin(["multi_io"], repository=tmp_path / "a")
    assert not first.kept
    assert not first.cached
    (again,) = export.export_builtin(["multi_io"], repository=tmp_path / "b")
    assert again.cached
    assert not again.kept
    assert _digests(tmp_path / "b" / "multi_io") == _digests(tmp_path / "a" / "multi_io")
    assert [(n.kind, n.what, n.hit) for n in caches.read(ledger)] == [
        ("export", "multi_io", False),
        ("export", "multi_io", True),
    ]
    # A third export into the same folder keeps it in place: no lookup at all.
    (kept,) = export.export_builtin(["multi_io"], repository=tmp_path / "b")
    assert kept.kept
    assert len(caches.read(ledger)) == 2


def test_a_copy_is_a_copy_so_a_test_that_edits_it_leaves_the_cache_alone(
    empty_cache: Path, tmp_path: Path
) -> None:
    export.export_builtin(["fixed_shape"], repository=tmp_path / "a")
    (entry,) = (export_cache.folder() / "fixed_shape").iterdir()
    before = _digests(entry)
    export.export_builtin(["fixed_shape"], repository=tmp_path / "b")
    config = tmp_path / "b" / "fixed_shape" / "config.pbtxt"
    with config.open("a", encoding="utf-8") as stream:  # in place, as tests change configs
        stream.write("# edited\n")
    assert _digests(entry) == before


def test_a_damaged_entry_is_exported_again_and_replaced(empty_cache: Path, tmp_path: Path) -> None:
    export.export_builtin(["multi_io"], repository=tmp_path / "a")
    (entry,) = (export_cache.folder() / "multi_io").iterdir()
    (entry / "config.pbtxt").write_text("damaged\n", encoding="utf-8")
    (made,) = export.export_builtin(["multi_io"], repository=tmp_path / "b")
    assert not made.cached
    assert not made.kept
    assert "damaged" not in (tmp_path / "b" / "multi_io" / "config.pbtxt").read_text(encoding="utf-8")
    (stored,) = (export_cache.folder() / "multi_io").iterdir()
    assert _digests(stored) == _digests(tmp_path / "b" / "multi_io")
    (copied,) = export.export_builtin(["multi_io"], repository=tmp_path / "c")
    assert copied.cached


def test_force_exports_whatever_the_cache_holds(empty_cache: Path, tmp_path: Path) -> None:
    export.export_builtin(["fixed_shape"], repository=tmp_path / "a")
    (forced,) = export.export_builtin(["fixed_shape"], repository=tmp_path / "b", force=True)
    assert not forced.cached
    assert not forced.kept
    assert forced.seconds > 0


def test_each_model_keeps_its_newest_entries(empty_cache: Path, tmp_path: Path) -> None:
    for seed in range(export_cache.KEEP + 2):
        export.export_builtin(["fixed_shape"], repository=tmp_path / f"r{seed}", seed=seed)
    entries = list((export_cache.folder() / "fixed_shape").iterdir())
    assert len(entries) == export_cache.KEEP
    assert all((e / STAMP).is_file() for e in entries)
    # the newest are kept: the last seed's is copied, the first's is exported again
    assert export.export_builtin(["fixed_shape"], repository=tmp_path / "x", seed=export_cache.KEEP + 1)[
        0
    ].cached
    assert not export.export_builtin(["fixed_shape"], repository=tmp_path / "y", seed=0)[0].cached


def test_a_pt2_copy_is_keyed_by_the_machine_it_was_compiled_for() -> None:
    """AOTInductor compiles for this CPU's vector ISA with this compiler: a package from another machine is not
    taken for this one's."""
    described = export_cache.machine()
    assert " cpu flags " in described
    here = builtin_fingerprint("multi_io_pt2:pt2", 0, machine=described)
    assert here != builtin_fingerprint("multi_io_pt2:pt2", 0, machine=described.replace("flags", "flags 0"))
    assert here != builtin_fingerprint("multi_io_pt2:pt2", 0)
