"""Which of a model file's calls a libtorch lacks: the prediction, before any server runs, in the server's words.

    predict(calls, registry, registries, torchvision=...) -> Prediction    pure: what the registry lacks
    foresee(path, release, compiled=...) -> [sentence]                     a warning per call a release lacks

The doctor (tritonpt.doctor.needs), migrate --ngc and `nox -s compat` ask it; compat holds it to the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonpt.operators.calls import Call, Calls, of_file
from tritonpt.operators.registry import TORCHVISION, Registries, Registry, load
from tritonpt.versions import TritonRelease, minor_of


@dataclass(frozen=True, kw_only=True)
class Missing:
    """A call the serving libtorch lacks, and the torch minors (of those read) that have it."""

    call: Call
    having: tuple[str, ...]

    def describe(self, registries: Registries) -> str:
        where = span(self.having, registries.minors)
        if self.call.namespace == TORCHVISION:
            where = f"libtorchvision beside {where}"
        return f"`{self.call.refusal}` ({self.call.where}; registered by {where})"


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """What one file needs and one libtorch lacks: the doctor's answer before any server runs."""

    calls: Calls
    registry: Registry
    torchvision: bool  # whether the serving backend links libtorchvision
    missing: tuple[Missing, ...] = ()  # refused at load
    custom: tuple[Call, ...] = ()  # namespaces no torch registers: a user's own library must be loaded

    @property
    def loads(self) -> bool:
        """Whether nothing the file calls is missing (custom namespaces aside: their library may be loaded)."""
        return not self.missing

    @property
    def first_refusal(self) -> str:
        return self.missing[0].call.refusal if self.missing else ""


def predict(calls: Calls, registry: Registry, registries: Registries, *, torchvision: bool) -> Prediction:
    """Which of ``calls`` ``registry`` lacks. A name that no torch read registers, in a namespace torch itself
    owns (``aten``, ``prim``, …), is missing too (a newer torch's operator); in another namespace it is a custom
    operator, which a library loaded into the server may provide."""
    owned = registries.namespaces | {TORCHVISION}
    missing: list[Missing] = []
    custom: list[Call] = []
    for call in calls.calls:
        if call.kind == "class":
            custom.append(call)  # TorchBind classes are not in the operator registry: said, not judged
            continue
        if call.kind == "shim":
            if call.name not in registry.shims:
                missing.append(Missing(call=call, having=tuple(registries.having_shim(call.name))))
            continue
        if call.namespace not in owned:
            custom.append(call)
            continue
        vision = torchvision and call.namespace == TORCHVISION
        if not registry.has(call.name, torchvision=vision):
            having = registries.having(call.name, torchvision=call.namespace == TORCHVISION)
            missing.append(Missing(call=call, having=tuple(having)))
    return Prediction(
        calls=calls, registry=registry, torchvision=torchvision, missing=tuple(missing), custom=tuple(custom)
    )


def span(
    chosen: tuple[str, ...] | list[str], order: list[str], *, word: str = "torch", least: int = 2
) -> str:
    """``torch 2.14 to 2.15`` where ``chosen`` are ``least`` or more consecutive items of ``order``, else the list
    (``torch 2.8, 2.10``); items of ``order`` only, in its order."""
    ranked = [m for m in order if m in chosen]
    if not ranked:
        return f"no {word} read here"
    first, last = order.index(ranked[0]), order.index(ranked[-1])
    if len(ranked) >= least and order[first : last + 1] == ranked:
        return f"{word} {ranked[0]} to {ranked[-1]}"
    return f"{word} " + ", ".join(ranked)


def foresee(
    path: Path, release: TritonRelease, *, compiled: bool, registries: Registries | None = None
) -> list[str]:
    """Sentences for each call of ``path`` that ``release``'s libtorch lacks: ``compiled`` False, a TorchScript file
    about to be compiled (its operators, which the package calls only where inductor does not compile them into its
    kernels); True, the package itself (what it does call). Empty where nothing is missing or nothing can be said."""
    registries = registries if registries is not None else load()
    if registries is None:
        return []
    if not release.backend_torch:
        return [f"Triton {release.ngc}'s libtorch is not stated: what {path.name} calls is not judged for it"]
    held = registries.of_minor(minor_of(release.backend_torch))
    if held is None:
        return [f"no registry read for libtorch {minor_of(release.backend_torch)} (Triton {release.ngc})"]
    missing = predict(of_file(path), held, registries, torchvision=True).missing
    lacks = f"Triton {release.ngc}'s libtorch ({minor_of(release.backend_torch)}, PyPI's {held.torch} standing in)"
    if compiled:
        return [
            f"{lacks} lacks what the package calls: {m.describe(registries)}; it would be refused at load"
            for m in missing
        ]
    return [
        f"{lacks} lacks {m.call.name}, which the model calls ({m.call.where}; registered by "
        f"{span(m.having, registries.minors)}): unless inductor compiles it into its kernels, the package will be "
        f"refused (`Could not find schema for {m.call.name}.`)"
        for m in missing
    ]
