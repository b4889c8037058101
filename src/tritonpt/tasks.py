"""The front door for people: the tasks of `tritonpt` (installed) and `invoke` (a checkout, the root tasks.py).

Each task says which options it takes by its keyword parameters; what each option is (help, default, choices)
is declared once in :data:`tritonpt.options.OPTIONS`, and :func:`door` composes the task's command line from it,
checks the choices, then calls the task with the values. The work is :mod:`tritonpt.cli`'s.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invoke import tasks as invoke_tasks
from invoke.context import Context

from tritonpt.options import OPTIONS, Option, Ports

Body = Callable[..., None]


def _help(option: Option) -> str:
    """The option's help, with its default where it has one worth saying."""
    value = option.default
    shown = bool(value) and not isinstance(value, bool) and not (isinstance(value, int | float) and value < 0)
    return (
        f"{option.help} (default {option.default})" if shown and "default" not in option.help else option.help
    )


def door(body: Body) -> Any:
    """An invoke task from ``body``, whose keyword parameters name its options (each one of OPTIONS): their
    defaults, help, repeatability and place come from there; a value outside an option's choices is refused in
    one paragraph before ``body`` runs. invoke makes up no short flags: ``-h`` is help in every task."""
    declared = [OPTIONS[name] for name in inspect.signature(body).parameters]

    @functools.wraps(body)
    def run(c: Context, **given: object) -> None:
        from tritonpt.console import guard  # noqa: PLC0415 - rich loads when a task runs, not for --list

        values = {o.name: list(given[o.name] or []) if o.repeatable else given[o.name] for o in declared}  # type: ignore[call-overload]
        with guard(debug=bool(values.get("debug"))):
            for option in declared:
                if not option.repeatable:
                    option.check(values[option.name])
        body(**values)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("c", kind)]
        + [inspect.Parameter(o.name, kind, default=None if o.repeatable else o.default) for o in declared]
    )
    return invoke_tasks.task(
        run,
        auto_shortflags=False,
        iterable=[o.name for o in declared if o.repeatable],
        help={o.name: _help(o) for o in declared},
        positional=[o.name for o in declared if o.positional],
    )


@door
def export(
    *,
    model: str,
    name: str,
    repository: str,
    only: list[str],
    script: bool,
    max_batch_size: int,
    dynamic_axis: list[str],
    instance_kind: str,
    parameter: list[str],
    seed: int,
    force: bool,
    format: str,
    shard: str,
    shard_costs: str,
    pt2_build: str,
    build_backend: bool,
    from_file: str,
    samples: str,
    debug: bool,
) -> None:
    """Export models to a model repository with eager-PyTorch reference outputs, then validate it.

    The built-in set, your model (--model MODULE:ATTR --name NAME: a zero-argument callable returning the module
    and its example inputs, or a tritonpt.spec.ModelSpec), or a model file made elsewhere as it is (--from-file
    FILE --name NAME --samples INPUTS.npz: its config from what it takes and returns, reference data from it
    in-process). Each model gets NAME/1/model.pt (or model.pt2), config.pbtxt, a warmup sample and reference data,
    staged and validated before it is moved in. A model whose stamp (.export-stamp.json: the code that exports
    it, the versions, the seed, a sha256 of each file) still matches is kept; one exported before with the same
    inputs on this machine comes from the export cache (~/.cache/tritonpt/exports/); --force exports it again.
    """
    from tritonpt import cli  # noqa: PLC0415 - keeps `invoke --list` fast (no torch import)

    cli.export(
        model=model,
        name=name,
        repository=Path(repository),
        only=only,
        script=script,
        max_batch_size=None if max_batch_size < 0 else max_batch_size,
        dynamic_axes=dynamic_axis,
        instance_kind=instance_kind or None,
        parameters=parameter,
        seed=seed,
        force=force,
        model_format=format,
        debug=debug,
        shard=shard,
        shard_costs=shard_costs,
        pt2_build=pt2_build,
        build_backend=build_backend,
        from_file=from_file,
        samples=samples,
    )


@door
def build_image(
    *,
    recipe: str,
    tag: str,
    no_cache: bool,
    build_arg: list[str],
    ngc: str,
    sources: str,
    pt2_build: str,
    debug: bool,
) -> None:
    """Build the Triton + PyTorch 2.9 image from a recipe in docker/, with every version from versions.toml.

    The pytorch recipe builds the PT2 backend beside the TorchScript one (--pt2-build names which).
    """
    from tritonpt import cli  # noqa: PLC0415

    cli.build_image(
        recipe=recipe,
        tag=tag or None,
        no_cache=no_cache,
        build_args=build_arg,
        ngc=ngc or None,
        sources=sources or None,
        pt2_build=pt2_build,
        debug=debug,
    )


