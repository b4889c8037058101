"""Models as users have them: outputs in dicts, ModelOutput-like dataclasses, NamedTuples and lists, inputs given
by name. Each is exported for real (torch.jit.trace, save, load) and validated; the served names keep the key."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from tritonpt import export, options, reference, spec
from tritonpt.errors import SpecError
from tritonpt.export.outputs import Structure
from tritonpt.repository import ModelDir, read_config
from tritonpt.validate import validate_model


class Encoder(nn.Module):
    """An encoder as transformers builds one: token ids and an optional mask in, keyed outputs out."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 3)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> dict[str, torch.Tensor | None]:
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = hidden.mean(dim=1)
        return OrderedDict(
            last_hidden_state=hidden, pooler_output=pooled, hidden_states=None, logits=self.head(pooled)
        )


@dataclasses.dataclass
class Output:  # what transformers' ModelOutput is: a dataclass (and an OrderedDict)
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class WithStates(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> Output:
        h = torch.tanh(self.a(x))
        return Output(logits=self.b(h), hidden_states=(x, h))


class Pair(NamedTuple):
    mean: torch.Tensor
    spread: torch.Tensor


class Stats(nn.Module):
    def forward(self, x: torch.Tensor) -> Pair:
        return Pair(mean=x.mean(dim=1, keepdim=True), spread=x.std(dim=1, keepdim=True))


class Listed(nn.Module):
    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [x * 2, x + 1]


def _exported(tmp_path: Path, model_spec: spec.ModelSpec) -> ModelDir:
    result = export.export(model_spec, repository=tmp_path / "repository")
    model = result.model
    assert [p for p in validate_model(model, gpu_available=False) if p.severity == "error"] == []
    return model


def _served_like_the_backend(model: ModelDir) -> None:
    """The reloaded TorchScript, fed by config input names in forward()'s argument order, returns a tuple whose
    tensors match the reference outputs in config order."""
    module = torch.jit.load(str(model.model_file()))
    arguments = [a.name for a in module.forward.schema.arguments[1:]]
    config = read_config(model.config)
    assert arguments == [t.name for t in config.input]  # the backend maps the inputs by name
    ref = reference.load(model)
    for case in ref.cases:
        with torch.inference_mode():
            result = module(*(torch.from_numpy(a.copy()) for a in case.inputs))
        assert isinstance(result, tuple | torch.Tensor)
        got = (result,) if isinstance(result, torch.Tensor) else result
        for tensor, expected in zip(got, case.outputs, strict=True):
            np.testing.assert_allclose(tensor.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_a_dict_with_none_values_and_keyword_inputs_is_served_by_name(tmp_path: Path) -> None:
    ids = torch.randint(0, 50, (1, 6))
    model_spec = spec.coerce(
        (Encoder(), {"attention_mask": torch.ones_like(ids), "input_ids": ids}),
        name="encoder",
        dynamic_axes={"input_ids": (1,), "attention_mask": (1,)},
    )
    assert model_spec.input_names == ("input_ids", "attention_mask")  # forward()'s order, not the dict's
    assert model_spec.keyword_inputs
    assert dict(model_spec.dynamic_axes) == {0: (1,), 1: (1,)}
    model = _exported(tmp_path, model_spec)
    config = read_config(model.config)
    assert [t.name for t in config.output] == ["last_hidden_state__0", "pooler_output__1", "logits__2"]
    assert [list(t.dims) for t in config.input] == [[-1], [-1]]
    text = model.config.read_text(encoding="utf-8")
    assert "token_type_ids, output_hidden_states keep their defaults" in text
    assert [o.name for o in reference.load(model).outputs] == [t.name for t in config.output]
    _served_like_the_backend(model)


def test_a_dataclass_with_a_nested_tuple_is_flattened_in_order(tmp_path: Path) -> None:
    model = _exported(
        tmp_path, spec.ModelSpec(name="states", module=WithStates(), example_inputs=(torch.randn(2, 4),))
    )
    names = [t.name for t in read_config(model.config).output]
    assert names == ["logits__0", "hidden_states.0__1", "hidden_states.1__2"]
    _served_like_the_backend(model)


def test_a_named_tuple_keeps_its_field_names(tmp_path: Path) -> None:
    model = _exported(
        tmp_path, spec.ModelSpec(name="stats", module=Stats(), example_inputs=(torch.randn(2, 5),))
    )
    assert [t.name for t in read_config(model.config).output] == ["mean__0", "spread__1"]
    _served_like_the_backend(model)


def test_a_list_of_tensors_is_served_as_a_tuple(tmp_path: Path) -> None:
    """pytorch_backend r25.10 fails every inference of a List[Tensor] (M007); export returns a tuple instead."""
    result = export.export(
        spec.ModelSpec(name="listed", module=Listed(), example_inputs=(torch.randn(2, 3),)),
        repository=tmp_path / "r",
    )
    assert [t.name for t in read_config(result.model.config).output] == ["OUTPUT__0", "OUTPUT__1"]
    assert result.notes == ("forward() returns list: served as a tuple of 2 tensor(s), OUTPUT__0, OUTPUT__1",)
    _served_like_the_backend(result.model)


class ScriptedDict(nn.Module):
    """Data-dependent control flow that only scripting keeps, and a dict out."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = x * 2.0 if bool(x.sum() > 0) else x - 1.0
        return {"y": y, "positive": y > 0}


def test_a_scripted_model_with_a_dict_keeps_its_control_flow(tmp_path: Path) -> None:
    model_spec = spec.ModelSpec(
        name="scripted", module=ScriptedDict(), example_inputs=(torch.ones(2, 3),), method="script"
    )
    model = _exported(tmp_path, model_spec)
    module = torch.jit.load(str(model.model_file()))
    negative = -torch.ones(1, 3)
    with torch.inference_mode():
        y, positive = module(negative)
    assert torch.equal(y, negative - 1.0)  # the other branch: not frozen by a trace
    assert not bool(positive.any())


def test_an_unknown_keyword_is_refused_naming_the_arguments() -> None:
    ids = torch.randint(0, 50, (1, 6))
    with pytest.raises(
        SpecError, match=r"name 'mask', which forward\(\) does not take \(it takes input_ids, attention_mask"
    ):
        spec.coerce((Encoder(), {"input_ids": ids, "mask": ids}), name="encoder")


def test_a_dynamic_axis_by_an_unknown_name_is_refused() -> None:
    with pytest.raises(SpecError, match="names the input 'tokens'; the model's inputs are INPUT__0"):
        spec.coerce((Listed(), (torch.randn(2, 3),)), name="listed", dynamic_axes={"tokens": (1,)})


class Cache:
    """What a decoder returns as past_key_values unless use_cache=False."""


class WithCache(nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, object]:
        return {"logits": x, "past_key_values": Cache()}


def test_a_cache_in_the_output_is_refused_with_the_fix() -> None:
    with pytest.raises(SpecError, match=r"past_key_values in it is of type Cache.*use_cache=False"):
        Structure.of("decoder", WithCache()(torch.ones(1)))


def test_names_keep_their_keys_within_the_backends_rule() -> None:
    structure = Structure.of("m", {"a__b": torch.ones(1), "with space": torch.ones(1), 3: torch.ones(1)})
    assert structure.names() == ("a_b__0", "with_space__1", "3__2")  # one "__" each: the backend's index


def test_a_dynamic_axis_is_given_by_index_or_by_name() -> None:
    parsed = options.parse_dynamic_axes(["0:1", "attention_mask:1", "0:2"], error=SpecError)
    assert parsed == {0: (1, 2), "attention_mask": (1,)}
    with pytest.raises(SpecError, match="expected INPUT:AXIS"):
        options.parse_dynamic_axes(["input_ids"], error=SpecError)
