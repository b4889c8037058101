"""Stage "shards": a deterministic split of a repository's models over N runners.

    --shard K/N                 this runner's part: the K-th of N disjoint subsets that cover every model
    --shard-costs SUMMARY.json  a previous summary.json's seconds per model balance the split (longest
                                first, onto the least loaded); without them a sha256 of the name decides

:func:`split` and :func:`select` make the parts; :func:`universe` takes a sharded export's whole list
(``.tritonpt-split.json``), so that the matrix splits the same list on every runner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tritonpt.errors import HINT, ShardError

STAGES = ("export_s", "load_s", "matrix_s")
"""The per-model seconds summary.json records under ``costs``, and what the split balances."""


@dataclass(frozen=True, kw_only=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str, *, option: str = "--shard") -> Shard:
        """``"2/4"``: the second of four. A clear ``ShardError`` for anything else."""
        head, sep, tail = text.partition("/")
        try:
            index, count = int(head), int(tail)
        except ValueError:
            index = count = 0
        if not sep or count < 1 or not 1 <= index <= count:
            msg = (
                f"Cannot use {option} {text!r}: expected K/N with 1 <= K <= N, e.g. {option} 1/2 for the first of "
                f"two shards.\n{HINT} run each of the N shards with the same N and its own K."
            )
            raise ShardError(msg)
        return cls(index=index, count=count)

    def describe(self) -> str:
        return f"shard {self.index}/{self.count}"

    @property
    def slug(self) -> str:
        return f"shard-{self.index}-of-{self.count}"


@dataclass(frozen=True, kw_only=True)
class Costs:
    """Measured seconds per model, from a previous summary.json."""

    seconds: Mapping[str, float] = field(default_factory=dict)
    source: str = ""  # the file they came from, "" for none
    digest: str = ""  # of what was used, so that shards can tell they split alike

    @classmethod
    def none(cls) -> Costs:
        return cls()

    @classmethod
    def read(cls, path: Path) -> Costs:
        """The per-model cost (the sum of :data:`STAGES`) in a summary.json; ``ShardError`` naming the file."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            costs = data.get("costs", {})
            seconds = {
                str(name): float(sum(float(row.get(stage, 0.0)) for stage in STAGES))
                for name, row in costs.items()
            }
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            msg = (
                f"Cannot read the shard costs in {path}: {exc}.\n{HINT} give --shard-costs the summary.json of a "
                "previous run (reports/summary.json, or the one merge-reports wrote), or leave it out to split by a "
                "hash of the names."
            )
            raise ShardError(msg) from exc
        text = json.dumps(sorted(seconds.items()))
        return cls(seconds=seconds, source=str(path), digest=hashlib.sha256(text.encode()).hexdigest()[:12])


def given(shard: str, costs: str) -> tuple[Shard | None, Costs | None]:
    """``--shard K/N`` and ``--shard-costs FILE`` as values (None, None without a shard); ``ShardError`` for costs
    without a shard, which would balance nothing."""
    if not shard:
        if costs:
            msg = "--shard-costs balances shards; give --shard K/N with it."
            raise ShardError(msg)
        return None, None
    return Shard.parse(shard), Costs.read(Path(costs)) if costs else None


def _hash(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def split(names: Iterable[str], count: int, costs: Costs | None = None) -> list[list[str]]:
    """``count`` disjoint lists that together hold every name, each sorted.

    Models with a measured cost go longest first to the least loaded shard (ties: the lower index); the rest by
    a stable hash of their name. The same names and costs give the same split on every machine.
    """
    chosen = sorted(set(names))
    measured = dict(costs.seconds) if costs else {}
    loads = [0.0] * count
    shards: list[list[str]] = [[] for _ in range(count)]
    timed = sorted((n for n in chosen if n in measured), key=lambda n: (-measured[n], n))
    for name in timed:
        lightest = min(range(count), key=lambda i: (loads[i], i))
        shards[lightest].append(name)
        loads[lightest] += measured[name]
    for name in chosen:
        if name not in measured:
            shards[_hash(name) % count].append(name)
    return [sorted(s) for s in shards]


def select(names: Sequence[str], shard: Shard | None, costs: Costs | None = None) -> list[str]:
    """The names ``shard`` runs (all of them without a shard), in their given order."""
    if shard is None:
        return list(names)
    mine = set(split(names, shard.count, costs)[shard.index - 1])
    return [n for n in names if n in mine]


def universe(repository: Path, present: Sequence[str]) -> list[str]:
    """What a shard of this repository splits: the list a sharded export recorded, else the models it holds."""
    from tritonpt.repository import read_split  # noqa: PLC0415 - protobuf loads only when a split is read

    recorded = read_split(repository)
    if recorded is None:
        return list(present)
    return sorted(set(recorded.models) | set(present))


def mine(
    repository: Path, present: Sequence[str], shard: Shard, costs: Costs | None
) -> tuple[list[str], int]:
    """This shard's models of the repository and the size of the split; ``ShardError`` when the repository lacks
    one of them (it was exported for another shard or split)."""
    every = universe(repository, present)
    chosen = select(every, shard, costs)
    missing = sorted(set(chosen) - set(present))
    if missing:
        msg = (
            f"Cannot run {shard.describe()} of {repository}: it lacks {', '.join(missing)}, which this shard runs.\n"
            f"{HINT} export with the same --shard and --shard-costs as the matrix (`nox -s integration -- --shard "
            f"{shard.index}/{shard.count}` does both)."
        )
        raise ShardError(msg)
    return chosen, len(every)
