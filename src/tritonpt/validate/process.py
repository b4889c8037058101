"""Family P: what one model's config does to the others that the same server loads."""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import text_format

from tritonpt import spec
from tritonpt.errors import Problem
from tritonpt.repository import ModelDir, read_config
from tritonpt.validate.rules import Findings, rule

INTER_OP_SEVERAL = rule("P001", "INTER_OP_THREAD_COUNT in two models of one repository")
INTER_OP_ONE = rule("P002", "INTER_OP_THREAD_COUNT in one model of several")


def _inter_op_threads(model: ModelDir) -> int:
    """The INTER_OP_THREAD_COUNT a model's config sets (0 when none, or when it does not parse)."""
    if not model.config.is_file():  # a FIFO would block the read forever; validate_model reports it
        return 0
    try:
        config = read_config(model.config)
    except (OSError, text_format.ParseError):
        return 0
    return spec.BackendRun.of(config).inter_op_threads or 0


def process_wide_problems(held: Iterable[ModelDir]) -> list[Problem]:
    """What one model's config does to the others in the same server.

    The backend hands INTER_OP_THREAD_COUNT to ``at::set_num_interop_threads``, which libtorch lets a process
    call once, before any parallel work: seen with server 2.51.0, a second model that sets it aborts the whole
    server at load (SIGABRT, ``cannot set number of interop threads after parallel work has started or
    set_num_interop_threads called``).
    """
    held = list(held)
    findings = Findings()
    setting = [m for m in held if _inter_op_threads(m) > 0]
    if len(setting) > 1:
        for m in setting:
            findings.add(
                INTER_OP_SEVERAL,
                "error",
                m.config,
                "parameters INTER_OP_THREAD_COUNT",
                f"{len(setting)} models of this repository set it ({', '.join(x.name for x in setting)}); "
                "libtorch takes it once per process, and Triton's server aborts (SIGABRT) loading the second.",
                "set it in one model at most (it applies to the whole server), or serve those models apart.",
            )
    elif setting and len(held) > 1:
        findings.add(
            INTER_OP_ONE,
            "warning",
            setting[0].config,
            "parameters INTER_OP_THREAD_COUNT",
            "it applies to the whole server, not this model, and libtorch accepts it only before any "
            "parallel work: if another model of the repository computes first (a warmup), the server aborts.",
            "serve this model in a server of its own, or leave the parameter out.",
        )
    return list(findings)
