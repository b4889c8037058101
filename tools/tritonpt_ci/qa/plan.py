"""What runs of Triton's own QA tests, what does not and why, and how each test's checks are counted.

    LIBTORCH, TORCH_AOTI    the two Plans (versions.toml ``[[qa]]``): each test of the pinned files, run or not
    UpstreamTest            one test: its unittest cases, its greps of the server's log (LogCheck), or why not
    lay_overlay(plan, qa)   our tests in NVIDIA's form (docs/upstream/qa/) laid over the pinned files

A test passes when it exits 0 and every check of its plan was seen to run and hold (`nox -s triton-qa`).
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritonpt.versions import VERSIONS, QaSuite

CHECKOUT = Path(__file__).resolve().parents[3]
"""The checkout this runs from (the harness is CI's: it runs from one)."""


@dataclass(frozen=True, kw_only=True)
class Generator:
    """One of upstream's model generators (``qa/common/gen_*.py``), run from ``qa/common``."""

    script: str
    args: tuple[str, ...]
    into: str  # the folder below the data folder that ``--models_dir`` names
    ours: bool = False  # from the plan's overlay (docs/upstream/qa/common/), not the pinned files


@dataclass(frozen=True, kw_only=True)
class LogCheck:
    """A grep of the server's log that a test.sh judges: the text, and the count it requires (None: found)."""

    pattern: str  # as grep is given it, after test.sh expanded its variables
    count: int | None = None

    def holds(self, count: int | None, exit_code: int) -> bool:
        if self.count is None:
            return exit_code == 0 and bool(count)
        return count == self.count

    def describe(self) -> str:
        return "test.sh requires it" if self.count is None else f"test.sh requires {self.count}"


@dataclass(frozen=True, kw_only=True)
class UpstreamTest:
    name: str  # its folder below qa/
    cases: int  # unittest cases its clients run on a CPU, over every client run
    log_checks: tuple[LogCheck, ...] = ()  # greps of the server's log its test.sh judges, in order
    how_counted: str
    not_run: str = ""  # why it cannot run here; empty when it runs
    fixed_by: str = (
        ""  # ours (docs/upstream/qa/): the patch it needs; it fails on the stock build, as it must
    )

    @property
    def checks(self) -> int:
        return self.cases + len(self.log_checks)


@dataclass(frozen=True, kw_only=True)
class Control:
    """A negative control: an upstream test with one of its checks made to fail, run beside the real ones. The
    runner must report it failed, with exactly one check short, or the count cannot be trusted."""

    test: str  # the upstream test it copies
    old: str  # in its test.sh, replaced by ``new`` in the copy
    new: str
    what: str  # the check it breaks, in words


@dataclass(frozen=True, kw_only=True)
class Plan:
    suite: QaSuite
    generators: tuple[Generator, ...]
    tests: tuple[UpstreamTest, ...]
    controls: tuple[Control, ...] = ()
    overlay: str = ""  # a folder of this repository laid over the pinned qa/ (our tests in NVIDIA's form)

    @property
    def label(self) -> str:
        return f"{self.suite.source.ref} ({self.suite.backend} build)"

    @property
    def to_run(self) -> tuple[UpstreamTest, ...]:
        return tuple(t for t in self.tests if not t.not_run)


def _suite(ref: str) -> QaSuite:
    for suite in VERSIONS.qa:
        if suite.source.ref == ref:
            return suite
    msg = f"versions.toml has no [[qa]] suite at {ref!r}"
    raise LookupError(msg)


_FLAG_CHECKS = (
    "2 configs (the flag true and false), each a client run of 1 unittest case and a grep of the server's log for "
    "the flag's line (3, one per version)"
)


def _flag(name: str, line: str, *, on: str, off: str, note: str = "") -> UpstreamTest:
    """One of the three tests of a boolean parameter: the flag true, then false."""
    return UpstreamTest(
        name=name,
        cases=2,
        log_checks=(LogCheck(pattern=line + on, count=3), LogCheck(pattern=line + off, count=3)),
        how_counted=_FLAG_CHECKS + note,
    )


_REUSE = "Reusing TorchScript model for instance"

LIBTORCH = Plan(
    suite=_suite("r25.10"),
    generators=(
        Generator(script="gen_qa_models.py", args=("--libtorch",), into="qa_model_repository"),
        Generator(
            script="gen_qa_identity_models.py", args=("--libtorch",), into="qa_identity_model_repository"
        ),
        Generator(
            script="gen_qa_sequence_models.py",
            args=("--libtorch", "--variable"),
            into="qa_variable_sequence_model_repository",
        ),
    ),
    tests=(
        UpstreamTest(
            name="L0_libtorch_io_names",
            cases=8,
            how_counted="io_names_client.py's 8 unittest cases (INPUT__0 and named inputs, mixed, wrong names)",
        ),
        _flag("L0_libtorch_inference_mode", "Inference Mode is ", on="enabled", off="disabled"),
        # DISABLE_OPTIMIZED_EXECUTION true logs "disabled", false "enabled"
        _flag("L0_libtorch_optimized_execution", "Optimized execution is ", on="disabled", off="enabled"),
        _flag(
            "L0_libtorch_disable_cudnn",
            "cuDNN is ",
            on="disabled",
            off="enabled",
            note="; on a CPU it checks only that the flag is logged",
        ),
        UpstreamTest(
            name="L0_libtorch_io_types",
            cases=0,
            log_checks=(
                LogCheck(
                    pattern="unsupported datatype TYPE_UINT32 for input 'INPUT0' for model "
                    "'libtorch_invalid_input_type'"
                ),
                LogCheck(
                    pattern="unsupported datatype TYPE_UINT64 for output 'OUTPUT__0' for model "
                    "'libtorch_invalid_output_type'"
                ),
                LogCheck(pattern="input 'CORRID__2' type 'TYPE_UINT32' is not supported by PyTorch."),
            ),
            how_counted="3 models the server must refuse to load, each a grep of its log for the backend's exact "
            "message (that the server did not start is judged too, and decides the exit, but is not counted)",
        ),
        UpstreamTest(
            name="L0_libtorch_shared_weights",
            cases=2,
            log_checks=(LogCheck(pattern=_REUSE, count=0), LogCheck(pattern=_REUSE, count=15)),
            how_counted="the 2 CPU configs (without and with ENABLE_WEIGHT_SHARING) of upstream's 3, each a "
            f"client run of 1 unittest case (128 concurrent requests) and a grep of the log for '{_REUSE}' (0, "
            "then 15)",
        ),
        UpstreamTest(
            name="L0_libtorch_instance_group_kind_model",
            cases=2,
            log_checks=(
                LogCheck(pattern="SumModule - INPUT0 device: cpu, INPUT1 device: cpu"),
                LogCheck(pattern="DiffModule - INPUT0 device: cuda:3, INPUT1 device: cuda:3"),
                LogCheck(pattern="SumModule - INPUT0 device: cuda:2, INPUT1 device: cuda:2"),
                LogCheck(pattern="DiffModule - INPUT0 device: cuda:0, INPUT1 device: cuda:0"),
            ),
            how_counted="2 models, each a client run and 2 greps of the device each input was on",
            not_run="needs 4 GPUs (its gen_models.py places modules on cuda:0, cuda:2 and cuda:3 and exits "
            "below 4), and its test.sh pip-uninstalls torch and installs another from download.pytorch.org, "
            "which must never touch a pinned environment. Runs on a machine with 4 GPUs and a throwaway "
            "environment, where KIND_MODEL instance groups can be checked",
        ),
    ),
    controls=(
        Control(
            test="L0_libtorch_inference_mode",
            old='string_value: \\"$FLAG\\"',
            new='string_value: \\"true\\"',
            what="INFERENCE_MODE stays true when the loop sets it false, so the log's 'Inference Mode is disabled' "
            "count is 0 where test.sh requires 3 (one check of 4)",
        ),
    ),
)

OVERLAY = "docs/upstream/qa"
"""Our tests of the PT2 fixes in the form of qa/L0_torch_aoti, to be sent upstream with the patches; the harness
lays them over the pinned r26.05 qa/ (their models: qa/common/gen_qa_torch_aoti_batch_models.py)."""

_SETTINGS = (  # L0_torch_aoti_parameters's valid settings, each logged once by the PT2 path
    "Inference mode is enabled",
    "Inference mode is disabled",
    "Cache cleaning is enabled",
    "cuDNN is disabled",
    "Intra op thread count is set to 2",
)

TORCH_AOTI = Plan(
    suite=_suite("r26.05"),
    generators=(
        Generator(script="gen_qa_models.py", args=("--torch-aoti",), into="qa_model_repository"),
        Generator(script="gen_qa_models.py", args=("--torchvision-aoti",), into="qa_model_repository"),
        Generator(script="gen_qa_torch_aoti_batch_models.py", args=(), into="qa_model_repository", ours=True),
    ),
    tests=(
        UpstreamTest(
            name="L0_torch_aoti",
            cases=4,
            how_counted="torch_aoti_infer_test.py's 4 unittest cases (ordinal names, call-spec names with "
            "nested dicts, 6 dtypes of an add model, torchvision ResNet50)",
        ),
        UpstreamTest(
            name="L0_torch_aoti_dynamic_batching",
            cases=1,
            how_counted="ours: 1 unittest case, 8 concurrent batch-1 requests merged (executions < requests), "
            "each with its own row",
            fixed_by="0001-pt2-dynamic-batching.patch",
        ),
        UpstreamTest(
            name="L0_torch_aoti_static_batch",
            cases=2,
            how_counted="ours: 2 unittest cases, the package's batch 1 served, batch 4 refused",
            fixed_by="0002-pt2-static-batch.patch",
        ),
        UpstreamTest(
            name="L0_torch_aoti_output_type",
            cases=1,
            how_counted="ours: 1 unittest case, an FP16 output on an FP32 package answered with the backend's "
            "error twice, the server live",
            fixed_by="0003-pt2-output-dtype-use-after-free.patch",
        ),
        UpstreamTest(
            name="L0_torch_aoti_parameters",
            cases=0,
            log_checks=(
                LogCheck(pattern="failed to convert 'maybe' to boolean"),
                *(LogCheck(pattern=line, count=1) for line in _SETTINGS),
            ),
            how_counted="ours: a grep of the log for INFERENCE_MODE 'maybe' refused at load (that the server did "
            "not start is judged too, not counted), then 5 valid settings, each a grep for its line once",
            fixed_by="0004-pt2-parameters.patch",
        ),
        UpstreamTest(
            name="L0_torch_aoti_statistics",
            cases=1,
            how_counted="ours: 1 unittest case, the statistics' split of 10 requests fits inside them",
            fixed_by="0005-pt2-statistics-order.patch",
        ),
    ),
    overlay=OVERLAY,
)

PLANS = (LIBTORCH, TORCH_AOTI)


def overlay_digest(plan: Plan) -> str:
    """sha256 of the overlay's generator files (``common/``: paths and contents), which the generated models'
    cache key holds: our generator is not pinned by the suite's commit. Its tests do not change the models."""
    if not plan.overlay:
        return ""
    digest = hashlib.sha256()
    folder = CHECKOUT / plan.overlay / "common"
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def lay_overlay(plan: Plan, qa: Path) -> None:
    """Lay the plan's overlay (ours, from this checkout) over the unpacked ``qa/``; nothing for upstream's own."""
    if plan.overlay:
        shutil.copytree(
            CHECKOUT / plan.overlay, qa, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
        )
