"""Reference data for parity: seeded inputs and eager PyTorch outputs, with provenance and tolerances.

Stored beside the model's version folders (``reference.json`` + ``reference.npz``), where Triton does not
look. Files are written deterministically (no timestamps, fixed zip entry dates), so a re-export with the
same seed on the same machine reproduces them byte for byte.
"""

from __future__ import annotations

import contextlib
import io
import json
import reprlib
import zipfile
from collections.abc import Iterator
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from tritonpt import dtypes
from tritonpt.errors import ReferenceDataError, first_line
from tritonpt.repository import ModelDir
from tritonpt.spec import Tolerance

FORMAT = 1
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)

Array = npt.NDArray[np.generic]


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where the reference outputs came from. The exporting torch version is recorded nowhere else:
    a TorchScript file does not carry it. No timestamps and no file hashes (torch.jit.script writes a
    random serialization id), so the reference files are reproducible byte for byte."""

    torch_version: str
    torchvision_version: str
    numpy_version: str
    python_version: str
    device: str
    seed: int
    method: str
    torchscript_format: int  # 0 for a PT2 package
    exporter: str
    model_format: str = "torchscript"  # or "pt2" (torch.export + AOTInductor)
    # What the outputs are: "export" (eager PyTorch, recorded when the model was exported), "in-process" (the
    # model's own file run by this torch, for a model without reference data: tritonpt.in_process) or
    # "torchscript" (the TorchScript file a torch_aoti model was migrated from, run in-process: tritonpt.migrate).
    source: str = "export"
    samples: str = ""  # in-process: where its inputs came from ("samples.npz", "generated from config.pbtxt")

    def held_to(self) -> str:
        """What a check against these outputs holds the served model to, in words."""
        if self.source == "export":
            return f"eager outputs recorded at export (torch {self.torch_version})"
        if self.source == "torchscript":
            return (
                f"the TorchScript file it was migrated from, in-process (torch {self.torch_version}), on inputs "
                f"{self.samples}"
            )
        return f"its own file in-process (torch {self.torch_version}), on inputs {self.samples}"


@dataclass(frozen=True, kw_only=True)
class TensorInfo:
    name: str
    data_type: str  # config enum name, e.g. TYPE_FP32


@dataclass(frozen=True, kw_only=True)
class OutputInfo(TensorInfo):
    cpu_tolerance: Tolerance
    gpu_tolerance: Tolerance

    def tolerance(self, *, gpu: bool) -> Tolerance:
        return self.gpu_tolerance if gpu else self.cpu_tolerance


@dataclass(frozen=True, kw_only=True)
class Case:
    """One set of inputs and the eager outputs for them."""

    id: str
    batch_size: int  # 0 when the model has no batch axis
    inputs: tuple[Array, ...]
    outputs: tuple[Array, ...]


@dataclass(frozen=True, kw_only=True)
class Reference:
    model: str
    provenance: Provenance
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[OutputInfo, ...]
    cases: tuple[Case, ...]

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        msg = f"Model {self.model!r} has no reference case {case_id!r}; it has {[c.id for c in self.cases]}."
        raise KeyError(msg)


def _key(case: str, kind: str, name: str) -> str:
    return f"{case}/{kind}/{name}"


def save(reference: Reference, model: ModelDir) -> None:
    """Write ``reference.json`` and ``reference.npz`` into a model folder."""
    arrays: dict[str, Array] = {}
    cases = []
    for case in reference.cases:
        for info, array in zip(reference.inputs, case.inputs, strict=True):
            arrays[_key(case.id, "inputs", info.name)] = array
        for info, array in zip(reference.outputs, case.outputs, strict=True):
            arrays[_key(case.id, "outputs", info.name)] = array
        cases.append(
            {
                "id": case.id,
                "batch_size": case.batch_size,
                "input_shapes": [list(a.shape) for a in case.inputs],
                "output_shapes": [list(a.shape) for a in case.outputs],
            }
        )
    document = {
        "format": FORMAT,
        "model": reference.model,
        "provenance": asdict(reference.provenance),
        "inputs": [asdict(i) for i in reference.inputs],
        "outputs": [asdict(o) for o in reference.outputs],
        "cases": cases,
    }
    model.reference_json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    _write_npz(model.reference_npz, arrays)


def _write_npz(path: Path, arrays: dict[str, Array]) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue())


def exists(model: ModelDir) -> bool:
    return model.reference_json.is_file() and model.reference_npz.is_file()


def load(model: ModelDir) -> Reference:
    """Read a model's reference data; raises ``ReferenceDataError`` naming the file and the field."""
    json_file = _Reader(model.reference_json)
    document = json_file.document()
    if document.get("format") != FORMAT:
        json_file.fail(
            "format",
            f"reference format {document.get('format')!r}, this version reads {FORMAT}.",
        )
    inputs = tuple(
        TensorInfo(name=json_file.text(i, "name", where), data_type=json_file.data_type(i, where))
        for where, i in json_file.items(document, "inputs")
    )
    outputs = tuple(
        OutputInfo(
            name=json_file.text(o, "name", where),
            data_type=json_file.data_type(o, where),
            cpu_tolerance=json_file.tolerance(o, "cpu_tolerance", where),
            gpu_tolerance=json_file.tolerance(o, "gpu_tolerance", where),
        )
        for where, o in json_file.items(document, "outputs")
    )
    cases = json_file.items(document, "cases")
    provenance = json_file.provenance(document)
    npz_file = _Reader(model.reference_npz)
    loaded = []
    with npz_file.archive() as npz:
        for where, c in cases:
            case_id = json_file.text(c, "id", where)
            batch_size = json_file.value(c, "batch_size", int, "an integer", where)
            arrays = {
                kind: tuple(
                    npz_file.array(npz, _key(case_id, kind, info.name), info.data_type) for info in infos
                )
                for kind, infos in (("inputs", inputs), ("outputs", outputs))
            }
            loaded.append(
                Case(id=case_id, batch_size=batch_size, inputs=arrays["inputs"], outputs=arrays["outputs"])
            )
    return Reference(
        model=json_file.text(document, "model", ""),
        provenance=provenance,
        inputs=inputs,
        outputs=outputs,
        cases=tuple(loaded),
    )


