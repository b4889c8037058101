"""What one run of the matrix is asked to do, typed and frozen: built once by the door that starts the run
(`tritonpt check`, ``python -m tritonpt.matrix``, `nox -s integration` through it) and handed to pytest as a
plugin (:class:`Plugin`), which the conftest reads. Nothing after the door parses an option.

Each option is the registry's (:data:`tritonpt.options.OPTIONS`): its flag, help, default and choices are declared
there once; :data:`NAMES` says which of them the matrix takes.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from tritonpt import shards
from tritonpt.errors import SpecError
from tritonpt.options import (
    GPUS,
    OPTIONS,
    PT2_BUILDS,
    SANITIZERS,
    TARGETS,
    Gpus,
    Mount,
    Pt2Build,
    Sanitizer,
    Target,
    add_arguments,
    command_line,
    one_of,
    parse_mounts,
)

NAMES = (
    "target", "url", "grpc_url", "metrics_url", "repository", "upload", "replace_loaded", "image", "gpus", "mount",
    "tritonserver", "reports", "shard", "shard_costs", "pt2_build", "sanitize", "export_builtin", "strict_backend",
    "memory", "skip_validation", "start_timeout", "rerun",
)  # fmt: skip
"""The options of the matrix, as the registry declares them."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One run of the matrix: where the server comes from, which repository and shard, where the reports go."""

    repository: Path
    target: Target
    url: str | None
    grpc_url: str | None
    metrics_url: str | None
    image: str | None
    gpus: Gpus
    mounts: tuple[Mount, ...]
    tritonserver: str | None
    reports: Path  # --reports, else a shard's own folder (reports/shard-K-of-N, where merge-reports looks)
    shard: shards.Shard | None
    costs: shards.Costs | None
    pt2_build: Pt2Build
    sanitize: Sanitizer | None
    export_builtin: bool
    upload: bool
    replace_loaded: bool
    strict_backend: bool
    memory: str | None
    skip_validation: bool
    start_timeout: float
    rerun: bool
    line: tuple[str, ...]  # the options as a command line, those left at their default left out (the rerun's)

    @classmethod
    def of(cls, values: Mapping[str, object]) -> Settings:
        """The settings from option values as typed (strings, flags, lists; an option left out at its default, or
        absent): choices, the shard, its costs and the mounts are checked here, each in its own paragraph
        (``SpecError``, ``ShardError``)."""
        unknown = sorted(set(values) - set(NAMES))
        if unknown:
            flags = ", ".join("--" + name.replace("_", "-") for name in unknown)
            msg = f"The matrix has no option {flags}."
            raise SpecError(msg)
        given = {name: values.get(name, OPTIONS[name].default) for name in NAMES}
        mounts = given["mount"] or ()
        given["mount"] = [mounts] if isinstance(mounts, str) else list(cast("Sequence[str]", mounts))
        try:
            given["start_timeout"] = float(cast("float", given["start_timeout"]))
        except (TypeError, ValueError):
            msg = f"--start-timeout {given['start_timeout']!r}: expected a number of seconds, e.g. 240."
            raise SpecError(msg) from None

        def text(name: str) -> str | None:
            return str(given[name]) if given[name] not in ("", None) else None

        def choice(name: str, choices: tuple[str, ...]) -> str:
            return one_of(str(given[name]), choices, option=OPTIONS[name].flag, error=SpecError)

        shard, costs = shards.given(str(given["shard"] or ""), str(given["shard_costs"] or ""))
        reports = text("reports")
        default_reports = Path(str(OPTIONS["reports"].default))
        return cls(
            repository=Path(str(given["repository"])),
            target=cast("Target", choice("target", TARGETS)),
            url=text("url"),
            grpc_url=text("grpc_url"),
            metrics_url=text("metrics_url"),
            image=text("image"),
            gpus=cast("Gpus", choice("gpus", GPUS)),
            mounts=parse_mounts(given["mount"], option="--mount", error=SpecError),  # type: ignore[arg-type]
            tritonserver=text("tritonserver"),
            reports=Path(reports) if reports else default_reports / shard.slug if shard else default_reports,
            shard=shard,
            costs=costs,
            pt2_build=cast("Pt2Build", choice("pt2_build", PT2_BUILDS)),
            sanitize=cast("Sanitizer", choice("sanitize", SANITIZERS)) if text("sanitize") else None,
            export_builtin=bool(given["export_builtin"]),
            upload=bool(given["upload"]),
            replace_loaded=bool(given["replace_loaded"]),
            strict_backend=bool(given["strict_backend"]),
            memory=text("memory"),
            skip_validation=bool(given["skip_validation"]),
            start_timeout=cast("float", given["start_timeout"]),
            rerun=bool(given["rerun"]),
            line=tuple(command_line({n: v for n, v in given.items() if v != OPTIONS[n].default and v != []})),
        )


def parser() -> argparse.ArgumentParser:
    """The matrix's options on an argparse parser (no abbreviations: what it does not know is pytest's)."""
    declared = argparse.ArgumentParser(
        prog="python -m tritonpt.matrix",
        description="The integration matrix. Options not listed here are pytest's, e.g. -k parity -x.",
        allow_abbrev=False,
    )
    add_arguments(declared.add_argument, NAMES, defaults={"reports": None})
    return declared


def parse(args: Sequence[str], given: Mapping[str, object] | None = None) -> tuple[Settings, list[str]]:
    """The settings a command line gives, and the rest of it (pytest's own arguments), in their order. ``given``:
    option values a door already holds (`tritonpt check`'s), which the command line's own options override."""
    known, rest = parser().parse_known_args(list(args), namespace=argparse.Namespace(**(given or {})))
    return Settings.of(vars(known)), rest


KEY = pytest.StashKey[Settings]()


class Plugin:
    """Hands the settings to the matrix's conftest: ``pytest.main(args, plugins=[Plugin(settings)])``; the
    conftest reads ``config.stash[KEY]``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[KEY] = self.settings
