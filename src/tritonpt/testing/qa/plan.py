"""What runs of Triton's own QA tests, what does not and why, and how each test's checks are counted.

Two suites (versions.toml ``[[qa]]``): the server repository's ``qa/`` at r25.10, whose ``L0_libtorch_*`` tests
run against the r25.10 build of the pytorch backend, and at r26.05, whose ``L0_torch_aoti`` runs against the PT2
build. Every test of the pinned files is named here, run or not: a test that cannot run on a CPU is listed with
its reason, never dropped.

A test's ``checks`` are what its test.sh judges, counted by reading it (a unittest case, a grep of the server log
for a count, a server that must refuse to start); its exit code is the verdict, as upstream's CI takes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonpt.versions import VERSIONS, QaSuite


@dataclass(frozen=True, kw_only=True)
class Generator:
    """One of upstream's model generators (``qa/common/gen_*.py``), run from ``qa/common``."""

    script: str
    args: tuple[str, ...]
    into: str  # the folder below the data folder that ``--models_dir`` names


@dataclass(frozen=True, kw_only=True)
class UpstreamTest:
    name: str  # its folder below qa/
    checks: int  # what its test.sh judges on a CPU (see how_counted)
    how_counted: str
    not_run: str = ""  # why it cannot run here; empty when it runs


@dataclass(frozen=True, kw_only=True)
class Plan:
    suite: QaSuite
    generators: tuple[Generator, ...]
    tests: tuple[UpstreamTest, ...]

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


_FLAG_CHECKS = "2 configs (the flag true and false), each a unittest run and a count of its log line (3, one per version)"

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
            checks=8,
            how_counted="io_names_client.py's 8 unittest cases (INPUT__0 and named inputs, mixed, wrong names)",
        ),
        UpstreamTest(name="L0_libtorch_inference_mode", checks=4, how_counted=_FLAG_CHECKS),
        UpstreamTest(name="L0_libtorch_optimized_execution", checks=4, how_counted=_FLAG_CHECKS),
        UpstreamTest(
            name="L0_libtorch_disable_cudnn",
            checks=4,
            how_counted=_FLAG_CHECKS + "; on a CPU it checks only that the flag is logged",
        ),
        UpstreamTest(
            name="L0_libtorch_io_types",
            checks=3,
            how_counted="3 models the server must refuse to load, each with the backend's exact message",
        ),
        UpstreamTest(
            name="L0_libtorch_shared_weights",
            checks=4,
            how_counted="the 2 CPU configs (without and with ENABLE_WEIGHT_SHARING) of upstream's 3, each a "
            "unittest of 128 concurrent requests and a count of 'Reusing TorchScript model' (0, then 15)",
        ),
        UpstreamTest(
            name="L0_libtorch_instance_group_kind_model",
            checks=6,
            how_counted="2 models, each a client run and 2 greps of the device each input was on",
            not_run="needs 4 GPUs (its gen_models.py places modules on cuda:0, cuda:2 and cuda:3 and exits "
            "below 4), and its test.sh pip-uninstalls torch and installs another from download.pytorch.org, "
            "which must never touch a pinned environment. Runs on a machine with 4 GPUs and a throwaway "
            "environment, where KIND_MODEL instance groups can be checked",
        ),
    ),
)

TORCH_AOTI = Plan(
    suite=_suite("r26.05"),
    generators=(
        Generator(script="gen_qa_models.py", args=("--torch-aoti",), into="qa_model_repository"),
        Generator(script="gen_qa_models.py", args=("--torchvision-aoti",), into="qa_model_repository"),
    ),
    tests=(
        UpstreamTest(
            name="L0_torch_aoti",
            checks=4,
            how_counted="torch_aoti_infer_test.py's 4 unittest cases (ordinal names, call-spec names with "
            "nested dicts, 6 dtypes of an add model, torchvision ResNet50)",
        ),
    ),
)

PLANS = (LIBTORCH, TORCH_AOTI)
