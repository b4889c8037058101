"""Family R: the repository folder, its model folders, their version folders and the version policy.

Version folders as Triton's core reads them (model_lifecycle.cc, read in the r25.10 sources; the differential
suite holds server 2.51.0 to it): see :func:`tritonpt.repository.version_number`.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt.errors import first_line
from tritonpt.repository import CONFIG, ModelDir, default_model_file, versions_to_load, zero_padded
from tritonpt.validate.rules import Findings, rule

NO_REPOSITORY = rule(
    "R001",
    "the repository folder is missing, or is a file",
    why="Error: the server fails to start (`failed to stat file`).",
    example="model_repository/ does not exist, or is a file",
)
UNLISTABLE = rule(
    "R002",
    "a repository or model folder cannot be listed",
    why="Error: Triton cannot read it either.",
    example="model_repository/classifier/ without read permission (chmod 000)",
)
NO_CONFIG = rule(
    "R003",
    "a model folder without config.pbtxt",
    why="Error: the pytorch backend cannot auto-complete a config.",
    example="model_repository/classifier/1/model.pt with no classifier/config.pbtxt beside 1/",
)
EMPTY = rule(
    "R004",
    "the repository holds no models",
    why="Error: there is nothing to serve.",
    example="an empty model_repository/",
)
LEADING_ZERO = rule(
    "R005",
    "a version folder Triton skips for its leading zero (007/)",
    why="Warning: Triton skips a version folder with a leading zero, so it is never loaded.",
    example="model_repository/classifier/007/model.pt",
)
NO_VERSION = rule(
    "R006",
    "no numeric version folder",
    why="Error: Triton refuses the model, as it has no version to load.",
    example="model_repository/classifier/ with config.pbtxt and latest/model.pt, but no 1/",
)
BEYOND_INT64 = rule(
    "R007",
    "a version folder whose number is beyond 64 bits",
    why=(
        "Error: the server aborts at load (SIGABRT: `std::stoll` throws `out_of_range`, which "
        "the version scan does not catch)."
    ),
    example="model_repository/classifier/99999999999999999999/model.pt",
)
POLICY_MISSING = rule(
    "R008",
    "version_policy names versions the folder lacks",
    why=(
        "A warning when another version loads: Triton serves the present ones (it logs an error "
        "for the missing one). An error when none does: Triton refuses the model."
    ),
    example="version_policy: { specific: { versions: [ 1, 3 ] } }  # only 1/ in the model folder",
)
POLICY_NONE = rule(
    "R009",
    "version_policy selects no version",
    why="Error: Triton refuses the model.",
    example="version_policy: { latest: { num_versions: 0 } }",
)
NO_MODEL_FILE = rule(
    "R010",
    "a version the policy loads has no model file (1a/ counted as 1, read from 1/)",
    why=(
        "Error: Triton refuses the model (`unable to find ... for model instance`). A folder "
        "`1a/` or `+1/` with no `1/` beside it counts as version 1 (`std::stoll`), and then "
        "Triton reads `1/`."
    ),
    example="model_repository/classifier/1a/model.pt with no classifier/1/",
)

_EXPORT = "export models into it first: `invoke export` (built-in set) or `invoke export --model MODULE:ATTR --name NAME`."
_READABLE = "make the folder readable by the user that runs validate and Triton."


def repository_folders(repository: Path, findings: Findings) -> list[Path] | None:
    """The repository's model folders (hidden ones left out, as Triton does); None after an error that ends it."""
    if not repository.is_dir():
        findings.add(
            NO_REPOSITORY,
            "error",
            repository,
            "repository",
            "the model repository folder does not exist."
            if not repository.exists()
            else "this is a file, not a model repository folder.",
            _EXPORT,
        )
        return None
    try:
        folders = [p for p in sorted(repository.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    except OSError as exc:
        findings.add(
            UNLISTABLE,
            "error",
            repository,
            "repository",
            f"the folder cannot be listed ({first_line(exc)}); Triton could not read it either.",
            _READABLE,
        )
        return None
    for folder in folders:
        if not (folder / CONFIG).exists():
            findings.add(
                NO_CONFIG,
                "error",
                folder / CONFIG,
                "config.pbtxt",
                "this model folder has no config.pbtxt; the pytorch backend cannot auto-complete configs.",
                "re-export the model (`invoke export`), or write a full config.pbtxt with inputs, outputs and max_batch_size.",
            )
    if not folders:
        findings.add(
            EMPTY, "error", repository, "repository", "the model repository holds no models.", _EXPORT
        )
    return folders


def model_files(model: ModelDir, config: ModelConfig, findings: Findings) -> list[Path]:
    """The model file of every version the policy loads, each checked to exist; [] after an error that ends it."""
    try:
        counted = model.version_folders()
        ignored = sorted(
            p.name for p in model.root.iterdir() if p.is_dir() and zero_padded(p.name) and p.name.isdecimal()
        )
    except OSError as exc:
        findings.add(
            UNLISTABLE,
            "error",
            model.root,
            "version folder",
            f"the model folder cannot be listed ({first_line(exc)}); Triton finds no version to load.",
            _READABLE,
        )
        return []
    for name in ignored:
        findings.add(
            LEADING_ZERO,
            "warning",
            model.root / name,
            "version folder",
            f"Triton skips version folders whose name starts with 0 ({name!r}), so it never loads this one.",
            f"name it {str(int(name))!r}.",
        )
    filename = default_model_file(config)
    if not counted:
        findings.add(
            NO_VERSION,
            "error",
            model.root,
            "version folder",
            "no numeric version folder (e.g. 1/) inside the model folder; Triton finds no version to load.",
            f"put the model file at {model.root / '1' / filename} (re-export with `invoke export`).",
        )
        return []
    beyond = [name for name, number in counted.items() if not -(2**63) <= number < 2**63]
    for name in beyond:
        findings.add(
            BEYOND_INT64,
            "error",
            model.root / name,
            "version folder",
            "the number in this folder's name is more than a 64-bit integer holds; std::stoll throws "
            "std::out_of_range, which Triton's version scan does not catch, and server 2.51.0 aborts (SIGABRT) "
            "while it reads the model folder, taking every other model down with it.",
            "rename or remove the folder (versions are small numbers: 1/, 2/, ...).",
        )
    if beyond:
        return []
    loaded = _loaded(model, config, sorted(set(counted.values())), findings)
    files = []
    for version in loaded:
        # Triton reads version v from <model>/<v>/, whatever name it counted v from; its JoinPath appends even
        # an absolute file name to that folder, so the file is always inside it.
        model_file = model.root / str(version) / filename.lstrip("/")
        if model_file.is_file():
            files.append(model_file)
            continue
        named = [n for n, v in counted.items() if v == version and n != str(version)]
        counted_from = (
            f" (Triton counts folder {named[0]!r} as version {version}, then reads {version}/)"
            if named
            else ""
        )
        findings.add(
            NO_MODEL_FILE,
            "error",
            model_file,
            "model file",
            f"version {version} has no {filename}{counted_from}; the pytorch backend fails with "
            f"`unable to find '{model_file}' for model instance`.",
            f"name the version folder {str(version)!r} and put {filename} in it (re-export with `invoke export`), "
            "or remove the folder."
            if named
            else "re-export the model, or remove the empty version folder.",
        )
    return files


def _loaded(model: ModelDir, config: ModelConfig, numbers: list[int], findings: Findings) -> list[int]:
    """The versions the policy loads, lowest first; [] (and an error) when it loads none."""
    existing = ", ".join(map(str, numbers))
    policy, loaded = versions_to_load(config, numbers)
    missing = [v for v in config.version_policy.specific.versions if v not in numbers]
    if missing and loaded:
        findings.add(
            POLICY_MISSING,
            "warning",
            model.config,
            "version_policy",
            f"version_policy asks for version(s) {', '.join(map(str, missing))}, which the model folder does not "
            f"have; Triton loads {', '.join(map(str, sorted(loaded)))} and logs an error for the rest "
            "(`the version directory is not present`).",
            f"list only versions that exist ({existing}).",
        )
    elif missing:
        findings.add(
            POLICY_MISSING,
            "error",
            model.config,
            "version_policy",
            f"version_policy asks for version(s) {', '.join(map(str, missing))}, but the model folder has only "
            f"{existing}; Triton loads no version and the model never becomes ready.",
            f"list versions that exist ({existing}), or remove the version_policy block.",
        )
        return []
    if not loaded:
        findings.add(
            POLICY_NONE,
            "error",
            model.config,
            "version_policy",
            f"{policy} selects no version of {existing}; Triton refuses the model "
            "(`at least one version must be available under the version policy`).",
            "ask for at least one version (latest { num_versions: 1 }), or remove the version_policy block.",
        )
    return sorted(loaded)
