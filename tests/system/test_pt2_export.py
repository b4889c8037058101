"""`invoke export --format pt2` and the validator's PT2 family, on real packages (AOTInductor compiles each:
tens of seconds, which is why this is the system tier and not the unit tier)."""

from __future__ import annotations

import shutil
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from tritonclient.grpc.model_config_pb2 import DataType

from tritonpt import client, export, reference, spec
from tritonpt.backend import BuiltBackend
from tritonpt.errors import ExportError
from tritonpt.export import pt2
from tritonpt.options import Pt2Build
from tritonpt.repository import ModelDir, read_config, render_config
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.validate import pt2 as pt2_rules
from tritonpt.validate import validate_model

from ..helpers import compiled_package

pytestmark = pytest.mark.slow


def _copy(exported_pt2: Path, tmp_path: Path, name: str = "multi_io_pt2") -> ModelDir:
    shutil.copytree(exported_pt2 / name, tmp_path / "repository" / name)
    return ModelDir(root=tmp_path / "repository" / name)


def _rules(model: ModelDir) -> dict[str, str]:
    return {p.rule: p.severity for p in validate_model(model, gpu_available=False)}


def test_the_pt2_config_is_as_nvidia_documents_it_and_what_the_backend_serves(exported_pt2: Path) -> None:
    config = read_config(exported_pt2 / "multi_io_pt2" / "config.pbtxt")
    assert config.platform == "torch_aoti"
    assert not config.backend  # the repository's own config: Triton 26.03+ takes it as it is
    assert config.default_model_filename == "model.pt2"  # core r26.03 would look for model.pt
    assert [t.name for t in config.input] == ["ARGS[0]", "ARGS[1]"]
    assert [t.name for t in config.output] == ["RESULT[0]", "RESULT[1]"]
    assert not config.HasField("dynamic_batching")
    assert not config.parameters
    provenance = reference.load(ModelDir(root=exported_pt2 / "multi_io_pt2")).provenance
    assert (provenance.model_format, provenance.method, provenance.device) == ("pt2", "aoti", "cpu")
    assert _rules(ModelDir(root=exported_pt2 / "multi_io_pt2")) == {}


@pytest.mark.parametrize(
    ("edit", "rule", "severity"),
    [
        ("dynamic_batching", "A005", "error"),
        ("sequence_batching", "A006", "error"),
        ("parameters", "A007", "warning"),
        ("input_fp64", "A008", "error"),
        ("input_dims", "A010", "error"),
        ("output_fp16", "A011", "error"),
        ("output_dims", "A012", "error"),
        ("drop_input", "A003", "error"),
        ("rename_output", "A004", "error"),
        ("not_a_zip", "A001", "error"),
    ],
)
def test_each_pt2_rule_on_a_copy_broken_one_way(
    exported_pt2: Path, tmp_path: Path, edit: str, rule: str, severity: str
) -> None:
    model = _copy(exported_pt2, tmp_path)
    config = read_config(model.config)
    config.ClearField("model_warmup")
    if edit == "dynamic_batching":
        config.dynamic_batching.SetInParent()
    elif edit == "sequence_batching":
        config.sequence_batching.SetInParent()
    elif edit == "parameters":
        config.parameters["INFERENCE_MODE"].string_value = "false"
    elif edit == "input_fp64":
        config.input[0].data_type = DataType.TYPE_FP64
    elif edit == "input_dims":
        del config.input[0].dims[:]
        config.input[0].dims.append(17)
    elif edit == "output_fp16":
        config.output[0].data_type = DataType.TYPE_FP16
    elif edit == "output_dims":
        config.output[0].dims[0] = 9
    elif edit == "drop_input":
        del config.input[1]
    elif edit == "rename_output":
        config.output[0].name = "RESULT[mixed]"
    else:
        (model.root / "1" / "model.pt2").write_bytes(b"not a zip")
    model.config.write_text(render_config(config), encoding="utf-8")
    assert _rules(model).get(rule) == severity, validate_model(model, gpu_available=False)


