"""Family A: a PT2 package (``model.pt2``) against its config, as pytorch_backend r26.05's PT2 path loads it.

Three parts: the archive (its ``*.wrapper.so``, and the call spec read from its C++ source with the backend's
grammar: ``ARGS[i]`` / ``KWARGS[key]``, ``RESULT[...]``, or ``INPUT__i`` / ``OUTPUT__i``); the config (what
the backend does not serve right: dynamic_batching, sequence_batching, parameters); and a run in this process
with AOTInductor's input checks on, at batch 2 where the config batches, which finds a wrong data type or a
static batch axis before the server does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import dtypes
from tritonpt.errors import first_line
from tritonpt.options import Pt2Build
from tritonpt.repository import ModelDir
from tritonpt.validate import feeds
from tritonpt.validate.rules import Findings, check_output_shape, config_type, rule
from tritonpt.versions import VERSIONS

NOT_A_PACKAGE = rule(
    "A001",
    "model.pt2 that is not an AOTInductor package",
    why="Error: Triton refuses the model.",
    example="a 1/model.pt2 that is not a zip, or a zip with no data/aotinductor/.../*.so",
)
SPEC_TYPES = rule(
    "A002",
    "a call spec with types the backend's parser does not take (a ModelOutput, an OrderedDict)",
    why=(
        "Error: Triton refuses the model (`Failed to parse ... call specification`); `invoke "
        "export --format pt2` returns plain dicts and tuples."
    ),
    example="a package whose forward() returns an OrderedDict, a ModelOutput, a NamedTuple or a dataclass",
)
INPUT_COUNT = rule(
    "A003",
    "fewer or more inputs than the package's call spec",
    why="Error: Triton refuses the model (`configuration expects N inputs, but model expects M inputs`).",
    example="two inputs declared for a package exported with one",
)
UNKNOWN_NAME = rule(
    "A004",
    "an input or output name the call spec does not have",
    why=(
        "Error: Triton refuses the model. A name must be the call spec's (`ARGS[i]`, "
        "`KWARGS[key]`, `RESULT[...]`) or exactly `INPUT__i` / `OUTPUT__i`."
    ),
    example='platform: "torch_aoti"\ninput [ { name: "image" data_type: TYPE_FP32 dims: [ 4 ] } ]',
)
DYNAMIC_BATCHING = rule(
    "A005",
    "dynamic_batching on a PT2 model",
    why=(
        "Error, for the stock PT2 build: Triton serves merged requests wrong, with no error: "
        "every response gets the whole batch (`ReadOutputTensors` with `first_dim_batching` "
        "false; tests/system holds it). The patched build serves them right (`--pt2-build "
        "patched`: no finding)."
    ),
    example='platform: "torch_aoti"\nmax_batch_size: 8\ndynamic_batching { }',
)
SEQUENCE_BATCHING = rule(
    "A006",
    "sequence_batching on a PT2 model",
    why="Error: Triton refuses the model (`Sequence batching is not supported yet.`).",
    example='platform: "torch_aoti"\nsequence_batching { }',
)
PARAMETERS = rule(
    "A007",
    "backend parameters on a PT2 model",
    why=(
        "Warning, for the stock PT2 build: the backend ignores them all (they are parsed only "
        "when the config has no `parameters` key, and core always sends one). The patched build "
        "reads them, and C017-C020 hold them instead."
    ),
    example='platform: "torch_aoti"\nparameters: { key: "INFERENCE_MODE" value: { string_value: "true" } }',
)
INPUT_TYPES = rule(
    "A008",
    "an input data type other than the package's",
    why=(
        "Error: every inference fails (HTTP 500, `aoti_torch_cpu_addmm_out ... API call "
        "failed`); the backend does not check input types."
    ),
    example='input [ { name: "INPUT__0" data_type: TYPE_FP64 dims: [ 4 ] } ]  # the package takes float32',
)
STATIC_BATCH = rule(
    "A009",
    "max_batch_size above 0 with a batch axis exported static",
    why=(
        "Error. Stock build: Triton serves a batch of 2 or more wrong, with no error. Patched "
        "build: it refuses every batch but the package's (tests/system holds both)."
    ),
    example="max_batch_size: 8  # the package was exported with a static batch axis (no torch.export.Dim)",
)
FAILS = rule(
    "A010",
    "dims the package does not accept",
    why="Error: Triton serves garbage or fails (AOTInductor's input checks are off in the server).",
    example=(
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]  # the package takes 4 features'
    ),
)
OUTPUT_TYPE = rule(
    "A011",
    "an output data type other than the package's",
    why=(
        "Error. Stock build: the server crashes (SIGSEGV: the error path frees its message "
        "before reading it). Patched build: every inference fails with the backend's error, and "
        "a `model_warmup` of it can kill server 2.51.0 at load (core: "
        "`docs/upstream/core-warmup-failure.md`)."
    ),
    example=(
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP16 dims: [ 10 ] } ]  # the package returns float32'
    ),
)
OUTPUT_DIMS = rule(
    "A012",
    "output dims other than the package's",
    why="Error: Triton serves the package's shape, not the declared one.",
    example=(
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] } ]  # the package '
        "returns 1000 per row"
    ),
)

BF16 = rule(
    "A013",
    "TYPE_BF16 on a PT2 model",
    why=(
        "Error for pytorch_backend r26.05 (the PT2 build here, and NGC 26.03 to 26.10): Triton refuses the model "
        "(`Unsupported datatype TYPE_BF16`). Triton 26.11's release notes state BF16 inputs and outputs for AOTI: "
        "`tritonpt doctor --ngc 26.11` judges a repository for it."
    ),
    example='platform: "torch_aoti"\ninput [ { name: "INPUT__0" data_type: TYPE_BF16 dims: [ 4 ] } ]',
)

CHECK_INPUTS = "AOTI_RUNTIME_CHECK_INPUTS"
_SPEC = re.compile(r'(in|out)_spec_ = R"\((.*?)\)";', re.DOTALL)
_BUILTINS = {"builtins.tuple", "builtins.list", "builtins.dict"}


def check_config(
    model: ModelDir, config: ModelConfig, findings: Findings, *, pt2_build: Pt2Build = "stock"
) -> None:
    """What the PT2 path does with a config's scheduling and parameters (read in r26.05, held against it). The
    patched build (``pt2_build="patched"``) splits a dynamic batch and reads its parameters: A005 and A007 are
    stock bugs, and the C rules hold its parameters instead (validate.config)."""
    path = model.config
    for kind, tensors in (("input", config.input), ("output", config.output)):
        for tensor in tensors:
            if config_type(tensor) == "TYPE_BF16":
                findings.add(
                    BF16,
                    "error",
                    path,
                    f"{kind} {tensor.name!r} data_type",
                    f"TYPE_BF16: pytorch_backend r26.05's PT2 path, which serves torch_aoti here (and in NGC 26.03 to "
                    f'26.10), refuses it at load (`Unsupported datatype TYPE_BF16 for {kind} "{tensor.name}"`); '
                    f"Triton {VERSIONS.pt2.bf16_ngc} and later serve BF16 inputs and outputs of AOTI packages "
                    f"({VERSIONS.pt2.bf16_source}).",
                    f"serve it on Triton {VERSIONS.pt2.bf16_ngc} or later (`tritonpt doctor --ngc "
                    f"{VERSIONS.pt2.bf16_ngc}` judges the repository for it), or cast to FP16/FP32 in the model.",
                )
    if config.HasField("dynamic_batching") and pt2_build == "stock":
        findings.add(
            DYNAMIC_BATCHING,
            "error",
            path,
            "dynamic_batching",
            "pytorch_backend r26.05's PT2 path reads a merged batch's outputs without splitting them "
            "(first_dim_batching false): every request gets the whole batch back, mostly garbage, and no error.",
            "remove dynamic_batching (send batches from the client), serve it with the patched PT2 build "
            "(`--pt2-build patched`), or serve the TorchScript export.",
        )
    if config.HasField("sequence_batching"):
        findings.add(
            SEQUENCE_BATCHING,
            "error",
            path,
            "sequence_batching",
            "the PT2 path refuses it at load (`Sequence batching is not supported yet.`).",
            "remove sequence_batching, or serve the TorchScript export.",
        )
    if config.parameters and pt2_build == "stock":
        findings.add(
            PARAMETERS,
            "warning",
            path,
            "parameters",
            f"{', '.join(sorted(config.parameters))}: the PT2 path parses its parameters only when the config has "
            "none, and Triton's core always hands it a parameters map, so it never applies them (it keeps inference "
            "mode on and its thread defaults).",
            "leave them out: they change nothing here (the patched PT2 build, `--pt2-build patched`, reads them).",
        )


def call_spec(model_file: Path) -> tuple[list[str], list[str]]:
    """The package's input and output names by the backend's grammar; ``ValueError`` with what is wrong."""
    try:
        with zipfile.ZipFile(model_file) as archive:
            sources = [
                n for n in archive.namelist() if "/data/aotinductor/" in n and n.endswith(".wrapper.cpp")
            ]
            libraries = [n for n in archive.namelist() if "/data/aotinductor/" in n and n.endswith(".so")]
            if not libraries:
                msg = "it holds no <name>/data/aotinductor/model/*.so, which the backend loads"
                raise ValueError(msg)
            text = archive.read(sources[0]).decode("utf-8", errors="replace") if sources else ""
    except (OSError, zipfile.BadZipFile) as exc:
        msg = f"it is not a zip archive ({first_line(exc)})"
        raise ValueError(msg) from exc
    specs: dict[str, str] = {m.group(1): m.group(2) for m in _SPEC.finditer(text)}
    if "in" not in specs or "out" not in specs:
        msg = "its wrapper source has no in_spec_/out_spec_ (compiled without it, or not by aoti_compile_and_package)"
        raise ValueError(msg)
    inputs = json.loads(specs["in"])[1]
    if inputs.get("type") != "builtins.tuple" or len(inputs.get("children_spec", [])) != 2:
        msg = "its in_spec is not (args, kwargs)"
        raise ValueError(msg)
    args, kwargs = inputs["children_spec"]
    names = [f"ARGS{p}" for p in _leaves(args)]
    names += [f"KWARGS[{key}]" for key in json.loads(kwargs.get("context") or "[]")]
    outputs = json.loads(specs["out"])[1]
    result = ["RESULT"] if _leaf(outputs) else [f"RESULT{p}" for p in _leaves(outputs)]
    return names, result


def _leaf(node: dict[str, Any]) -> bool:
    return node.get("type") is None


def _leaves(node: dict[str, Any], path: str = "") -> list[str]:
    if _leaf(node):
        return [path]
    kind = node.get("type")
    if kind not in _BUILTINS:
        msg = f"its call spec holds {kind}, which the backend's parser does not take (only tuple, list, dict)"
        raise ValueError(msg)
    children = node.get("children_spec", [])
    keys = json.loads(node.get("context") or "null") if kind == "builtins.dict" else None
    found = []
    for index, child in enumerate(children):
        found += _leaves(child, f"{path}[{keys[index] if keys else index}]")
    return found


def positions(declared: list[str], names: list[str], ordinal: str) -> list[int | None]:
    return [names.index(n) if n in names else _ordinal(n, ordinal) for n in declared]


def _ordinal(name: str, prefix: str) -> int | None:
    number = name.removeprefix(prefix)
    return (
        int(number) if name.startswith(prefix) and number.isdigit() and str(int(number)) == number else None
    )


def check(
    model: ModelDir,
    config: ModelConfig,
    model_file: Path,
    findings: Findings,
    *,
    pt2_build: Pt2Build = "stock",
) -> None:
    """The package against the config: its call spec, then a run with AOTInductor's input checks on."""
    path = model.config
    try:
        inputs, outputs = call_spec(model_file)
    except ValueError as exc:
        found = SPEC_TYPES if "parser" in str(exc) else NOT_A_PACKAGE
        findings.add(
            found,
            "error",
            model_file,
            "model file",
            f"{exc}; the PT2 path fails to load it.",
            "export it with torch.export and torch._inductor.aoti_compile_and_package (`invoke export --format pt2`, "
            "which returns plain dicts and tuples).",
        )
        return
    if len(config.input) != len(inputs):
        findings.add(
            INPUT_COUNT,
            "error",
            path,
            "input",
            f"{len(config.input)} input(s) declared, the package takes {len(inputs)} ({', '.join(inputs)}); the PT2 "
            f"path refuses to load it (`configuration expects {len(config.input)} inputs, but model expects "
            f"{len(inputs)} inputs`).",
            "declare one input per name of the call spec.",
        )
        return
    feed_order = positions([t.name for t in config.input], inputs, "INPUT__")
    out_order = positions([t.name for t in config.output], outputs, "OUTPUT__")
    unknown = [
        t.name
        for t, p in zip((*config.input, *config.output), (*feed_order, *out_order), strict=True)
        if p is None
    ]
    if unknown:
        findings.add(
            UNKNOWN_NAME,
            "error",
            path,
            "input/output names",
            f"{', '.join(unknown)} are not in the package's call spec (inputs {', '.join(inputs)}; outputs "
            f"{', '.join(outputs)}, or INPUT__i / OUTPUT__i exactly); the PT2 path refuses to load it.",
            "name them as the call spec does, or by INPUT__i / OUTPUT__i.",
        )
        return
    _run(
        model,
        config,
        model_file,
        [p or 0 for p in feed_order],
        out_order=[p or 0 for p in out_order],
        names=inputs,
        findings=findings,
        pt2_build=pt2_build,
    )


