"""Property-based tests (hypothesis): `invoke validate` on mutated config.pbtxt text, reference files and
repository layouts never crashes, and every problem it reports names a file of the model that was broken.

Each example copies soundly exported small models (conftest's ``exported_small``), breaks them in one to
three ways, and runs the validator the front door runs. The properties:

- it returns problems and raises nothing (a crash is any exception: the front door would print a traceback);
- every problem names a path inside what was broken (the mutated model's folder, the reference files, the
  extra folder), renders as one paragraph with that path in it, and says what to do;
- broken reference files are warnings only: Triton never reads them, so the model still serves.

The number of examples per category is ``TRITONPT_FUZZ_EXAMPLES`` (default 150; set it higher for a deeper
run). The examples tried, the distinct crashes and the tracebacks seen in the front door's output go to the
reliability report's ``fuzz`` part when this module ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tritonclient.grpc.model_config_pb2 import DataType, ModelConfig

from tritonpt import spec
from tritonpt.errors import Problem
from tritonpt.reporting.reliability import count_tracebacks, write_part
from tritonpt.repository import parse_config
from tritonpt.validate import validate_repository

from ..helpers import SMALL_MODELS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("TRITONPT_FUZZ_EXAMPLES", "150"))
CATEGORIES = ("config_text", "reference_files", "layouts")

_tried: Counter[str] = Counter()
_crashes: set[str] = set()
_outputs: list[str] = []

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # one example loads and runs TorchScript: its time varies with the machine's load
    database=None,  # nothing written into the checkout (.hypothesis/)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module", autouse=True)
def _fuzz_part() -> Iterator[None]:
    """The reliability report's ``fuzz`` part: what this module tried, once it is done."""
    yield
    write_part(
        "fuzz",
        {
            "cases": {category: _tried[category] for category in CATEGORIES},
            "crashes": len(_crashes),
            "crash_signatures": sorted(_crashes),
            "front_door_runs": len(_outputs),
            "tracebacks": count_tracebacks(_outputs),
        },
        folder=ROOT / "reports" / "reliability" / "parts",
    )


# --- running the validator and checking the properties -------------------------------------------------


class Hang(Exception):  # noqa: N818 - names what happened, like the crash types it is listed with
    """validate took longer than :data:`HANG_S` on one small repository (e.g. blocked opening a FIFO)."""


HANG_S = 60


def _hang(signum: int, frame: object) -> None:
    msg = f"validate did not return within {HANG_S} s"
    raise Hang(msg)


def _validate(category: str, repository: Path) -> list[Problem]:
    """validate_repository as the front door calls it; any exception is a crash, recorded and re-raised, and so
    is a hang (an alarm interrupts even a blocking open of a FIFO)."""
    _tried[category] += 1
    previous = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(HANG_S)
    try:
        return validate_repository(repository, gpu_available=False)
    except BaseException as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tritonpt" in f.filename]
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        _crashes.add(f"{category}: {type(exc).__name__} at {where}")
        raise
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _check(problems: list[Problem], blame: set[Path], *, warnings_only: bool = False) -> None:
    """Every problem names a path at or under one of ``blame`` and reads as one paragraph with a fix."""
    for problem in problems:
        text = problem.render()
        assert any(problem.path == b or problem.path.is_relative_to(b) for b in blame), text
        assert str(problem.path) in text
        assert problem.field, text
        assert problem.message.strip(), text
        assert problem.fix.strip(), text
        assert "\n\n" not in text, text
        assert "Traceback" not in text, text
        if warnings_only:
            assert problem.severity == "warning", text


