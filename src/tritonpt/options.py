"""The vocabulary of choices the front doors accept, and how a typed string becomes one of them.

Each set of choices is defined here once, as a ``Literal`` and the tuple of its values; the stages import the
type, the front doors (tasks.py, noxfile.py, tritonpt.cli, the matrix's settings, every program's parser) the
values. Standard library only, so that reading a command line never loads torch.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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


def resolve_target(target: Target, *, url: str | None, image: str | None) -> Target:
    """The target ``auto`` means where it is given: ``url`` with a URL, ``container`` with an image, else ``local``;
    any other target as it is. Every door and the server factory resolve it here."""
    if target != "auto":
        return target
    return "url" if url else "container" if image else "local"


ModelFormat = Literal["torchscript", "pt2"]
"""TorchScript (``model.pt``, platform pytorch_libtorch) or torch.export + AOTInductor (``model.pt2``, torch_aoti)."""
MODEL_FORMATS: tuple[ModelFormat, ...] = get_args(ModelFormat)
FormatChoice = Literal["torchscript", "pt2", "both"]
"""What `invoke export --format` takes: one format, or both (the PT2 copy named ``<name>_pt2``)."""
FORMAT_CHOICES: tuple[FormatChoice, ...] = get_args(FormatChoice)


Recipe = Literal["ngc", "pytorch"]
"""The image recipes of docker/: ngc (an NGC Triton image with its PyTorch backend), pytorch (pytorch/pytorch)."""
RECIPES: tuple[Recipe, ...] = get_args(Recipe)

BackendChoice = Literal["cpu", "gpu", "auto"]
"""The backend variant asked for: cpu, gpu (needs a CUDA toolkit and a CUDA torch), or auto."""
BACKEND_CHOICES: tuple[BackendChoice, ...] = get_args(BackendChoice)

Sanitizer = Literal["address", "undefined"]
"""A sanitizer every backend build is instrumented with (own cache keys): ASan or UBSan."""
SANITIZERS: tuple[Sanitizer, ...] = get_args(Sanitizer)

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


@dataclass(frozen=True)
class Ports:
    """The host ports a server this package starts listens on; 0 picks a free one at start."""

    http: int = 0
    grpc: int = 0
    metrics: int = 0

    def named(self) -> list[tuple[str, int, str]]:
        """(endpoint, port, the option that sets it) for each port asked for (not 0)."""
        named = [("HTTP", self.http, "--http-port"), ("gRPC", self.grpc, "--grpc-port")]
        named.append(("metrics", self.metrics, "--metrics-port"))
        return [(what, port, option) for what, port, option in named if port]


TRITON_PORTS = Ports(8000, 8001, 8002)
"""Triton's own ports, where its docs and every copied client look: `tritonpt serve`'s default."""
FREE_PORTS = Ports()
"""Free ports picked at start: what the checks use, so that they run beside anything else."""

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


# --- The options of the front doors, each declared once ----------------------------------------------------------

Value = str | int | float | bool | None


@dataclass(frozen=True, kw_only=True)
class Option:
    """One option of the front doors: its help, its default and what it accepts, in every door that offers it
    (the `tritonpt`/`invoke` tasks, the matrix's settings, every program's parser, the tasks reference page)."""

    name: str  # the Python name ("pt2_build"); the flag is --pt2-build
    help: str
    default: Value = ""
    choices: tuple[str, ...] = ()
    repeatable: bool = False  # --mount A --mount B: a list
    path: bool = False  # a folder or file: a Path where a parser reads it (None where left empty)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value: object) -> None:
        """``SpecError``-like ``TritonPtError`` where ``value`` is not one of the choices (an empty value is the
        option left out, where its default is empty)."""
        if self.choices and not (value == "" and self.default == "") and value not in self.choices:
            msg = f"{self.flag} {value!r}: expected one of {', '.join(self.choices)}."
            raise TritonPtError(msg)


def _options(*declared: Option) -> dict[str, Option]:
    return {option.name: option for option in declared}


SHARD_HELP = (
    "K/N: only this shard's models, the same split in every door (export writes it, check and serve use it)"
)
OPTIONS = _options(
    Option(name="repository", help="model repository folder", default=str(DEFAULT_REPOSITORY)),
    Option(
        name="model",
        help="your model as MODULE:ATTR, ATTR a zero-argument callable returning (module, example_inputs) or a "
        "ModelSpec (migrate: the module --name is re-exported from, instead of converting its file)",
    ),
    Option(name="name", help="a model's name in the repository (its folder and config name)"),
    Option(
        name="only",
        help="only this built-in model (repeatable); default: the whole built-in set",
        repeatable=True,
    ),
    Option(
        name="script",
        help="torch.jit.script instead of torch.jit.trace (models with data-dependent control flow)",
        default=False,
    ),
    Option(
        name="max_batch_size",
        help="largest batch; 0 = no batch axis (default: the model's own, else 8)",
        default=-1,
    ),
    Option(
        name="dynamic_axis",
        help="INPUT:AXIS of a variable-length axis, the input by index or name: 0:1, input_ids:1 (repeatable)",
        repeatable=True,
    ),
    Option(name="instance_kind", help="KIND_AUTO (default), KIND_CPU or KIND_GPU", choices=INSTANCE_KINDS),
    Option(
        name="parameter",
        help="pytorch backend parameter KEY=VALUE, e.g. INTRA_OP_THREAD_COUNT=4 (repeatable)",
        repeatable=True,
    ),
    Option(name="seed", help="seed for the built-in models' weights and the reference inputs", default=0),
    Option(
        name="force",
        help="do the work again even where what is there says it is current (an export's stamp, the build cache)",
        default=False,
    ),
    Option(
        name="format",
        help="torchscript (model.pt, platform pytorch_libtorch), pt2 (torch.export + AOTInductor: model.pt2, "
        "platform torch_aoti), or both (the PT2 copy named NAME_pt2)",
        default="torchscript",
        choices=FORMAT_CHOICES,
    ),
    Option(name="shard", help=SHARD_HELP),
    Option(
        name="shard_costs",
        help="a previous run's summary.json: balance the shards by its measured seconds per model (every shard the "
        "same file)",
    ),
    Option(
        name="pt2_build",
        help="the PT2 build that serves torch_aoti models: stock (NVIDIA's, as NGC images run it) or patched (ours, "
        "the patch set of versions.toml [pt2]); export writes dynamic_batching for PT2 copies only for patched",
        default="stock",
        choices=PT2_BUILDS,
    ),
    Option(
        name="build_backend",
        help="also build (or find cached) the backends the repository needs, side by side with the export",
        default=False,
    ),
    Option(
        name="from_file",
        help="import a model file made elsewhere as it is (a TorchScript model.pt or an AOTInductor model.pt2) into "
        "--name's folder: config from what it takes and returns, reference data from it in-process",
    ),
    Option(
        name="samples",
        help="your inputs as a .npz, one array per input named as the input, a first axis of samples: export's "
        "--from-file file's; migrate's for --name (or a folder of NAME.npz, one per model)",
    ),
    Option(name="debug", help="show tracebacks", default=False),
    Option(
        name="smoke",
        help="a short run, for CI: it proves that the run works (shorter windows, fewer requests, cycles or "
        "models), and its figures are rough",
        default=False,
    ),
    Option(
        name="recipe",
        help="ngc (recommended: an NGC Triton image with its PyTorch backend) or pytorch (the pytorch/pytorch base)",
        default="ngc",
        choices=RECIPES,
    ),
    Option(name="tag", help="image tag (default tritonpt:ngc-<release> or tritonpt:pytorch-<torch>)"),
    Option(name="no_cache", help="build without the engine's layer cache", default=False),
    Option(
        name="build_arg",
        help="override one build argument, KEY=VALUE (repeatable); the defaults come from versions.toml",
        repeatable=True,
    ),
    Option(
        name="ngc",
        help="a Triton release of versions.toml, e.g. 26.07: the one build-image's ngc recipe builds; the one the "
        "doctor judges the repository against without an image; the one migrate warns for (calls its libtorch lacks)",
    ),
    Option(
        name="sources",
        help="folder of the pinned source tarballs (default $TRITONPT_SOURCES; else downloaded from GitHub)",
    ),
    Option(
        name="variant",
        help="cpu, gpu (needs a CUDA toolkit and a CUDA torch), or auto",
        default="cpu",
        choices=BACKEND_CHOICES,
    ),
    Option(
        name="pt2",
        help="the PT2 (torch_aoti) build too; built anyway when the repository holds torch_aoti models",
        default=False,
    ),
    Option(
        name="sanitize",
        help="address or undefined: every build instrumented with ASan or UBSan (own cache keys)",
        choices=SANITIZERS,
    ),
    Option(
        name="target",
        help="what runs the server: auto (url with --url, container with --image, else local), local (a "
        "tritonserver process), container, or url (a server already running)",
        default="auto",
        choices=TARGETS,
    ),
    Option(name="url", help="HTTP URL of a running server (target url), e.g. http://127.0.0.1:8000"),
    Option(name="grpc_url", help="gRPC host:port of that server (default: port 8001 on its host)"),
    Option(name="metrics_url", help="metrics URL of that server (default: port 8002 on its host)"),
    Option(name="image", help="an image tag: target container runs it, the doctor looks inside it"),
    Option(
        name="gpus",
        help="target container: auto (when the engine can hand them out), all (demand them) or none",
        default="auto",
        choices=GPUS,
    ),
    Option(
        name="mount",
        help="target container: one more bind mount HOST_PATH:/CONTAINER/PATH[:ro|rw] (repeatable)",
        repeatable=True,
    ),
    Option(
        name="tritonserver",
        help="tritonserver binary for target local (default: $TRITONSERVER, PATH, /opt/tritonserver, the "
        "embedded one)",
    ),
    Option(
        name="reports",
        help="folder for the reports (and the server's log); the matrix's default for a --shard K/N run is "
        "reports/shard-K-of-N",
        default="reports",
        path=True,
    ),
    Option(
        name="export_builtin",
        help="where --repository is model_repository (the default): export the built-in set into it first, both "
        "formats (the PT2 copies for --pt2-build; in the matrix, a --shard's part only), the backends built beside "
        "it; the main job, as `nox -s integration` runs it",
        default=False,
    ),
    Option(
        name="upload",
        help="with --url: send the repository's models through the server's load API (it must run with "
        "--model-control-mode=explicit) and unload them after; a restricted API's key from $TRITONPT_ADMIN_KEY",
        default=False,
    ),
    Option(
        name="replace_loaded",
        help="with --upload: replace a model of the same name the server already serves",
        default=False,
    ),
    Option(name="pytest", help='more pytest arguments, as one string, e.g. "-k parity -x"'),
    Option(
        name="strict_backend",
        help="fail unless every model is served by libtriton_pytorch.so (the default, on every target); "
        "--no-strict-backend records, but does not require, the backend library a server at --url reports",
        default=True,
    ),
    Option(name="memory", help="target container: a memory limit, as docker run --memory (e.g. 2g)"),
    Option(
        name="skip_validation",
        help="start the server even when validation finds errors, and let Triton have its say",
        default=False,
    ),
    Option(name="start_timeout", help="seconds to wait for the server and models", default=240.0),
    Option(
        name="rerun",
        help="a run the server's known crash (one with an upstream reproduction) aborted is run once more; "
        "--no-rerun does not (nox -s crash-hunt counts every crash)",
        default=True,
    ),
    Option(
        name="http_port",
        help=f"the HTTP port on 127.0.0.1 (Triton's own: {TRITON_PORTS.http}; 0 picks a free one)",
        default=TRITON_PORTS.http,
    ),
    Option(name="grpc_port", help="the gRPC port (0 picks a free one)", default=TRITON_PORTS.grpc),
    Option(name="metrics_port", help="the metrics port (0 picks a free one)", default=TRITON_PORTS.metrics),
    Option(
        name="latency_budget_ms",
        help="the winner's p99 latency must fit this many milliseconds (default: no budget)",
        default=-1.0,
    ),
    Option(
        name="apply",
        help="write the winning config.pbtxt into the repository (staged and validated, as export writes)",
        default=False,
    ),
    Option(
        name="shards",
        help="the shards' report folders: a glob or a comma-separated list",
        default="reports/shard-*-of-*",
    ),
    Option(
        name="into",
        help="where the result goes: merge-reports' summary.md, summary.json and junit.xml (default "
        "reports/merged); migrate's new torch_aoti repository (a folder outside --repository)",
        path=True,
    ),
)
"""Every option of every task, once; tritonpt.tasks composes each task's signature and help from it."""


