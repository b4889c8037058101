"""The caches' ledger: each lookup said in one line and appended to the run's ledger, read back, summed per kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonpt import caches


def test_a_lookup_is_said_once_and_appended_to_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "run" / "ledger.jsonl"
    monkeypatch.setenv(caches.LEDGER_ENV, str(ledger))
    caches.note("export", "resnet18_pt2", hit=False, seconds=61.26)
    said: list[str] = []
    caches.note("backend", "r25.10 cpu", hit=True, say=said.append)
    assert capsys.readouterr().err == "cache: export resnet18_pt2 miss (61 s to make)\n"
    assert said == ["cache: backend r25.10 cpu hit"]
    read = caches.read(ledger)
    assert {n.cache for n in read} == {str(caches.root().resolve())}
    assert [(n.kind, n.what, n.hit, n.seconds) for n in read] == [
        ("export", "resnet18_pt2", False, 61.3),
        ("backend", "r25.10 cpu", True, 0.0),
    ]


def test_without_a_ledger_a_lookup_is_only_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(caches.LEDGER_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    caches.note("venv", "test-abc", hit=True)
    assert capsys.readouterr().err == "cache: venv test-abc hit\n"
    assert list(tmp_path.iterdir()) == []


def test_a_line_cut_short_by_a_killed_writer_is_left_out(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(
        '{"at": 1.0, "hit": true, "kind": "export", "seconds": 0.0, "what": "multi_io"}\n{"at": 2.0, "hit": fa',
        encoding="utf-8",
    )
    assert [n.what for n in caches.read(ledger)] == ["multi_io"]
    assert caches.read(tmp_path / "missing.jsonl") == []


def test_the_summary_has_a_line_per_kind_with_what_the_misses_cost() -> None:
    lookups = [
        caches.Lookup(kind="export", what="resnet18_pt2", hit=False, seconds=60.0),
        caches.Lookup(kind="export", what="multi_io", hit=False, seconds=2.0),
        caches.Lookup(kind="export", what="multi_io", hit=True),
        caches.Lookup(kind="backend", what="r25.10 cpu", hit=True),
    ]
    lines = caches.summary(lookups, kinds=("export", "backend", "image"))
    assert lines == [
        "cache export      1 hit(s),   2 miss(es), 62 s making them: multi_io, resnet18_pt2",
        "cache backend     1 hit(s),   0 miss(es)",
        "cache image       0 hit(s),   0 miss(es)",
    ]


def test_lookups_in_a_tests_private_cache_are_counted_apart(tmp_path: Path) -> None:
    """A test's private cache is counted apart; an act job's home links to the machine's cache, which counts as it."""
    machine, private, linked = tmp_path / "machine", tmp_path / "private", tmp_path / "job-home-cache"
    machine.mkdir()
    linked.symlink_to(machine, target_is_directory=True)
    lookups = [
        caches.Lookup(kind="export", what="multi_io", hit=True, cache=str(linked.resolve())),
        caches.Lookup(kind="export", what="resnet18", hit=False, seconds=9.0, cache=str(private)),
        caches.Lookup(kind="export", what="fixed_shape", hit=False, seconds=1.0, cache=str(private)),
    ]
    (line,) = caches.summary(lookups, kinds=("export",), shared=machine)
    assert line == "cache export      1 hit(s),   0 miss(es) (and 2 in tests' private caches)"


def test_the_root_is_the_variable_else_xdg_else_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(caches.CACHE_ENV, str(tmp_path / "mine"))
    assert caches.root() == tmp_path / "mine"
    monkeypatch.delenv(caches.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert caches.root() == tmp_path / "xdg" / "tritonpt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert caches.root() == tmp_path / "home" / ".cache" / "tritonpt"
