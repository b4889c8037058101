"""The model repository on disk, in the layout Triton reads plus our reference data.

    <repository>/<name>/config.pbtxt, 1/model.pt   the config (platform "pytorch_libtorch") and the model file
    <repository>/<name>/reference.{json,npz}       provenance, tolerances, cases (Triton ignores these files)
    <repository>/.tritonpt-split.json              a sharded export's whole split (:class:`Split`)

:class:`ModelDir` is one model's folder. ``config.pbtxt`` is read and written with protobuf's ``text_format``
and Triton's own ``model_config.proto`` (:func:`read_config`, :func:`render_config`), never a hand parser.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import scratch, stopping
from tritonpt.errors import HINT, ShardError
from tritonpt.options import DEFAULT_REPOSITORY

__all__ = [
    "DEFAULT_REPOSITORY",
    "SPLIT_FILE",
    "ModelDir",
    "Split",
    "clear_split",
    "config_text",
    "default_model_file",
    "models",
    "one_model",
    "parse_config",
    "pt2_models",
    "read_config",
    "read_split",
    "render_config",
    "staged_model",
    "version_number",
    "versions_to_load",
    "write_served_copy",
    "write_split",
    "zero_padded",
]

CONFIG = "config.pbtxt"
MODEL_FILE = "model.pt"
VERSION = "1"
REFERENCE_JSON = "reference.json"
REFERENCE_NPZ = "reference.npz"
WARMUP = "warmup"  # model_warmup input files: Triton reads them from <model>/warmup/
PLATFORM = "pytorch_libtorch"
PT2_PLATFORM = "torch_aoti"
ENSEMBLE_PLATFORM = "ensemble"  # Triton's core schedules it; no backend, no model file
"""torch.export + AOTInductor packages: pytorch_backend r26.03 and later (src/pt2/), file ``model.pt2``."""
PT2_FILE = "model.pt2"
SPLIT_FILE = ".tritonpt-split.json"
"""At the top of a repository a sharded export filled (Triton and the validator read only folders there)."""


def serves_pytorch(config: ModelConfig) -> bool:
    """Whether the pytorch backend serves the model: TorchScript (``pytorch_libtorch``) or a PT2 package."""
    return platform_of(config) in (PLATFORM, PT2_PLATFORM)


def platform_of(config: ModelConfig) -> str:
    """The platform Triton serves a config as: its ``platform``, else ``pytorch_libtorch`` for ``backend: "pytorch"``
    (core fills it in: model_config_utils.cc maps the backend name pytorch to that platform), else ""."""
    if config.platform:
        return str(config.platform)
    return PLATFORM if config.backend == "pytorch" else ""


def default_model_file(config: ModelConfig) -> str:
    """The file Triton reads from each version folder: ``default_model_filename``, else what the platform names
    (``model.pt2`` for torch_aoti, ``model.pt`` otherwise)."""
    if config.default_model_filename:
        return str(config.default_model_filename)
    return PT2_FILE if config.platform == PT2_PLATFORM else MODEL_FILE


@dataclass(frozen=True, kw_only=True)
class ModelDir:
    """Paths of one model inside a repository."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def config(self) -> Path:
        return self.root / CONFIG

    def model_file(self, version: str = VERSION) -> Path:
        return self.root / version / MODEL_FILE

    @property
    def reference_json(self) -> Path:
        return self.root / REFERENCE_JSON

    @property
    def reference_npz(self) -> Path:
        return self.root / REFERENCE_NPZ

    def version_folders(self) -> dict[str, int]:
        """Every sub-folder Triton counts as a version, with the number it reads from the name (see
        :func:`version_number`): "1a" counts as version 1, "007" not at all."""
        named = {p.name: version_number(p.name) for p in self.root.iterdir() if p.is_dir()}
        return {name: number for name, number in sorted(named.items()) if number is not None}

    def versions(self) -> list[str]:
        """The version folders named as their number is written, lowest first (Triton reads version ``v``
        from ``<model>/<v>/``, whatever folder name it counted ``v`` from), whatever the version_policy."""
        return sorted((n for n, v in self.version_folders().items() if n == str(v) and v >= 0), key=int)

    def loaded_versions(self) -> list[str]:
        """The folders Triton reads the versions it loads from, under the config's version_policy, lowest
        first (a folder may be missing: "1a" is version 1, read from 1/); every folder of :meth:`versions`
        when config.pbtxt cannot be read."""
        try:
            config = read_config(self.config)
        except (OSError, text_format.ParseError):
            return self.versions()
        return [str(v) for v in sorted(versions_to_load(config, self.version_folders().values())[1])]


_SKIPPED = frozenset({WARMUP, "initial_state", "configs"})  # folders Triton never reads as versions
_STOLL = re.compile(r"^[ \t\n\v\f\r]*([+-]?[0-9]+)")  # what std::stoll reads: blanks, a sign, leading digits


