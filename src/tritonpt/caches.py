"""The caches a run draws on, and a ledger of what it found there.

    root()                        $TRITONPT_CACHE, else $XDG_CACHE_HOME/tritonpt (~/.cache/tritonpt)
    note(kind, what, hit=...)     one lookup: printed as ``cache: export resnet18_pt2 hit``, and appended to
                                  the ledger, the file $TRITONPT_CACHE_LEDGER names, where it is set
    read(ledger) -> [Lookup]      a run's lookups, for its summary (hits and misses per kind)

Standard library only: the backend build in docker/pytorch.Dockerfile imports it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, get_args

CACHE_ENV = "TRITONPT_CACHE"
LEDGER_ENV = "TRITONPT_CACHE_LEDGER"

Kind = Literal["export", "backend", "venv", "image", "qa-models", "package", "registry"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Say = Callable[[str], None]


def root() -> Path:
    """``$TRITONPT_CACHE``, else ``$XDG_CACHE_HOME/tritonpt`` (``~/.cache/tritonpt``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonpt"


@dataclass(frozen=True, kw_only=True)
class Lookup:
    """One lookup in a cache: what was looked for, whether it was there, and what a miss cost."""

    kind: Kind
    what: str  # "resnet18_pt2", "r25.10 cpu", ...
    hit: bool
    seconds: float = 0.0  # a miss: how long making it took (0 where unknown)
    at: float = 0.0  # time.time() of the note
    cache: str = ""  # the cache's root: the machine's, or a test's private one

    def line(self) -> str:
        cost = f" ({self.seconds:.0f} s to make)" if not self.hit and self.seconds else ""
        return f"cache: {self.kind} {self.what} {'hit' if self.hit else 'miss'}{cost}"


def note(kind: Kind, what: str, *, hit: bool, seconds: float = 0.0, say: Say | None = None) -> Lookup:
    """Say one lookup in one line (with ``say``, the caller's progress printer; else on stderr), and append it to
    the run's ledger where one is set."""
    lookup = Lookup(
        kind=kind,
        what=what,
        hit=hit,
        seconds=round(seconds, 1),
        at=round(time.time(), 3),
        cache=str(root().resolve()),  # an act job's cache is a link to the machine's
    )
    if say is None:
        print(lookup.line(), file=sys.stderr, flush=True)
    else:
        say(lookup.line())
    ledger = os.environ.get(LEDGER_ENV)
    if ledger:
        path = Path(ledger)
        path.parent.mkdir(parents=True, exist_ok=True)
        # One write of one short line in append mode: processes that share the ledger never interleave lines.
        with path.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(asdict(lookup), sort_keys=True) + "\n")
    return lookup


def read(ledger: Path) -> list[Lookup]:
    """The lookups a ledger holds (a line that does not parse, from a process killed while writing, is left out)."""
    try:
        lines = ledger.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            data = json.loads(line)
            fields = {k: data[k] for k in ("kind", "what", "hit", "seconds", "at")}
            found.append(Lookup(**fields, cache=str(data.get("cache", ""))))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def summary(
    lookups: Iterable[Lookup], kinds: Sequence[Kind] = KINDS, *, shared: Path | None = None
) -> list[str]:
    """One line per kind of cache: hits, misses, and what the misses cost. With ``shared`` (the run's cache), the
    lookups in other caches (the private ones tests make, to export or build for real) are counted apart."""
    every = list(lookups)
    lines = []
    for kind in kinds:
        of_kind = [lookup for lookup in every if lookup.kind == kind]
        private = [
            lookup
            for lookup in of_kind
            if shared is not None and lookup.cache not in ("", str(shared.resolve()))
        ]
        ours = [lookup for lookup in of_kind if lookup not in private]
        hits = sum(lookup.hit for lookup in ours)
        misses = [lookup for lookup in ours if not lookup.hit]
        cost = sum(lookup.seconds for lookup in misses)
        missed = f": {', '.join(sorted({m.what for m in misses}))}" if misses else ""
        paid = f", {cost:.0f} s making them" if cost else ""
        apart = f" (and {len(private)} in tests' private caches)" if private else ""
        lines.append(f"cache {kind:<9} {hits:>3} hit(s), {len(misses):>3} miss(es){paid}{missed}{apart}")
    return lines
