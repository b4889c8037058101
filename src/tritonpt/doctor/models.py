"""Judging a model repository against what serves it: per model, its file's format, the operators it calls, the
exporting torch (a measured pair of `nox -s compat`), and for a torch_aoti model the server and its BF16 tensors.

Reads the repository it judges (configs, model files, reference data); everything else is given. The host's and the
image's checks are :mod:`tritonpt.doctor.judge`'s.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from tritonpt import reference, repository
from tritonpt.doctor.results import (
    LABEL_BACKEND_TORCH,
    MODELS,
    Backend,
    Result,
    Status,
    dotted,
    parse_version,
)
from tritonpt.versions import NOT_STATED, VERSIONS, Versions

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig


def _config_of(config_path: Path) -> ModelConfig | None:
    """A model's config, or None when unreadable (any parse problem: `invoke validate` reports it)."""
    try:
        return repository.read_config(config_path)
    except Exception:  # whatever fails here is validate's to explain
        return None


def _backend_of_model(config: ModelConfig | None) -> str | None:
    """``pytorch`` for a pytorch_libtorch model, another backend's name, or None when unreadable (the doctor then
    assumes pytorch)."""
    if config is None:
        return None
    if config.backend:
        return str(config.backend)
    if config.platform in (repository.PLATFORM, "libtorch", ""):
        return "pytorch"
    return str(config.platform)


def _pt2_build_of(label: str, versions: Versions) -> str:
    """``stock`` or ``patched`` from an ``io.tritonpt.pt2-backend`` label (``r26.05 55bbe27``,
    ``r26.05+tritonpt.1 55bbe27``), with what it means for the model."""
    ref = label.partition(" ")[0]
    patch_set = versions.pt2.build.patch_set
    if patch_set and ref.endswith(f"+{patch_set}"):
        return (
            f"patched ({ref}: our fixes of docs/upstream/ applied; validate and export for it with "
            "--pt2-build patched)"
        )
    return f"stock ({ref}: the bugs of docs/upstream/ apply; export and validate as for stock, the default)"


def _local_pt2_builds(versions: Versions) -> str:
    """Which PT2 builds this host's cache holds, for the local server (`invoke serve`)."""
    from tritonpt import backend  # noqa: PLC0415 - reads the cache folder only

    pins = versions.pt2.build
    found = []
    for build in ("stock", "patched"):
        try:
            built = backend.find(pins=pins, flavor=backend.of_pt2_build(build, pins))
        except Exception:  # a host without torch, or a cache it cannot read: no build to name here
            built = None
        if built is not None:
            found.append(f"{build} (pytorch_backend {built.origin.build})")
    held = ", ".join(found) if found else "none yet (`invoke build-backend` builds the stock one)"
    return f"cached here: {held}; `invoke serve` serves with the stock one unless given --pt2-build patched"


STOCK_BUGS = "the stock backend's known bugs (docs/upstream/pt2-*.md: the validator's A rules apply)"
"""What holds for every NGC release that serves torch_aoti: it runs NVIDIA's stock pytorch_backend PT2 path."""


def _check_pt2_server(model: repository.ModelDir, backend: Backend, versions: Versions) -> Result:
    """A torch_aoti model needs Triton 26.03 or later, or the PT2 build installed under the second name; which
    build serves it (stock or ours, patched) says which of its bugs apply."""
    name = f"model {model.name} server"
    pt2 = versions.pt2
    if not backend.named:
        return Result.skip(
            name,
            f"no --image: `invoke serve` and the matrix serve this torch_aoti model on the embedded server "
            f"{versions.embedded.server}, through the PT2 build installed as backends/{pt2.backend_name}/: "
            f"{_local_pt2_builds(versions)}",
            fix="Pass --image TAG to check the image that will serve it.",
        )
    # The release's row says so, or the server the image names is one of 26.03 (2.67.0) on.
    native = (backend.release is not None and backend.release.serves_torch_aoti) or (
        bool(backend.server) and pt2.native(backend.server)
    )
    if native:
        return Result.ok(
            name,
            f"torch_aoti: server {backend.server} (Triton {backend.ngc or '?'}) serves it itself ({backend.source}), "
            f"with NVIDIA's stock PT2 path of that release: {STOCK_BUGS} (the validator's default, --pt2-build "
            "stock, judges for it)",
        )
    if backend.pt2:
        return Result.ok(
            name,
            f"torch_aoti: server {backend.server or '?'} predates Triton {pt2.native_ngc}, and the image carries the "
            f"PT2 build ({backend.pt2}) as backends/{pt2.backend_name}/: the harness serves it as on the embedded "
            f"server (a copy of the repository whose torch_aoti configs name that backend); that build is "
            f"{_pt2_build_of(backend.pt2, versions)}",
        )
    serving = versions.torch_aoti_releases
    if serving:
        releases = (
            "the releases of versions.toml whose own pytorch backend serves it: "
            + ", ".join(f"Triton {r.ngc} (server {r.server})" for r in serving)
            + f", each with {STOCK_BUGS}"
        )
        build = (
            f"Build an image of one of them (`invoke build-image --recipe ngc --ngc {serving[0].ngc}`; "
            f"--ngc takes any of {', '.join(r.ngc for r in serving)})"
        )
    else:
        releases = f"versions.toml's release table holds none yet (Triton {pt2.native_ngc} and later do)"
        build = f"Serve PT2 models from an image of Triton {pt2.native_ngc} or later"
    return Result.fail(
        name,
        f"torch_aoti needs Triton {pt2.native_ngc} (server {pt2.native_server}) or later, and the image runs server "
        f"{backend.server or 'unknown'} ({backend.source}); its core refuses the platform (`unexpected platform "
        f"type` or `unexpected 'platform' and 'backend' pair`). Images that serve it: {releases}; or an image of "
        f"ours carrying the PT2 build as backends/{pt2.backend_name}/ (the pytorch recipe)",
        f"{build}, export this model as TorchScript (`invoke export --format torchscript`), or serve it on the "
        "embedded server (`invoke serve`).",
    )


