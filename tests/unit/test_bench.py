"""The bench's pure parts: its cases, core pinning, eager's settings from a config, the one-model repository.
The measuring itself runs in `nox -s bench` (and its smoke in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonpt import bench, repository
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
