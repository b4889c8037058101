"""Exceptions, one root per area of the pipeline.

``TritonPtError`` is the root; under it ``SpecError``, ``ExportError``, ``ReferenceDataError``,
``InProcessError``, ``ValidationError`` (carries :class:`Problem` findings), ``BackendError`` (``BuildError``),
``MigrateError`` (``RefusedError``), ``ServerError`` (``ServerStartError``, ``ModelLoadError``), ``ImageError``,
``ShardError``, ``QaError`` and ``DockerUnavailable``. Messages are full sentences that say what happened and what to do. This module is the
bottom of the package: it imports nothing of tritonpt, so every stage can raise these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning"]

HINT = "Hint:"
"""How a message introduces the sentence that says what to do (testcontainers' wording)."""
FIX = "fix:"
"""How a validation problem introduces its fix."""


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One broken rule of a model repository, in words a user can act on."""

    severity: Severity
    path: Path
    field: str
    message: str
    fix: str
    rule: str = ""  # the validator's rule code, e.g. "C005" (docs/reference/validator.md explains each)

    def render(self) -> str:
        code = f" [{self.rule}]" if self.rule else ""
        return f"{self.severity}: {self.path}: {self.field}: {self.message}{code}\n  {FIX} {self.fix}"

    def moved(self, old: Path, new: Path) -> Problem:
        """The same problem with paths inside ``old`` named inside ``new`` (a staged folder's destination), in
        its path, message and fix."""
        path = new / self.path.relative_to(old) if self.path.is_relative_to(old) else self.path
        message, fix = (text.replace(str(old), str(new)) for text in (self.message, self.fix))
        return replace(self, path=path, message=message, fix=fix)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (torch's are often pages long), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class TritonPtError(Exception):
    """Root of every error this package raises on purpose."""


class SpecError(TritonPtError):
    """A model definition cannot be exported as given."""


class ExportError(TritonPtError):
    """Tracing, scripting or the reload check of a model failed."""


class _FileFieldError(TritonPtError):
    """An error about one field of one file: ``path`` is the file, ``field`` what in it is wrong, ``detail`` what
    was found (and expected), ``fix`` what to do; its message says all four in that order."""

    def __init__(self, *, path: Path, field: str, detail: str, fix: str) -> None:
        self.path = path
        self.field = field
        self.detail = detail
        self.fix = fix
        super().__init__(f"{path}: {field}: {detail} {HINT} {fix}")


class ReferenceDataError(_FileFieldError, ValueError):
    """A model's reference.json or reference.npz cannot be read as export writes them; a ValueError too, for
    callers that catch what reading a file can raise."""


class InProcessError(_FileFieldError):
    """A model's own file cannot be run in-process for the reference it is held to: it does not load, fails on its
    samples, or mixes the rows of a batch; or a samples.npz does not fit its config (``detail``: the model's own
    words)."""


class ValidationError(TritonPtError):
    """The model repository breaks one or more rules."""

    def __init__(self, problems: Sequence[Problem], *, outcome: str = "") -> None:
        self.problems = list(problems)
        self.outcome = outcome  # what became of the repository, e.g. "nothing was written"
        super().__init__("\n\n".join([*(p.render() for p in problems), *([outcome] if outcome else [])]))


class BackendError(TritonPtError):
    """The official pytorch backend could not be built, or no build of it fits this environment."""


class BuildError(BackendError):
    """A step of the backend's build (CMake, the compiler) exited non-zero: ``first_error`` is the first line of
    its output that says error, ``log`` the build's whole output."""

    def __init__(self, message: str, *, first_error: str, log: Path) -> None:
        self.first_error = first_error
        self.log = log
        super().__init__(message)


class MigrateError(TritonPtError):
    """A migration cannot start as asked (its folders, its options); nothing was written."""


class RefusedError(MigrateError):
    """One model that cannot move to torch_aoti: ``reason`` says why, ``fix`` what to do; it gets no folder."""

    def __init__(self, reason: str, fix: str) -> None:
        self.reason = reason
        self.fix = fix
        super().__init__(f"{reason} {HINT} {fix}")


class ServerError(TritonPtError):
    """A Triton server could not be started, reached or stopped."""


class ServerStartError(ServerError):
    """The server exited or did not become ready in time."""


class ModelLoadError(ServerError):
    """Models did not become ready; ``reasons`` maps each one to Triton's own words."""

    def __init__(self, message: str, reasons: Mapping[str, str]) -> None:
        self.reasons = dict(reasons)
        super().__init__(message)


class ImageError(TritonPtError):
    """An image could not be built or inspected."""


class ShardError(TritonPtError):
    """A shard could not be chosen, or shards' reports could not be merged into one."""


class QaError(TritonPtError):
    """Triton's own QA tests could not be prepared (their pinned files, a substitution, a model generator)."""


class DockerUnavailable(TritonPtError):  # noqa: N818 - reads as a state, like httpx.ConnectError
    """No Docker engine answers."""