@contextlib.contextmanager
def _repository(exported: Path, *names: str) -> Iterator[Path]:
    """A fresh repository holding copies of the named exported models (hypothesis cannot use tmp_path)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        repository = Path(folder) / "repository"
        repository.mkdir()
        for name in names:
            shutil.copytree(exported / name, repository / name, symlinks=True)
        yield repository


# --- config.pbtxt ---------------------------------------------------------------------------------------

_HUGE = (2**31, 2**40, 2**63 - 1, -(2**63))
# Dims stay small (up to 4 axes of up to 16) or are absurd: small ones are run through the model, absurd
# ones must be refused before anything is allocated.
_DIMS = st.lists(st.one_of(st.integers(-3, 16), st.sampled_from(_HUGE)), max_size=4)
_DATA_TYPES = st.one_of(st.sampled_from(DataType.values()), st.integers(-3, 40))
_NAMES = st.one_of(
    st.sampled_from(
        ["INPUT__0", "INPUT__1", "INPUT__2", "OUTPUT__0", "OUTPUT__1", "OUTPUT__3", "features", "context", ""]
    ),
    st.text(max_size=12),
)
_TOKENS = st.sampled_from(
    [
        "{", "}", "[", "]", ":", ",", "<", ">", '"', "'", "#", "\n", "\\", "-", "-1", "0", "1e400", "inf", "nan",
        "0x10", "99999999999999999999", "TYPE_FP32", "TYPE_STRING", "TYPE_BF16", "input", "output", "dims",
        "name", "max_batch_size", "instance_group", "kind", "KIND_GPU", "parameters", "key", "value",
        "string_value", "version_policy", "model_warmup", "dynamic_batching", '"\\x00"', "\u00e9", "\U0001f600",
    ]
)  # fmt: skip


def _edit_tensor(draw: st.DrawFn, config: ModelConfig) -> None:
    tensors = draw(st.sampled_from([config.input, config.output]))
    operation = draw(st.sampled_from(["dims", "data_type", "name", "remove", "add", "reshape", "flags"]))
    if operation == "add" or not tensors:
        tensors.add(name=draw(_NAMES), data_type=draw(_DATA_TYPES), dims=draw(_DIMS))
        return
    index = draw(st.integers(0, len(tensors) - 1))
    tensor = tensors[index]
    if operation == "dims":
        tensor.ClearField("dims")
        tensor.dims.extend(draw(_DIMS))
    elif operation == "data_type":
        tensor.data_type = draw(_DATA_TYPES)
    elif operation == "name":
        tensor.name = draw(_NAMES)
    elif operation == "remove":
        del tensors[index]
    elif operation == "reshape":
        tensor.reshape.shape.extend(draw(_DIMS))
    else:
        tensor.is_shape_tensor = draw(st.booleans())
        if tensor.DESCRIPTOR.name == "ModelInput":
            tensor.optional = draw(st.booleans())
            tensor.allow_ragged_batch = draw(st.booleans())


def _edit_warmup(draw: st.DrawFn, config: ModelConfig) -> None:
    """A model_warmup sample: its inputs' names, dims, data types and data sources."""
    warmup = config.model_warmup[0] if config.model_warmup else config.model_warmup.add(name="fuzz")
    operation = draw(st.sampled_from(["batch_size", "count", "add-input", "edit-input", "drop-input"]))
    if operation == "batch_size":
        warmup.batch_size = draw(st.integers(0, 2**32 - 1))
    elif operation == "count":
        warmup.count = draw(st.integers(0, 2**32 - 1))
    elif operation == "drop-input" and warmup.inputs:
        del warmup.inputs[draw(st.sampled_from(sorted(warmup.inputs)))]
    else:
        names = sorted(warmup.inputs) if operation == "edit-input" and warmup.inputs else [draw(_NAMES)]
        entry = warmup.inputs[draw(st.sampled_from(names))]
        entry.data_type = draw(_DATA_TYPES)
        entry.ClearField("dims")
        entry.dims.extend(draw(_DIMS))
        source = draw(st.sampled_from(["zero_data", "random_data", "input_data_file"]))
        if source == "input_data_file":
            entry.input_data_file = draw(
                st.one_of(
                    st.sampled_from(["features", "INPUT__0", "../config.pbtxt", "/etc/hostname", ""]), _NAMES
                )
            )
        else:
            setattr(entry, source, draw(st.booleans()))


