"""The doctor's row per model: what its file calls against the registry of the release's libtorch minor.

    check_operators(model, config, backend, versions) -> Result

A pair of versions that serves the built-in set can refuse a model that calls an operator its libtorch lacks
(torch adds 4 to 23 operators each minor and removed 124 in 2.13). So the doctor reads the model's own calls and
holds them to that registry (tritonpt.operators); `nox -s compat` holds the same prediction to the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonpt.doctor.results import Backend, Result
from tritonpt.operators.calls import Calls, of_file
from tritonpt.operators.predict import Missing, Prediction, predict, span
from tritonpt.operators.registry import REGISTRIES, TORCHVISION, Registries, load
from tritonpt.repository import MODEL_FILE, default_model_file
from tritonpt.versions import NOT_STATED, VERSIONS, TritonRelease, Versions, minor_of

if TYPE_CHECKING:
    from pathlib import Path

    from tritonclient.grpc.model_config_pb2 import ModelConfig

    from tritonpt.repository import ModelDir

TORCHVISION_SOURCE = (
    "pytorch_backend's CMakeLists.txt (r25.10 and r26.05): option TRITON_PYTORCH_ENABLE_TORCHVISION ON by default, "
    "linking the libtorchvision.so.1 of the NGC PyTorch container it builds from"
)
"""Why an NGC release's backend resolves ``torchvision::`` operators; ours (and PyPI's torch) have no
libtorchvision.so, so our builds set it OFF (tritonpt.backend.layout)."""
CUSTOM_OPS = (
    "load the library that registers them into the server: `LD_PRELOAD=libyourops.so tritonserver ...`, with "
    "/opt/tritonserver/backends/pytorch on LD_LIBRARY_PATH (Triton's user guide, custom_operations.md, PyTorch)"
)


# --- The doctor's row ----------------------------------------------------------------------------------------


def check_operators(
    model: ModelDir,
    config: ModelConfig | None,
    backend: Backend,
    versions: Versions = VERSIONS,
    registries: Registries | None = None,
) -> Result:
    """The operators ``model``'s file calls against the registry of the backend's libtorch minor."""
    name = f"model {model.name} operators"
    registries = registries if registries is not None else load()
    if registries is None or not registries.registries:
        return Result.skip(
            name,
            f"no operator registries at {REGISTRIES}",
            fix="Run `nox -s compat -- --write` in a checkout.",
        )
    files = model_files(model, config)
    if not files:
        return Result.skip(name, f"{model.root} has no model file to read (the format row says why)")
    try:
        read = [of_file(f) for f in files]
    except (ValueError, OSError) as exc:
        return Result.fail(
            name, f"cannot read what it calls: {exc}", "Export the model again (`invoke export`)."
        )
    where = _where(backend)
    if backend.torch == NOT_STATED:
        return _not_stated(name, read, registries, backend, where)
    minor = minor_of(backend.torch)
    registry = registries.of_minor(minor)
    if registry is None:
        return Result.warn(
            name,
            f"{where}: no registry read for libtorch {minor} (`nox -s compat` reads "
            f"{', '.join(registries.minors)}); what the file calls is not judged",
            f"Check it served: `tritonpt check` on that release, or ask about a release of torch "
            f"{registries.minors[0]} to {registries.minors[-1]}.",
        )
    predictions = [predict(c, registry, registries, torchvision=backend.torchvision) for c in read]
    counted = sum(len(p.calls.calls) for p in predictions)
    stand_in = (
        f"PyPI's torch {registry.torch} standing in for {where}'s libtorch {backend.torch}"
        if backend.named
        else f"PyPI's torch {registry.torch}, the libtorch of the build here"
    )
    missing = [m for p in predictions for m in p.missing]
    notes = _notes(predictions)
    if missing:
        said = "; ".join(m.describe(registries) for m in missing[:6]) + (
            f"; and {len(missing) - 6} more" if len(missing) > 6 else ""
        )
        return Result.fail(
            name,
            f"{where} refuses it at load: {said}. Read from {_files(read)} against {stand_in}{notes}",
            _fix(missing, registries, backend, versions),
        )
    if any(p.custom for p in predictions) or any(p.calls.unread for p in predictions):
        return Result.warn(
            name,
            f"{counted} calls read from {_files(read)}; {stand_in} registers every one it knows{notes}",
            f"For operators outside torch's namespaces, {CUSTOM_OPS}; for what was not read, run the model on "
            "that release before you rely on it (`tritonpt check`).",
        )
    return Result.ok(name, f"{counted} calls read from {_files(read)}; {stand_in} registers every one{notes}")


def model_files(model: ModelDir, config: ModelConfig | None) -> list[Path]:
    """The file of each version Triton loads that is there: ``default_model_filename``, else the platform's
    (``model.pt`` where the config cannot be read)."""
    filename = default_model_file(config) if config is not None else MODEL_FILE
    return [f for f in (model.root / v / filename for v in model.loaded_versions()) if f.is_file()]


def _not_stated(name: str, read: list[Calls], registries: Registries, backend: Backend, where: str) -> Result:
    """A release whose libtorch no source states: which of the torches read would serve what the file calls."""
    serve: list[str] = []
    refuse: list[str] = []
    for registry in registries.registries:
        predictions = [predict(c, registry, registries, torchvision=backend.torchvision) for c in read]
        (serve if all(p.loads for p in predictions) else refuse).append(registry.minor)
    return Result.warn(
        name,
        f"{where}: the libtorch its backend bundles is not stated ({backend.source}); of the torches read, "
        f"{span(serve, registries.minors) if serve else 'none'} register every call of {_files(read)}"
        + (f", {span(refuse, registries.minors)} would refuse it" if refuse else ""),
        "Read the libtorch version in the release's image (/opt/tritonserver/backends/pytorch), or run "
        "`tritonpt doctor --image` on it.",
    )


def _where(backend: Backend) -> str:
    if not backend.named:
        return "the build here (torchvision OFF)"
    return f"Triton {backend.ngc}" if backend.ngc else f"the image ({backend.source})"


def _files(read: list[Calls]) -> str:
    return ", ".join(f"{c.path.parent.name}/{c.path.name}" for c in read)


def _notes(predictions: list[Prediction]) -> str:
    parts: list[str] = []
    custom = sorted({c.name for p in predictions for c in p.custom})
    if custom:
        parts.append(
            f"outside torch's namespaces, which no torch read here registers: {', '.join(custom[:5])}"
            + (" ..." if len(custom) > 5 else "")
        )
    vision = sorted({c.name for p in predictions for c in p.calls.calls if c.namespace == TORCHVISION})
    if vision and predictions[0].torchvision:
        parts.append(
            f"{', '.join(vision)} resolved by libtorchvision, which the release's backend links ({TORCHVISION_SOURCE})"
        )
    unread = [u for p in predictions for u in p.calls.unread]
    if unread:
        parts.append("not read: " + "; ".join(unread))
    return "".join(f"; {p}" for p in parts)


def _fix(missing: list[Missing], registries: Registries, backend: Backend, versions: Versions) -> str:
    """What to do: serve on a release whose libtorch has every missing call, export with a torch the release
    reads, or replace the call."""
    vision = [m for m in missing if m.call.namespace == TORCHVISION]
    steps: list[str] = []
    if vision and not backend.torchvision:
        steps.append(
            f"for {', '.join(sorted({m.call.name for m in vision}))}, serve it on an NGC release, whose backend links "
            f"libtorchvision ({TORCHVISION_SOURCE}); the build here and our pytorch recipe's image do not"
        )
    others = [m for m in missing if m not in vision or backend.torchvision]
    if others:
        having = set(registries.minors)
        for m in others:
            having &= set(m.having)
        serving = [
            r for r in versions.triton_releases if r.backend_torch and minor_of(r.backend_torch) in having
        ]
        if serving:
            steps.append(f"serve it on a release whose libtorch has them: {_releases(serving, versions)}")
        elif having:
            steps.append(
                f"no release of versions.toml bundles a libtorch that has them all (torch {', '.join(sorted(having))} "
                "does)"
            )
        steps.append(
            f"export it again with torch {minor_of(backend.torch)}.x, the release's own minor, where that torch can "
            "run the model (its tracer writes only calls its libtorch has), and ask again"
        )
        steps.append("or replace the call in the model")
    said = "; ".join(steps)
    return said[:1].upper() + said[1:] + "."


def _releases(serving: list[TritonRelease], versions: Versions) -> str:
    """``Triton 26.08 to 26.11`` where ``serving`` are three or more consecutive releases of versions.toml, else
    the list (two read as well listed)."""
    tags = sorted(r.ngc for r in versions.triton_releases)
    return span([r.ngc for r in serving], tags, word="Triton", least=3)
