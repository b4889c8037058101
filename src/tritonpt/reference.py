"""Reference data for parity: seeded inputs and eager PyTorch outputs, with provenance and tolerances.

Stored beside the model's version folders (``reference.json`` + ``reference.npz``), where Triton does not
look. Files are written deterministically (no timestamps, fixed zip entry dates), so a re-export with the
same seed on the same machine reproduces them byte for byte.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

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
    torchscript_format: int
    exporter: str


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
    """Read a model's reference data; raises ``FileNotFoundError`` or ``ValueError`` with the file named."""
    document = json.loads(model.reference_json.read_text(encoding="utf-8"))
    if document.get("format") != FORMAT:
        msg = (
            f"{model.reference_json}: reference format {document.get('format')!r}, this version reads "
            f"{FORMAT}. Re-export the model to refresh it."
        )
        raise ValueError(msg)
    inputs = tuple(TensorInfo(**i) for i in document["inputs"])
    outputs = tuple(
        OutputInfo(
            name=o["name"],
            data_type=o["data_type"],
            cpu_tolerance=Tolerance(**o["cpu_tolerance"]),
            gpu_tolerance=Tolerance(**o["gpu_tolerance"]),
        )
        for o in document["outputs"]
    )
    with np.load(model.reference_npz, allow_pickle=False) as npz:
        cases = tuple(
            Case(
                id=c["id"],
                batch_size=c["batch_size"],
                inputs=tuple(npz[_key(c["id"], "inputs", i.name)] for i in inputs),
                outputs=tuple(npz[_key(c["id"], "outputs", o.name)] for o in outputs),
            )
            for c in document["cases"]
        )
    return Reference(
        model=document["model"],
        provenance=Provenance(**document["provenance"]),
        inputs=inputs,
        outputs=outputs,
        cases=cases,
    )
