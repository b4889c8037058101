"""--force in `tritonpt migrate`: the folders it replaces are set aside while their models move, and come back
where the model did not move (refused, not proven, a stop), so a failed migration never costs a deployed folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonpt.migrate.run import kept_until_proven


def _folder(root: Path, name: str, text: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(text, encoding="utf-8")


def test_a_moved_model_replaces_its_folder_and_one_that_did_not_move_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    into = tmp_path / "out"
    _folder(into, "moved", "old")
    _folder(into, "refused", "old")
    with kept_until_proven(into, ["moved", "refused"]):
        assert not (into / "moved").exists()  # set aside: the proof serves only what this run wrote
        assert not (into / "refused").exists()
        _folder(into, "moved", "new")
    assert (into / "moved" / "config.pbtxt").read_text(encoding="utf-8") == "new"
    assert (into / "refused" / "config.pbtxt").read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the folder set aside is gone


def test_a_stop_brings_back_every_folder_that_was_not_replaced(tmp_path: Path) -> None:
    into = tmp_path / "out"
    _folder(into, "a", "old a")
    _folder(into, "b", "old b")

    def stopped_after_a() -> None:
        with kept_until_proven(into, ["a", "b"]):
            _folder(into, "a", "new a")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped_after_a()
    assert (into / "a" / "config.pbtxt").read_text(encoding="utf-8") == "new a"
    assert (into / "b" / "config.pbtxt").read_text(encoding="utf-8") == "old b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
