"""Triton's own QA tests (tritonpt_ci.qa): every upstream test is accounted for, every substitution still
fits the pinned files exactly, and what the report and the reliability part claim follows from the results."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tritonpt.backend.sources import unpack_source
from tritonpt.errors import QaError
from tritonpt.reporting.reliability import folder_in, write_part
from tritonpt_ci import reliability
from tritonpt_ci.qa import adapt, generate, ledger, report, run
from tritonpt_ci.qa.plan import LIBTORCH, PLANS, TORCH_AOTI, Plan, UpstreamTest, lay_overlay
from tritonpt_ci.qa.run import QaResult

ROOT = Path(__file__).resolve().parents[2]


def _unpacked(plan: Plan, tmp_path: Path) -> Path:
    folder = os.environ.get("TRITONPT_SOURCES")
    if not folder:
        pytest.skip(
            "$TRITONPT_SOURCES is unset: these tests read the pinned qa/ tarballs there (.ci/run sets it)"
        )
    source = plan.suite.source
    qa = unpack_source(source, Path(folder) / source.tarball, tmp_path / source.ref) / "qa"
    lay_overlay(plan, qa)  # our tests in upstream's form, as the harness lays them
    return qa


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.suite.source.ref)
def test_every_upstream_test_of_the_pinned_files_is_run_or_says_why_not(plan: Plan, tmp_path: Path) -> None:
    qa = _unpacked(plan, tmp_path)
    upstream = {p.name for p in qa.iterdir() if p.name.startswith("L0_")}
    wanted = {t.name for t in plan.tests}
    other_plans = {t.name for p in PLANS if p is not plan for t in p.tests}
    # A suite's tarball may hold tests another suite runs (r26.05 also holds L0_libtorch_*, run at r25.10).
    assert upstream - wanted <= other_plans, f"not accounted for: {sorted(upstream - wanted - other_plans)}"
    assert wanted <= upstream
    assert all(t.not_run or t.checks > 0 for t in plan.tests)


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.suite.source.ref)
def test_each_substitution_fits_the_pinned_files_exactly(plan: Plan, tmp_path: Path) -> None:
    qa = _unpacked(plan, tmp_path)
    values = {"SERVER": "/x/bin/tritonserver", "DATA": "/x/data", "HTTP_PORT": "18000"}
    subs = adapt.for_ref(plan.suite.source.ref)
    adapt.apply(qa, subs, values)
    for sub in subs:
        for name in sub.files:
            text = (qa / name).read_text(encoding="utf-8")
            assert sub.old not in text or sub.old in sub.new, f"{sub.key} left {sub.old!r} in {name}"
    assert "8000" not in (qa / "common" / "util.sh").read_text(encoding="utf-8").replace("18000", "")


def test_a_substitution_that_no_longer_fits_stops_the_run_naming_file_and_key(tmp_path: Path) -> None:
    qa = _unpacked(LIBTORCH, tmp_path)
    target = qa / "L0_libtorch_shared_weights" / "test.sh"
    target.write_text(target.read_text(encoding="utf-8").replace("KIND_GPU}", "KIND_GPU }"), encoding="utf-8")
    with pytest.raises(QaError) as failure:
        adapt.apply(qa, adapt.for_ref("r25.10"), {"SERVER": "s", "DATA": "d", "HTTP_PORT": "1"})
    said = str(failure.value)
    assert "S3" in said
    assert "qa/L0_libtorch_shared_weights/test.sh" in said
    assert "holds 0" in said


def test_generated_models_are_keyed_by_what_makes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    assert generate.key(LIBTORCH) != generate.key(TORCH_AOTI)
    assert generate.key(LIBTORCH) == generate.key(LIBTORCH)
    before = generate.key(TORCH_AOTI)
    monkeypatch.setattr(generate, "_versions", lambda: {"torch": "2.10.0"})
    assert generate.key(TORCH_AOTI) != before
    assert generate.inputs(TORCH_AOTI)["substitutions"], "the weights substitution changes what is generated"


def _result(test: str, status: str, checks: int, held: int | None = None) -> QaResult:
    return QaResult(
        test=test,
        ref="r25.10",
        build="b",
        checks=checks,
        how_counted="",
        adaptations=[],
        status=status,
        checks_run=checks if status != "not run" else 0,
        checks_passed=(checks if held is None else held) if status != "not run" else 0,
    )


def test_the_claim_counts_checks_seen_to_hold_and_a_failure_fails_the_goal(tmp_path: Path) -> None:
    results = [
        _result("L0_libtorch_a", "passed", 8),
        _result("L0_libtorch_b", "failed", 4, held=3),
        _result("L0_libtorch_c", "not run", 6),
        _result("L0_torch_aoti", "passed", 4),
    ]
    assert report.claim(results) == "11/12 checks in 1/2 tests"
    assert report.claim(results, "L0_torch_aoti") == "4/4 checks in 1/1 tests"
    control = _result("L0_libtorch_b", "failed", 4, held=3)
    control.exit_code = 1
    report.write(results, tmp_path, 1.0, [control])
    merged = reliability.merge(tmp_path)
    goal = next(g for g in merged.goals if g.what.startswith("Triton's own QA"))
    assert not goal.met
    assert goal.value == "2 / 3 (15 / 16)"
    assert next(g for g in merged.goals if "negative controls" in g.what).met
    row = {
        "test": "t",
        "suite": "r25.10",
        "checks": 2,
        "checks_passed": 2,
        "status": "passed",
        "seconds": 1.0,
    }
    write_part(
        "triton-qa",
        {"tests": [row], "controls": [{"test": "t", "suite": "r25.10", "held": True}], "tracebacks": 0},
        folder_in(tmp_path),
    )
    assert all(g.met for g in reliability.merge(tmp_path).goals if "QA" in g.what)
    write_part(
        "triton-qa",
        {"tests": [{**row, "checks_passed": 1}], "controls": [], "tracebacks": 0},
        folder_in(tmp_path),
    )
    goals = {g.what: g for g in reliability.merge(tmp_path).goals}
    assert not goals["Triton's own QA tests passed (their checks, seen to hold)"].met  # passed, a check short
    assert not goals["Triton's QA: negative controls failed one check short"].met  # no control ran


def _flag_test() -> UpstreamTest:
    return next(t for t in LIBTORCH.tests if t.name == "L0_libtorch_inference_mode")


def test_what_the_plan_counts_is_what_test_sh_judges(tmp_path: Path) -> None:
    """Each log check's text is in the pinned test.sh, and the plan's totals are the ones the QA page states
    (test_the_qa_page_states_the_plans_totals)."""
    qa = _unpacked(LIBTORCH, tmp_path)
    for test in LIBTORCH.tests:
        text = (qa / test.name / "test.sh").read_text(encoding="utf-8")
        for check in test.log_checks:
            words = check.pattern.split()[0]
            assert words in text, f"{test.name}: {check.pattern!r} is not what its test.sh greps"
            if check.count is not None:
                assert f'!= "{check.count}"' in text, f"{test.name}: test.sh does not require {check.count}"
    assert sum(t.checks for t in LIBTORCH.to_run) == 27
    assert sum(t.checks for t in TORCH_AOTI.to_run if not t.fixed_by) == 4
    # Ours (docs/upstream/qa/), as the harness lays them over the r26.05 files: 1 + 2 + 1 + 6 + 1
    ours = _unpacked(TORCH_AOTI, tmp_path / "ours")
    for test in (t for t in TORCH_AOTI.tests if t.fixed_by):
        text = (ours / test.name / "test.sh").read_text(encoding="utf-8")
        for check in test.log_checks:
            assert check.pattern in text, f"{test.name}: {check.pattern!r} is not what its test.sh greps"
            if check.count is not None:
                assert f'!= "{check.count}"' in text, f"{test.name}: test.sh does not require {check.count}"
    assert sum(t.checks for t in TORCH_AOTI.to_run if t.fixed_by) == 11
    for control in LIBTORCH.controls:
        assert (qa / control.test / "test.sh").read_text(encoding="utf-8").count(control.old) == 1


def test_the_qa_page_states_the_plans_totals() -> None:
    """docs/reference/qa.md's headline: every check the plans count, seen to hold (27/27, 4/4, 11/11)."""
    page = " ".join((ROOT / "docs/reference/qa.md").read_text(encoding="utf-8").split())
    libtorch = sum(t.checks for t in LIBTORCH.to_run)
    aoti = sum(t.checks for t in TORCH_AOTI.to_run if not t.fixed_by)
    ours = sum(t.checks for t in TORCH_AOTI.to_run if t.fixed_by)
    assert f"pass on the backend we build: {libtorch}/{libtorch}**" in page
    assert f"passes on both PT2 builds: {aoti}/{aoti} on stock, {aoti}/{aoti} patched**" in page
    assert f"all {sum(1 for t in TORCH_AOTI.to_run if t.fixed_by)} pass patched, {ours}/{ours} checks" in page


