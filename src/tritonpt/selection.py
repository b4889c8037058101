"""Which models a run serves: a shard's part of the repository (every model without a shard), validated.

`tritonpt serve` and the matrix both start a server on this; each decides what an empty shard or a validation
error means for it (serve refuses both; the matrix reports an empty shard as passed, and starts anyway under
--skip-validation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonpt import repository, shards
from tritonpt.errors import Problem, ValidationError
from tritonpt.options import Pt2Build
from tritonpt.validate import validate_repository


@dataclass(frozen=True, kw_only=True)
class Selection:
    repository: Path
    names: tuple[str, ...]  # the models this run serves, in the repository's order
    total: int  # how many the split (or the repository) holds
    shard: shards.Shard | None
    costs: shards.Costs | None
    problems: tuple[Problem, ...]  # the validator's, on these models (the rules across models see them all)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def require_valid(self) -> None:
        """``ValidationError`` with every problem where the validator found an error."""
        if self.errors:
            raise ValidationError(self.problems)


def select(
    folder: Path, *, shard: shards.Shard | None, costs: shards.Costs | None, pt2_build: Pt2Build
) -> Selection:
    """The models of ``folder`` that ``shard`` serves and what the validator says of them (nothing, where the shard
    has none); ``ShardError`` where the repository lacks one of the shard's models."""
    names = [m.name for m in repository.models(folder)]
    total = len(names)
    if shard is not None:
        names, total = shards.mine(folder, names, shard, costs)
    # a shard with no model has nothing to validate; an empty repository without a shard has its say (D001)
    problems = (
        validate_repository(folder, only=names if shard is not None else None, pt2_build=pt2_build)
        if names or shard is None
        else []
    )
    return Selection(
        repository=folder,
        names=tuple(names),
        total=total,
        shard=shard,
        costs=costs,
        problems=tuple(problems),
    )