@door
def build_backend(
    *,
    sources: str,
    variant: str,
    force: bool,
    pt2: bool,
    pt2_build: str,
    sanitize: str,
    repository: str,
    debug: bool,
) -> None:
    """Build the official pytorch backend against this environment's torch, or reuse the cached build.

    libtriton_pytorch.so, and its PT2 build for torch_aoti models (--pt2, --pt2-build stock or patched).
    """
    from tritonpt import cli  # noqa: PLC0415

    cli.build_backend(
        sources=sources or None,
        variant=variant,
        force=force,
        pt2=pt2 or pt2_build == "patched",
        pt2_patches=pt2_build == "patched",
        sanitize=sanitize or None,
        repository=Path(repository),
        debug=debug,
    )


@door
def check(
    *,
    repository: str,
    target: str,
    url: str,
    grpc_url: str,
    metrics_url: str,
    image: str,
    gpus: str,
    mount: list[str],
    tritonserver: str,
    reports: str,
    shard: str,
    shard_costs: str,
    pt2_build: str,
    upload: bool,
    replace_loaded: bool,
    pytest: str,
) -> None:
    """Run the integration matrix on a repository (the backend built or reused first); exit 0 only when it passes.

    Backend load, the platform, the three ports, parity with the reference data over HTTP and gRPC, batching,
    bad requests, model control; junit.xml, summary.md and .json and the server's log in --reports. A model
    without reference data is held to its own file run in-process. With --url URL --upload, each model goes to
    that server through its load API and is unloaded after, also on a failure or a stop; a restricted server's
    key comes from $TRITONPT_ADMIN_KEY (header $TRITONPT_ADMIN_HEADER, default admin-key), never printed.
    """
    from tritonpt import cli  # noqa: PLC0415

    cli.check(
        repository=Path(repository),
        target=target,
        url=url,
        grpc_url=grpc_url,
        metrics_url=metrics_url,
        image=image,
        gpus=gpus,
        mounts=mount,
        tritonserver=tritonserver,
        reports=reports,
        shard=shard,
        shard_costs=shard_costs,
        pt2_build=pt2_build,
        upload=upload,
        replace_loaded=replace_loaded,
        pytest_args=pytest,
    )


@door
def serve(
    *,
    repository: str,
    target: str,
    image: str,
    gpus: str,
    mount: list[str],
    tritonserver: str,
    shard: str,
    shard_costs: str,
    pt2_build: str,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    debug: bool,
) -> None:
    """Validate a repository and serve it with Triton until Ctrl-C, on ports 8000, 8001 and 8002.

    Triton's own ports, where its clients look, unless told otherwise; prints the three endpoints.
    """
    from tritonpt import cli  # noqa: PLC0415

    cli.serve(
        ports=Ports(http_port, grpc_port, metrics_port),
        repository=Path(repository),
        target=target,
        image=image or None,
        gpus=gpus,
        mounts=mount,
        tritonserver=tritonserver or None,
        debug=debug,
        shard=shard,
        shard_costs=shard_costs,
        pt2_build=pt2_build,
    )


@door
def doctor(*, image: str, repository: str, mount: list[str], debug: bool) -> None:
    """Diagnose this host, an image and a model repository; exit 1 on any FAIL.

    Docker, GPU, driver, glibc, libraries, which torch made the models and what the release serves.
    """
    from tritonpt import cli  # noqa: PLC0415

    cli.doctor(image=image or None, repository=Path(repository), mounts=mount, debug=debug)


@door
def validate(*, repository: str, pt2_build: str, debug: bool) -> None:
    """Validate every config.pbtxt, model.pt and model.pt2 in a repository; exit 1 on any error."""
    from tritonpt import cli  # noqa: PLC0415

    cli.validate(repository=Path(repository), pt2_build=pt2_build, debug=debug)


@door
def tune(
    *,
    name: str,
    repository: str,
    latency_budget_ms: float,
    apply: bool,
    reports: str,
    pt2_build: str,
    debug: bool,
) -> None:
    """Search one model's config space (--name) for the fastest config that keeps parity.

    Instance count, batching, queue delay and backend threads; the table, Pareto front and plot go to
    <reports>/tune/<name>/, and --apply writes the winner.
    """
    from tritonpt import cli  # noqa: PLC0415

    cli.tune(
        model=name,
        repository=Path(repository),
        latency_budget_ms=latency_budget_ms or None,
        apply=apply,
        reports=Path(reports) / "tune",
        debug=debug,
        pt2_build=pt2_build,
    )


@door
def merge_reports(*, shards: str, into: str) -> None:
    """Merge the reports of `--shard K/N` runs into one; a missing or failed shard is named and exits 1."""
    from tritonpt import cli  # noqa: PLC0415

    cli.merge_reports(shards=shards, into=Path(into))
