"""What the invoke tasks do, as plain functions: parse option strings into typed values, call the
pipeline, print progress and problems, exit non-zero on failure. tasks.py only declares the options.

Each stage is imported inside the function that uses it, so ``invoke --list`` and ``tritonpt --help`` load
neither torch nor docker-py (tests/unit/test_layout.py checks it).
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from tritonpt import shards
from tritonpt.console import Progress, err, guard, out, print_problems
from tritonpt.errors import ImageError, ServerError, ShardError, SpecError
from tritonpt.options import (
    OPTIONS,
    BackendChoice,
    FormatChoice,
    Gpus,
    InstanceKind,
    Ports,
    Pt2Build,
    Sanitizer,
    Target,
    formats_of,
    one_of,
    parse_assignments,
    parse_dynamic_axes,
    parse_factory,
    parse_mounts,
    resolve_target,
)

if TYPE_CHECKING:
    from tritonpt import selection

SERVE_TARGETS: tuple[Target, ...] = ("local", "container")
"""What `invoke serve` can start (a server at a URL is already running)."""


def export(
    *,
    model: str,
    name: str,
    repository: Path,
    only: Sequence[str],
    script: bool,
    max_batch_size: int | None,
    dynamic_axis: Sequence[str],
    instance_kind: InstanceKind | None,
    parameter: Sequence[str],
    seed: int,
    force: bool,
    format: FormatChoice,
    shard: str,
    shard_costs: str,
    pt2_build: Pt2Build,
    build_backend: bool,
    from_file: Path | None,
    samples: Path | None,
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
    from tritonpt import export as exporting  # noqa: PLC0415 - torch loads only when a task needs it
    from tritonpt.repository import Split, clear_split, write_split  # noqa: PLC0415

    progress = Progress()
    with guard(debug=debug):
        formats = formats_of(format)
        build = pt2_build
        axes = parse_dynamic_axes(dynamic_axis, error=SpecError) if dynamic_axis else None
        example = "INTRA_OP_THREAD_COUNT=4"
        settings = (
            parse_assignments(parameter, option="--parameter", example=example, error=SpecError)
            if parameter
            else None
        )
        if from_file or samples:
            _import_file(
                from_file or Path(),
                samples=samples,
                name=name,
                repository=repository,
                elsewhere=bool(
                    model or only or script or shard or len(formats) > 1 or formats[0] != "torchscript"
                ),
                max_batch_size=max_batch_size,
                dynamic_axes=axes,
                instance_kind=instance_kind,
                parameters=settings,
                pt2_build=build,
                step=progress,
            )
            return
        with contextlib.ExitStack() as beside:
            if build_backend:
                from tritonpt.export.beside import backends_beside  # noqa: PLC0415 - with the export

                beside.enter_context(
                    backends_beside(
                        repository,
                        pt2="pt2" in formats,
                        patched=build == "patched",
                        step=progress,
                        relay=lambda line: err.print(f"[dim]\\[backend][/dim] {escape(line)}"),
                    )
                )
            if model:
                if not name:
                    msg = "--model needs --name: the model's folder and config name in the repository."
                    raise SpecError(msg)
                if only or shard:
                    msg = "--only and --shard select built-in models; they cannot be combined with --model."
                    raise SpecError(msg)
                factory = exporting.load_factory(*parse_factory(model, error=SpecError))
                results = [
                    exporting.export_factory(
                        factory,
                        name=f"{name}_pt2" if len(formats) > 1 and each == "pt2" else name,
                        repository=repository,
                        seed=seed,
                        step=progress,
                        model_format=each,
                        pt2_build=build,
                        method="script" if script else None,
                        max_batch_size=max_batch_size,
                        dynamic_axes=axes,
                        instance_kind=instance_kind,
                        parameters=settings,
                    )
                    for each in formats
                ]
            else:
                if name or script or dynamic_axis or max_batch_size is not None or instance_kind or parameter:
                    msg = (
                        "--name, --script, --max-batch-size, --dynamic-axis, --instance-kind and --parameter apply to "
                        "--model MODULE:ATTR; the built-in set carries its own settings."
                    )
                    raise SpecError(msg)
                from tritonpt import builtin  # noqa: PLC0415

                names = list(only) or list(builtin.BUILTIN)
                folders = None
                part, costs = shards.given(shard, shard_costs)
                if part is not None:
                    every = [f for m in formats for f, n in exporting.builtin_names(m).items() if n in names]
                    folders = shards.select(every, part, costs)
                    # The matrix splits this same list; the rules across models read the others' parameters.
                    split = Split(
                        models=tuple(every),
                        costs_digest=costs.digest if costs else "",
                        parameters=exporting.builtin_parameters(every, seed=seed),
                    )
                    write_split(repository, split)
                    progress(
                        f"{part.describe()}: {len(folders)} of {len(every)} models ({', '.join(folders) or 'none'})"
                    )
                    if not folders:
                        progress(f"{part.describe()}: nothing to export (more shards than models)")
                        return
                else:
                    clear_split(repository)
                results = exporting.export_builtin(
                    names,
                    repository=repository,
                    seed=seed,
                    force=force,
                    step=progress,
                    model_formats=formats,
                    folders=folders,
                    pt2_build=build,
                )
            for result in results:
                for note in result.warnings:
                    err.print(f"[yellow]warning:[/yellow] [{result.name}] tracer: {note}")
            progress(f"validating {repository}")
            _validate(repository, pt2_build=build)


def _import_file(
    path: Path,
    *,
    samples: Path | None,
    name: str,
    repository: Path,
    elsewhere: bool,
    **options: Any,  # noqa: ANN401 - import_file's typed options, passed on as they came
) -> None:
    """`export --from-file FILE --name NAME --samples FILE.npz`: a model file made elsewhere, as a model folder."""
    from tritonpt.export.imported import import_file  # noqa: PLC0415 - torch loads only when a task needs it

    if not path.name or not name or elsewhere:
        msg = (
            "--from-file FILE imports a model file as it is, into --name's folder (its format is the file's), with "
            "its inputs in --samples: give both, and leave out --model, --only, --shard, --script and --format, "
            "which export a module."
        )
        raise SpecError(msg)
    result = import_file(path, name=name, repository=repository, samples=samples, **options)
    for note in result.notes:
        options["step"](f"[{name}] {note}")
    options["step"](f"validating {repository}")
    _validate(repository, pt2_build=options["pt2_build"])


def build_image(
    *,
    recipe: str,
    tag: str | None,
    no_cache: bool,
    build_arg: Sequence[str],
    ngc: str | None,
    sources: Path | None,
    pt2_build: Pt2Build,
    debug: bool,
) -> None:
    """Build the Triton + PyTorch 2.9 image from a recipe in docker/, with every version from versions.toml.

    The pytorch recipe builds the PT2 backend beside the TorchScript one (--pt2-build names which).
    """
    from tritonpt import image  # noqa: PLC0415 - docker-py loads only when asked

    progress = Progress()
    with guard(debug=debug):
        build = pt2_build
        if build != "stock" and recipe != "pytorch":
            msg = (
                f"Cannot build the {recipe} recipe with --pt2-build {build}: only the pytorch recipe builds the PT2 "
                "backend (an NGC image runs NVIDIA's own, stock)."
            )
            raise ImageError(msg)
        progress(f"building docker/{recipe}.Dockerfile")
        built = image.build_image(
            recipe=recipe,
            tag=tag,
            no_cache=no_cache,
            build_args=(image.pt2_flavor_arg(build) if recipe == "pytorch" else {})
            | parse_assignments(
                build_arg, option="--build-arg", example="TRITON_NGC=25.09", error=ImageError
            ),
            ngc=ngc,
            sources=sources,
            on_line=lambda line: err.print(f"  {escape(line)}"),
        )
    progress(f"built {built.tag} in {built.seconds:.1f} s")
    out.print(f"image  {built.tag}\nid     {built.id}\nsize   {built.size_mb:.0f} MB")
    for key, value in built.labels.items():
        out.print(f"label  {key}={value}")


def build_backend(
    *,
    sources: str | None,
    variant: BackendChoice,
    force: bool,
    pt2: bool,
    pt2_build: Pt2Build,
    sanitize: Sanitizer | None,
    repository: Path,
    debug: bool,
) -> None:
    """Build the official pytorch backend against this environment's torch, or reuse the cached build.

    libtriton_pytorch.so, and its PT2 build for torch_aoti models (--pt2, or --pt2-build patched for ours; built
    anyway when the repository holds torch_aoti models).
    """
    from tritonpt import backend  # noqa: PLC0415
    from tritonpt.repository import pt2_models  # noqa: PLC0415

    progress = Progress()
    with guard(debug=debug):
        pt2_patches = pt2_build == "patched"
        held = pt2_models(repository)
        if held and not (pt2 or pt2_patches):
            progress(
                f"{repository} holds torch_aoti (PT2) models ({', '.join(m.name for m in held)}): the PT2 build too"
            )
        made = backend.ensure_serving(
            pt2=bool(pt2 or pt2_patches or held),
            pt2_patches=pt2_patches,
            sanitizer=sanitize,
            sources=sources,
            variant=variant,
            force=force,
            step=progress,
        )
    for pins, built in made:
        label = pins.label
        if built.cached:
            progress(f"cached: {built.describe()} (built in {built.seconds:.1f} s)")
        out.print(f"{label:<8} {built.library}\nkey      {built.key}")


def check(
    *,
    repository: str,
    target: str,
    url: str,
    grpc_url: str,
    metrics_url: str,
    image: str,
    gpus: str,
    mount: Sequence[str],
    tritonserver: str,
    reports: str,
    shard: str,
    shard_costs: str,
    pt2_build: str,
    upload: bool,
    replace_loaded: bool,
    export_builtin: bool,
    sanitize: str,
    strict_backend: bool,
    memory: str,
    skip_validation: bool,
    start_timeout: float,
    rerun: bool,
    pytest: str,
) -> None:
    """Run the integration matrix on a repository (the backend built or reused first); exit 0 only when it passes.

    Backend load, the platform, the three ports, parity with the reference data over HTTP and gRPC, batching,
    bad requests, model control; junit.xml, summary.md and .json and the server's log in --reports. A model
    without reference data is held to its own file run in-process. With --url URL --upload, each model goes to
    that server through its load API and is unloaded after, also on a failure or a stop; a restricted server's
    key comes from $TRITONPT_ADMIN_KEY (header $TRITONPT_ADMIN_HEADER, default admin-key), never printed.
    --pytest takes pytest's own options only; the matrix's are this task's own.
    """
    given = {
        name: value for name, value in locals().items() if name != "pytest"
    }  # the options, nothing else yet
    from tritonpt.matrix import run  # noqa: PLC0415 - loads torch and pytest: only this task needs them

    # a shard's reports go to its own folder unless --reports says where, as in the matrix's command
    given["reports"] = None if reports == OPTIONS["reports"].default else reports
    given["mount"] = list(mount)
    with guard(debug=False):
        sys.exit(run.checked(given, shlex.split(pytest)))


def serve(
    *,
    repository: Path,
    target: Target,
    image: str | None,
    gpus: Gpus,
    mount: Sequence[str],
    tritonserver: str | None,
    shard: str,
    shard_costs: str,
    pt2_build: Pt2Build,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    debug: bool,
) -> None:
    """Validate a repository and serve it with Triton until Ctrl-C, on ports 8000, 8001 and 8002.

    Triton's own ports, where its clients look, unless told otherwise; prints the three endpoints.
    """
    ports = Ports(http_port, grpc_port, metrics_port)
    from tritonpt import backend, server  # noqa: PLC0415
    from tritonpt.repository import pt2_models  # noqa: PLC0415
    from tritonpt.selection import select  # noqa: PLC0415
    from tritonpt.versions import VERSIONS  # noqa: PLC0415

    progress = Progress()
    with guard(debug=debug):
        part, costs = shards.given(shard, shard_costs)
        build = pt2_build
        chosen = select(repository, shard=part, costs=costs, pt2_build=build)
        served = list(chosen.names)
        if part is not None:
            if not served:
                msg = f"Cannot serve {part.describe()}: the split gives all {chosen.total} models to the other shards."
                raise ShardError(msg)
            progress(
                f"{part.describe()}: serving {len(served)} of {chosen.total} model(s): {', '.join(served)}"
            )
        _validate(repository, pt2_build=build, chosen=chosen)
        where = one_of(  # serve starts a server: there is no URL for auto to pick
            resolve_target(target, url=None, image=image), SERVE_TARGETS, option="--target", error=SpecError
        )
        built, pt2 = None, None
        if where == "local" and not server.TritonInstall.locate(tritonserver).official_pytorch:
            built = backend.find() or backend.ensure(step=progress)
            progress(f"pytorch backend: {built.describe()}")
            if pt2_models(repository):
                pins = VERSIONS.pt2.build
                flavor = backend.of_pt2_build(build, pins)
                pt2 = backend.find(pins=pins, flavor=flavor) or backend.ensure(
                    step=progress, pins=pins, flavor=flavor
                )
                progress(f"PT2 backend (as {backend.PT2_NAME}): {pt2.describe()}")
        extra = parse_mounts(mount, option="--mount", error=SpecError)
        instance = server.create(
            where,
            repository=repository,
            image=image,
            gpus=gpus,
            mounts=extra,
            tritonserver=tritonserver,
            pytorch_backend=built,
            pt2_backend=pt2,
            log_path=Path("reports/tritonserver.log"),
            models=served if part is not None else (),
            ports=ports,
        )
        with instance:
            instance.wait_ready()
            instance.wait_models_ready(served)
            endpoints = instance.endpoints
            out.print(
                f"HTTP    http://{endpoints.http}\ngRPC    {endpoints.grpc}\nmetrics {endpoints.metrics_url}"
            )
            log = (
                f"log: {instance.log_path}"
                if where == "local"
                else f"log: docker logs, saved to {instance.log_path} at stop"
            )
            progress(f"serving {repository}; {log}; Ctrl-C stops")
            while instance.is_alive():
                time.sleep(1.0)
            ended = instance.exit_state() or "stopped"  # what died and how: exit code, signal, OOM, engine
            raise ServerError(
                instance.failure(f"{instance.describe()} {ended} while serving (it stopped on its own)")
            )


def doctor(
    *, image: str | None, repository: Path, mount: Sequence[str], ngc: str | None, debug: bool
) -> None:
    """Diagnose this host, an image and a model repository; exit 1 on any FAIL.

    Docker, GPU, driver, glibc, libraries, which torch made the models and what the release serves; --ngc RELEASE
    judges the models against a release without its image (what its sources state, what `nox -s compat` measured).
    """
    from tritonpt import doctor as doctoring  # noqa: PLC0415 - docker-py and pyelftools load only when asked
    from tritonpt.image import ngc_release  # noqa: PLC0415

    with guard(debug=debug):
        extra = parse_mounts(mount, option="--mount", error=SpecError)
        if image and ngc:
            msg = (
                f"Cannot judge --image {image} and --ngc {ngc} at once: an image's labels name its own release. "
                "Give --image to check an image, or --ngc alone to judge the repository against a release."
            )
            raise SpecError(msg)
        release = ngc_release(ngc, purpose="judge the repository").ngc if ngc else None
        report = doctoring.run(image=image, repository=repository, mounts=extra, ngc=release)
    doctoring.render(report)
    sys.exit(report.exit_code)


def tune(
    *,
    name: str,
    repository: Path,
    latency_budget_ms: float | None,
    apply: bool,
    reports: Path,
    pt2_build: Pt2Build,
    export_builtin: bool,
    debug: bool,
) -> None:
    """Search one model's config space (--name) for the fastest config that keeps parity.

    Instance count, batching, queue delay and backend threads; the table, Pareto front and plot go to
    <reports>/tune/<name>/, and --apply writes the winner.
    """
    from tritonpt import tune as tuning  # noqa: PLC0415
    from tritonpt.export.builtin_set import export_builtin_set  # noqa: PLC0415

    progress = Progress()
    with guard(debug=debug):
        if not name:
            msg = "tune needs --name NAME: the model of the repository to tune."
            raise SpecError(msg)
        if export_builtin:
            export_builtin_set(repository, pt2_build=pt2_build, step=progress)
        report = tuning.run(
            repository,
            name,
            budget_ms=latency_budget_ms,
            apply_winner=apply,
            step=progress,
            pt2_build=pt2_build,
        )
        written = report.write(reports / "tune" / name)
    out.print(report.to_markdown())
    progress("written: " + ", ".join(str(p) for p in written))
    if report.winner is None:
        sys.exit(1)


def validate(*, repository: Path, pt2_build: Pt2Build, debug: bool) -> None:
    """Validate every config.pbtxt, model.pt and model.pt2 in a repository; exit 1 on any error."""
    with guard(debug=debug):
        _validate(repository, pt2_build=pt2_build)


def _validate(repository: Path, *, pt2_build: Pt2Build, chosen: selection.Selection | None = None) -> None:
    """The validator's findings on the models a run serves (``chosen``; every model of ``repository`` by default),
    and that they are valid; ``ValidationError`` with every problem where one is an error."""
    from tritonpt.selection import select  # noqa: PLC0415

    chosen = chosen or select(repository, shard=None, costs=None, pt2_build=pt2_build)
    chosen.require_valid()
    print_problems(list(chosen.problems))
    err.print(f"[green]{chosen.repository}: valid[/green] ({len(chosen.names)} model(s))")


def merge_reports(*, shards: str, into: Path | None) -> None:
    """Merge the reports of `--shard K/N` runs into one; a missing or failed shard is named and exits 1."""
    from tritonpt.reporting import merge  # noqa: PLC0415

    sys.exit(merge.gather([part.strip() for part in shards.split(",")], into or merge.MERGED))


def migrate(
    *,
    repository: Path,
    into: Path | None,
    name: str | None,
    model: str | None,
    samples: Path | None,
    force: bool,
    pt2_build: Pt2Build,
    reports: Path,
    smoke: bool,
    ngc: str | None,
    debug: bool,
) -> None:
    """Move a TorchScript repository to torch_aoti (PT2) in --into, and prove it served beside the original.

    Each pytorch_libtorch model is converted (or re-exported from --model with --name), compiled, held to its
    file, and served beside it on one server: outputs compared, speed measured. A model that cannot move is named
    with why and what to do, and exits 1; the report goes to <reports>/migrate/.
    """
    from tritonpt import migrate as migrating  # noqa: PLC0415 - torch loads only when asked
    from tritonpt.export import load_factory  # noqa: PLC0415

    progress = Progress()
    with guard(debug=debug):
        if into is None:
            msg = "migrate needs --into OUT: the folder the torch_aoti repository is written to (never --repository)."
            raise SpecError(msg)
        factory = load_factory(*parse_factory(model, error=SpecError)) if model else None
        outcome = migrating.run(
            repository,
            into,
            name=name,
            module=factory,
            samples=samples,
            force=force,
            pt2_build=pt2_build,
            reports=reports / "migrate",
            smoke=smoke,
            ngc=ngc,
            step=progress,
        )
        page = migrating.report.write(outcome, reports / "migrate")
    for one in outcome.migrated:
        changes = ", ".join(f"{r.kind} {r.before} -> {r.after}" for r in one.renamed) or "no name changes"
        out.print(f"[green]migrated[/green] {escape(one.name)} ({one.how}): {escape(changes)}")
    for refused in outcome.refused:
        out.print(
            f"[red]refused[/red] {escape(refused.name)}: {escape(refused.reason)} Hint: {escape(refused.fix)}"
        )
    for left, what in outcome.left:
        out.print(f"left as it is: {escape(left)} ({escape(what)})")
    out.print(f"report: {page}")
    sys.exit(outcome.exit_code)
