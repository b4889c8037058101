"""Stage "validate": every rule that Triton or its pytorch backend would otherwise fail on later, checked now.

One module per family, in the order a model is read: ``folders`` (R), ``text`` (T), ``config`` (C),
``warmup`` (W), ``torchscript`` (M), ``pt2`` (A), ``ensemble`` (E), ``feeds`` (D) and ``process`` (P).
:mod:`tritonpt.validate.rules` has the codes, :mod:`tritonpt.validate.reference` writes
docs/reference/validator.md from them, and ``nox -s differential`` holds each rule against the real server.
Each problem names the file, the field, what was expected, the fix, and its rule.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

import torch

from tritonpt.errors import Problem, ValidationError
from tritonpt.options import Pt2Build
from tritonpt.repository import ENSEMBLE_PLATFORM, PT2_PLATFORM, ModelDir, models
from tritonpt.validate import config as config_rules
from tritonpt.validate import ensemble, feeds, folders, pt2, text, torchscript, warmup
from tritonpt.validate.process import process_wide_problems
from tritonpt.validate.rules import RULES, Findings, Rule

__all__ = ["RULES", "Rule", "process_wide_problems", "refuse_staged", "validate_model", "validate_repository"]


def validate_repository(
    repository: Path,
    *,
    gpu_available: bool | None = None,
    only: Collection[str] | None = None,
    pt2_build: Pt2Build = "stock",
) -> list[Problem]:
    """Validate every model folder in a repository (or those named in ``only``: a shard's), then the rules
    across them, which always see every model of the repository (one server loads them all), also those of a
    sharded export's split that another runner holds. ``pt2_build``: which PT2 build will serve its torch_aoti
    models (stock, or an NGC image of 26.03 on: every rule; patched: not those of the stock bugs it fixes)."""
    findings = Findings()
    if folders.repository_folders(repository, findings) is None:
        return list(findings)
    problems = list(findings)
    held = models(repository)
    for model in held:
        if only is None or model.name in only:
            problems += validate_model(model, gpu_available=gpu_available, pt2_build=pt2_build)
    return problems + process_wide_problems(held, repository)


def validate_model(
    model: ModelDir, *, gpu_available: bool | None = None, pt2_build: Pt2Build = "stock"
) -> list[Problem]:
    """Validate one model folder; returns its problems (empty when it is sound).

    ``gpu_available`` is whether the server that will load it has a GPU (default: this host has one).
    """
    findings = Findings()
    config = text.read(model.config, findings)
    if config is None:
        return list(findings)
    if gpu_available is None:
        gpu_available = torch.cuda.is_available()
    config_rules.check(model, config, findings, gpu_available=gpu_available, pt2_build=pt2_build)
    if config.platform == ENSEMBLE_PLATFORM:
        ensemble.check(model, config, findings)
        return list(findings)
    is_pt2 = config.platform == PT2_PLATFORM
    if is_pt2:
        pt2.check_config(model, config, findings, pt2_build=pt2_build)
    warmup.check(model, config, findings)
    if findings.failed:
        return list(findings)
    for model_file in folders.model_files(model, config, findings):
        if is_pt2:
            pt2.check(model, config, model_file, findings, pt2_build=pt2_build)
            feeds.reference_feeds(model, config, findings)
        else:
            torchscript.check(model, config, model_file, findings)
    feeds.missing(model, findings)
    return list(findings)


def refuse_staged(staged: ModelDir, final: Path, problems: Iterable[Problem]) -> None:
    """Raise :class:`ValidationError` for the errors among ``problems``, found on a staged copy of ``final``:
    named where the folder was going (the staging folder is gone by the time anyone reads them), and saying
    that nothing was written. Warnings alone raise nothing."""
    errors = [p.moved(staged.root, final) for p in problems if p.severity == "error"]
    if errors:
        before = "is as it was" if final.exists() else "was not created"
        raise ValidationError(errors, outcome=f"Nothing was written: {final} {before}.")