def _check_pt2_bf16(
    model: repository.ModelDir, config: ModelConfig, backend: Backend, versions: Versions
) -> list[Result]:
    """BF16 inputs and outputs of a torch_aoti model, against the release that serves it: Triton 26.11 on, as its
    release notes state; no row where the model has none."""
    from tritonclient.grpc.model_config_pb2 import DataType  # noqa: PLC0415 - as _config_of, only with a repository

    bf16 = [t.name for t in (*config.input, *config.output) if t.data_type == DataType.TYPE_BF16]
    if not bf16:
        return []
    name = f"model {model.name} bf16"
    pt2 = versions.pt2
    said = f"{', '.join(bf16)} TYPE_BF16"
    release = backend.release if backend.named else None
    if release is not None and pt2.serves_bf16(release.ngc):
        return [
            Result.ok(
                name,
                f"{said}: Triton {release.ngc} serves BF16 inputs and outputs of AOTI packages, as its release notes "
                f"state ({pt2.bf16_source}); stated, not measured here (no pytorch_backend sources after r26.05)",
            )
        ]
    where = (
        f"Triton {release.ngc} ({backend.source})"
        if release is not None
        else f"the PT2 build here (pytorch_backend {pt2.build.pytorch_backend.ref})"
    )
    return [
        Result.fail(
            name,
            f"{said}: {where} refuses it at load (`Unsupported datatype TYPE_BF16`, validator A013); Triton "
            f"{pt2.bf16_ngc} and later serve it ({pt2.bf16_source})",
            f"Serve it on Triton {pt2.bf16_ngc} or later (`tritonpt doctor --ngc {pt2.bf16_ngc}`), or cast to "
            "FP16/FP32 in the model and export again.",
        )
    ]


def check_models(root: Path, backend: Backend, versions: Versions = VERSIONS) -> list[Result]:
    """For each model: its file's format, the operators it calls and the exporting torch, against the backend's
    libtorch."""
    if not root.is_dir():
        return [
            Result.skip(
                MODELS,
                f"no model repository at {root}",
                fix=f"Export models first (`invoke export --repository {root}`) or pass --repository.",
            )
        ]
    found = repository.models(root)
    if not found:
        return [
            Result.skip(
                MODELS,
                f"no model folder (a folder with config.pbtxt) in {root}",
                fix=f"Export models first: `invoke export --repository {root}`.",
            )
        ]
    # Not at the top: so that `python -m tritonpt.operators.registry` runs that module first (the package imports this).
    from tritonpt.doctor.needs import check_operators  # noqa: PLC0415

    results: list[Result] = []
    for model in found:
        config = _config_of(model.config)
        if config is not None and config.platform == repository.PT2_PLATFORM:
            operators = check_operators(model, config, backend, versions)
            results += [
                _check_pt2_server(model, backend, versions),
                *_check_pt2_bf16(model, config, backend, versions),
                operators,
                _check_model_torch(model, backend, versions, pt2=True, operators=operators),
            ]
            continue
        kind = _backend_of_model(config)
        if kind is not None and kind != "pytorch":
            results.append(
                Result.skip(
                    f"model {model.name}", f"{model.config}: backend {kind!r}, not a pytorch_libtorch model"
                )
            )
            continue
        operators = check_operators(model, config, backend, versions)
        results.append(_check_model_format(model, backend, versions))
        results.append(operators)
        results.append(_check_model_torch(model, backend, versions, pt2=False, operators=operators))
    return results


