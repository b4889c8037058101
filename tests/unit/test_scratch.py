"""A Ctrl-C that lands while a scratch folder is removed, or inside a staged model's two-step commit: the step
finishes, then the interrupt arrives.

Each case sends a real SIGINT to this process at the chosen moment (Python raises ``KeyboardInterrupt`` at the
next bytecode, as it does for a user's Ctrl-C). The held step itself: tests/unit/test_stopping.py.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tritonpt import repository, scratch


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_folder_interrupted_while_it_is_removed_is_still_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.rmtree

    def interrupted_rmtree(path: Path, *args: object, **kwargs: object) -> None:
        _ctrl_c()  # before the first file goes: without the hold, nothing would be removed
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "rmtree", interrupted_rmtree)
    with pytest.raises(KeyboardInterrupt), scratch.folder("probe-", inside=tmp_path) as made:
        (made / "file").write_text("x")
    assert list(tmp_path.iterdir()) == []


def test_a_ctrl_c_between_the_two_renames_of_a_commit_loses_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old folder moves aside, then the new one moves in: an interrupt between them must not leave the
    repository without the model (the staging folder, with the old one inside, is then removed)."""
    repo = tmp_path / "repo"
    (repo / "m").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text("old")
    real = Path.replace

    def replace_then_interrupt(self: Path, target: Path) -> Path:
        moved = real(self, target)
        if self == repo / "m":
            _ctrl_c()
        return moved

    monkeypatch.setattr(Path, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt), repository.staged_model(repo, "m") as model:
        model.config.write_text("new")
    assert (repo / "m" / "config.pbtxt").read_text() == "new"
    assert sorted(p.name for p in repo.iterdir()) == ["m"]


def test_a_commit_whose_second_rename_fails_puts_the_old_model_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "m").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text("old")
    real = Path.replace

    def second_rename_fails(self: Path, target: Path) -> Path:
        if target == repo / "m" and self.name == "m":  # the staged folder moving in, not the old one back
            msg = "the disk said no"
            raise OSError(msg)
        return real(self, target)

    monkeypatch.setattr(Path, "replace", second_rename_fails)
    with pytest.raises(OSError, match="the disk said no"), repository.staged_model(repo, "m") as model:
        model.config.write_text("new")
    assert (repo / "m" / "config.pbtxt").read_text() == "old"
    assert sorted(p.name for p in repo.iterdir()) == ["m"]
