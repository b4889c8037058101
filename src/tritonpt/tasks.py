"""The front door for people: each task declares its options and help text, then calls :mod:`tritonpt.cli`.

The same tasks answer to `invoke` in a checkout (the root tasks.py imports them) and to `tritonpt` /
`python -m tritonpt` after `pip install` (:mod:`tritonpt.__main__`).

    invoke export      TorchScript + config.pbtxt + eager reference outputs into a model repository
    invoke validate    check a model repository against Triton's schema and the models themselves
    invoke build-backend  build the official libtriton_pytorch.so from pinned sources against this torch
    invoke build-image build a Triton + PyTorch 2.9 image from a recipe in docker/
    invoke doctor      diagnose this host (and an image): Docker, GPU, driver, glibc, libraries, models
    invoke serve       run a local Triton on a repository until Ctrl-C
    invoke check       the integration matrix on a repository: health, backend, platform, parity, batching, errors
    invoke tune        search one model's config space on the real backend; --apply writes the winner

`invoke --help TASK` (or `tritonpt --help TASK`) shows each task's options.
"""

from __future__ import annotations

import functools
from pathlib import Path

from invoke import tasks as invoke_tasks
from invoke.context import Context

from tritonpt.options import DEFAULT_REPOSITORY

task = functools.partial(invoke_tasks.task, auto_shortflags=False)
"""invoke's task, without the short flags it would make up per task: `-h` stays help in every task (made up, it was
`--shard` in export and `--shard-costs` in check), and no letter means one option here and another there."""

_SERVER_HELP = {
    "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
    "image": "image to run for target container",
    "gpus": "target container: auto (when the engine can hand them out), all (demand them) or none",
    "mount": "target container: one more bind mount HOST_PATH:/CONTAINER/PATH[:ro|rw] (repeatable)",
    "tritonserver": "tritonserver binary for target local (default: $TRITONSERVER, PATH, /opt/tritonserver, the embedded one)",
    "shard_costs": "a previous run's summary.json to balance the shards by (every shard the same file)",
}
"""The options `invoke check` and `invoke serve` share, in the same words."""


