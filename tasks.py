"""invoke tasks: the pipeline's front door for people. Each task declares its arguments and calls tritonpt.

    invoke export      TorchScript + config.pbtxt + eager reference outputs into a model repository
    invoke validate    check a model repository against Triton's schema and the models themselves
    invoke build-image build a Triton + PyTorch 2.9 image from a recipe in docker/
    invoke doctor      diagnose this host (and an image): Docker, GPU, driver, glibc, libraries, models
    invoke serve       run a local Triton on a repository until Ctrl-C

`invoke --help TASK` shows each task's options.
"""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from invoke.tasks import task

from tritonpt.repository import DEFAULT_REPOSITORY


@task(
    iterable=["only", "dynamic_axis", "parameter"],
    help={
        "model": "your model as MODULE:ATTR, ATTR a zero-argument callable returning (module, example_inputs) or a ModelSpec",
        "name": "model name (folder and config name); required with --model",
        "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
        "only": "export only this built-in model (repeatable); default: the whole built-in set",
        "script": "use torch.jit.script instead of torch.jit.trace (models with data-dependent control flow)",
        "max_batch_size": "largest batch; 0 = no batch axis (default: the model's own, else 8)",
        "dynamic_axis": "INPUT_INDEX:AXIS of a variable-length axis, e.g. 0:1 (repeatable)",
        "instance_kind": "KIND_AUTO (default), KIND_CPU or KIND_GPU",
        "parameter": "pytorch backend parameter KEY=VALUE, e.g. INTRA_OP_THREAD_COUNT=4 (repeatable)",
        "seed": "seed for weights of built-in models and for reference inputs (default 0)",
        "debug": "show tracebacks",
    },
)
def export(
    c: Context,
    model: str = "",
    name: str = "",
    repository: str = str(DEFAULT_REPOSITORY),
    only: list[str] | None = None,
    script: bool = False,
    max_batch_size: int = -1,
    dynamic_axis: list[str] | None = None,
    instance_kind: str = "",
    parameter: list[str] | None = None,
    seed: int = 0,
    debug: bool = False,
) -> None:
    """Export models to a Triton model repository with eager-PyTorch reference outputs, then validate it."""
    from tritonpt import cli  # noqa: PLC0415 - keeps `invoke --list` fast (no torch import)

    cli.export(
        model=model,
        name=name,
        repository=Path(repository),
        only=only or [],
        script=script,
        max_batch_size=None if max_batch_size < 0 else max_batch_size,
        dynamic_axes=dynamic_axis or [],
        instance_kind=instance_kind or None,
        parameters=parameter or [],
        seed=seed,
        debug=debug,
    )


@task(
    help={
        "image": "image tag to check (glibc, pytorch backend libraries, GPU inside it); default: host and model checks only",
        "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
        "debug": "show tracebacks",
    }
)
def doctor(
    c: Context, image: str = "", repository: str = str(DEFAULT_REPOSITORY), debug: bool = False
) -> None:
    """Diagnose this host, an image and a model repository: Docker, GPU, driver, glibc, libraries, TorchScript versions."""
    from tritonpt import cli  # noqa: PLC0415

    cli.doctor(image=image or None, repository=Path(repository), debug=debug)


@task(
    help={"repository": f"model repository folder (default {DEFAULT_REPOSITORY})", "debug": "show tracebacks"}
)
def validate(c: Context, repository: str = str(DEFAULT_REPOSITORY), debug: bool = False) -> None:
    """Validate every config.pbtxt and model.pt in a repository; exit 1 on any error."""
    from tritonpt import cli  # noqa: PLC0415

    cli.validate(repository=Path(repository), debug=debug)