def _run(
    model: ModelDir,
    config: ModelConfig,
    model_file: Path,
    feed_order: list[int],
    *,
    out_order: list[int],
    names: list[str],
    findings: Findings,
    pt2_build: Pt2Build,
) -> None:
    with _checked_inputs():
        try:
            loaded = torch._inductor.aoti_load_package(str(model_file))
        except Exception as exc:  # the loader's own refusal
            findings.add(
                NOT_A_PACKAGE,
                "error",
                model_file,
                "model file",
                f"it does not load ({first_line(exc)}).",
                "re-export it.",
            )
            return
        synthesized = feeds.synthesize(config, model.config, findings)
        if synthesized is None:
            return
        ordered: list[Any] = [None] * len(feed_order)
        for array, position in zip(synthesized, feed_order, strict=True):
            ordered[position] = torch.from_numpy(np.array(array))
        said, result = call(loaded, ordered, names)
    if result is None:
        _refused(model.config, config, said, findings, pt2_build)
        return
    produced = outputs(result)
    batch = config.max_batch_size > 0
    for tensor, position in zip(config.output, out_order, strict=True):
        value = produced[position]
        actual = (
            dtypes.from_torch(value.dtype).config if dtypes.is_served_torch(value.dtype) else str(value.dtype)
        )
        if actual != config_type(tensor):
            findings.add(
                OUTPUT_TYPE,
                "error",
                model.config,
                f"output {tensor.name!r} data_type",
                f"{config_type(tensor)} is declared, the package returns {actual}; "
                + (
                    "the PT2 path's error for it frees its message before it reads it, and server 2.51.0 was seen "
                    "to crash (SIGSEGV) on it."
                    if pt2_build == "stock"
                    else "the patched PT2 build fails every inference with its own error (`has datatype "
                    f"{actual} but model configuration expects {config_type(tensor)}`), and a model_warmup fails "
                    "at load, which server 2.51.0's core does not survive (SIGSEGV: docs/upstream/)."
                ),
                f"declare {actual}.",
            )
        shape = tuple(value.shape[1:]) if batch else tuple(value.shape)
        check_output_shape(
            findings, OUTPUT_DIMS, model.config, tensor, shape, batch=batch, what="the package"
        )


