"""What the matrix's tests share: one model of the repository under test, with its config and reference data."""

from __future__ import annotations

from dataclasses import dataclass

from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import reference


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
        return self.config.max_batch_size > 0

    @property
    def dynamic_batching(self) -> bool:
        return self.batching and self.config.HasField("dynamic_batching")
