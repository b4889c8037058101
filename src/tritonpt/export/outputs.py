"""What forward() returns, as the pytorch backend serves it: a tuple of tensors in a fixed order, each named.

    Structure.of(value)   the path of every tensor in a returned dict, ModelOutput, NamedTuple, dataclass or
                          list (nested), in its own order; None values are left out, any other leaf refused
    Adapter               an nn.Module around the model that returns those tensors as a tuple: what is served

Outputs are named ``<key>__<index>`` (``logits__0``); a Tensor or a tuple keeps ``OUTPUT__i``, no adapter.
A structure that changes with the input is refused, with the paths that changed.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from tritonpt.errors import HINT, SpecError

Path = tuple[str | int, ...]
"""Where a tensor sits in forward()'s result: keys (mappings, dataclasses, named tuples) and indices."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _children(value: object) -> list[tuple[str | int, object]] | None:
    """The parts of a container, in its own order, or None for a leaf."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, Mapping):
        return [(k if isinstance(k, str | int) else str(k), v) for k, v in value.items()]
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return [(name, getattr(value, name)) for name in value._fields]
    if isinstance(value, tuple | list):
        return list(enumerate(value))
    return None


def describe(path: Path) -> str:
    """``logits``, ``hidden_states[1]``, ``[0].boxes``: a path as a person reads it."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "the output"


@dataclass(frozen=True, kw_only=True)
class Structure:
    """The tensors in forward()'s result, by path, and what was left out."""

    kind: str  # the result's type name: "Tensor", "tuple", "SequenceClassifierOutput", ...
    paths: tuple[Path, ...]
    dropped: tuple[Path, ...] = ()  # values that were None

    @classmethod
    def of(cls, model: str, value: object) -> Structure:
        """Flatten ``value``; ``SpecError`` naming the first part that is neither a tensor, a container nor None."""
        paths: list[Path] = []
        dropped: list[Path] = []

        def walk(node: object, path: Path) -> None:
            if isinstance(node, torch.Tensor):
                paths.append(path)
                return
            if node is None and path:
                dropped.append(path)
                return
            children = _children(node)
            if children is None:
                what = (
                    f"forward() returned {type(value).__name__}, and {describe(path)} in it is of type "
                    f"{type(node).__name__}"
                    if path
                    else f"forward() returned {type(node).__name__}"
                )
                msg = (
                    f"Model {model!r}: {what}, not a tensor; Triton's pytorch backend serves tensors only. {HINT} "
                    + _leaf_hint(node)
                )
                raise SpecError(msg)
            for key, child in children:
                walk(child, (*path, key))

        walk(value, ())
        if not paths:
            msg = (
                f"Model {model!r}: forward() returned {type(value).__name__} with no tensor in it; there is nothing "
                f"to serve. {HINT} return the tensors the clients need."
            )
            raise SpecError(msg)
        return cls(kind=type(value).__name__, paths=tuple(paths), dropped=tuple(dropped))

    @property
    def flat(self) -> bool:
        """A Tensor or a tuple of tensors: served as it is, no adapter needed."""
        return self.kind == "Tensor" or (self.kind == "tuple" and all(len(p) == 1 for p in self.paths))

    @property
    def keyed(self) -> bool:
        """Whether any tensor is reached through a key (its name then says which)."""
        return any(isinstance(part, str) for path in self.paths for part in path)

    def names(self) -> tuple[str, ...]:
        """Output names by the backend's rule: ``OUTPUT__i`` by position, ``<key>__i`` where a key says more."""
        if not self.keyed:
            return tuple(f"OUTPUT__{i}" for i in range(len(self.paths)))
        names = []
        for index, path in enumerate(self.paths):
            key = ".".join(str(part) for part in path)
            key = _UNSAFE.sub("_", key).replace("__", "_").strip("_.") or "OUTPUT"
            names.append(f"{key}__{index}")
        return tuple(names)

    def pick(self, value: object) -> tuple[torch.Tensor, ...]:
        return tuple(_at(value, path) for path in self.paths)

    def differences(self, other: Structure) -> str:
        """What another input's result has or lacks against this one, in words."""
        mine, theirs = set(self.paths), set(other.paths)
        said = []
        if theirs - mine:
            said.append("it has " + ", ".join(describe(p) for p in sorted(theirs - mine, key=str)[:5]))
        if mine - theirs:
            said.append("it lacks " + ", ".join(describe(p) for p in sorted(mine - theirs, key=str)[:5]))
        return "; ".join(said) or "the same tensors in another order"

    def note(self) -> str | None:
        """The one line export prints for a structure it adapted, or None for a flat one."""
        if self.flat:
            return None
        names = ", ".join(self.names())
        left = (
            f"; left out, as they are None on the example inputs: {', '.join(describe(p) for p in self.dropped)}"
            if self.dropped
            else ""
        )
        return (
            f"forward() returns {self.kind}: served as a tuple of {len(self.paths)} tensor(s), {names}{left}"
        )


def _leaf_hint(node: object) -> str:
    name = type(node).__name__
    if "Cache" in name:
        return (
            f"a {name} holds a decoder's key/value cache, which is state between calls: build the model with "
            "`use_cache=False` (config.use_cache = False) to serve one forward pass."
        )
    if isinstance(node, int | float | bool | str):
        return "return it as a tensor (`torch.tensor(value)`), with shape [1] or per sample."
    return "return tensors, or a dict, tuple, list, NamedTuple or dataclass of them."


def _at(value: object, path: Path) -> torch.Tensor:
    node = value
    for part in path:
        node = getattr(node, part) if isinstance(part, str) and not isinstance(node, Mapping) else node[part]  # type: ignore[index]
    assert isinstance(node, torch.Tensor)  # noqa: S101 - Structure.of put only tensors on its paths
    return node


class Adapter(torch.nn.Module):
    """The user's model as the backend serves it: called with the inputs by position, or as keywords, and its
    result flattened to the tuple of tensors at ``structure``'s paths. What export traces instead of the model.

    Its forward() takes one argument per input, named after them (a signature set per instance's class), so the
    traced module's arguments are the config's input names and the backend maps inputs by name.
    """

    def __init__(
        self, inner: torch.nn.Module, structure: Structure, *, input_names: Sequence[str], keywords: bool
    ) -> None:
        super().__init__()
        self.inner = inner
        self.structure = structure
        self.input_names = tuple(input_names)
        self.keywords = keywords
        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
            inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in self.input_names
        ]

        def forward(self: Adapter, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return Adapter.forward(self, *inputs)

        # A class of its own, whose forward() has this instance's signature (torch.jit.trace names by it).
        forward.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        self.__class__ = type("Adapter", (Adapter,), {"forward": forward})

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.keywords:
            result = self.inner(**dict(zip(self.input_names, inputs, strict=True)))
        else:
            result = self.inner(*inputs)
        return self.structure.pick(result)