def outputs(result: Any) -> list[Any]:  # noqa: ANN401 - what a package returned
    """A package's result as the backend takes it apart: a tensor, a dict's values, or a sequence's items."""
    if isinstance(result, torch.Tensor):
        return [result]
    return list(result.values()) if isinstance(result, dict) else list(result)


def call(loaded: Any, ordered: list[torch.Tensor], names: list[str]) -> tuple[str, Any]:  # noqa: ANN401 - AOTICompiledModel
    """Run the package on its inputs in the call spec's order (``ARGS`` by position, ``KWARGS[key]`` by keyword),
    keeping what AOTInductor prints about a refused input (on fd 2)."""
    args = [t for t, n in zip(ordered, names, strict=True) if n.startswith("ARGS")]
    kwargs = {
        n.removeprefix("KWARGS[").removesuffix("]"): t
        for t, n in zip(ordered, names, strict=True)
        if n.startswith("KWARGS[")
    }
    with tempfile.TemporaryFile() as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            with torch.no_grad():
                return "", loaded(*args, **kwargs)
        except Exception as exc:  # the package's own check failed: its reason went to stderr
            os.dup2(saved, 2)
            capture.seek(0)
            printed = capture.read().decode("utf-8", errors="replace")
            lines = [line.strip() for line in printed.splitlines() if "unmatched" in line or "Error" in line]
            return (lines[0] if lines else first_line(exc)), None
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _refused(path: Path, config: ModelConfig, said: str, findings: Findings, pt2_build: Pt2Build) -> None:
    if "unmatched dtype" in said:
        findings.add(
            INPUT_TYPES,
            "error",
            path,
            "input data_type",
            f"the package refuses config-typed inputs ({said.removeprefix('Error: ')}); the PT2 path does not check "
            "input types (`CANNOT VALIDATE INPUTS BY DTYPE`), and server 2.51.0 failed or crashed serving it.",
            "declare the data types the model was exported with (`invoke export --format pt2` writes them).",
        )
    elif "unmatched dim value at 0" in said and config.max_batch_size > 0:
        findings.add(
            STATIC_BATCH,
            "error",
            path,
            "max_batch_size",
            f"the package's batch axis is static ({said.removeprefix('Error: ')}): served with max_batch_size "
            f"{config.max_batch_size}, "
            + (
                "a request of 2 or more rows is not answered right (row 0 is, the rest are wrong or missing), "
                "and no error."
                if pt2_build == "stock"
                else "every request of another batch size fails (the patched PT2 build: `the package computes a "
                "fixed batch size`)."
            ),
            "export with a dynamic batch axis (torch.export.Dim; `invoke export --format pt2` does), or set "
            "max_batch_size 0 with the full shape in dims.",
        )
    else:
        findings.add(
            FAILS,
            "error",
            path,
            "input dims",
            f"the package fails on inputs shaped as the config declares ({said.removeprefix('Error: ')}).",
            "make dims match the exported program (-1 only on axes exported as dynamic).",
        )


@contextlib.contextmanager
def _checked_inputs() -> Iterator[None]:
    previous = os.environ.get(CHECK_INPUTS)
    os.environ[CHECK_INPUTS] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CHECK_INPUTS, None)
        else:
            os.environ[CHECK_INPUTS] = previous
