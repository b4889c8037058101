"""invoke tune's pure parts: settings to and from config.pbtxt, the coordinate descent, the Pareto front, and
applying a winner through the staged, validated path. The measuring itself runs in `nox -s tune`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import bench, console, repository, tune
from tritonpt.errors import ValidationError
from tritonpt.repository import ModelDir

EXPORTED = tune.Settings(instances=1, max_batch_size=8, queue_delay_us=1000, optimized=False)


def _point(throughput: float, p99: float, concurrency: int = 1) -> bench.Measurement:
    return bench.Measurement(
        model="m",
        case=f"c{concurrency}",
        side="grpc",
        batch=1,
        concurrency=concurrency,
        throughput=throughput,
        p50_ms=p99 / 2,
        p90_ms=p99,
        p99_ms=p99,
    )


def test_settings_round_trip_through_a_config(exported_small: Path) -> None:
    base = repository.read_config(exported_small / "multi_io" / "config.pbtxt")
    wanted = tune.Settings(
        instances=2,
        max_batch_size=4,
        preferred=(4,),
        queue_delay_us=100,
        intra_op_threads=1,
        inter_op_threads=1,
        optimized=True,
    )
    config = wanted.config(base)
    assert tune.Settings.of(config) == wanted
    assert config.parameters["INTRA_OP_THREAD_COUNT"].string_value == "1"
    assert config.parameters["DISABLE_OPTIMIZED_EXECUTION"].string_value == "false"
    assert list(config.input) == list(base.input)  # what the model is stays as it was
    assert list(config.output) == list(base.output)
    # Back to the backend's default threads: the parameters go, they are not written as 0.
    default = replace(wanted, intra_op_threads=None, inter_op_threads=None, queue_delay_us=None).config(
        config
    )
    assert "INTRA_OP_THREAD_COUNT" not in default.parameters
    assert "INTER_OP_THREAD_COUNT" not in default.parameters
    assert not default.HasField("dynamic_batching")


def test_exported_config_reads_as_its_settings(exported_small: Path) -> None:
    config = repository.read_config(exported_small / "multi_io" / "config.pbtxt")
    settings = tune.Settings.of(config)
    assert settings.instances == config.instance_group[0].count
    assert settings.max_batch_size == config.max_batch_size
    assert settings.queue_delay_us == config.dynamic_batching.max_queue_delay_microseconds
    assert settings.optimized is (config.parameters["DISABLE_OPTIMIZED_EXECUTION"].string_value != "true")


def _scripted(throughput: Callable[[tune.Settings], float]) -> tuple[tune.Measure, list[tune.Settings]]:
    measured: list[tune.Settings] = []

    def measure(settings: tune.Settings, varied: str) -> tune.Trial:
        measured.append(settings)
        return tune.Trial(
            settings=settings, varied=varied, seconds=0.0, points=(_point(throughput(settings), 5.0),)
        )

    return measure, measured


def test_search_finds_the_best_value_of_each_dimension_without_the_grid() -> None:
    # A separable objective whose best is known by hand: intra-op 1, optimized on, 2 instances, delay 100 µs.
    def throughput(s: tune.Settings) -> float:
        return (
            100.0
            + 40 * (s.intra_op_threads == 1)
            + 20 * s.optimized
            + 30 * (s.instances == 2)
            + 10 * (s.queue_delay_us == 100)
        )

    measure, measured = _scripted(throughput)
    _, best = tune.search(EXPORTED, measure, budget_ms=None, cores=2)
    assert best.settings.intra_op_threads == 1
    assert best.settings.optimized is True
    assert best.settings.instances == 2
    assert best.settings.queue_delay_us == 100
    assert best.score(None) == 200.0
    assert len(measured) == len(set(measured)), "a candidate was measured twice"
    assert len(measured) < tune.grid_size(EXPORTED, 2) / 10


def test_noise_never_wins_the_search_or_the_parity_order() -> None:
    # Every value within MARGIN of the others: the exported settings stay the best, and are re-checked first.
    measure, _ = _scripted(lambda s: 100.0 + (1.0 if s.instances == 2 else 0.0))
    trials, best = tune.search(EXPORTED, measure, budget_ms=None, cores=2)
    assert best is trials[0]
    later = [t for t in trials if t.varied in {"queue_delay_us", "max_batch_size"}]
    assert all(t.settings.instances == 1 for t in later)  # the descent did not move
    assert tune.parity_order(trials, best, None) == [trials[0]]  # 1 % faster is not a candidate


def test_parity_order_is_the_best_then_the_clearly_faster_then_the_exported() -> None:
    def trial(settings: tune.Settings, throughput: float) -> tune.Trial:
        return tune.Trial(settings=settings, varied="x", seconds=0, points=(_point(throughput, 5.0),))

    exported = trial(EXPORTED, 100.0)
    best = trial(replace(EXPORTED, instances=2), 150.0)
    faster = trial(replace(EXPORTED, intra_op_threads=1), 160.0)  # found before the search moved on
    noise = trial(replace(EXPORTED, optimized=True), 102.0)
    refused = tune.Trial(settings=replace(EXPORTED, instances=4), varied="x", seconds=0, error="refused: no")
    order = tune.parity_order([exported, faster, noise, best, refused], best, None)
    assert order == [best, faster, exported]


def test_a_refused_candidate_is_a_trial_with_its_reason_and_never_wins() -> None:
    def measure(settings: tune.Settings, varied: str) -> tune.Trial:
        if settings.instances == 2:
            return tune.Trial(settings=settings, varied=varied, seconds=0.1, error="refused by Triton")
        return tune.Trial(settings=settings, varied=varied, seconds=0.1, points=(_point(50.0, 5.0),))

    trials, _ = tune.search(EXPORTED, measure, budget_ms=None, cores=2)
    refused = [t for t in trials if t.error]
    assert [t.settings.instances for t in refused] == [2]
    assert refused[0].score(None) == 0.0


def test_latency_budget_decides_which_load_level_counts() -> None:
    trial = tune.Trial(
        settings=EXPORTED,
        varied="exported",
        seconds=0.0,
        points=(_point(100.0, 4.0, concurrency=1), _point(300.0, 20.0, concurrency=8)),
    )
    assert trial.score(None) == 300.0
    assert trial.score(10.0) == 100.0
    assert trial.score(1.0) == 0.0


def test_pareto_front_keeps_only_points_nothing_beats_on_both() -> None:
    a = tune.Trial(
        settings=EXPORTED, varied="exported", seconds=0, points=(_point(100, 2), _point(400, 10, 8))
    )
    b = tune.Trial(
        settings=replace(EXPORTED, instances=2),
        varied="instances",
        seconds=0,
        points=(_point(90, 3), _point(500, 12, 16)),
    )
    front = [(p.throughput, p.p99_ms) for _, p in tune.pareto_front([a, b])]
    assert front == [(100, 2), (400, 10), (500, 12)]  # (90, 3) is beaten by (100, 2)


def test_preferred_batch_sizes_above_the_max_are_dropped() -> None:
    settings = replace(EXPORTED, preferred=(8,), max_batch_size=4)
    assert tune.space.normalized(settings).preferred == ()


def test_apply_writes_through_the_staged_validated_path(repository_copy: Callable[..., Path]) -> None:
    folder = repository_copy("multi_io")
    model = ModelDir(root=folder / "multi_io")
    base = repository.read_config(model.config)
    model_bytes = model.model_file().read_bytes()
    winner = replace(tune.Settings.of(base), instances=2, intra_op_threads=1)
    tune.apply(model, winner.config(base), note="test")
    assert tune.Settings.of(repository.read_config(model.config)) == winner
    assert model.config.read_text(encoding="utf-8").startswith("# Tuned by `invoke tune`")
    assert model.model_file().read_bytes() == model_bytes
    assert model.reference_json.is_file()
    assert not list(folder.glob(".staging-*"))


def test_apply_refuses_a_config_the_validator_fails_and_leaves_the_model_as_it_was(
    repository_copy: Callable[..., Path],
) -> None:
    folder = repository_copy("multi_io")
    model = ModelDir(root=folder / "multi_io")
    before = model.config.read_bytes()
    broken = repository.read_config(model.config)
    broken.dynamic_batching.preferred_batch_size.append(broken.max_batch_size + 1)  # Triton refuses this
    with pytest.raises(ValidationError) as refused:
        tune.apply(model, broken, note="test")
    assert model.config.read_bytes() == before
    assert not list(folder.glob(".staging-*"))
    # The error names the file where the config was going, not the staging folder that is gone by now.
    assert [p.path for p in refused.value.problems] == [model.config]
    assert refused.value.outcome == f"Nothing was written: {model.root} is as it was."
    assert ".staging-" not in str(refused.value)


def test_a_refused_apply_names_no_staging_path_even_inside_its_messages(
    repository_copy: Callable[..., Path],
) -> None:
    model = ModelDir(root=repository_copy("multi_io") / "multi_io")
    broken = repository.read_config(model.config)
    broken.output[0].label_filename = "labels.txt"  # the message names the file it looked for
    with pytest.raises(ValidationError) as refused:
        tune.apply(model, broken, note="test")
    assert str(model.root / "labels.txt") in refused.value.problems[0].message
    assert ".staging-" not in str(refused.value)


def test_a_refused_apply_reads_at_the_front_door_as_problems_then_what_was_written(
    repository_copy: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model = ModelDir(root=repository_copy("multi_io") / "multi_io")
    broken = repository.read_config(model.config)
    broken.max_batch_size = -1
    with pytest.raises(SystemExit) as ended, console.guard():
        tune.apply(model, broken, note="test")
    assert ended.value.code == 1
    said = capsys.readouterr().err
    assert f"error: {model.config}: max_batch_size" in " ".join(said.split())
    assert said.rstrip().endswith(f"Nothing was written: {model.root} is as it was.")


def test_candidates_are_compared_at_the_exported_load_levels() -> None:
    bigger = replace(EXPORTED, instances=2)
    assert bigger.load_levels(EXPORTED) == (1, 8, 16)
    trial = tune.Trial(
        settings=bigger,
        varied="instances",
        seconds=0,
        points=(_point(10, 5, 1), _point(50, 9, 8), _point(90, 20, 16)),
        compared=(1, 8),
    )
    assert trial.score(None) == 50  # the concurrency-16 point is on the front, not in the comparison
    assert {p.throughput for _, p in tune.pareto_front([trial])} == {10, 50, 90}


def test_max_batch_size_is_never_searched_above_the_exported_one() -> None:
    values = {
        d.name: d.values(tune.Known(exported=EXPORTED, current=EXPORTED, cores=2)) for d in tune.DIMENSIONS
    }
    assert max(values["max_batch_size"]) == EXPORTED.max_batch_size  # parity is checked up to there only


def test_the_best_must_stay_faster_when_both_are_measured_again() -> None:
    def trial(settings: tune.Settings, throughput: float) -> tune.Trial:
        return tune.Trial(settings=settings, varied="x", seconds=0, points=(_point(throughput, 5.0),))

    other = replace(EXPORTED, intra_op_threads=2)
    exported, lucky = trial(EXPORTED, 100.0), trial(other, 130.0)  # one noisy measurement, 30 % faster
    assert (
        tune.confirmed(exported, lucky, trial(EXPORTED, 120.0), trial(other, 95.0), budget_ms=None)
        is exported
    )
    real = trial(other, 130.0)
    assert tune.confirmed(exported, real, trial(EXPORTED, 105.0), trial(other, 125.0), budget_ms=None) is real


def test_a_delay_of_a_batch_execution_and_a_quarter_is_tried_once_the_exported_trial_measured_one() -> None:
    # Triton closes the next batch once its oldest request has waited the delay, also while the instance is busy;
    # under max_batch_size steady clients only a delay longer than the shorter group's execution lets them merge.
    batch_us = 400_000.0
    full = replace(_point(20.0, 500.0, EXPORTED.filling), compute_infer_us=batch_us)
    tried: list[tune.Settings] = []

    def measure(settings: tune.Settings, varied: str) -> tune.Trial:
        tried.append(settings)
        points = (_point(10.0, 100.0), full) if varied == "exported" else (_point(10.0, 100.0),)
        return tune.Trial(settings=settings, varied=varied, seconds=0.0, points=points)

    tune.search(EXPORTED, measure, budget_ms=None, cores=2)
    # 1.25 executions of 400 ms
    assert 500_000 in {s.queue_delay_us for s in tried}
    unmeasured = tune.Known(exported=EXPORTED, current=EXPORTED, cores=2)
    delays = next(d for d in tune.DIMENSIONS if d.name == "queue_delay_us").values
    assert 500_000 not in delays(unmeasured)
    assert delays(replace(unmeasured, batch_us=batch_us))[-1] == 500_000
    assert tune.grid_size(EXPORTED, 2, batch_us=batch_us) > tune.grid_size(EXPORTED, 2)
    unbatched = replace(EXPORTED, queue_delay_us=None)
    assert delays(tune.Known(exported=unbatched, current=unbatched, cores=2, batch_us=batch_us)) == []