def _edit_config(draw: st.DrawFn, config: ModelConfig) -> None:
    """One field-level change through Triton's own schema."""
    field = draw(
        st.sampled_from(
            ["tensor", "max_batch_size", "instance_group", "parameters", "version_policy", "default_model_filename",
             "dynamic_batching", "platform", "name", "warmup", "clear"]
        )
    )  # fmt: skip
    if field == "tensor":
        _edit_tensor(draw, config)
    elif field == "max_batch_size":
        config.max_batch_size = draw(st.one_of(st.integers(-3, 40), st.sampled_from([2**31 - 1, -(2**31)])))
    elif field == "instance_group":
        group = config.instance_group[0] if config.instance_group else config.instance_group.add()
        group.kind = draw(st.integers(0, 5))
        group.count = draw(st.integers(-2, 4))
        group.gpus.extend(draw(st.lists(st.integers(-1, 3), max_size=2)))
    elif field == "parameters":
        key = draw(st.one_of(st.sampled_from(sorted(spec.KNOWN_PARAMETERS)), st.text(max_size=10)))
        value = draw(
            st.one_of(st.sampled_from(["true", "off", "maybe", "", "2", "-1", " 3x", "many"]), st.text())
        )
        config.parameters[key].string_value = value
    elif field == "version_policy":
        versions = st.lists(st.one_of(st.integers(-2, 5), st.sampled_from([2**40, -(2**63)])), max_size=3)
        choice = draw(st.sampled_from(["latest", "all", "specific"]))
        if choice == "latest":
            config.version_policy.latest.num_versions = draw(st.integers(0, 2**32 - 1))
        elif choice == "all":
            config.version_policy.all.SetInParent()
        else:
            config.version_policy.specific.versions.extend(draw(versions))
    elif field == "default_model_filename":
        config.default_model_filename = draw(
            st.one_of(
                st.sampled_from(
                    ["model.pt", "other.pt", "/abs/model.pt", "../reference.json", "1/model.pt", "."]
                ),
                st.text(max_size=12),
            )
        )
    elif field == "dynamic_batching":
        config.dynamic_batching.preferred_batch_size.extend(draw(st.lists(st.integers(-2, 40), max_size=3)))
        config.dynamic_batching.max_queue_delay_microseconds = draw(st.integers(0, 2**64 - 1))
    elif field == "platform":
        config.platform = draw(
            st.sampled_from(["", "pytorch", "pytorch_libtorch", "libtorch", "onnxruntime_onnx"])
        )
        config.backend = draw(st.sampled_from(["", "pytorch", "python", "x"]))
    elif field == "name":
        config.name = draw(_NAMES)
    elif field == "warmup":
        _edit_warmup(draw, config)
    else:
        config.ClearField(draw(st.sampled_from([f.name for f in ModelConfig.DESCRIPTOR.fields])))


def _edit_text(draw: st.DrawFn, text: str) -> str | bytes:
    """One change to the characters (or bytes) of the file."""
    operation = draw(
        st.sampled_from(["delete", "insert", "duplicate", "number", "truncate", "junk", "encoding"])
    )
    at = draw(st.integers(0, len(text)))
    if operation == "delete":
        return text[:at] + text[at + draw(st.integers(1, 40)) :]
    if operation == "insert":
        return text[:at] + draw(st.one_of(_TOKENS, st.text(max_size=8))) + text[at:]
    if operation == "duplicate":
        return text[:at] + text[at : at + draw(st.integers(1, 80))] + text[at:]
    if operation == "number":
        numbers = list(re.finditer(r"-?\d+", text))
        if not numbers:
            return text
        match = draw(st.sampled_from(numbers))
        number = draw(
            st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(["1.5", "1e9", "-0", "0x7f"]))
        )
        return text[: match.start()] + number + text[match.end() :]
    if operation == "truncate":
        return text[:at]
    encoded = text.encode("utf-8")
    if operation == "junk":
        return encoded[:at] + draw(st.binary(min_size=1, max_size=16)) + encoded[at:]
    return text.encode(draw(st.sampled_from(["utf-16", "utf-32", "cp1252"])), errors="replace")


