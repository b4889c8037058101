"""Triton's own QA tests (tritonpt.testing.qa): every upstream test is accounted for, every substitution still
fits the pinned files exactly, and what the report and the reliability part claim follows from the results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonpt.backend.sources import unpack_source
from tritonpt.errors import QaError
from tritonpt.testing import reliability
from tritonpt.testing.parts import write_part
from tritonpt.testing.qa import adapt, generate, report
from tritonpt.testing.qa.plan import LIBTORCH, PLANS, TORCH_AOTI, Plan
from tritonpt.testing.qa.run import QaResult


def _unpacked(plan: Plan, tmp_path: Path) -> Path:
    folder = os.environ.get("TRITONPT_SOURCES")
    if not folder:
        pytest.skip(
            "$TRITONPT_SOURCES is unset: these tests read the pinned qa/ tarballs there (.ci/run sets it)"
        )
    source = plan.suite.source
    return unpack_source(source, Path(folder) / source.tarball, tmp_path / source.ref) / "qa"


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


def _result(test: str, status: str, checks: int) -> QaResult:
    return QaResult(
        test=test, ref="r25.10", build="b", checks=checks, how_counted="", adaptations=[], status=status
    )


def test_the_claim_counts_checks_of_the_tests_that_ran_and_a_failure_fails_the_goal(tmp_path: Path) -> None:
    results = [
        _result("L0_libtorch_a", "passed", 8),
        _result("L0_libtorch_b", "failed", 4),
        _result("L0_libtorch_c", "not run", 6),
        _result("L0_torch_aoti", "passed", 4),
    ]
    assert report.claim(results) == "8/12 checks in 1/2 tests"
    assert report.claim(results, "L0_torch_aoti") == "4/4 checks in 1/1 tests"
    report.write(results, tmp_path, 1.0)
    merged = reliability.merge(tmp_path)
    goal = next(g for g in merged.goals if g.what.startswith("Triton's own QA"))
    assert not goal.met
    assert goal.value == "2 / 3 (12 / 16)"
    write_part(
        "triton-qa",
        {
            "tests": [{"test": "t", "suite": "r25.10", "checks": 1, "status": "passed", "seconds": 1.0}],
            "tracebacks": 0,
        },
        reliability.parts_folder(tmp_path),
    )
    assert next(g for g in reliability.merge(tmp_path).goals if g.what.startswith("Triton's own QA")).met