def add_arguments(
    add: Callable[..., object],
    names: Iterable[str],
    *,
    defaults: Mapping[str, Value] | None = None,
    many: Collection[str] = (),
) -> None:
    """Declare the named options on an argparse parser or a pytest option group (``add``: its ``add_argument``
    or ``addoption``), as OPTIONS says: a flag (``--no-X`` too where it is on by default), a repeatable option, or
    a value within its choices. ``defaults`` gives a program its own default for an option (a CI program's reports
    folder; its help says so), ``many`` the options it takes more than once (a list, each value within the
    choices): the help is the registry's."""
    for name in names:
        option = OPTIONS[name]
        default = option.default if defaults is None else defaults.get(name, option.default)
        said = option.help + (f" (here: default {default})" if default != option.default and default else "")
        if name in many:
            add(option.flag, action="append", default=[], choices=option.choices or None, help=said)
        elif isinstance(option.default, bool):
            action = argparse.BooleanOptionalAction if option.default else "store_true"
            add(option.flag, action=action, default=default, help=said)
        elif option.repeatable:
            add(option.flag, action="append", default=[], help=said)
        elif option.path:
            add(option.flag, type=Path, default=Path(str(default)) if default else None, help=said)
        else:
            add(
                option.flag,
                type=type(option.default),
                default=default,
                choices=option.choices or None,
                help=said,
            )


def command_line(values: Mapping[str, object]) -> list[str]:
    """Options with their values as a command line (the matrix's, which pytest reads), spelled as OPTIONS says: a
    flag where it is on, a repeatable option once per value, any other where it has a value."""
    line: list[str] = []
    for name, value in values.items():
        option = OPTIONS[name]
        if isinstance(option.default, bool) and option.default:
            line += [] if value else ["--no-" + option.flag.removeprefix("--")]
        elif isinstance(option.default, bool):
            line += [option.flag] if value else []
        elif option.repeatable:
            line += [part for each in value or () for part in (option.flag, str(each))]  # type: ignore[attr-defined]
        elif value not in ("", None):
            line += [option.flag, str(value)]
    return line
