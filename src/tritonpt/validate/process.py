"""Family P: what one model's config does to the others that the same server loads.

The rules see every model of the repository: those it holds, and, in a repository a sharded export filled with
its part, the others of the split as the export recorded them (:class:`tritonpt.repository.Split`), so that each
shard reaches the verdict one server of the whole repository would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import spec
from tritonpt.errors import Problem
from tritonpt.repository import SPLIT_FILE, ModelDir, read_config, read_split
from tritonpt.validate.rules import Findings, rule

INTER_OP_SEVERAL = rule(
    "P001",
    "INTER_OP_THREAD_COUNT in two models of one repository",
    why=(
        "Error: the server aborts at load (SIGABRT, seen by hand: `set_num_interop_threads` may "
        "run once per process)."
    ),
    example='two models of one repository, each with parameters: { key: "INTER_OP_THREAD_COUNT" ... }',
)
INTER_OP_ONE = rule(
    "P002",
    "INTER_OP_THREAD_COUNT in one model of several",
    why="Warning: Triton serves it, unless another model computes first.",
    example=(
        'one model of several with parameters: { key: "INTER_OP_THREAD_COUNT" value: { string_value: "2" } }'
    ),
)


@dataclass(frozen=True, kw_only=True)
class _Setting:
    """What one model sets for the whole process, and where that is written."""

    model: str
    inter_op_threads: int
    file: Path
    field: str


def _held(model: ModelDir) -> _Setting:
    """A model of the repository, from its config (0 threads when none is set, or when it does not parse)."""
    threads = 0
    if model.config.is_file():  # a FIFO would block the read forever; validate_model reports it
        with contextlib.suppress(OSError, text_format.ParseError):
            threads = spec.BackendRun.of(read_config(model.config)).inter_op_threads or 0
    return _Setting(
        model=model.name,
        inter_op_threads=threads,
        file=model.config,
        field="parameters INTER_OP_THREAD_COUNT",
    )


def _recorded(name: str, parameters: Mapping[str, str], repository: Path) -> _Setting:
    """A model another runner holds, from the parameters the sharded export recorded for it."""
    config = ModelConfig()
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return _Setting(
        model=name,
        inter_op_threads=spec.BackendRun.of(config).inter_op_threads or 0,
        file=repository / SPLIT_FILE,
        field=f"parameters {name} INTER_OP_THREAD_COUNT (a model another shard's runner exports)",
    )


def process_wide_problems(held: Iterable[ModelDir], repository: Path | None = None) -> list[Problem]:
    """What one model's config does to the others in the same server.

    The backend hands INTER_OP_THREAD_COUNT to ``at::set_num_interop_threads``, which libtorch lets a process
    call once, before any parallel work: seen with server 2.51.0, a second model that sets it aborts the whole
    server at load (SIGABRT, ``cannot set number of interop threads after parallel work has started or
    set_num_interop_threads called``). With ``repository``, the models of the split a sharded export recorded
    there that this runner does not hold count as well.
    """
    every = [_held(m) for m in held]
    if repository is not None and (split := read_split(repository)) is not None:
        here = {s.model for s in every}
        every += [
            _recorded(name, split.parameters.get(name, {}), repository)
            for name in split.models
            if name not in here
        ]
    findings = Findings()
    setting = [s for s in every if s.inter_op_threads > 0]
    if len(setting) > 1:
        for s in setting:
            findings.add(
                INTER_OP_SEVERAL,
                "error",
                s.file,
                s.field,
                f"{len(setting)} models of this repository set it ({', '.join(x.model for x in setting)}); "
                "libtorch takes it once per process, and Triton's server aborts (SIGABRT) loading the second.",
                "set it in one model at most (it applies to the whole server), or serve those models apart.",
            )
    elif setting and len(every) > 1:
        findings.add(
            INTER_OP_ONE,
            "warning",
            setting[0].file,
            setting[0].field,
            "it applies to the whole server, not this model, and libtorch accepts it only before any "
            "parallel work: if another model of the repository computes first (a warmup), the server aborts.",
            "serve this model in a server of its own, or leave the parameter out.",
        )
    return list(findings)
