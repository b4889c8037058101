"""tritonpt_ci.watch: what is new on PyPI and GitHub against versions.toml, and the rows it writes (the fixtures the
workflow tier serves to compat-watch.yml; tests/workflows runs the whole lane under act)."""

from __future__ import annotations

import difflib
import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt.doctor import compat
from tritonpt.versions import VERSIONS, CompatTorch, load
from tritonpt_ci import watch

FIXTURES = Path(__file__).resolve().parents[1] / "workflows" / "fixtures"


def _lookups(name: str) -> watch.Lookups:
    return watch.Lookups(json.loads((FIXTURES / name).read_text(encoding="utf-8")))


def test_today_nothing_is_new() -> None:
    lookups = _lookups("lookups-today.json")
    assert watch.new_torch(lookups) is None  # 2.15.0 has its row; 2.16.0rc1 is a pre-release
    assert watch.new_release(lookups) is None  # 26.11 (2.75.0) has its row


def test_a_newer_release_on_github_is_new() -> None:
    release = watch.new_release(_lookups("lookups-new-release.json"))
    assert release == watch.NewRelease(
        ngc="26.12",
        server="2.76.0",
        page="https://github.com/triton-inference-server/server/releases/tag/v2.76.0",
    )


def test_a_torch_minor_the_table_lacks_is_new_and_served_on_the_newest_line() -> None:
    before = replace(VERSIONS, compat=tuple(c for c in VERSIONS.compat if c.minor != "2.15"))
    torch = watch.new_torch(_lookups("lookups-today.json"), before)
    assert torch == watch.NewTorch(minor="2.15", torch="2.15.0", torchvision="0.29.2", line="r26.05")


def test_the_rows_written_parse_where_they_belong(tmp_path: Path) -> None:
    text = watch.TOML.read_text(encoding="utf-8")
    written = watch.add_rows(
        text,
        watch.NewTorch(minor="2.16", torch="2.16.0", torchvision="0.31.0", line="r26.05"),
        watch.NewRelease(ngc="26.12", server="2.76.0", page="https://example/v2.76.0"),
    )
    path = tmp_path / "versions.toml"
    path.write_text(written, encoding="utf-8")
    versions = load(path)
    assert versions.release("26.12").server == "2.76.0"
    assert versions.release("26.12").backend_torch is None  # not stated until a source states it
    assert "https://example/v2.76.0" in versions.release("26.12").sources["server"]
    assert versions.compat_torch("2.16") == CompatTorch(
        minor="2.16", torch="2.16.0", torchvision="0.31.0", line="r26.05"
    )
    assert versions.newest_compat.torch == "2.16.0"
    # the rows sit with their kind, before the next section's comments, and nothing else moved
    raw = tomllib.loads(written)
    assert raw["triton"]["releases"][-1]["ngc"] == "26.12"
    assert written.index('ngc = "26.12"') < written.index("[compat]")
    removed = [
        line for line in difflib.ndiff(text.splitlines(), written.splitlines()) if line.startswith("- ")
    ]
    assert removed == []
    assert written.count("[compat]\n") == 1


def test_the_pull_requests_body_gives_each_verdict_of_the_new_torch() -> None:
    torch = watch.NewTorch(minor="2.15", torch="2.15.0", torchvision="0.29.2", line="r26.05")
    table = compat.load()
    assert table is not None
    body = watch.body(torch, None, table, "")
    pairs = [p for p in table.pairs if "2.15" in (p.exported_minor, p.served_minor)]
    assert pairs
    for pair in pairs:
        assert f"- {pair.verdict}: {pair.describe()}" in body
    failed = watch.body(torch, None, None, "compat exited 1:\nno torch 2.15.0 wheel")
    assert "## What could not be measured" in failed
    assert "no torch 2.15.0 wheel" in failed


def test_a_new_torch_is_admitted_by_pyprojects_ranges() -> None:
    text = (watch.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    newer = watch.admit(
        text, watch.NewTorch(minor="2.16", torch="2.16.0", torchvision="0.30.0", line="r26.05")
    )
    assert '"torch>=2.8,<2.17"' in newer
    assert '"torchvision>=0.23,<0.31"' in newer
    assert (
        watch.admit(text, watch.NewTorch(minor="2.15", torch="2.15.0", torchvision="0.29.2", line="r26.05"))
        == text
    )


def test_a_lookup_the_fixture_lacks_names_the_url() -> None:
    with pytest.raises(KeyError, match=r"pypi\.org/pypi/torch/json"):
        watch.Lookups({}).get(watch.PYPI.format(package="torch"))