def _check_model_format(model: repository.ModelDir, backend: Backend, versions: Versions) -> Result:
    from tritonpt.export import torchscript_format  # noqa: PLC0415 - imports torch; only the model checks need it

    name = f"model {model.name} format"
    readable = versions.pytorch.torchscript_max_format
    version_dirs = model.loaded_versions()  # as validate and Triton: the versions the policy loads
    if not version_dirs:
        return Result.fail(
            name,
            f"{model.root} has no version folder (1/model.pt)",
            f"Re-export the model (`invoke export`) so that {model.model_file()} exists.",
        )
    formats: list[str] = []
    for version in version_dirs:
        path = model.model_file(version)
        if not path.is_file():
            return Result.fail(
                name,
                f"{path} is missing: Triton answers `unable to find '{path.name}' for model instance`",
                "Re-export the model (`invoke export`), or remove the empty version folder.",
            )
        try:
            found = torchscript_format(path)
        except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
            return Result.fail(
                name,
                f"{path} is not a TorchScript archive ({exc})",
                "Save the model with torch.jit.save (or `invoke export`); Triton's pytorch backend loads "
                "TorchScript archives only.",
            )
        if found > readable:
            return Result.fail(
                name,
                f"{path} has TorchScript file format {found}; libtorch {versions.pytorch.torch.rsplit('.', 1)[0]} "
                f"reads up to {readable} (versions.toml torchscript_max_format)",
                f"Re-export the model with torch {versions.pytorch.torch} (`invoke export`), or serve it with a "
                "Triton release whose libtorch reads this format.",
            )
        formats.append(f"{found} ({version}/model.pt)")
    return Result.ok(
        name,
        f"TorchScript file format {', '.join(formats)}; the backend's libtorch {backend.torch} reads up to "
        f"{readable} (versions.toml torchscript_max_format)",
    )


def _check_model_torch(
    model: repository.ModelDir, backend: Backend, versions: Versions, *, pt2: bool, operators: Result
) -> Result:
    """The exporting torch (reference.json) against the backend's libtorch; ``pt2``: an AOTInductor package. A
    measured pair holds for the built-in set; where ``operators`` (this model's own calls) failed, it is no
    longer a pass for this model."""
    result = _pair_of(model, backend, versions, pt2=pt2)
    if result.status is Status.OK and operators.status is Status.FAIL:
        return Result.warn(
            result.name,
            f"{result.finding}; but this model calls operators that libtorch lacks (its operators row): the pair "
            "holds for the built-in set, not for it",
            operators.fix,
        )
    return result


def _pair_of(model: repository.ModelDir, backend: Backend, versions: Versions, *, pt2: bool) -> Result:
    name = f"model {model.name} torch"
    if not model.reference_json.is_file():
        return Result.warn(
            name,
            f"no {model.reference_json}: the torch version that exported model.pt is unknown (a "
            "TorchScript file does not record it); the operators row judges what the file calls",
            f"Re-export with `invoke export` to record it, or make sure the exporting torch is not newer than "
            f"{backend.torch} (the backend's libtorch).",
        )
    try:
        exported = reference.load(model).provenance.torch_version
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Result.fail(
            name,
            f"{model.reference_json}: cannot read provenance.torch_version ({type(exc).__name__}: {exc})",
            "Re-export the model with `invoke export` to rewrite its reference data.",
        )
    have, serve = parse_version(exported), parse_version(backend.torch)
    if backend.torch == NOT_STATED:
        return Result.warn(
            name,
            f"exported with torch {exported}; the libtorch the backend bundles is not stated ({backend.source})",
            f"Make sure torch {exported} is not newer than the image's libtorch: read "
            "/opt/tritonserver/backends/pytorch's libtorch version in the image, or export with an older torch.",
        )
    if have is None or serve is None:
        return Result.warn(
            name,
            f"cannot compare torch {exported!r} (provenance.torch_version in {model.reference_json}) "
            f"with the backend's {backend.torch!r}",
            "Write versions as MAJOR.MINOR.PATCH (e.g. 2.9.1) in reference.json and in the image's "
            f"{LABEL_BACKEND_TORCH} label.",
        )
    from tritonpt.doctor import compat  # noqa: PLC0415 - so `python -m tritonpt.doctor.compat` runs it first

    fmt = "pt2" if pt2 else "torchscript"
    table = compat.load()
    pair = table.pair(dotted(have[:2]), dotted(serve[:2]), fmt) if table is not None else None
    head = f"exported with torch {exported}; the backend's libtorch is {backend.torch} ({backend.source})"
    if table is None or pair is None:
        newer = have[:2] > serve[:2]
        return Result.warn(
            name,
            f"{head}: not measured (`nox -s compat` has served no {fmt} export of torch {dotted(have[:2])} on "
            f"libtorch {dotted(serve[:2])}; the measured pairs: {compat.PAGE})",
            (
                f"Re-export with torch {dotted(serve[:2])}.x (this repository pins torch {versions.pytorch.torch}), "
                "or serve with a release whose libtorch is of your torch's minor: nothing promises that an older "
                "libtorch loads a newer torch's export."
                if newer
                else f"Check it served before you rely on it: `tritonpt check` against that image, or a release "
                f"whose pair {compat.PAGE} lists."
            ),
        )
    stand_in = versions.stand_in(backend.release) if backend.release is not None else None
    on = f", on {stand_in}" if stand_in else ""
    measured = f"{head}; measured {table.measured} (`nox -s compat`{on}, {compat.PAGE}): {pair.describe()}"
    if pair.verdict == "parity":
        return Result.ok(name, measured)
    return Result.fail(
        name,
        measured,
        f"Re-export with torch {dotted(serve[:2])}.x (this repository pins torch {versions.pytorch.torch}: "
        f"`invoke export`), or serve with a Triton release whose pair {compat.PAGE} lists with parity.",
    )