@task(
    iterable=["only", "dynamic_axis", "parameter"],
    help={
        "model": "your model as MODULE:ATTR, ATTR a zero-argument callable returning (module, example_inputs) or a ModelSpec",
        "name": "model name (folder and config name); required with --model",
        "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
        "only": "export only this built-in model (repeatable); default: the whole built-in set",
        "script": "use torch.jit.script instead of torch.jit.trace (models with data-dependent control flow)",
        "max_batch_size": "largest batch; 0 = no batch axis (default: the model's own, else 8)",
        "dynamic_axis": "INPUT:AXIS of a variable-length axis, the input by index or name: 0:1, input_ids:1 (repeatable)",
        "instance_kind": "KIND_AUTO (default), KIND_CPU or KIND_GPU",
        "parameter": "pytorch backend parameter KEY=VALUE, e.g. INTRA_OP_THREAD_COUNT=4 (repeatable)",
        "seed": "seed for weights of built-in models and for reference inputs (default 0)",
        "force": "re-export built-in models even when nothing they depend on changed since their last export",
        "format": "torchscript (default: model.pt, platform pytorch_libtorch), pt2 (torch.export + AOTInductor: model.pt2, platform torch_aoti), or both (the PT2 copy named NAME_pt2)",
        "shard": "K/N: export only this shard's part of the built-in set (as `nox -s integration -- --shard K/N` serves it)",
        "shard_costs": "a previous run's summary.json: balance the shards by its measured seconds per model (every shard the same file)",
        "pt2_build": "the PT2 build that will serve the PT2 copies: stock (default: no dynamic_batching, which stock serves wrong) or patched (ours: dynamic_batching written as for TorchScript)",
        "build_backend": "also build (or find cached) the backends the repository needs, side by side with the export (a first run overlaps the two)",
        "from_file": "import a model file made elsewhere as it is (a TorchScript model.pt or an AOTInductor model.pt2) into --name's folder: config from what it takes and returns, reference data from it in-process",
        "samples": "with --from-file: a .npz of its inputs, one array per input named as the input (INPUT__i, forward()'s argument or the package's call spec name), a first axis of samples",
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
    force: bool = False,
    format: str = "torchscript",
    shard: str = "",
    shard_costs: str = "",
    pt2_build: str = "stock",
    build_backend: bool = False,
    from_file: str = "",
    samples: str = "",
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


@task(
    iterable=["build_arg"],
    help={
        "recipe": "recipe: ngc (recommended; NGC Triton 25.10 with its PyTorch 2.9 backend) or pytorch (pytorch/pytorch 2.9.1 base)",
        "tag": "image tag (default tritonpt:ngc-<release> or tritonpt:pytorch-<torch>)",
        "no_cache": "build without the engine's layer cache",
        "build_arg": "override one build argument for this build, KEY=VALUE (repeatable); defaults come from versions.toml",
        "ngc": "another Triton release of versions.toml for the ngc recipe, e.g. 25.09, or 26.03 to 26.08 (they serve torch_aoti)",
        "sources": "pytorch recipe: folder of the pytorch backend's source tarballs (default $TRITONPT_SOURCES; else GitHub)",
        "pt2_build": "pytorch recipe: the PT2 backend built beside the TorchScript one, stock (default) or patched (ours, r26.05+tritonpt.1)",
        "debug": "show tracebacks",
    },
)
def build_image(
    c: Context,
    recipe: str = "ngc",
    tag: str = "",
    no_cache: bool = False,
    build_arg: list[str] | None = None,
    ngc: str = "",
    sources: str = "",
    pt2_build: str = "stock",
    debug: bool = False,
) -> None:
    """Build the Triton + PyTorch 2.9 image from a recipe in docker/, with every version from versions.toml."""
    from tritonpt import cli  # noqa: PLC0415

    cli.build_image(
        recipe=recipe,
        tag=tag or None,
        no_cache=no_cache,
        build_args=build_arg or [],
        ngc=ngc or None,
        sources=sources or None,
        pt2_build=pt2_build,
        debug=debug,
    )


@task(
    help={
        "sources": "folder of the pinned source tarballs (default $TRITONPT_SOURCES; else downloaded from GitHub)",
        "variant": "cpu (default), gpu (needs a CUDA toolkit and a CUDA torch), or auto",
        "force": "build even when the cache holds a build of the same inputs",
        "pt2": "build the PT2 (torch_aoti) backend too; done anyway when the repository holds torch_aoti models",
        "pt2_patches": "build the PT2 backend with our fixes (versions.toml [pt2] patch_set, a build of its own name) instead of stock",
        "sanitize": "address or undefined: instrument every build with ASan or UBSan (own cache keys; for hunting memory errors)",
        "repository": f"model repository folder whose models decide whether the PT2 build is needed (default {DEFAULT_REPOSITORY})",
        "debug": "show tracebacks",
    }
)
def build_backend(
    c: Context,
    sources: str = "",
    variant: str = "cpu",
    force: bool = False,
    pt2: bool = False,
    pt2_patches: bool = False,
    sanitize: str = "",
    repository: str = str(DEFAULT_REPOSITORY),
    debug: bool = False,
) -> None:
    """Build the official Triton pytorch backend (libtriton_pytorch.so, and its PT2 build for torch_aoti models) against this environment's torch, or reuse the cached builds."""
    from tritonpt import cli  # noqa: PLC0415

    cli.build_backend(
        sources=sources or None,
        variant=variant,
        force=force,
        pt2=pt2,
        pt2_patches=pt2_patches,
        sanitize=sanitize or None,
        repository=Path(repository),
        debug=debug,
    )


@task(
    iterable=["mount"],
    help={
        **_SERVER_HELP,
        "target": "auto (default: url with --url, container with --image, else local), local, container or url",
        "url": "HTTP URL of a running server (target url), e.g. http://127.0.0.1:8000",
        "grpc_url": "gRPC host:port of that server (default: port 8001 on its host)",
        "metrics_url": "metrics URL of that server (default: port 8002 on its host)",
        "reports": "where junit.xml, summary.md and .json and the server log go (default reports)",
        "shard": "K/N: check only this shard's models (the split `invoke export --shard K/N` made)",
        "pt2_build": "which PT2 build serves torch_aoti models: stock (default; NVIDIA's) or patched (ours, r26.05+tritonpt.1)",
        "upload": "with --url: send the repository's models through the server's load API (it must run with "
        "--model-control-mode=explicit) and unload them after; a restricted API's key from $TRITONPT_ADMIN_KEY",
        "replace_loaded": "with --upload: replace a model of the same name the server already serves",
        "pytest": 'more pytest arguments, as one string, e.g. "-k parity -x"',
    },
)
def check(
    c: Context,
    repository: str = str(DEFAULT_REPOSITORY),
    target: str = "auto",
    url: str = "",
    grpc_url: str = "",
    metrics_url: str = "",
    image: str = "",
    gpus: str = "auto",
    mount: list[str] | None = None,
    tritonserver: str = "",
    reports: str = "reports",
    shard: str = "",
    shard_costs: str = "",
    pt2_build: str = "stock",
    upload: bool = False,
    replace_loaded: bool = False,
    pytest: str = "",
) -> None:
    """Run the integration matrix on a repository (the backend built or reused first); exit 0 only when it passes."""
    from tritonpt import cli  # noqa: PLC0415

    cli.check(
        repository=Path(repository),
        target=target,
        url=url,
        grpc_url=grpc_url,
        metrics_url=metrics_url,
        image=image,
        gpus=gpus,
        mounts=mount or [],
        tritonserver=tritonserver,
        reports=reports,
        shard=shard,
        shard_costs=shard_costs,
        pt2_build=pt2_build,
        upload=upload,
        replace_loaded=replace_loaded,
        pytest_args=pytest,
    )


@task(
    iterable=["mount"],
    help={
        **_SERVER_HELP,
        "target": "local (default: a tritonserver process) or container (needs --image)",
        "shard": "K/N: serve only this shard's models (the split `nox -s integration -- --shard K/N` uses)",
        "pt2_build": "which PT2 build will serve torch_aoti models: stock (default; NVIDIA's, as in NGC images) or patched (ours, r26.05+tritonpt.1: invoke build-backend --pt2-patches)",
        "debug": "show tracebacks",
    },
)
def serve(
    c: Context,
    repository: str = str(DEFAULT_REPOSITORY),
    target: str = "local",
    image: str = "",
    gpus: str = "auto",
    mount: list[str] | None = None,
    tritonserver: str = "",
    shard: str = "",
    shard_costs: str = "",
    pt2_build: str = "stock",
    debug: bool = False,
) -> None:
    """Validate a repository and serve it with Triton until Ctrl-C; prints the three endpoints."""
    from tritonpt import cli  # noqa: PLC0415

    cli.serve(
        repository=Path(repository),
        target=target,
        image=image or None,
        gpus=gpus,
        mounts=mount or [],
        tritonserver=tritonserver or None,
        debug=debug,
        shard=shard,
        shard_costs=shard_costs,
        pt2_build=pt2_build,
    )


@task(
    iterable=["mount"],
    help={
        "image": "image tag to check (glibc, pytorch backend libraries, GPU inside it); default: host and model checks only",
        "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
        "mount": "a bind mount the image needs at run time, HOST_PATH:/CONTAINER/PATH[:ro|rw] (repeatable)",
        "debug": "show tracebacks",
    },
)
def doctor(
    c: Context,
    image: str = "",
    repository: str = str(DEFAULT_REPOSITORY),
    mount: list[str] | None = None,
    debug: bool = False,
) -> None:
    """Diagnose this host, an image and a model repository: Docker, GPU, driver, glibc, libraries, TorchScript versions."""
    from tritonpt import cli  # noqa: PLC0415

    cli.doctor(image=image or None, repository=Path(repository), mounts=mount or [], debug=debug)


@task(
    help={
        "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
        "pt2_build": "which PT2 build will serve torch_aoti models: stock (default; NVIDIA's, as in NGC images) or patched (ours, r26.05+tritonpt.1: invoke build-backend --pt2-patches)",
        "debug": "show tracebacks",
    }
)
def validate(
    c: Context, repository: str = str(DEFAULT_REPOSITORY), pt2_build: str = "stock", debug: bool = False
) -> None:
    """Validate every config.pbtxt, model.pt and model.pt2 in a repository; exit 1 on any error."""
    from tritonpt import cli  # noqa: PLC0415

    cli.validate(repository=Path(repository), pt2_build=pt2_build, debug=debug)


@task(
    help={
        "model": "the model of the repository to tune (required)",
        "repository": f"model repository folder (default {DEFAULT_REPOSITORY})",
        "latency_budget_ms": "the winner's p99 latency must fit this many milliseconds (default: no budget)",
        "apply": "write the winning config.pbtxt into the repository (staged and validated, as export writes)",
        "reports": "where the table, Pareto front and plot go (default reports/tune/<model>/)",
        "pt2_build": "which PT2 build serves a torch_aoti model: stock (default; NVIDIA's) or patched (ours, r26.05+tritonpt.1, which batches)",
        "debug": "show tracebacks",
    }
)
def tune(
    c: Context,
    model: str = "",
    repository: str = str(DEFAULT_REPOSITORY),
    latency_budget_ms: float = 0.0,
    apply: bool = False,
    reports: str = "reports/tune",
    pt2_build: str = "stock",
    debug: bool = False,
) -> None:
    """Search instance count, batching, queue delay and backend threads for the fastest config that keeps parity."""
    from tritonpt import cli  # noqa: PLC0415

    cli.tune(
        model=model,
        repository=Path(repository),
        latency_budget_ms=latency_budget_ms or None,
        apply=apply,
        reports=Path(reports),
        debug=debug,
        pt2_build=pt2_build,
    )


@task(
    positional=["shards"],
    help={
        "shards": "the shards' report folders: a glob or a comma-separated list (default reports/shard-*-of-*)",
        "into": "where the merged summary.md, summary.json and junit.xml go (default reports/merged)",
    },
)
def merge_reports(c: Context, shards: str = "reports/shard-*-of-*", into: str = "reports/merged") -> None:
    """Merge the reports of `--shard K/N` runs into one; a missing or failed shard is named and exits 1."""
    from tritonpt import cli  # noqa: PLC0415

    cli.merge_reports(shards=shards, into=Path(into))
