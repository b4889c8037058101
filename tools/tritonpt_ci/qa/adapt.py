"""The adaptations: how Triton's QA tests, written for NVIDIA's GPU machines, run here unchanged otherwise.

Every change to an upstream file is a row of :data:`SUBSTITUTIONS`, applied at run time to a scratch copy of the
unpacked pinned files (never to the files themselves, never committed). Each row says the file, the exact text it
replaces, how often that text must occur, and why; a count that differs stops the run naming the file, so a pin
that moves cannot change what a substitution does without a review. Placeholders in the new text are filled at
run time: ``@SERVER@`` (the server wrapper), ``@DATA@`` (the generated models), ``@HTTP_PORT@``.
What is not an edit of a file is :data:`AROUND`: the server wrapper, the ports, the ``pip`` shims, the PT2 models.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonpt.errors import HINT, QaError

_LIBTORCH_TESTS = (
    "L0_libtorch_io_names",
    "L0_libtorch_inference_mode",
    "L0_libtorch_optimized_execution",
    "L0_libtorch_disable_cudnn",
    "L0_libtorch_io_types",
    "L0_libtorch_shared_weights",
)
_FLAG_TESTS = ("L0_libtorch_inference_mode", "L0_libtorch_optimized_execution", "L0_libtorch_disable_cudnn")
GENERATION = "model generation"
_OURS = (
    "L0_torch_aoti_dynamic_batching",
    "L0_torch_aoti_static_batch",
    "L0_torch_aoti_output_type",
    "L0_torch_aoti_parameters",
    "L0_torch_aoti_statistics",
)  # docs/upstream/qa/: the PT2 fixes' tests in upstream's form


@dataclass(frozen=True, kw_only=True)
class Substitution:
    key: str  # "S1": how the report names it
    ref: str  # the suite it applies to ("r25.10")
    files: tuple[str, ...]  # below qa/
    old: str
    new: str
    count: int = 1  # occurrences of ``old`` in each file
    tests: tuple[str, ...]  # the tests it serves (or GENERATION)
    why: str


SUBSTITUTIONS: tuple[Substitution, ...] = (
    Substitution(
        key="S1",
        ref="r25.10",
        files=tuple(f"{t}/test.sh" for t in _LIBTORCH_TESTS),
        old="SERVER=/opt/tritonserver/bin/tritonserver",
        new="SERVER=@SERVER@",
        tests=_LIBTORCH_TESTS,
        why="the server wrapper: server 2.51.0 from the nvidia-pytriton wheel with our backend directory",
    ),
    Substitution(
        key="S2",
        ref="r25.10",
        files=tuple(f"{t}/test.sh" for t in _LIBTORCH_TESTS),
        old="/data/inferenceserver/${REPO_VERSION}",
        new="@DATA@",
        tests=_LIBTORCH_TESTS,
        why="the models upstream's generators made here (NVIDIA's CI keeps them in /data/inferenceserver)",
    ),
    Substitution(
        key="S3",
        ref="r25.10",
        files=("L0_libtorch_shared_weights/test.sh",),
        old="count: ${INSTANCE_CNT} kind: KIND_GPU}",
        new="count: ${INSTANCE_CNT} kind: KIND_CPU}",
        tests=("L0_libtorch_shared_weights",),
        why="KIND_GPU -> KIND_CPU: the config without weight sharing asks for GPU instances; the embedded server "
        "runs on the CPU",
    ),
    Substitution(
        key="S4",
        ref="r25.10",
        files=("L0_libtorch_shared_weights/test.sh",),
        old="for KIND in KIND_CPU KIND_GPU; do",
        new="for KIND in KIND_CPU; do",
        tests=("L0_libtorch_shared_weights",),
        why="the sharing loop's GPU leg left out (as KIND_CPU it would repeat the CPU leg): 2 of 3 configs run",
    ),
    Substitution(
        key="S5",
        ref="r25.10",
        files=("L0_libtorch_io_types/test.sh",),
        old="sed -i 's/READY__2/CORRID__2/' models/libtorch_invalid_sequence_int32/config.pbtxt && \\",
        new="sed -i 's/READY__2/CORRID__2/' models/libtorch_invalid_sequence_int32/config.pbtxt && \\\n"
        "    sed -i 's/KIND_GPU/KIND_CPU/' models/libtorch_invalid_sequence_int32/config.pbtxt && \\",
        tests=("L0_libtorch_io_types",),
        why="KIND_GPU -> KIND_CPU in the generated sequence model: without a GPU, core refuses it before the "
        "backend's data-type check, whose message the test expects",
    ),
    Substitution(
        key="S6",
        ref="r25.10",
        files=("common/util.sh",),
        old="${SERVER_IPADDR}:8000/",
        new="${SERVER_IPADDR}:@HTTP_PORT@/",
        count=4,
        tests=_LIBTORCH_TESTS,
        why="a free HTTP port instead of 8000 (readiness and liveness probes), so that no other server collides",
    ),
    Substitution(
        key="S7",
        ref="r25.10",
        files=("common/libtorch_infer_client.py",),
        old='{_tritonserver_ipaddr}:8000"',
        new='{_tritonserver_ipaddr}:@HTTP_PORT@"',
        tests=_FLAG_TESTS,
        why="the client's port",
    ),
    Substitution(
        key="S8",
        ref="r25.10",
        files=("L0_libtorch_io_names/io_names_client.py",),
        old='"localhost:8000"',
        new='"127.0.0.1:@HTTP_PORT@"',
        tests=("L0_libtorch_io_names",),
        why="the client's address and port",
    ),
    Substitution(
        key="S9",
        ref="r25.10",
        files=("L0_libtorch_shared_weights/libtorch_shared_weights_test.py",),
        old='"localhost:8000"',
        new='"127.0.0.1:@HTTP_PORT@"',
        tests=("L0_libtorch_shared_weights",),
        why="the client's address and port",
    ),
    Substitution(
        key="S10",
        ref="r26.05",
        files=("L0_torch_aoti/test.sh",),
        old="\npip install torch\n",
        new="\n: pip install torch  # tritonpt: torch comes from the pinned environment\n",
        tests=("L0_torch_aoti",),
        why="never install into the environment: torch 2.9.1 is already there, pinned",
    ),
    Substitution(
        key="S11",
        ref="r26.05",
        files=("common/util.sh",),
        old="${SERVER_IPADDR}:8000/",
        new="${SERVER_IPADDR}:@HTTP_PORT@/",
        count=4,
        tests=("L0_torch_aoti", *_OURS),
        why="a free HTTP port instead of 8000 (readiness and liveness probes)",
    ),
    Substitution(
        key="S12",
        ref="r26.05",
        files=("L0_torch_aoti/torch_aoti_infer_test.py",),
        old='"localhost:8000"',
        new='"127.0.0.1:@HTTP_PORT@"',
        count=4,
        tests=("L0_torch_aoti",),
        why="the client's address and port",
    ),
    Substitution(
        key="S14",
        ref="r26.05",
        files=(
            "L0_torch_aoti_dynamic_batching/dynamic_batching_test.py",
            "L0_torch_aoti_output_type/output_type_test.py",
            "L0_torch_aoti_statistics/statistics_test.py",
            "L0_torch_aoti_parameters/test.sh",
        ),
        old="localhost:8000",
        new="127.0.0.1:@HTTP_PORT@",
        tests=_OURS,
        why="the client's address and port (our tests, docs/upstream/qa/, written as upstream's are)",
    ),
    Substitution(
        key="S15",
        ref="r26.05",
        files=("L0_torch_aoti_static_batch/static_batch_test.py",),
        old="localhost:8000",
        new="127.0.0.1:@HTTP_PORT@",
        count=2,
        tests=("L0_torch_aoti_static_batch",),
        why="the client's address and port",
    ),
    Substitution(
        key="S13",
        ref="r26.05",
        files=("common/gen_qa_models.py",),
        old="models.resnet50(weights=models.ResNet50_Weights.DEFAULT)",
        new="models.resnet50(weights=None)",
        tests=(GENERATION,),
        why="no download of ResNet50's weights (download.pytorch.org may be unreachable); the test checks the "
        "output's shape and that it is finite, not the weights",
    ),
)


@dataclass(frozen=True, kw_only=True)
class Around:
    key: str
    what: str
    why: str
    tests: str = "all"


AROUND: tuple[Around, ...] = (
    Around(
        key="W",
        what="SERVER is a wrapper that execs server 2.51.0 with --backend-directory, the libraries it needs on "
        "LD_LIBRARY_PATH, and HTTP, gRPC and metrics bound to 127.0.0.1 on free ports; the test's own "
        "arguments follow and win",
        why="no /opt/tritonserver here; exec keeps the pid the test kills and waits for",
    ),
    Around(
        key="E",
        what="PATH starts with shims for pip, pip3 and gdb that refuse (exit 1), then the session's Python; "
        "TRITONSERVER_IPADDR=127.0.0.1",
        why="no test may install into the pinned environment; util.sh attaches gdb and writes a core file of "
        "gigabytes when a server does not get ready",
    ),
    Around(
        key="P",
        what="DATADIR holds the generated models as the harness serves PT2 on server 2.51.0: a copy linking "
        "every file, each torch_aoti config naming backend pt2 (tritonpt.repository.write_served_copy); "
        "TRITON_DIR and MODELDIR are the test's own environment overrides",
        why="core r24.10 refuses backend pytorch with platform torch_aoti; the PT2 build is installed as pt2",
        tests="L0_torch_aoti",
    ),
    Around(
        key="O",
        what="docs/upstream/qa/ of this repository is laid over the pinned qa/: our L0_torch_aoti_* tests of the "
        "PT2 fixes and their generator, in upstream's form; each runs on the stock PT2 build (where it must fail: "
        "it shows the bug) and on the patched one (where it must pass)",
        why="so that each patch goes upstream with a test NVIDIA's suite can take",
        tests="L0_torch_aoti_*",
    ),
)


def for_ref(ref: str) -> tuple[Substitution, ...]:
    return tuple(s for s in SUBSTITUTIONS if s.ref == ref)


def apply(qa: Path, substitutions: tuple[Substitution, ...], values: dict[str, str]) -> None:
    """Apply each substitution to the scratch copy ``qa`` (the folder named qa/), its count checked first."""
    for sub in substitutions:
        new = sub.new
        for placeholder, value in values.items():
            new = new.replace(f"@{placeholder}@", value)
        for name in sub.files:
            path = qa / name
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                msg = (
                    f"Cannot apply substitution {sub.key} to qa/{name} of server {sub.ref}: {exc.strerror or exc}.\n"
                    f"{HINT} the pinned files changed: review {sub.key} in tools/tritonpt_ci/qa/adapt.py."
                )
                raise QaError(msg) from exc
            found = text.count(sub.old)
            if found != sub.count:
                msg = (
                    f"Cannot apply substitution {sub.key} to qa/{name} of server {sub.ref}: it expects {sub.count} "
                    f"x {sub.old!r}, and the file holds {found}.\n{HINT} the pinned files changed: review "
                    f"{sub.key} in tools/tritonpt_ci/qa/adapt.py against the new text."
                )
                raise QaError(msg)
            path.write_text(text.replace(sub.old, new), encoding="utf-8")