_REEXPORT = "re-export the model with `invoke export` to rewrite its reference data."


class _Reader:
    """Reads one reference file, failing with the file, the field, what was found and what was expected.

    On damaged bytes numpy's and zipfile's readers raise ValueError, EOFError, OSError, zipfile.BadZipFile,
    zlib.error, NotImplementedError (an unknown compression method), RuntimeError (an encrypted member) or
    tokenize.TokenError (a mangled array header), as tests/unit/test_validate_fuzz.py found: every one means
    the archive is not what export wrote, so reading an archive catches them all.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, detail: str) -> NoReturn:
        raise ReferenceDataError(path=self.path, field=field, detail=detail, fix=_REEXPORT)

    def document(self) -> dict[str, Any]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.fail("file", "it does not exist.")
        except (OSError, UnicodeDecodeError) as exc:
            self.fail("file", f"it cannot be read as UTF-8 text ({first_line(exc)}).")
        except json.JSONDecodeError as exc:
            self.fail("syntax", f"not JSON ({exc}).")
        except RecursionError:
            self.fail("syntax", "JSON nested too deeply to read.")
        if not isinstance(document, dict):
            self.fail("document", f"a JSON {type(document).__name__}; expected an object.")
        return document

    def value(
        self, mapping: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str, where: str
    ) -> Any:  # noqa: ANN401 - what JSON holds
        found = mapping.get(key)
        # bool is an int to Python, never a count or a tolerance here.
        if not isinstance(found, kind) or (isinstance(found, bool) and kind is not bool):
            got = "missing" if key not in mapping else reprlib.repr(found)
            self.fail(f"{where}.{key}" if where else key, f"{got}; expected {expected}.")
        return found

    def text(self, mapping: dict[str, Any], key: str, where: str) -> str:
        return str(self.value(mapping, key, str, "a string", where))

    def items(self, document: dict[str, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
        entries = self.value(document, key, list, "a list of objects", "")
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                self.fail(f"{key}[{index}]", f"{reprlib.repr(entry)}; expected an object.")
        return [(f"{key}[{index}]", entry) for index, entry in enumerate(entries)]

    def data_type(self, mapping: dict[str, Any], where: str) -> str:
        name = self.text(mapping, "data_type", where)
        try:
            dtypes.from_config(name)
        except ValueError:
            served = ", ".join(d.config for d in dtypes.SUPPORTED)
            self.fail(f"{where}.data_type", f"{name!r}; expected one of {served}.")
        return name

    def tolerance(self, mapping: dict[str, Any], key: str, where: str) -> Tolerance:
        bound = self.value(mapping, key, dict, "an object with atol and rtol", where)
        atol, rtol = (
            float(self.value(bound, k, (int, float), "a number", f"{where}.{key}")) for k in ("atol", "rtol")
        )
        return Tolerance(atol=atol, rtol=rtol)

    def provenance(self, document: dict[str, Any]) -> Provenance:
        found = self.value(document, "provenance", dict, "an object", "")
        values: dict[str, Any] = {}
        for item in fields(Provenance):
            if item.name not in found and item.default is not MISSING:
                continue  # written before the field existed: its default
            kind = int if item.type == "int" else str
            values[item.name] = self.value(
                found, item.name, kind, "an integer" if kind is int else "a string", "provenance"
            )
        return Provenance(**values)

    @contextlib.contextmanager
    def archive(self) -> Iterator[Any]:
        with contextlib.ExitStack() as stack:
            try:
                # An open stream, not the path: numpy leaks the file it opened when the zip is corrupt.
                stream = stack.enter_context(self.path.open("rb"))
                npz = np.load(stream, allow_pickle=False)
            except FileNotFoundError:
                self.fail("file", "it does not exist.")
            except Exception as exc:  # damaged bytes: any of the types in _Reader's docstring
                self.fail("file", f"not a numpy .npz archive ({type(exc).__name__}: {first_line(exc)}).")
            if not isinstance(npz, np.lib.npyio.NpzFile):
                self.fail("file", f"a single {type(npz).__name__}; expected an .npz archive of arrays.")
            with npz:
                yield npz

    def array(self, npz: Any, key: str, data_type: str) -> Array:  # noqa: ANN401 - numpy's NpzFile is untyped
        if key not in npz.files:
            self.fail(key, "no such array in the archive; reference.json names it.")
        try:
            array: Array = npz[key]
        except MemoryError:
            self.fail(key, "its header declares an array too large to load.")
        except Exception as exc:  # damaged bytes: any of the types in _Reader's docstring
            self.fail(key, f"cannot be read ({type(exc).__name__}: {first_line(exc)}).")
        expected = np.dtype(dtypes.from_config(data_type).numpy)
        if array.dtype != expected:
            self.fail(
                key, f"dtype {array.dtype.str}; reference.json says {data_type}, stored as {expected.str}."
            )
        return array