@st.composite
def _config_file(draw: st.DrawFn, original: str) -> bytes:
    config = parse_config(original)
    for _ in range(draw(st.integers(0, 3))):
        _edit_config(draw, config)
    content: str | bytes = text_format.MessageToString(config)
    for _ in range(draw(st.integers(0 if config != parse_config(original) else 1, 2))):
        content = _edit_text(draw, content) if isinstance(content, str) else content
    return content if isinstance(content, bytes) else content.encode("utf-8")


@FUZZ
@given(data=st.data())
@pytest.mark.timeout(600)
def test_mutated_config_text_never_crashes_and_names_the_model(
    exported_small: Path, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(SMALL_MODELS), label="model")
    original = (exported_small / name / "config.pbtxt").read_text(encoding="utf-8")
    content = data.draw(_config_file(original), label="config.pbtxt")
    with _repository(exported_small, name) as repository:
        (repository / name / "config.pbtxt").write_bytes(content)
        problems = _validate("config_text", repository)
        _check(problems, {repository / name})


# --- reference.json and reference.npz -------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_ARRAY_DTYPES = [
    "<f4",
    ">f4",
    "<f8",
    "<f2",
    "<i8",
    ">i8",
    "<i4",
    "<i2",
    "|i1",
    "|u1",
    "<u2",
    "<u4",
    "|b1",
    "<c8",
    "<U3",
    "|S3",
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location in a JSON document, the document itself first."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, (*prefix, key))


def _edit_json(draw: st.DrawFn, document: Any) -> Any:
    path = draw(st.sampled_from(list(_paths(document))))
    replacement = draw(_JSON)
    if not path:
        return replacement
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()):
        parent[path[-1]] = replacement
    else:
        del parent[path[-1]]
    return document


def _arrays(path: Path) -> dict[str, Any] | None:
    """The archive's arrays; None once an earlier change left no readable archive of arrays."""
    try:
        with path.open("rb") as stream:
            archive = np.load(stream)
            if not isinstance(archive, np.lib.npyio.NpzFile):
                return None
            with archive:
                return {key: archive[key] for key in archive.files} or None
    except Exception:  # the test's own setup: whatever an earlier change broke, edit bytes instead
        return None


def _rewrite_npz(draw: st.DrawFn, path: Path) -> None:
    """Replace, drop or add an array; or store one array where the archive was."""
    arrays = _arrays(path)
    if arrays is None:
        _edit_bytes(draw, path)
        return
    key = draw(st.sampled_from(sorted(arrays)))
    operation = draw(st.sampled_from(["values", "array", "drop", "add", "single"]))
    if operation == "values":  # the same dtype and shape, other values: the model runs on them
        arrays[key] = draw(hnp.arrays(arrays[key].dtype, arrays[key].shape))
    elif operation == "array":
        dtype = draw(st.sampled_from(_ARRAY_DTYPES))
        shape = draw(
            st.one_of(st.just(arrays[key].shape), hnp.array_shapes(min_dims=0, max_dims=3, max_side=20))
        )
        arrays[key] = draw(hnp.arrays(np.dtype(dtype), shape))
    elif operation == "drop":
        del arrays[key]
    elif operation == "add":
        arrays[draw(st.text(min_size=1, max_size=10))] = np.zeros(3)
    if operation == "single":
        with path.open("wb") as stream:
            np.save(stream, arrays[key])
        return
    with path.open("wb") as stream:
        np.savez(stream, **arrays)


def _edit_bytes(draw: st.DrawFn, path: Path) -> None:
    content = bytearray(path.read_bytes())
    operation = draw(st.sampled_from(["flip", "truncate", "append", "empty", "random"]))
    if operation == "flip" and content:
        for _ in range(draw(st.integers(1, 8))):
            content[draw(st.integers(0, len(content) - 1))] = draw(st.integers(0, 255))
    elif operation == "truncate":
        del content[draw(st.integers(0, len(content))) :]
    elif operation == "append":
        content += draw(st.binary(min_size=1, max_size=64))
    elif operation == "empty":
        content = bytearray()
    else:
        content = bytearray(draw(st.binary(max_size=256)))
    path.write_bytes(bytes(content))


