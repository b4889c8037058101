"""A model without reference data is held to its own file, run in-process as the backend runs it
(tritonpt.in_process): on its samples.npz or on inputs generated from its config, at batch 1 and at the largest
batch the config allows, each row of the batch as the same sample alone. Where that cannot be done, this check
fails with the model's own words and what to do, and the model's other checks do not run: it is never a pass."""

from __future__ import annotations

import pytest

from .models import OwnFile


def test_its_own_file_runs_in_process_as_its_config_says(own_file: OwnFile) -> None:
    if own_file.error:
        pytest.fail(own_file.error, pytrace=False)
    assert own_file.held_to.startswith("its own file in-process"), own_file.held_to
