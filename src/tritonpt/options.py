"""The vocabulary of choices the front doors accept, and how a typed string becomes one of them.

Each set of choices is defined here once, as a ``Literal`` and the tuple of its values; the stages import the
type, the front doors (tasks.py, noxfile.py, tritonpt.cli, the pytest options) the values. Standard library
only, so that reading a command line never loads torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar, get_args

from tritonpt.errors import TritonPtError

InstanceKind = Literal["KIND_AUTO", "KIND_CPU", "KIND_GPU"]
"""instance_group kinds we write (KIND_AUTO: GPU where there is one, CPU otherwise)."""
INSTANCE_KINDS: tuple[InstanceKind, ...] = get_args(InstanceKind)

Gpus = Literal["auto", "all", "none"]
"""GPUs for a container: every GPU when the engine can give them, every GPU or fail, none."""
GPUS: tuple[Gpus, ...] = get_args(Gpus)

Target = Literal["auto", "local", "url", "container"]
"""What runs the server: auto picks url with a URL, container with an image, else local."""
TARGETS: tuple[Target, ...] = get_args(Target)

ModelFormat = Literal["torchscript", "pt2"]
"""TorchScript (``model.pt``, platform pytorch_libtorch) or torch.export + AOTInductor (``model.pt2``, torch_aoti)."""
MODEL_FORMATS: tuple[ModelFormat, ...] = get_args(ModelFormat)
FormatChoice = Literal["torchscript", "pt2", "both"]
"""What `invoke export --format` takes: one format, or both (the PT2 copy named ``<name>_pt2``)."""
FORMAT_CHOICES: tuple[FormatChoice, ...] = get_args(FormatChoice)


Pt2Build = Literal["stock", "patched"]
"""Which build of pytorch_backend's PT2 path serves torch_aoti models: ``stock``, the pinned sources as NVIDIA
publishes them (the default, and what an NGC image of Triton 26.03 or later runs, bugs included:
docs/upstream/), or ``patched``, ours with the patch set versions.toml [pt2] names (``r26.05+tritonpt.1``), which
splits a dynamic batch, refuses a batch a package was not compiled for, survives a mismatched output type, reads
its parameters and reports its statistics in order. Export, the validator, the server and the matrix each take it."""
PT2_BUILDS: tuple[Pt2Build, ...] = get_args(Pt2Build)


def formats_of(choice: FormatChoice) -> tuple[ModelFormat, ...]:
    return MODEL_FORMATS if choice == "both" else (choice,)


DEFAULT_REPOSITORY = Path("model_repository")
"""Where the front doors read and write the model repository unless told otherwise."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_Choice = TypeVar("_Choice", bound=str)


def one_of(value: str, choices: tuple[_Choice, ...], *, option: str, error: type[TritonPtError]) -> _Choice:
    """``value`` when it is one of ``choices``, else ``error`` saying which are valid."""
    for choice in choices:
        if value == choice:
            return choice
    msg = f"{option} {value!r}: expected one of {', '.join(choices)}."
    raise error(msg)


def parse_assignments(
    values: Iterable[str], *, option: str, example: str, error: type[TritonPtError]
) -> dict[str, str]:
    """``["K=V", ...]`` typed after a repeatable option, as a mapping; a value may itself hold ``=``."""
    parsed: dict[str, str] = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not _NAME.fullmatch(key):
            msg = f"Cannot read {option} {value!r}: write it as NAME=VALUE, e.g. {option} {example}."
            raise error(msg)
        parsed[key] = setting
    return parsed


@dataclass(frozen=True, kw_only=True)
class Mount:
    """A bind mount into a container: host ``source`` at ``target``, read-only unless said otherwise."""

    source: Path
    target: str
    read_only: bool = True

    def volume(self) -> str:
        """The ``-v`` form: ``SOURCE:TARGET:ro``."""
        return f"{self.source}:{self.target}:{'ro' if self.read_only else 'rw'}"


def parse_mounts(values: Iterable[str], *, option: str, error: type[TritonPtError]) -> tuple[Mount, ...]:
    """``["/host/dir:/in/container[:ro|rw]", ...]`` as mounts; the host folder must exist."""
    mounts = []
    for value in values:
        parts = value.split(":")
        mode = parts.pop() if len(parts) == 3 and parts[-1] in ("ro", "rw") else "ro"
        if len(parts) != 2 or not parts[0] or not parts[1].startswith("/"):
            msg = f"Cannot read {option} {value!r}: write it as HOST_PATH:/CONTAINER/PATH[:ro|rw], e.g. {option} $PWD/data:/data:ro."
            raise error(msg)
        source = Path(parts[0]).absolute()
        if not source.exists():
            msg = f"Cannot mount {source} ({option} {value!r}), as it does not exist on this host."
            raise error(msg)
        mounts.append(Mount(source=source, target=parts[1], read_only=mode == "ro"))
    return tuple(mounts)


def parse_dynamic_axes(
    values: Sequence[str], *, error: type[TritonPtError]
) -> Mapping[int | str, tuple[int, ...]]:
    """``["0:1", "0:2", "attention_mask:1"]`` (INPUT:AXIS, the input by index or by name) ->
    ``{0: (1, 2), "attention_mask": (1,)}``; a name is resolved against the model's inputs by the spec."""
    axes: dict[int | str, list[int]] = {}
    for value in values:
        which, sep, axis = value.rpartition(":")
        if not sep or not which or not axis.isdigit():
            msg = (
                f"--dynamic-axis {value!r}: expected INPUT:AXIS, the input by index or name, e.g. 0:1 for axis 1 "
                "of the first input, or input_ids:1."
            )
            raise error(msg)
        axes.setdefault(int(which) if which.isdigit() else which, []).append(int(axis))
    return {k: tuple(sorted(set(v))) for k, v in axes.items()}


def parse_factory(value: str, *, error: type[TritonPtError]) -> tuple[str, str]:
    """``MODULE:ATTR`` (``--model``) -> ``(MODULE, ATTR)``."""
    module, sep, attr = value.partition(":")
    if not sep or not module or not attr:
        msg = f"--model {value!r}: expected MODULE:ATTR, e.g. `--model my_models:build_classifier`."
        raise error(msg)
    return module, attr