def _replace_file(draw: st.DrawFn, path: Path, other: Path) -> None:
    """The file becomes something else: gone, a folder, a FIFO, or a link (to the other file, nowhere, itself)."""
    kind = draw(st.sampled_from(["missing", "folder", "fifo", "link-other", "link-null", "dangling", "loop"]))
    path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-other":
        path.symlink_to(other)
    elif kind == "link-null":
        path.symlink_to("/dev/null")
    elif kind == "dangling":
        path.symlink_to(path.with_name("nowhere"))
    elif kind == "loop":
        path.symlink_to(path.name)


def _break_reference(draw: st.DrawFn, model: Path) -> None:
    json_file, npz_file = model / "reference.json", model / "reference.npz"
    operation = draw(st.sampled_from(["json-value", "json-bytes", "npz-array", "npz-bytes", "file"]))
    if operation == "json-value":
        try:
            document = json.loads(json_file.read_text(encoding="utf-8"))
        except ValueError:  # an earlier change left no JSON: edit bytes instead
            _edit_bytes(draw, json_file)
        else:
            json_file.write_text(json.dumps(_edit_json(draw, document)), encoding="utf-8")
    elif operation == "json-bytes":
        _edit_bytes(draw, json_file)
    elif operation == "npz-array":
        _rewrite_npz(draw, npz_file)
    elif operation == "npz-bytes":
        _edit_bytes(draw, npz_file)
    else:
        target, other = draw(st.sampled_from([(json_file, npz_file), (npz_file, json_file)]))
        _replace_file(draw, target, other)


@FUZZ
@given(data=st.data())
@pytest.mark.timeout(600)
def test_broken_reference_files_are_warnings_that_name_them(
    exported_small: Path, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(SMALL_MODELS), label="model")
    with _repository(exported_small, name) as repository:
        model = repository / name
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            if (model / "reference.json").is_file() and (model / "reference.npz").is_file():
                _break_reference(data.draw, model)
        problems = _validate("reference_files", repository)
        # Triton never reads the reference files: the model still serves, so at most a warning, naming them.
        _check(problems, {model / "reference.json", model / "reference.npz"}, warnings_only=True)


# --- repository layouts ---------------------------------------------------------------------------------

_VERSION_NAMES = st.sampled_from(
    ["2", "0", "01", "007", "-1", "1.0", " 1", "v2", "\u0661", "\u00b2", "99999999999999999999", ".1"]
)
_FOLDER_NAMES = st.one_of(
    st.sampled_from(["extra", "model one", "a:b", ".hidden", "\u00e9t\u00e9", "1", "config.pbtxt"]),
    st.text(
        st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]), min_size=1, max_size=12
    ),
).filter(lambda n: n not in (".", ".."))
_MODEL_FILES = ["config.pbtxt", "1/model.pt", "reference.json", "reference.npz"]


def _files(model: Path) -> list[str]:
    """What the export wrote into a model folder (warmup data and stamps too), relative to it."""
    found = {str(p.relative_to(model)) for p in model.rglob("*") if p.is_file() or p.is_symlink()}
    return sorted(found | set(_MODEL_FILES))


def _junk(draw: st.DrawFn) -> bytes:
    return draw(
        st.one_of(st.just(b""), st.binary(max_size=64), st.sampled_from([b"\x00" * 32, b"PK\x03\x04"]))
    )


def _inside(model: Path, path: Path) -> bool:
    """Whether ``path``'s folder is really inside ``model`` (not reached through a link to elsewhere)."""
    return Path(os.path.realpath(path.parent)).is_relative_to(os.path.realpath(model))


def _own(model: Path, path: Path) -> bool:
    """A file (or link) of ``model`` itself that a change may replace."""
    return (path.is_file() or path.is_symlink()) and _inside(model, path)


