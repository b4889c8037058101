"""Family T: config.pbtxt as Triton's parser reads it, then Triton's own schema (``model_config.proto``)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt.errors import first_line
from tritonpt.repository import config_text, parse_config
from tritonpt.validate.rules import Findings, rule

NOT_A_FILE = rule(
    "T001",
    "config.pbtxt is not a regular file",
    why="Error: Triton cannot read it.",
    example="model_repository/classifier/config.pbtxt/ is a folder",
)
BYTE_ORDER_MARK = rule(
    "T002",
    "config.pbtxt starts with a UTF-8 byte-order mark",
    why="Error: Triton refuses the model (its text parser does not skip the mark).",
    example='config.pbtxt saved with a UTF-8 byte-order mark (EF BB BF) before `name: "classifier"`',
)
WIDE_ENCODING = rule(
    "T003",
    "config.pbtxt saved as UTF-16 or UTF-32",
    why="Error: Triton refuses the model.",
    example="config.pbtxt saved as UTF-16 or UTF-32 (a byte-order mark or NUL bytes)",
)
NOT_UTF8 = rule(
    "T004",
    "config.pbtxt holds bytes that are not UTF-8",
    why=(
        "Warning: Triton serves it (its parser takes the bytes as they are); the checks read "
        "each bad sequence as U+FFFD."
    ),
    example="config.pbtxt with a Latin-1 é (the single byte E9) in a comment or a string value",
)
UNREADABLE = rule(
    "T005",
    "config.pbtxt cannot be read",
    why="Error: Triton cannot read it either.",
    example="model_repository/classifier/config.pbtxt without read permission (chmod 000)",
)
SCHEMA = rule(
    "T006",
    "config.pbtxt breaks model_config.proto (a field Triton does not know, bad syntax)",
    why="Error: Triton refuses the model; the fix names the closest field.",
    example="max_batch_sise: 8",
)

_FIELD = re.compile(r'has no field named "([^"]+)"')
_RANGE = re.compile(r"'(\w+): [^']*': Value out of range")


def read(path: Path, findings: Findings) -> ModelConfig | None:
    """The config as Triton reads it; None (and an error) when it cannot be read or does not parse."""
    text = _text(path, findings)
    if text is None:
        return None
    try:
        return parse_config(text)
    except text_format.ParseError as exc:
        findings.add(
            SCHEMA,
            "error",
            path,
            _field_of(exc),
            f"Triton's model_config.proto rejects it: {exc}.",
            _parse_fix(exc),
        )
        return None


def _text(path: Path, findings: Findings) -> str | None:
    """config.pbtxt's text; None (and an error) when it is not a readable UTF-8 file."""
    if not path.is_file():
        findings.add(
            NOT_A_FILE,
            "error",
            path,
            "config.pbtxt",
            "this is not a regular file (a folder, a device or a dangling link); Triton cannot read it.",
            "replace it with the config.pbtxt text file (re-export with `invoke export`).",
        )
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        findings.add(
            UNREADABLE,
            "error",
            path,
            "config.pbtxt",
            f"it cannot be read ({first_line(exc)}); Triton could not read it either.",
            "make it readable by the user that runs validate and Triton.",
        )
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        findings.add(
            BYTE_ORDER_MARK,
            "error",
            path,
            "config.pbtxt",
            "it starts with a UTF-8 byte-order mark, which Triton's text parser does not skip: server 2.51.0 "
            "refuses the model.",
            "save it as UTF-8 without a BOM (most editors call that plain UTF-8), or re-export with `invoke export`.",
        )
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data:
            findings.add(
                WIDE_ENCODING,
                "error",
                path,
                "config.pbtxt",
                "it looks saved as UTF-16 or UTF-32 (a byte-order mark or NUL bytes); Triton's text parser cannot "
                "read it and refuses the model.",
                'save it as UTF-8 (an editor\'s "Unicode" is often UTF-16), or re-export with `invoke export`.',
            )
            return None
        findings.add(
            NOT_UTF8,
            "warning",
            path,
            "config.pbtxt",
            f"not UTF-8 text ({exc.reason} at byte {exc.start}); Triton's parser takes such bytes as they are "
            "(server 2.51.0 serves a config with a Latin-1 byte in a comment or a string value), and the checks "
            "here read each such sequence as U+FFFD.",
            "save it as UTF-8 (an editor may have changed its encoding), or re-export with `invoke export`.",
        )
        return config_text(data)


def _field_of(exc: text_format.ParseError) -> str:
    match = _FIELD.search(str(exc)) or _RANGE.search(str(exc))
    return match.group(1) if match else "syntax"


def _parse_fix(exc: text_format.ParseError) -> str:
    if _RANGE.search(str(exc)):
        return "write a value its field's type holds: an enum by its name (`data_type: TYPE_FP32`), an integer within its field's range."
    match = _FIELD.search(str(exc))
    if not match:
        return "fix the text-format syntax at the line and column given (text format is `field: value`, blocks in `{}` or `[]`)."
    known = [f.name for f in ModelConfig.DESCRIPTOR.fields]
    close = difflib.get_close_matches(match.group(1), known, n=1)
    if close:
        return f"did you mean `{close[0]}`? Field names are those of model_config.proto's ModelConfig."
    return f"remove it; ModelConfig's fields are: {', '.join(sorted(known))}."
