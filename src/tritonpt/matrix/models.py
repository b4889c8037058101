"""What the matrix's tests share: one model of the repository under test, with its config and reference data;
what a bad request must answer, and whether the server is still live and right after one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tritonclient.grpc.model_config_pb2 import ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import assertions, client, reference
from tritonpt.repository import PT2_PLATFORM
from tritonpt.server.base import Server

# What a bad request must answer: the client's fault, never a server error (HTTP 500 / gRPC INTERNAL).
CLIENT_ERROR = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
NOT_FOUND = {"http": "404", "grpc": "StatusCode.NOT_FOUND"}


@dataclass(frozen=True, kw_only=True)
class Model:
    """One model of the repository under test: its committed config and its reference data."""

    name: str
    config: ModelConfig
    reference: reference.Reference

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.reference.inputs]

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.reference.outputs]

    @property
    def batching(self) -> bool:
        return bool(self.config.max_batch_size > 0)

    @property
    def dynamic_batching(self) -> bool:
        return self.batching and self.config.HasField("dynamic_batching")

    @property
    def warmup_runs(self) -> int:
        """The executions Triton runs at each load of this model (its ``model_warmup`` samples, each ``count``
        times, once at least), which server 2.51.0 counts as successful requests before any of ours."""
        return sum(max(1, warmup.count) for warmup in self.config.model_warmup)

    def counted(self, triton: Server) -> int:
        """The successful requests ``triton`` has counted for this model once it has counted all of ours since its
        last load: its warmup runs and this process's answered requests (:func:`tritonpt.client.answered`). A
        release that does not count warmup runs stays short of it: a baseline read then waits SETTLE_S."""
        return self.warmup_runs + client.answered(triton.endpoints, self.name)

    @property
    def model_format(self) -> str:
        """``pt2`` for a torch_aoti package, else ``torchscript``."""
        return "pt2" if self.config.platform == PT2_PLATFORM else "torchscript"


@dataclass(frozen=True, kw_only=True)
class OwnFile:
    """A model without reference data, held to its own file in-process (tritonpt.in_process), or the reason it
    could not be (``error``: the file, what happened in the model's words, what to do)."""

    name: str
    held_to: str = ""
    error: str = ""


def held_to(model: Model) -> dict[str, object]:
    """What the model's outputs are held to, for the reports: the reference's source, torch, and the tolerances."""
    provenance = model.reference.provenance
    return {
        "held_to": provenance.held_to(),
        "source": provenance.source,
        "torch": provenance.torch_version,
        "tolerances": {  # on the CPU; an output served on a GPU is held to its gpu_tolerances
            o.name: {"atol": o.cpu_tolerance.atol, "rtol": o.cpu_tolerance.rtol}
            for o in model.reference.outputs
        },
        "gpu_tolerances": {
            o.name: {"atol": o.gpu_tolerance.atol, "rtol": o.gpu_tolerance.rtol}
            for o in model.reference.outputs
        },
    }


def probe_model(models: Sequence[Model], model_format: str = "torchscript") -> Model | None:
    """The model of a format bad requests are sent to: the first that batches, else the first; None when the
    repository holds none of that format."""
    chosen = [m for m in models if m.model_format == model_format]
    return next((m for m in chosen if m.batching), chosen[0] if chosen else None)


def unbatched_model(models: Sequence[Model]) -> Model | None:
    """The model a batch axis is sent to where none belongs: the first without batching (any format), by name."""
    return next((m for m in models if not m.batching), None)


PROBES: dict[str, Callable[[Sequence[Model]], Model | None]] = {
    "torchscript": lambda models: probe_model(models, "torchscript"),
    "pt2": lambda models: probe_model(models, "pt2"),
    "unbatched": unbatched_model,
}
"""Each kind of probe and how a run picks it from its models. Which model that is depends on the run's models,
so a shard's probe can differ from an unsharded run's: the report records each (tritonpt.reporting.merge takes a probe's
checks from the shard whose probe one run would pick)."""


@dataclass(frozen=True, kw_only=True)
class Aftermath:
    """The server after a bad request: live and ready, and a good request's outputs against the reference."""

    live: bool
    ready: bool
    failures: tuple[str, ...]  # outputs out of tolerance, or what the good request raised

    @property
    def parity(self) -> bool:
        return not self.failures


def aftermath(triton: Server, model: Model, protocol: client.Protocol) -> Aftermath:
    """Whether ``triton`` is still live and ready, and still computes ``model``'s first reference case."""
    try:
        live, ready = client.live_and_ready(triton.endpoints, protocol)
    except (OSError, InferenceServerException):  # nothing answers (HTTP), or the channel fails (gRPC)
        live, ready = False, False
    case = model.reference.cases[0]
    try:
        got = client.infer(
            triton.endpoints, protocol, model.name, dict(zip(model.input_names, case.inputs, strict=True)),
            model.output_names,
        )  # fmt: skip
        gpu = assertions.served_on_gpu(triton.model_config(model.name))
        comparisons = assertions.compare_outputs(model.reference.outputs, got, case.outputs, gpu=gpu)
        failures = tuple(assertions.mismatches(comparisons))
    except (OSError, InferenceServerException) as exc:
        failures = (f"the good request after it failed: {type(exc).__name__}: {exc}",)
    return Aftermath(live=live, ready=ready, failures=failures)