class Halve(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


def test_a_static_batch_axis_with_max_batch_size_is_an_error(exported_pt2: Path, tmp_path: Path) -> None:
    model = _copy(exported_pt2, tmp_path)
    (model.root / "1" / "model.pt2").unlink()
    compiled_package(Halve(), (torch.ones(1, 16),), model.root / "1" / "model.pt2")
    config = read_config(model.config)
    config.ClearField("model_warmup")
    del config.input[1]
    del config.output[1:]
    config.output[0].name, config.output[0].dims[0] = "RESULT", 16
    model.config.write_text(render_config(config), encoding="utf-8")
    assert _rules(model).get("A009") == "error"


class Keyed(torch.nn.Module):
    """Keyword inputs and an OrderedDict out, as a tokenizer and a library give them."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(40, 4)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> OrderedDict[str, torch.Tensor]:
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return OrderedDict(hidden=hidden, pooled=hidden.mean(dim=1), past=None)


def test_keyword_inputs_and_a_keyed_output_get_the_backends_forward_based_names(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)  # the same weights each run: the package cache serves them
    keyed = Keyed()
    torch.nn.init.normal_(keyed.embed.weight, generator=generator)
    ids = torch.randint(0, 40, (2, 5), generator=generator)
    model_spec = spec.coerce(
        (keyed, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}),
        name="keyed",
        dynamic_axes={"input_ids": (1,), "attention_mask": (1,)},
    )
    result = export.export(model_spec, repository=tmp_path / "repository", model_format="pt2")
    config = read_config(result.model.config)
    assert [t.name for t in config.input] == ["KWARGS[input_ids]", "KWARGS[attention_mask]"]
    assert [t.name for t in config.output] == ["RESULT[hidden]", "RESULT[pooled]"]
    assert [list(t.dims) for t in config.input] == [[-1], [-1]]
    assert any("left out" in n and "past" in n for n in result.notes)
    assert pt2_rules.call_spec(result.model.root / "1" / "model.pt2") == (
        ["KWARGS[input_ids]", "KWARGS[attention_mask]"],
        ["RESULT[hidden]", "RESULT[pooled]"],
    )


def test_without_a_compiler_the_refusal_is_one_paragraph(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pt2.shutil, "which", lambda _: None)
    with pytest.raises(
        ExportError, match=r"without a C\+\+ compiler .*TorchScript \(--format torchscript\) needs neither"
    ):
        pt2.requirements()


def test_a_sharded_export_records_the_parameters_each_format_writes(
    exported_small: Path, exported_pt2: Path
) -> None:
    """What a sharded export records of the other runners' models is what their exports write: the backend's
    parameters for TorchScript, none for PT2 (the backend's PT2 path ignores them all, rule A007)."""
    recorded = export.builtin_parameters(["multi_io", "multi_io_pt2", "token_encoder_pt2"])
    assert sorted(recorded) == ["multi_io", "multi_io_pt2", "token_encoder_pt2"]
    torchscript = read_config(exported_small / "multi_io" / "config.pbtxt")
    written = {k: v.string_value for k, v in torchscript.parameters.items()}
    assert written["INFERENCE_MODE"] == "true"
    assert written["DISABLE_OPTIMIZED_EXECUTION"] == "true"
    assert recorded["multi_io"] == written
    for name in ("multi_io_pt2", "token_encoder_pt2"):
        config = read_config(exported_pt2 / name / "config.pbtxt")
        assert len(config.parameters) == 0, f"{name}: the PT2 export writes no backend parameters"
        assert recorded[name] == {}


def test_a_pt2_copy_written_for_one_build_is_exported_again_for_the_other(
    exported_pt2: Path, tmp_path: Path
) -> None:
    """A session serves the repository with one PT2 build: a copy written for the other one (dynamic_batching or
    not) must not be kept as "unchanged", or the stock server would load a config only the patched build serves."""
    model = _copy(exported_pt2, tmp_path)  # written for the stock build, its stamp with it
    repository = model.root.parent

    def exported(build: Pt2Build) -> bool:
        result = export.export_builtin(
            ["multi_io"], repository=repository, model_formats=("pt2",), pt2_build=build
        )
        assert read_config(model.config).HasField("dynamic_batching") == (build == "patched")
        return not result[0].kept

    assert not exported("stock")  # as the fixture wrote it
    assert exported("patched")
    assert not exported("patched")
    assert exported("stock")
    assert _rules(model) == {}  # and it validates for the stock build again


class Counted(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (x > 0).sum().item()  # the tracer keeps the example's count; torch.export keeps the op


def test_a_torchscript_refusal_says_pt2_would_serve_the_model_when_it_does(tmp_path: Path) -> None:
    model = spec.ModelSpec(
        name="counted", module=Counted(), example_inputs=(torch.randn(2, 6),), max_batch_size=4
    )
    with pytest.raises(ExportError, match="the reloaded TorchScript disagrees with eager") as info:
        export.export(model, repository=tmp_path)
    assert "PT2 would, tried just now: torch.export and AOTInductor make a package" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # the trial package was scratch
    served = export.export(model, repository=tmp_path, model_format="pt2")  # and it does
    assert (served.model.root / "1" / "model.pt2").is_file()


class PerSample(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x.sum(dim=1)  # the second: one value a sample, [batch]


def test_one_value_a_sample_is_served_as_the_reference_records_it_in_both_formats(
    tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    """dims [ 1 ] with reshape { shape: [ ] }: Triton's core answers [batch, 1] for the model's [batch], on the
    TorchScript path and the PT2 one, and parity holds against the reference export recorded."""
    model = spec.ModelSpec(
        name="per_sample", module=PerSample(), example_inputs=(torch.randn(2, 3),), max_batch_size=4
    )
    repository = tmp_path / "repository"
    folders = [
        export.export(model, repository=repository).model,
        export.export(replace(model, name="per_sample_pt2"), repository=repository, model_format="pt2").model,
    ]
    with LocalServer(
        TritonFlags(model_repository=repository),
        log_path=tmp_path / "tritonserver.log",
        pytorch_backend=pytorch_backend,
        pt2_backend=pt2_backend,
    ) as server:
        server.wait_models_ready([f.name for f in folders])
        for folder in folders:
            ref = reference.load(folder)
            for case in ref.cases:
                for protocol in ("http", "grpc"):
                    got = client.infer(
                        server.endpoints,
                        protocol,
                        folder.name,
                        dict(zip([i.name for i in ref.inputs], case.inputs, strict=True)),
                        [o.name for o in ref.outputs],
                    )
                    assert got[1].shape == (case.batch_size, 1), (folder.name, protocol)
                    for served, recorded in zip(got, case.outputs, strict=True):
                        np.testing.assert_allclose(served, recorded, rtol=1e-5, atol=1e-5)