def zero_padded(folder: str) -> bool:
    """A name Triton skips as a version folder for its leading zero ("007"; "0" itself is version 0)."""
    return len(folder) > 1 and folder.startswith("0")


def version_number(folder: str) -> int | None:
    """The version Triton reads from a model's sub-folder name, or ``None`` where it skips the folder.

    As Triton's core does it (model_lifecycle.cc ``VersionsToLoad``, read in the r25.10 sources the backend
    builds with; the differential suite holds server 2.51.0 to it): ``warmup``,
    ``initial_state`` and ``configs`` are skipped, as is any longer name that starts with "0" ("007"); the
    rest go through ``std::stoll``, which reads a leading number and ignores what follows ("1a" is 1).
    """
    if folder in _SKIPPED or zero_padded(folder):
        return None
    match = _STOLL.match(folder)
    return int(match.group(1)) if match else None


def versions_to_load(config: ModelConfig, numbers: Iterable[int]) -> tuple[str, list[int]]:
    """The version_policy in words, and the versions of ``numbers`` Triton loads under it, highest first.

    No version_policy is latest 1; a ``version_policy {}`` with no choice in it loads every version (Triton's
    normalization only fills in a policy that is absent, and its loader's last branch is "all").
    """
    numbers = sorted(set(numbers), reverse=True)
    if not config.HasField("version_policy"):
        return "the default version policy (latest 1)", numbers[:1]
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "latest":
        return f"version_policy latest {policy.latest.num_versions}", numbers[: policy.latest.num_versions]
    if choice == "specific":
        wanted = set(policy.specific.versions)
        return "version_policy specific", [v for v in numbers if v in wanted]
    return "version_policy all", numbers


def models(repository: Path) -> list[ModelDir]:
    """Every model folder (a folder holding ``config.pbtxt``) in a repository, by name."""
    if not repository.is_dir():
        return []
    return [ModelDir(root=p) for p in sorted(repository.iterdir()) if p.is_dir() and (p / CONFIG).exists()]


def parse_config(text: str) -> ModelConfig:
    """Parse config.pbtxt text with Triton's schema; raises ``text_format.ParseError``, also for a number its
    field cannot hold (protobuf's own parser lets ``data_type: 3372036854775808`` through to the message, which
    raises ``ValueError``; Triton's parser refuses the text)."""
    config: ModelConfig = ModelConfig()
    try:
        text_format.Parse(text, config)
    except ValueError as exc:  # ParseError is not one
        raise _out_of_range(text, exc) from exc
    return config


_OUT_OF_RANGE = re.compile(r"out of range: (\S+)")


def _out_of_range(text: str, exc: ValueError) -> text_format.ParseError:
    """A ParseError worded as protobuf words an integer out of range (``'field: value': Value out of range``), at
    the first ``field: value`` of the text that holds the value; without a place when none does."""
    match = _OUT_OF_RANGE.search(str(exc))
    where = re.search(rf"(\w+)[ \t]*:[ \t]*{re.escape(match.group(1))}\b", text) if match else None
    if match is None or where is None:
        return text_format.ParseError(str(exc))
    message = f"'{where.group(1)}: {match.group(1)}': Value out of range"
    line = text.count("\n", 0, where.start()) + 1
    return text_format.ParseError(message, line, where.start() - text.rfind("\n", 0, where.start()))


def config_text(data: bytes) -> str:
    """config.pbtxt's bytes as text for protobuf's Python parser, which takes only ``str``.

    Triton's C++ parser takes bytes that are not UTF-8 as they are (server 2.51.0 loads and serves a config
    with a Latin-1 byte in a comment or in a string value); here each invalid sequence becomes U+FFFD, so
    that the rest parses as Triton parses it.
    """
    return data.decode("utf-8", errors="replace")


def read_config(path: Path) -> ModelConfig:
    return parse_config(config_text(path.read_bytes()))


def render_config(config: ModelConfig) -> str:
    return str(text_format.MessageToString(config))


@contextlib.contextmanager
def staged_model(repository: Path, name: str) -> Iterator[ModelDir]:
    """A model folder built aside that replaces ``repository/name`` only if the block succeeds.

    The folder is ``<repository>/.staging-XXXX/<name>``, so it already carries its final name (validation
    can run on it before it moves). On error it is removed and the previous model folder, if any, stays
    as it was: nothing half-written is ever left in the repository, and repository folders this call had to
    create are removed again.
    """
    created = [p for p in (repository, *repository.parents) if not p.exists()]
    try:
        repository.mkdir(parents=True, exist_ok=True)
        with scratch.folder(".staging-", inside=repository) as staging:
            model = ModelDir(root=staging / name)
            model.root.mkdir()
            yield model
            with stopping.ctrl_c_held():  # the old folder moves aside and the new one in, or neither
                target, previous = repository / name, staging / f"{name}.previous"
                if target.exists():
                    target.replace(previous)
                try:
                    model.root.replace(target)
                except BaseException:
                    if previous.exists() and not target.exists():
                        previous.replace(target)
                    raise
                created = []
    finally:
        with stopping.ctrl_c_held():
            for folder in created:  # innermost first; each is empty unless someone else wrote there meanwhile
                with contextlib.suppress(OSError):
                    folder.rmdir()