def _ledger(tmp_path: Path, script: str) -> list[dict[str, object]]:
    """Run ``script`` in bash with the shims first on PATH, as a test.sh runs; the ledger it wrote."""
    shims = tmp_path / "shims"
    shims.mkdir()
    env = {**os.environ, **ledger.shims(shims, grep=shutil.which("grep") or "grep")}
    env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
    env[ledger.LEDGER_ENV] = str(tmp_path / "ledger.jsonl")
    subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, check=True, timeout=60)
    return ledger.read(tmp_path / "ledger.jsonl")


CLIENT = """
import json, sys
json.dump({"total": 1, "errors": 0, "failures": int(sys.argv[1])}, open("test_results.txt", "w"))
sys.exit(int(sys.argv[1]))
"""


def test_the_shims_record_each_client_run_and_each_grep_of_a_servers_log(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(CLIENT, encoding="utf-8")
    (tmp_path / "other.py").write_text("print('no unittest here')\n", encoding="utf-8")
    server = tmp_path / "server.log"
    server.write_text("Inference Mode is enabled\n" * 3, encoding="utf-8")
    entries = _ledger(
        tmp_path,
        f"""printf '{{"kind": "server", "log": "{server}"}}\n' >> "$TRITONPT_QA_LEDGER"
        python client.py 0
        python3 other.py
        [ `grep -c "Inference Mode is enabled" ./server.log` == "3" ]
        echo x > client.log; grep -c "Inference" client.log || true
        cat server.log | grep -q enabled
        sed -i s/enabled/disabled/ server.log
        python client.py 0 || true
        grep -c "Inference Mode is disabled" server.log
        """,
    )
    clients = [e for e in entries if e["kind"] == "client"]
    assert [c["results"] is not None for c in clients] == [True, False, True]
    seen = ledger.tally(_flag_test(), entries)
    assert (seen.ran, seen.held) == (4, 4), seen.said  # 2 unittest cases, 2 greps of the server's log


def test_a_check_that_fails_or_does_not_run_leaves_the_count_short(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(CLIENT, encoding="utf-8")
    server = tmp_path / "server.log"
    server.write_text("Inference Mode is enabled\n" * 3, encoding="utf-8")
    entries = _ledger(
        tmp_path,
        f"""printf '{{"kind": "server", "log": "{server}"}}\n' >> "$TRITONPT_QA_LEDGER"
        python client.py 1 || true
        grep -c "Inference Mode is enabled" server.log
        grep -c "Inference Mode is disabled" server.log || true
        """,
    )
    seen = ledger.tally(_flag_test(), entries)
    assert (seen.ran, seen.held) == (3, 1)  # no second client run; the first case failed, and the second grep
    assert any("1 of 1 unittest case(s) failed" in s for s in seen.said)
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    assert ledger.tally(_flag_test(), _ledger(quiet, "true")).ran == 0  # nothing ran: nothing counted


def test_a_stop_ends_the_test_a_leg_runs_in_its_thread_and_each_leg_has_ports_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Legs run in worker threads, where no signal arrives: the runner's stop is an event the wait looks at."""
    import threading  # noqa: PLC0415

    from tritonpt_ci.qa import run  # noqa: PLC0415

    monkeypatch.setattr(run, "STOP", threading.Event())
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            run._wait(process, 0.2)  # nothing asked it to stop: the timeout is the test's own
        threading.Timer(0.2, run.STOP.set).start()
        with pytest.raises(KeyboardInterrupt):
            run._wait(process, 60)
    finally:
        run._end_group(process)
    assert process.poll() is not None
    legs = [run._leg_ports() for _ in range(20)]
    assert len({port for ports in legs for port in ports}) == 60


def test_a_failure_whose_logs_show_a_known_race_is_run_again_and_no_other(tmp_path: Path) -> None:
    logs = tmp_path / "L0_torch_aoti"
    logs.mkdir()
    (logs / "test.out").write_text("*** Test Failed ***\n", encoding="utf-8")
    (logs / "server.log").write_text(
        "E1206 model_lifecycle.cc:654] failed to load 'torch_aoti_float16_float16' version 1: Internal: Failed to "
        "create ModelInstanceState: No device information found.\n",
        encoding="utf-8",
    )
    lost = _result("L0_torch_aoti", "failed", 4, held=0)
    lost.log = str(logs)
    race = run.lost_race(lost)
    assert race is not None
    assert race.name == "torch-aoti-load-race"
    assert (Path(__file__).parents[2] / race.reproduction).is_file()  # the page that proves it exists
    passed = _result("L0_torch_aoti", "passed", 4)
    passed.log = str(logs)
    assert run.lost_race(passed) is None  # only a failure is run again
    (logs / "server.log").write_text("E1206 failed to load: PytorchStreamReader failed\n", encoding="utf-8")
    assert run.lost_race(lost) is None  # any other failure counts


def test_a_rerun_is_said_in_the_tests_row() -> None:
    rerun = _result("L0_torch_aoti", "passed", 4)
    rerun.rerun = "torch-aoti-load-race, docs/upstream/torch-aoti-load-race.md"
    page = report.to_markdown([rerun], 1.0)
    assert (
        "passed on a second run (the first lost torch-aoti-load-race, docs/upstream/torch-aoti-load-race.md)"
        in page
    )
