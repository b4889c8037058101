"""A run's table: each session of this run in the order it ran, with its seconds, and a line per cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonpt import caches
from tritonpt_ci import timings


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> timings.Run:
    monkeypatch.setenv(timings.RUN_ENV, "ci-7")
    monkeypatch.delenv(caches.LEDGER_ENV, raising=False)
    return timings.Run.current(tmp_path / "reports" / "timings")


def test_a_run_sets_its_id_and_ledger_for_the_processes_below_it(
    run: timings.Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run.id == "ci-7"
    assert run.ledger == tmp_path / "reports" / "timings" / "cache-ci-7.jsonl"
    import os  # noqa: PLC0415

    assert os.environ[caches.LEDGER_ENV] == str(run.ledger)
    # an inner nox (an act job, a clone) keeps the outer run's ledger
    inner = timings.Run.current(tmp_path / "elsewhere")
    assert inner.ledger == run.ledger
    monkeypatch.delenv(timings.RUN_ENV)
    assert timings.Run.current(tmp_path / "x").id.startswith("nox-")


def test_the_table_holds_this_runs_sessions_in_order_and_the_caches(run: timings.Run) -> None:
    run.record("unit", status="success", seconds=53.2, started=200.0)
    run.record("lint", status="success", seconds=41.6, started=100.0)
    other = timings.Run(id="ci-6", folder=run.folder)
    other.record("system", status="failed", seconds=900.0, started=50.0)
    caches.note("export", "multi_io", hit=True, say=lambda _: None)
    table = run.table()
    assert "## Run ci-7: 2 session(s), 1 min 35 s" in table
    assert table.index("| lint | success | 42 | 44% |") < table.index("| unit | success | 53 | 56% |")
    assert "system" not in table
    assert "cache export      1 hit(s),   0 miss(es)" in table


def test_a_step_outside_nox_is_recorded_from_the_command_line(run: timings.Run, tmp_path: Path) -> None:
    reports = str(tmp_path / "reports")
    assert timings.main(["--reports", reports, "--record", ".ci/run setup", "--seconds", "12"]) == 0
    assert [(r.session, r.seconds) for r in run.rows()] == [(".ci/run setup", 12.0)]