@contextlib.contextmanager
def one_model(model: ModelDir, config: ModelConfig) -> Iterator[Path]:
    """A temporary repository holding only ``model``, served with ``config``: its version folders and warmup
    data linked (never copied), the config written anew. Removed afterwards; ``model`` is not touched."""
    with scratch.folder("tritonpt-repository-") as folder:
        root = folder / model.name
        root.mkdir()
        for name in [*model.versions(), WARMUP]:
            if (model.root / name).is_dir():
                (root / name).symlink_to((model.root / name).absolute(), target_is_directory=True)
        (root / CONFIG).write_text(render_config(config), encoding="utf-8")
        yield folder


def pt2_models(repository: Path) -> list[ModelDir]:
    """The models of a repository whose config names ``platform: "torch_aoti"`` (a config that does not parse
    is not one: validation reports it)."""
    found = []
    for model in models(repository):
        with contextlib.suppress(OSError, text_format.ParseError):
            if read_config(model.config).platform == PT2_PLATFORM:
                found.append(model)
    return found


def write_served_copy(
    repository: Path, into: Path, *, pt2_backend: str, link_base: Path | None = None
) -> list[str]:
    """Fill the empty folder ``into`` with a copy of ``repository`` that a server older than Triton 26.03 serves:
    every model folder's entries linked (never copied), every torch_aoti config written again naming the
    backend ``pt2_backend`` (server 2.51.0's core refuses backend "pytorch" with that platform and takes any
    platform for a backend name it does not know). The repository itself is not touched; returns the models
    whose config was rewritten. ``link_base``: where the links point instead of ``repository`` (a container that
    mounts the repository at another path)."""
    rewritten = []
    pt2 = {m.name for m in pt2_models(repository)}
    for model in models(repository):
        root = into / model.name
        root.mkdir()
        for entry in model.root.iterdir():
            if entry.name != CONFIG:
                target = link_base / model.name / entry.name if link_base is not None else entry.absolute()
                (root / entry.name).symlink_to(target, target_is_directory=entry.is_dir())
        if model.name in pt2:
            config = read_config(model.config)
            config.backend = pt2_backend
            (root / CONFIG).write_text(render_config(config), encoding="utf-8")
            rewritten.append(model.name)
        else:
            (root / CONFIG).write_bytes(model.config.read_bytes())
    return rewritten


@dataclass(frozen=True, kw_only=True)
class Split:
    """What a sharded export recorded (``SPLIT_FILE``): every model of the split, of which this runner's repository
    holds only its part; the digest of the costs that balanced it; and each model's config parameters as its
    export writes them, so that the rules across models see the models another runner holds."""

    models: tuple[str, ...]
    costs_digest: str = ""
    parameters: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def write_split(repository: Path, split: Split) -> Path:
    """Record a sharded export's split in ``repository`` (whole, or not at all)."""
    path = repository / SPLIT_FILE
    repository.mkdir(parents=True, exist_ok=True)
    body = {
        "models": sorted(split.models),
        "costs_digest": split.costs_digest,
        "parameters": {name: dict(sorted(p.items())) for name, p in sorted(split.parameters.items())},
    }
    staged = path.with_suffix(".partial")
    staged.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    staged.replace(path)
    return path


def clear_split(repository: Path) -> None:
    """A whole export: the repository holds every model again, so no split stands in for it."""
    (repository / SPLIT_FILE).unlink(missing_ok=True)


def read_split(repository: Path) -> Split | None:
    """The split a sharded export recorded in ``repository``, None where there is none; ``ShardError`` naming the
    file when it does not read."""
    path = repository / SPLIT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        parameters = {
            str(name): {str(k): str(v) for k, v in dict(p).items()}
            for name, p in dict(data.get("parameters", {})).items()
        }
        return Split(
            models=tuple(str(n) for n in data["models"]),
            costs_digest=str(data.get("costs_digest", "")),
            parameters=parameters,
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = (
            f"Cannot read {path}: {exc}.\n{HINT} export again (`invoke export --shard K/N`), or delete the file to "
            "use the models the repository holds."
        )
        raise ShardError(msg) from exc
