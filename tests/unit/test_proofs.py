"""Proofs of a tree: the digest follows the files git sees (not the ignored ones), and a proof is reused only where
the run says so ($TRITONPT_PROOFS=reuse: act's jobs), for the same session, arguments and files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tritonpt_ci import proofs

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the digest lists the files with git")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("reports/\n", encoding="utf-8")
    (root / "a.py").write_text("print(1)\n", encoding="utf-8")
    return root


def test_the_digest_follows_the_files_git_sees(tree: Path) -> None:
    first = proofs.tree_digest(tree)
    assert first is not None
    assert proofs.tree_digest(tree) == first
    (tree / "reports").mkdir()
    (tree / "reports" / "junit.xml").write_text("<x/>", encoding="utf-8")  # ignored: the same tree
    assert proofs.tree_digest(tree) == first
    (tree / "a.py").chmod(0o755)
    moded = proofs.tree_digest(tree)
    assert moded != first
    (tree / "b.py").write_text("", encoding="utf-8")  # untracked, not ignored: part of the tree
    assert proofs.tree_digest(tree) not in (first, moded)


def test_outside_a_checkout_there_is_no_digest(tmp_path: Path) -> None:
    assert proofs.tree_digest(tmp_path) is None


def test_a_proof_is_reused_only_where_the_run_asks_for_the_same_session_args_and_tree(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = proofs.tree_digest(tree)
    assert digest is not None
    proofs.record("lint", [], digest, run="ci-1", seconds=41.0)
    monkeypatch.delenv(proofs.PROOFS_ENV, raising=False)
    assert proofs.find("lint", [], digest) is None  # a person's nox never skips
    monkeypatch.setenv(proofs.PROOFS_ENV, proofs.REUSE)
    found = proofs.find("lint", [], digest)
    assert found is not None
    assert found.run == "ci-1"
    assert "passed on this very tree" in found.describe()
    assert proofs.find("lint", ["-k", "x"], digest) is None
    assert proofs.find("unit", [], digest) is None
    assert proofs.find("lint", [], "0" * 64) is None