def _layout_change(draw: st.DrawFn, repository: Path, target: str, other: str) -> set[Path]:
    """Break the layout of ``target`` (or the repository around it); returns where problems may point."""
    model = repository / target
    change = draw(
        st.sampled_from(
            ["remove", "empty", "junk", "version", "extra-file", "misplace", "nest", "top-folder", "top-file",
             "link-file", "link-version", "link-model", "rename", "replace-model", "fifo"]
        )
    )  # fmt: skip
    relative = draw(st.sampled_from(_files(model)))
    if change in ("remove", "empty", "junk", "link-file", "fifo", "misplace") and not _own(
        model, model / relative
    ):
        return {model}  # an earlier change moved, removed or linked it elsewhere: change nothing outside
    if change == "remove":
        (model / relative).unlink()
        if draw(st.booleans()) and (model / "1").is_dir() and not (model / "1").is_symlink():
            shutil.rmtree(model / "1")
    elif change == "empty":
        (model / relative).unlink()
        (model / relative).write_bytes(b"")
    elif change == "junk":
        (model / relative).unlink()
        (model / relative).write_bytes(_junk(draw))
    elif change == "version":
        version = model / draw(_VERSION_NAMES)
        if os.path.lexists(version):
            return {model}
        version.mkdir()
        content = draw(st.sampled_from(["none", "copy", "junk", "folder"]))
        if content == "copy" and (model / "1" / "model.pt").is_file():
            shutil.copyfile(model / "1" / "model.pt", version / "model.pt")
        elif content == "junk":
            (version / "model.pt").write_bytes(_junk(draw))
        elif content == "folder":
            (version / "model.pt").mkdir(exist_ok=True)
    elif change == "extra-file":
        place = draw(st.sampled_from(["notes.txt", "1/extra.bin", "config.pbtxt.bak", ".hidden", "2.txt"]))
        if _inside(model, model / place) and (model / place).parent.is_dir() and not (model / place).exists():
            (model / place).write_bytes(_junk(draw))
    elif change == "misplace":
        source = model / relative
        destination = model / draw(st.sampled_from([".", "1", "2"])) / Path(relative).name
        if source != destination and _inside(model, destination) and not os.path.lexists(destination):
            if not os.path.lexists(destination.parent):  # a dangling or looping link there is left as it is
                destination.parent.mkdir()
            if destination.parent.is_dir():
                source.rename(destination)
    elif change == "nest":
        group = repository / draw(_FOLDER_NAMES)
        if os.path.lexists(group):
            return {model}
        group.mkdir()
        shutil.move(model, group / target)
        return {group}
    elif change == "top-folder":
        folder = repository / draw(_FOLDER_NAMES)
        if os.path.lexists(folder):
            return {model}
        folder.mkdir()
        inside = draw(st.sampled_from(["nothing", "version", "junk-config", "model-file"]))
        if inside == "version":
            (folder / "1").mkdir()
        elif inside == "junk-config":
            (folder / "config.pbtxt").write_bytes(_junk(draw))
        elif inside == "model-file" and (model / "1" / "model.pt").is_file():
            shutil.copyfile(model / "1" / "model.pt", folder / "model.pt")
        return {folder}
    elif change == "top-file":
        path = repository / draw(_FOLDER_NAMES)
        if os.path.lexists(path):
            return {model}
        path.write_bytes(_junk(draw))
        return {path}
    elif change == "link-file":
        path = model / relative
        path.unlink()
        path.symlink_to(
            draw(
                st.sampled_from(
                    [repository / other / relative, Path("/dev/null"), path.with_name("nowhere"),
                     Path(path.name), model / "1", Path("/")]
                )
            )
        )  # fmt: skip
    elif change == "link-version":
        if (model / "1").is_dir() and not (model / "1").is_symlink():
            shutil.rmtree(model / "1")
            (model / "1").symlink_to(draw(st.sampled_from([repository / other / "1", Path("/"), Path("1")])))
    elif change == "link-model":
        alias = repository / draw(_FOLDER_NAMES)
        if os.path.lexists(alias):
            return {model}
        alias.symlink_to(
            draw(st.sampled_from([model, Path("/"), alias.with_name("nowhere"), Path(alias.name)]))
        )
        return {alias}
    elif change == "rename":
        renamed = repository / draw(_FOLDER_NAMES)
        if os.path.lexists(renamed):
            return {model}
        model.rename(renamed)
        return {renamed}
    elif change == "replace-model":
        shutil.rmtree(model)
        model.write_bytes(_junk(draw))
    elif change == "fifo":
        (model / relative).unlink()
        os.mkfifo(model / relative)
    return {model}


