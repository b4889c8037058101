"""Family E: an ensemble (``platform: "ensemble"``) against the models its steps name.

Triton's core schedules an ensemble itself, with no backend and no model file, so the pytorch backend's rules do
not hold it (config.py keeps core's: its name, batching and dims). What core refuses at load, read in core r24.10
(src/ensemble_scheduler/ensemble_utils.cc) and held against server 2.51.0 by the differential suite: a step whose
model the repository does not hold, a step that maps a tensor its model does not declare, one that leaves an
input of its model unmapped, and a step model whose max_batch_size is below the ensemble's.
Not held here, though core refuses them too (serving the repository shows them): one ensemble tensor whose type
or dims differ between its steps, and an ensemble output no step produces.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt.repository import ModelDir, read_config
from tritonpt.validate.rules import Findings, rule

NO_STEP_MODEL = rule(
    "E001",
    "an ensemble step naming a model the repository does not hold",
    why="Error: Triton refuses the ensemble.",
    example='ensemble_scheduling { step [ { model_name: "classifer" ... } ] }  # the folder is classifier/',
)
NO_STEP_TENSOR = rule(
    "E002",
    "an ensemble step mapping a tensor its model does not declare",
    why="Error: Triton refuses the ensemble.",
    example='step [ { model_name: "classifier" input_map { key: "INPUT_0" value: "image" } } ]  # INPUT__0',
)

UNMAPPED_INPUT = rule(
    "E003",
    "an ensemble step leaving an input of its model unmapped",
    why="Error: Triton refuses the ensemble (an optional input may stay unmapped).",
    example='step [ { model_name: "multi_io" input_map { key: "features" value: "F" } } ]  # and context?',
)
SMALLER_BATCH = rule(
    "E004",
    "an ensemble step model whose max_batch_size is below the ensemble's",
    why="Error: Triton refuses the ensemble.",
    example='max_batch_size: 16  # the ensemble; its step model "classifier" has max_batch_size: 8',
)


def check(model: ModelDir, config: ModelConfig, findings: Findings) -> None:
    """Each step against the config of the model it names, a folder beside the ensemble's."""
    for index, step in enumerate(config.ensemble_scheduling.step):
        where = f"ensemble_scheduling.step[{index}]"
        folder = ModelDir(root=model.root.parent / step.model_name)
        if not step.model_name or not folder.config.is_file():
            findings.add(
                NO_STEP_MODEL,
                "error",
                model.config,
                f"{where}.model_name",
                f"{step.model_name!r} is no model of this repository ({model.root.parent}): Triton refuses to load "
                "the ensemble.",
                "name a model folder of the repository (names are case-sensitive), or add that model.",
            )
            continue
        declared = _declared(folder.config)
        if declared is None:
            continue  # its own config does not parse: its own validation says so
        if 0 < declared.max_batch_size < config.max_batch_size:
            findings.add(
                SMALLER_BATCH,
                "error",
                model.config,
                "max_batch_size",
                f"{config.max_batch_size}, and step {index}'s model {step.model_name!r} allows "
                f"{declared.max_batch_size}: Triton refuses to load the ensemble.",
                f"set the ensemble's max_batch_size to at most {declared.max_batch_size}.",
            )
        for tensor in declared.input:
            if tensor.name not in step.input_map and not tensor.optional:
                findings.add(
                    UNMAPPED_INPUT,
                    "error",
                    model.config,
                    f"{where}.input_map",
                    f"input {tensor.name!r} of {step.model_name!r} is mapped to no ensemble tensor: Triton "
                    "refuses to load the ensemble.",
                    f'map it: `input_map {{ key: "{tensor.name}" value: "<ensemble tensor>" }}`.',
                )
        for kind, mapping, names in (
            ("input_map", step.input_map, declared.input),
            ("output_map", step.output_map, declared.output),
        ):
            known = [t.name for t in names]
            for key in mapping:
                if key not in known:
                    findings.add(
                        NO_STEP_TENSOR,
                        "error",
                        model.config,
                        f"{where}.{kind}",
                        f"{key!r} is no {kind.removesuffix('_map')} of {step.model_name!r} (its config declares "
                        f"{', '.join(known) or 'none'}): Triton refuses to load the ensemble.",
                        f"map the {kind.removesuffix('_map')}s {step.model_name}/config.pbtxt declares.",
                    )


def _declared(path: Path) -> ModelConfig | None:
    try:
        return read_config(path)
    except (OSError, ValueError, text_format.ParseError):
        return None
