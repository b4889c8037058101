"""The bench's pure parts: its cases, core pinning, eager's settings from a config, the one-model repository,
the report's baseline.
The measuring itself runs in `nox -s bench` (and its smoke in CI)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import bench, client, repository
from tritonpt.bench.report import BenchReport
from tritonpt.repository import ModelDir


def test_cases_follow_the_config(exported_small: Path) -> None:
    batched = repository.read_config(exported_small / "multi_io" / "config.pbtxt")
    largest = batched.max_batch_size
    assert [(c.id, c.batch, c.concurrency, c.eager_batch) for c in bench.cases_for(batched)] == [
        ("b1-c1", 1, 1, 1),
        (f"b{largest}-c1", largest, 1, largest),
        (f"b1-c{largest}", 1, largest, largest),
    ]
    unbatched = repository.read_config(exported_small / "fixed_shape" / "config.pbtxt")
    assert unbatched.max_batch_size == 0
    assert [c.id for c in bench.cases_for(unbatched)] == ["full-c1"]


def _option(windows: list[str], name: str) -> str:
    return windows[windows.index(name) + 1]


def test_fast_cases_are_measured_in_time_windows_sized_by_their_pace() -> None:
    slow = bench.windows_for(200, 8, rate=2.5)  # resnet18 at batch 8 on two cores
    assert _option(slow, "--measurement-mode") == "count_windows"
    assert _option(slow, "--measurement-request-count") == "25"
    edge = bench.windows_for(200, 1, rate=bench.COUNTED_UP_TO)
    assert _option(edge, "--measurement-mode") == "count_windows"
    for rate in (bench.COUNTED_UP_TO + 1, 5_000.0, 50_000.0):  # multi_io served at ~5,000 requests/s here
        fast = bench.windows_for(200, 1, rate=rate)
        assert _option(fast, "--measurement-mode") == "time_windows"
        window_ms = int(_option(fast, "--measurement-interval"))
        assert window_ms >= bench.SHORTEST_WINDOW_MS
        # twice the wanted 200 requests at that pace, unless the shortest window holds more already
        assert window_ms * rate / 1000 == pytest.approx(
            max(400, bench.SHORTEST_WINDOW_MS * rate / 1000), rel=0.01
        )


def test_a_case_that_waits_the_queue_delay_is_paced_by_it_and_its_windows_stay_short() -> None:
    config = ModelConfig(max_batch_size=8)
    config.dynamic_batching.max_queue_delay_microseconds = 928_000  # a delay the tune tries: 1.25 executions
    eager_b1 = _row("b1-c1", "eager", 1, 9.0)
    lone, eight = (
        bench.Case(id="b1-c1", batch=1, concurrency=1, eager_batch=1),
        bench.Case(id="b1-c8", batch=1, concurrency=8, eager_batch=8),
    )
    # one request, one round per 0.928 s: at most 1.08 a second, not eager's 9
    assert bench.pace(eager_b1, lone, config) == pytest.approx(1 / 0.928)
    # eight fill the batch, which goes at once: eager's pace at batch 8 (11 images a second)
    assert bench.pace(_row("b1-c8", "eager", 8, 11.0), eight, config) == pytest.approx(11.0)
    config.dynamic_batching.preferred_batch_size.append(1)  # a preferred size it reaches: sent at once
    assert bench.pace(eager_b1, lone, config) == pytest.approx(9.0)
    # at about one request a second, a window holds 20 s of them (20 / 0.928 = 21.6), not 200 (185 s each)
    slow = bench.windows_for(200, 1, rate=1 / 0.928)
    assert _option(slow, "--measurement-request-count") == "22"
    assert _option(bench.windows_for(200, 1, rate=0.1), "--measurement-request-count") == "20"  # never fewer
    assert (
        _option(bench.windows_for(200, 1, rate=9.0), "--measurement-request-count") == "180"
    )  # 20 s of them
    assert _option(bench.windows_for(200, 1, rate=50.0), "--measurement-request-count") == "200"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning two sides needs two cores")
def test_pinning_parses_separate_cores_and_refuses_overlaps() -> None:
    cores = sorted(os.sched_getaffinity(0))
    pin = bench.Pinning.parse(f"{cores[1]}:{cores[0]}")
    assert (pin.server, pin.client) == ((cores[1],), (cores[0],))
    for bad in ("1", "a:b", f"{cores[0]}:{cores[0]}", f"{max(cores) + 1}:{cores[0]}"):
        with pytest.raises(bench.BenchError, match="--pin"):
            bench.Pinning.parse(bad)


def test_one_model_repository_links_the_model_and_writes_the_config(exported_small: Path) -> None:
    model = ModelDir(root=exported_small / "multi_io")
    config = repository.read_config(model.config)
    config.instance_group[0].count = 3
    with repository.one_model(model, config) as folder:
        [served] = repository.models(folder)
        assert served.name == "multi_io"
        assert repository.read_config(served.config).instance_group[0].count == 3
        assert served.model_file().resolve() == model.model_file().resolve()
        assert (served.root / "warmup").resolve() == (model.root / "warmup").resolve()
    assert not folder.exists()
    assert repository.read_config(model.config).instance_group[0].count == 1  # the model was not touched


def test_eager_on_pinned_cores_runs_in_a_child_started_on_them(exported_small: Path) -> None:
    model = ModelDir(root=exported_small / "multi_io")
    config = repository.read_config(model.config)
    case = bench.cases_for(config)[1]  # the largest batch
    core = min(os.sched_getaffinity(0))
    measured = bench.eager(model, case, seconds=0.2, config=config, cores=(core,))
    assert (measured.model, measured.case, measured.side, measured.batch) == (
        "multi_io",
        case.id,
        "eager",
        case.batch,
    )
    assert measured.throughput > 0
    assert measured.p50_ms <= measured.p99_ms


def test_an_eager_child_that_fails_names_the_model_and_what_it_said(
    exported_small: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "multi_io"
    broken.mkdir()
    (broken / "config.pbtxt").write_text((exported_small / "multi_io" / "config.pbtxt").read_text())
    model = ModelDir(root=broken)
    config = repository.read_config(model.config)
    with pytest.raises(bench.BenchError, match=r"The eager side of multi_io b1-c1 failed on cores") as failed:
        bench.eager(
            model,
            bench.cases_for(config)[0],
            seconds=0.1,
            config=config,
            cores=(min(os.sched_getaffinity(0)),),
        )
    assert "Traceback" not in str(failed.value).splitlines()[0]


def _row(case: str, side: str, batch: int, throughput: float, *, after: bool = False) -> bench.Measurement:
    return bench.Measurement(
        model="m",
        case=case,
        side=side,
        batch=batch,
        concurrency=8 if case == "b1-c8" else 1,
        throughput=throughput,
        p50_ms=1.0,
        p90_ms=1.0,
        p99_ms=1.0,
        after=after,
    )


def test_served_is_read_against_every_eager_run_at_its_batch_before_and_after() -> None:
    report = BenchReport(
        environment={},
        measurements=(
            _row("b1-c1", "eager", 1, 10.0),
            _row("b8-c1", "eager", 8, 12.0),
            _row("b1-c8", "eager", 8, 11.0),
            _row("b1-c1", "grpc", 1, 9.0),
            _row("b8-c1", "grpc", 8, 11.5),
            _row("b1-c8", "grpc", 1, 11.25),
            _row("b1-c1", "eager", 1, 8.0, after=True),
            _row("b8-c1", "eager", 8, 10.0, after=True),
            _row("b1-c8", "eager", 8, 12.0, after=True),
        ),
    )
    # batch 8 was run four times, 12, 11, 10 and 12: 11.25 a second on the mean; batch 1 twice: 9
    assert report.ratio("m", "b1-c8", "grpc") == pytest.approx(1.0)
    assert report.ratio("m", "b8-c1", "grpc") == pytest.approx(11.5 / 11.25)
    assert report.ratio("m", "b1-c1", "grpc") == pytest.approx(1.0)
    markdown = report.to_markdown()
    assert "| m | b8-c1 | eager, after | 10.0 |" in markdown
    assert "- m, eager at batch 8: 10.0-12.0 inferences/s over 4 runs (20% apart)" in markdown
    rows = json.loads(report.to_json())["measurements"]
    assert [round(r["ratio_to_eager"], 3) for r in rows if r["side"] == "eager"] == [
        round(10 / 9, 3), round(12 / 11.25, 3), round(11 / 11.25, 3), round(8 / 9, 3), round(10 / 11.25, 3), round(12 / 11.25, 3)
    ]  # fmt: skip


def test_batches_formed_are_the_samples_an_execution_between_two_readings_of_the_counters() -> None:
    before = client.Statistics(requests=10, inferences=10, executions=10)
    # 40 batch-1 requests at concurrency 8 served in 8 executions: batches of 5 on average, not the 8 it could form
    after = client.Statistics(requests=50, inferences=50, executions=18)
    assert bench.batches_formed(before, after) == pytest.approx(5.0)
    assert (
        bench.batches_formed(before, before) is None
    )  # nothing executed: no figure rather than a division by zero
    report = BenchReport(
        environment={}, measurements=(replace(_row("b1-c8", "grpc", 1, 9.0), batch_formed=5.0),)
    )
    assert report.to_markdown().splitlines()[-1].endswith("| 5.0 |")