@FUZZ
@given(data=st.data())
@pytest.mark.timeout(600)
def test_broken_layouts_never_crash_and_name_what_was_broken(
    exported_small: Path, data: st.DataObject
) -> None:
    target, other = data.draw(st.permutations(SMALL_MODELS), label="models")[:2]
    with _repository(exported_small, target, other) as repository:
        blame: set[Path] = set()
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            if (repository / target).is_dir() and not (repository / target).is_symlink():
                blame |= _layout_change(data.draw, repository, target, other)
        problems = _validate("layouts", repository)
        # The untouched model has no problems; the repository itself only when nothing is left in it.
        if not any(p.is_dir() for p in repository.iterdir()):
            blame.add(repository)
        _check(problems, blame)


# --- the front door -------------------------------------------------------------------------------------


def _front_door(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k != "TRITONPT_DEBUG"
    }  # --debug prints tracebacks on purpose
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=300, cwd=ROOT, env=env
    )
    _outputs.append(done.stdout + done.stderr)
    return done


INVOKE = [sys.executable, "-m", "invoke", "--search-root", str(ROOT), "validate", "--repository"]
TRITONPT = [sys.executable, "-m", "tritonpt", "validate", "--repository"]


def _breakers() -> dict[str, Callable[[Path], Path]]:
    """Broken models the fuzzing found crashes with, each returning the file its error must name."""

    def binary_config(model: Path) -> Path:
        (model / "config.pbtxt").write_bytes(b"\xff\xfe\x00name: \x9c")
        return model / "config.pbtxt"

    def config_is_a_folder(model: Path) -> Path:
        (model / "config.pbtxt").unlink()
        (model / "config.pbtxt").mkdir()
        return model / "config.pbtxt"

    def unnamed_data_type(model: Path) -> Path:
        config = model / "config.pbtxt"
        config.write_text(config.read_text(encoding="utf-8").replace("TYPE_FP32", "77", 1), encoding="utf-8")
        return config

    def superscript_version_folder(model: Path) -> Path:
        (model / "1").rename(model / "\u00b2")  # "²".isdigit() is True, int("²") raises
        return model

    return {
        "multi_io": binary_config,
        "token_encoder": config_is_a_folder,
        "scripted_gate": unnamed_data_type,
        "fixed_shape": superscript_version_folder,
    }


def test_invoke_validate_exits_1_naming_each_broken_file_without_a_traceback(exported_small: Path) -> None:
    with _repository(exported_small, *SMALL_MODELS) as repository:
        named = [breaker(repository / name) for name, breaker in _breakers().items()]
        done = _front_door([*INVOKE, str(repository)])
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    for path in named:
        assert f"error: {path}:" in done.stderr, done.stderr


def test_tritonpt_validate_warns_about_junk_reference_files_and_exits_0(exported_small: Path) -> None:
    with _repository(exported_small, "multi_io", "token_encoder") as repository:
        not_json = repository / "multi_io" / "reference.json"
        not_json.write_bytes(b"\x89PNG\r\n\x1a\n")
        not_npz = repository / "token_encoder" / "reference.npz"
        not_npz.write_bytes(b"PK\x03\x04 not a zip")
        done = _front_door([*TRITONPT, str(repository)])
    # Triton never reads reference files: both models serve, so these are warnings and validate passes.
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"warning: {not_json}: reference data file: it cannot be read as UTF-8 text" in done.stderr
    assert f"warning: {not_npz}: reference data file: not a numpy .npz archive" in done.stderr
