"""What each reliability part holds, as dataclasses, and a part file read against its contract.

    read_part(path) -> dict     the part as JSON, once every field its contract names is there with its type
    CONTRACTS                   part name -> its dataclass (the fields beyond ``part`` and ``tracebacks``)

A ``float`` field takes any JSON number; an ``int`` or ``float`` field never takes true/false. A field typed
``dict[str, Any]`` is an object whose contents the part keeps to itself. Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PartError(ValueError):
    """A part file that does not hold what its contract says."""


@dataclass(frozen=True)
class Leftovers:
    """What a fault left behind, by kind (tests/faults counts them)."""

    processes: int
    containers: int
    temp_dirs: int
    staging_dirs: int
    partial_files: int
    partial_cache: int
    loaded_models: int


@dataclass(frozen=True)
class Fault:
    fault: str
    stage: str
    exit_s: float
    exit: str
    leftovers: Leftovers
    ran: bool
    passed: bool


@dataclass(frozen=True)
class Faults:
    faults: list[Fault]
    collected: int
    pytest_exit: int


@dataclass(frozen=True)
class SoakCounts:
    sent: int
    request_success: int
    inference_count: int
    expected_inference_count: int


@dataclass(frozen=True)
class Soak:
    requests_sent: int
    failures: int
    mismatches: int
    counts: dict[str, SoakCounts]
    rss_start_mb: float
    rss_end_mb: float
    rss_bound_mb: float
    smoke: bool


@dataclass(frozen=True)
class FuzzCases:
    config_text: int
    reference_files: int
    layouts: int


@dataclass(frozen=True)
class Fuzz:
    cases: FuzzCases
    crashes: int


@dataclass(frozen=True)
class ContractCase:
    case: str
    exit: int
    one_paragraph: bool
    repository_unchanged: bool


@dataclass(frozen=True)
class ExportContract:
    cases: list[ContractCase]


@dataclass(frozen=True)
class BadRequest:
    case: str
    protocol: str
    status: str
    live_after: bool
    parity_after: bool


@dataclass(frozen=True)
class BadRequests:
    cases: list[BadRequest]


@dataclass(frozen=True)
class LockdownCheck:
    check: str
    passed: bool


@dataclass(frozen=True)
class Lockdown:
    checks: list[LockdownCheck]


@dataclass(frozen=True)
class QaTest:
    test: str
    suite: str
    checks: int
    checks_passed: int
    status: str
    seconds: float


@dataclass(frozen=True)
class TritonQa:
    tests: list[QaTest]
    controls: list[dict[str, Any]]


@dataclass(frozen=True)
class MatrixRun:
    reports: str
    first: str
    crash: str
    reproduction: str
    kept: str
    rerun: str


@dataclass(frozen=True)
class MatrixRuns:
    runs: list[MatrixRun]


@dataclass(frozen=True)
class Part:
    """What every part holds."""

    part: str
    tracebacks: int


CONTRACTS: dict[str, type] = {
    "faults": Faults,
    "soak": Soak,
    "fuzz": Fuzz,
    "export-contract": ExportContract,
    "bad-requests": BadRequests,
    "lockdown": Lockdown,
    "triton-qa": TritonQa,
    "matrix-runs": MatrixRuns,
}
"""The parts the report knows, in the order it shows them."""
LEFTOVER_KINDS = tuple(field.name for field in dataclasses.fields(Leftovers))

NAMES: dict[object, str] = {
    int: "an integer",
    float: "an integer or a number",
    str: "a string",
    bool: "true/false",
    list: "a list",
}


def _name(kind: object) -> str:
    origin: object = typing.get_origin(kind) or kind
    return NAMES.get(origin, "an object")


def _fits(value: object, kind: object) -> bool:
    origin = typing.get_origin(kind) or kind
    if origin in (int, float) and isinstance(value, bool):
        return False  # JSON true is not a count
    if origin is float:
        return isinstance(value, int | float)
    if dataclasses.is_dataclass(origin) or origin is dict:
        return isinstance(value, dict)
    return isinstance(value, typing.cast("type", origin))


def conform(where: str, data: dict[str, Any], contract: type, *, top: bool = True) -> None:
    """``data`` against ``contract``'s fields, into its lists' rows and its objects; ``PartError`` names the first
    field that is missing or of another type, as ``where: 'field' is ..., expected ...``. ``top``: ``where`` is the
    file (its fields read ``file: field``), not a field inside it (``file: rows[0].field``)."""
    for key, kind in typing.get_type_hints(contract).items():
        if key not in data:
            msg = f"{where} has no {key!r} field (expected {_name(kind)})"
            raise PartError(msg)
        value = data[key]
        if not _fits(value, kind):
            msg = f"{where}: {key!r} is {json.dumps(value)[:60]}, expected {_name(kind)}"
            raise PartError(msg)
        _inside(f"{where}: {key}" if top else f"{where}.{key}", value, kind)


def _inside(where: str, value: object, kind: object) -> None:
    """The rows of a list, the values of an object and the fields of a nested dataclass."""
    origin, arguments = typing.get_origin(kind), typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        conform(where, typing.cast("dict[str, Any]", value), typing.cast("type", kind), top=False)
    elif origin is list:
        for index, row in enumerate(typing.cast("list[object]", value)):
            _element(f"{where}[{index}]", row, arguments[0])
    elif origin is dict and arguments[1] is not Any:
        for name, entry in typing.cast("dict[str, object]", value).items():
            _element(f"{where}[{name!r}]", entry, arguments[1])


def _element(where: str, value: object, kind: object) -> None:
    if not _fits(value, kind):
        shown = "object" if isinstance(value, dict) else type(value).__name__
        msg = f"{where} is {shown}, expected {_name(kind)}"
        raise PartError(msg)
    _inside(where, value, kind)


def read_part(path: Path) -> dict[str, Any]:
    """One part, checked against its contract; ``PartError`` says which field of which file is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read {path}: {exc}"
        raise PartError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        raise PartError(msg) from exc
    if not isinstance(data, dict):
        msg = f"{path} holds {type(data).__name__}, expected a JSON object"
        raise PartError(msg)
    conform(str(path), data, Part)
    if data["part"] != path.stem:
        msg = (
            f"{path} says it is part {data['part']!r}; a part's file is named after it ({data['part']}.json)"
        )
        raise PartError(msg)
    contract = CONTRACTS.get(data["part"])
    if contract is not None:
        conform(str(path), data, contract)
    return data
