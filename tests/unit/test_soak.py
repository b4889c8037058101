"""The soak's plan and verdict without a server: what it sends is what the configs allow, the rows it expects are
the rows it sends, and any lost request, count difference or growth beyond the bound fails it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tritonpt import repository
from tritonpt.reporting.reliability import TRACEBACK, count_tracebacks, write_part
from tritonpt_ci import soak


@pytest.fixture(scope="module")
def models(exported_small: Path) -> list[soak.SoakModel]:
    return soak.load_models(exported_small)


def test_the_plan_respects_each_config_and_alternates_protocols(models: list[soak.SoakModel]) -> None:
    planned = soak.plan(models, 400, seed=3)
    by_name = {m.name: m for m in models}
    assert Counter(r.model for r in planned) == dict.fromkeys(by_name, 100)
    for request in planned:
        model = by_name[request.model]
        case = model.reference.case(request.case)
        if model.max_batch_size > 0:
            assert 1 <= request.rows <= model.max_batch_size
            assert request.start + request.rows <= case.batch_size
        else:
            assert (request.rows, request.samples) == (0, 1)
    for name in by_name:
        protocols = [r.protocol for r in planned if r.model == name]
        assert protocols == ["http", "grpc"] * 50
    sizes = {r.rows for r in planned if r.model == "multi_io"}
    assert sizes == set(range(1, 17)), "every batch size from 1 to max_batch_size is drawn"
    assert soak.plan(models, 400, seed=3) == planned, "a seed reproduces its plan"


def test_the_expected_outputs_are_the_rows_sent(models: list[soak.SoakModel]) -> None:
    model = next(m for m in models if m.name == "multi_io")
    request = soak.Request(index=0, model="multi_io", protocol="http", case="b16", start=5, rows=3)
    inputs, expected = model.payload(request)
    case = model.reference.case("b16")
    assert [a.shape[0] for a in inputs.values()] == [3, 3]
    np.testing.assert_array_equal(inputs["features"], case.inputs[0][5:8])
    np.testing.assert_array_equal(expected[1], case.outputs[1][5:8])
    fixed = next(m for m in models if m.max_batch_size == 0)
    whole, _ = fixed.payload(
        soak.Request(index=1, model=fixed.name, protocol="grpc", case="full", start=0, rows=0)
    )
    assert [a.shape for a in whole.values()] == [a.shape for a in fixed.reference.case("full").inputs]


def test_the_warm_up_sends_the_largest_batch_then_a_mix(models: list[soak.SoakModel]) -> None:
    warm = soak.warm_up_plan(models, 4, seed=1)
    largest = len(models) * 2 * 2
    assert len(warm) == largest + soak.WARM_UP_MIXED
    assert all(r.index < 0 for r in warm), "warm-up requests are never counted as the soak's"
    assert {r.rows for r in warm[:largest] if r.model == "multi_io"} == {16}
    assert len({r.rows for r in warm[largest:] if r.model == "multi_io"}) > 1


def _report(**changes: object) -> soak.SoakReport:
    report = soak.SoakReport(
        smoke=True, concurrency=4, requests_sent=10, rss_start_mb=700.0, rss_end_mb=710.0
    )
    report.counts["m"] = soak.Count(
        sent=10, request_success=10, inference_count=25, expected_inference_count=25
    )
    for key, value in changes.items():
        setattr(report, key, value)
    return report


def test_a_clean_soak_passes() -> None:
    assert _report().passed
    assert _report().problems() == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"failures": 1}, "1 requests failed"),
        ({"mismatches": 2}, "2 responses differ from their reference"),
        ({"rss_end_mb": 700.0 + soak.RSS_BOUND_MB + 1}, "beyond the bound of 256 MiB"),
        (
            {"aborted": "the local tritonserver was killed by signal SIGKILL\nmore"},
            "killed by signal SIGKILL",
        ),
        (
            {
                "counts": {
                    "m": soak.Count(
                        sent=10, request_success=9, inference_count=25, expected_inference_count=25
                    )
                }
            },
            "nv_inference_request_success rose by 9",
        ),
        (
            {
                "counts": {
                    "m": soak.Count(
                        sent=10, request_success=10, inference_count=26, expected_inference_count=25
                    )
                }
            },
            "nv_inference_count rose by 26",
        ),
    ],
)
def test_anything_lost_wrong_or_leaked_fails_the_soak(change: dict[str, object], problem: str) -> None:
    report = _report(**change)
    assert not report.passed
    assert any(problem in line for line in report.problems()), report.problems()
    assert report.part()["passed"] is False


def test_the_part_follows_the_contract(tmp_path: Path) -> None:
    report = _report(shown=[f"request 3: {TRACEBACK}:\n  File ..."])
    written = write_part("soak", report.part(), folder=tmp_path)
    data = json.loads(written.read_text(encoding="utf-8"))
    assert data["part"] == "soak"
    assert data["tracebacks"] == 1
    assert set(data) >= {
        "requests_sent", "failures", "mismatches", "counts", "rss_start_mb", "rss_end_mb", "rss_bound_mb", "smoke",
    }  # fmt: skip
    assert data["counts"]["m"] == {
        "sent": 10, "request_success": 10, "inference_count": 25, "expected_inference_count": 25,
    }  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == ["soak.json"], "nothing but the part is left"
    assert count_tracebacks(["no traceback here"]) == 0


def test_a_repository_without_references_is_refused(exported_small: Path, tmp_path: Path) -> None:
    source = repository.models(exported_small)[0]
    target = tmp_path / "repo" / source.name
    shutil.copytree(source.root, target)
    (target / source.reference_npz.name).unlink()
    with pytest.raises(soak.SoakError, match=r"responses cannot be checked") as failure:
        soak.load_models(tmp_path / "repo")
    assert str(target / source.reference_npz.name) in str(failure.value)
