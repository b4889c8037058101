"""tritonpt.operators.registry: the shipped registries are what each torch says of itself, never typed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tritonpt.operators import registry
from tritonpt.versions import VERSIONS, minor_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shipped() -> registry.Registries:
    found = registry.load()
    assert found is not None, f"no {registry.REGISTRIES}: run `nox -s compat -- --write`"
    return found


def test_the_shipped_registry_of_this_torch_is_what_this_torch_registers(
    shipped: registry.Registries, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read again from the torch the tests run on, as compat reads each environment's (a fresh interpreter): every
    schema, torchvision's and every shim equal. A second read of the same environment is the cache's."""
    from tritonpt_ci import compat  # noqa: PLC0415 - the CI program's own step

    held = shipped.of_minor(minor_of(torch.__version__))
    assert held is not None, f"no shipped registry of torch {torch.__version__}"
    out = tmp_path / "here.json.gz"
    compat.read_registry(None, out, tmp_path)
    here = registry.Registries.from_bytes(out.read_bytes()).registries[0]
    assert held.torch == here.torch
    assert held.schemas == here.schemas
    assert held.torchvision_schemas == here.torchvision_schemas
    assert held.shims == here.shims
    assert "cache: registry" in capsys.readouterr().err
    again = tmp_path / "a folder not made yet" / "again.json.gz"
    compat.read_registry(None, again, tmp_path)
    assert again.read_bytes() == out.read_bytes()
    assert capsys.readouterr().err.rstrip().endswith("hit")


def test_every_torch_compat_builds_against_has_a_registry(shipped: registry.Registries) -> None:
    assert shipped.minors == [c.minor for c in VERSIONS.compat]
    for entry in VERSIONS.compat:
        held = shipped.of_minor(entry.minor)
        assert held is not None
        assert held.torch.split("+")[0] == entry.torch
        assert held.torchvision.split("+")[0] == entry.torchvision


def test_what_each_minor_added_and_removed_is_in_the_data(shipped: registry.Registries) -> None:
    """The issue's worked examples, as the registries read them: linalg_polar from 2.14, cholesky until 2.13."""
    assert shipped.having("aten::linalg_polar") == ["2.14", "2.15"]
    assert shipped.having("aten::cholesky") == [m for m in shipped.minors if m not in ("2.14", "2.15")]
    assert "aten::cat.names" not in shipped.of_minor("2.13").names  # type: ignore[union-attr]
    assert shipped.of_minor("2.12").has("aten::cat.names")  # type: ignore[union-attr]


def test_a_name_resolves_by_any_overload_and_a_qualified_name_by_its_own() -> None:
    one = registry.Registry(
        torch="2.99.0", schemas=frozenset({"aten::cat.names(Tensor[] tensors, str dim) -> Tensor"})
    )
    assert one.has("aten::cat")
    assert one.has("aten::cat.names")
    assert not one.has("aten::cat.out")
    assert not one.has("torchvision::nms")


def test_the_compact_form_reads_back_what_it_wrote(shipped: registry.Registries) -> None:
    again = registry.Registries.from_bytes(shipped.to_bytes())
    assert again == shipped
    assert len(registry.REGISTRIES.read_bytes()) < 120_000  # the union once, a bit mask per torch


def test_the_page_is_the_one_the_data_makes(shipped: registry.Registries) -> None:
    page = ROOT / registry.PAGE
    assert page.read_text(encoding="utf-8") == registry.render(shipped), f"stale: run `{registry.REGENERATE}`"
