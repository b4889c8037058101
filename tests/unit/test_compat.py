"""The compatibility table: its verdicts from what each model did, the doctor's reading of it, its page, and
versions.toml covering every libtorch minor an NGC release bundles."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonpt.doctor import compat
from tritonpt.versions import VERSIONS, minor_of

ROOT = Path(__file__).resolve().parents[2]


def _pair(*models: compat.ModelResult, fmt: str = "torchscript") -> compat.Pair:
    return compat.Pair(
        exported_by="2.9.1+cu128",
        served_by="2.8.0+cu128",
        line="pytorch_backend r25.10 (3281319)",
        format=fmt,
        models=models,  # type: ignore[arg-type]
    )


PARITY = compat.ModelResult(model="a", loads=True, parity=True, max_abs_error=0.0)
REFUSED = compat.ModelResult(model="b", loads=False, error="Internal: Unknown builtin op: aten::foo")
DIFFERS = compat.ModelResult(
    model="c", loads=True, parity=False, max_abs_error=3.0, error="b1 http: 3.0 > 1e-5"
)
UNEXPORTED = compat.ModelResult(model="d", loads=False, error="not exported: torch 2.12.1's export exited 1")


@pytest.mark.parametrize(
    ("models", "verdict"),
    [
        ((PARITY,), "parity"),
        ((REFUSED,), "refused at load"),
        ((PARITY, REFUSED), "partly served"),
        ((PARITY, DIFFERS), "outputs differ"),
        ((UNEXPORTED,), "not exported"),
        ((PARITY, UNEXPORTED), "partly served"),
    ],
)
def test_a_pairs_verdict_follows_its_models(models: tuple[compat.ModelResult, ...], verdict: str) -> None:
    assert _pair(*models).verdict == verdict


def test_a_refused_pair_says_the_servers_words() -> None:
    pair = _pair(PARITY, REFUSED)
    assert "Unknown builtin op: aten::foo" in pair.describe()
    assert pair.first_error == REFUSED.error


def test_the_table_round_trips_and_finds_pairs_by_minor() -> None:
    table = compat.Table(
        measured="2026-12-06", server="2.51.0", lines={"r25.10": "3281319"}, pairs=(_pair(PARITY),)
    )
    again = compat.Table.from_json(table.to_json())
    assert again == table
    assert again.pair("2.9", "2.8", "torchscript") == table.pairs[0]
    assert again.pair("2.9", "2.8", "pt2") is None
    assert again.pair("2.12", "2.8", "torchscript") is None


def test_verdicts_name_each_model_and_leave_out_the_figures() -> None:
    one = compat.Table(measured="2026-12-06", server="2.51.0", pairs=(_pair(PARITY, REFUSED),))
    other = compat.Table(
        measured="2027-01-01",
        server="2.51.0",
        pairs=(_pair(compat.ModelResult(model="a", loads=True, parity=True, max_abs_error=1e-7), REFUSED),),
    )
    assert one.verdicts() == other.verdicts()
    assert one.verdicts()["2.9 -> 2.8 torchscript b"] == "refused"


def test_versions_toml_has_a_compat_entry_for_every_minor_ngc_bundles() -> None:
    bundled = {minor_of(r.backend_torch) for r in VERSIONS.triton_releases if r.backend_torch}
    assert bundled <= {c.minor for c in VERSIONS.compat}
    for release in VERSIONS.triton_releases:
        if release.backend_torch:
            assert release.backend_torch_source, f"{release.ngc}: backend_torch without its source"
    for entry in VERSIONS.compat:
        assert entry.torch.startswith(entry.minor + "."), entry
        VERSIONS.line(entry.line)  # a pinned line


def test_the_shipped_table_covers_every_minor_both_ways() -> None:
    table = compat.load()
    assert table is not None, f"no {compat.TABLE}: `nox -s compat -- --write`"
    ours = minor_of(VERSIONS.pytorch.torch)
    for entry in VERSIONS.compat:
        assert table.pair(ours, entry.minor, "torchscript") is not None, entry.minor
        if VERSIONS.line(entry.line) is VERSIONS.pt2.build:
            assert table.pair(ours, entry.minor, "pt2") is not None, entry.minor
    newest = max(VERSIONS.compat, key=lambda c: tuple(int(x) for x in c.torch.split(".")))
    assert table.pair(newest.minor, ours, "torchscript") is not None


def test_the_committed_page_is_the_tables() -> None:
    assert (ROOT / compat.PAGE).read_text(encoding="utf-8") == compat.render(compat.load()), (
        f"{compat.PAGE} is stale: run `{compat.REGENERATE}`"
    )


def test_the_readmes_answer_is_the_tables() -> None:
    """The README says every NGC release from 25.08 to 26.05 serves a torch 2.9 TorchScript export with parity, and
    26.03 to 26.05 its PT2 package: true only while every such pair of the table is."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "from 25.08 to 26.05" in readme
    table = compat.load()
    assert table is not None
    ours = minor_of(VERSIONS.pytorch.torch)
    for release in VERSIONS.triton_releases:
        if not release.backend_torch or not "25.08" <= release.ngc <= "26.05":
            continue
        formats = ("torchscript", "pt2") if release.serves_torch_aoti else ("torchscript",)
        for fmt in formats:
            pair = table.pair(ours, minor_of(release.backend_torch), fmt)
            assert pair is not None, (release.ngc, fmt)
            assert pair.verdict == "parity", (
                f"README.md's answer no longer holds for {release.ngc}: {pair.describe()}"
            )


def test_a_leg_reads_a_refusal_in_the_servers_words_and_parity_from_the_rows() -> None:
    from tritonpt_ci import compat as run  # noqa: PLC0415 - the CI program, only here

    refused = run.model_result("m", (False, "Internal: failed to load:\n  Unknown builtin op"), [])
    assert (refused.loads, refused.error) == (False, "Internal: failed to load: Unknown builtin op")
    row = {"ok": True, "max_abs_error": 1e-6, "case": "b1", "batch_size": 1, "protocol": "http", "detail": ""}
    bad = {**row, "ok": False, "max_abs_error": 2.0, "detail": "OUTPUT__0 differs"}
    assert run.model_result("m", (True, ""), [row]).parity
    differs = run.model_result("m", (True, ""), [row, bad])
    assert (differs.parity, differs.max_abs_error) == (False, 2.0)
    assert "OUTPUT__0 differs" in differs.error
    assert not run.model_result("m", (True, ""), []).parity  # loaded, but nothing checked: no parity


def test_a_measurement_that_differs_from_the_shipped_table_fails_naming_the_pair(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dataclasses import replace  # noqa: PLC0415

    from tritonpt_ci import compat as run  # noqa: PLC0415

    shipped = compat.load()
    assert shipped is not None
    assert run.held(shipped) == 0
    first = shipped.pairs[0]
    refused = replace(
        first, models=(replace(first.models[0], loads=False, error="refused"), *first.models[1:])
    )
    assert run.held(replace(shipped, pairs=(refused, *shipped.pairs[1:]))) == 1
    said = capsys.readouterr().err
    assert f"{first.exported_minor} -> {first.served_minor} {first.format}" in said
    assert "nox -s compat -- --write" in said
