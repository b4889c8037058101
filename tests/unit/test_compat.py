"""The compatibility table: its verdicts from what each model did, the doctor's reading of it, its page, and
versions.toml covering every libtorch minor an NGC release bundles."""

from __future__ import annotations

import dataclasses
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
UNBUILT = compat.ModelResult(
    model="e",
    loads=False,
    error=f"{compat.NOT_BUILT}: ATen.h:9:2: error: #error C++20 or later compatible compiler",
)


@pytest.mark.parametrize(
    ("models", "verdict"),
    [
        ((PARITY,), "parity"),
        ((REFUSED,), "refused at load"),
        ((PARITY, REFUSED), "partly served"),
        ((PARITY, DIFFERS), "outputs differ"),
        ((UNEXPORTED,), "not exported"),
        ((PARITY, UNEXPORTED), "partly served"),
        ((UNBUILT, UNBUILT), "not built"),
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
            assert release.sources.get("backend_torch"), f"{release.ngc}: backend_torch without its source"
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
    newest = VERSIONS.newest_compat
    for minor in VERSIONS.compat_reverse:
        assert table.pair(newest.minor, minor, "torchscript") is not None, minor
        if VERSIONS.line(VERSIONS.compat_torch(minor).line) is VERSIONS.pt2.build:  # type: ignore[union-attr]
            assert table.pair(newest.minor, minor, "pt2") is not None, minor


def test_the_reverse_legs_serve_the_newest_torchs_exports_on_the_two_builds_teams_keep() -> None:
    from tritonpt_ci import compat as run  # noqa: PLC0415 - the CI program, only here

    newest, here = VERSIONS.newest_compat.torch, VERSIONS.pytorch.torch
    assert set(VERSIONS.compat_reverse) == {"2.9", "2.12"}
    legs = run.plan()
    assert [(newest, "2.9"), (newest, "2.12")] == [leg for leg in legs if leg[0] == newest]
    assert [on for made, on in legs if made == here] == [c.minor for c in VERSIONS.compat]
    # what a new torch adds: its own forward leg, and the reverse legs its exports make
    minor = VERSIONS.newest_compat.minor
    assert run.plan([minor]) == [(here, minor), (newest, "2.9"), (newest, "2.12")]
    assert run.plan(["2.13"]) == [(here, "2.13")]


def test_a_partial_run_keeps_the_shipped_pairs_of_the_legs_it_did_not_run() -> None:
    from tritonpt_ci import compat as run  # noqa: PLC0415

    shipped = compat.Table(
        measured="2026-12-06", server="2.51.0", pairs=(_pair(PARITY), _pair(REFUSED, fmt="pt2"))
    )
    newer = compat.Pair(
        exported_by="2.9.1+cu128",
        served_by="2.15.0+cu132",
        line="r26.05",
        format="torchscript",
        models=(PARITY,),
    )
    measured = compat.Table(measured="2026-12-07", server="2.51.0", pairs=(newer,))
    merged = run._merged(shipped, measured)
    assert merged.measured == "2026-12-07"
    assert set(merged.pairs) == {*shipped.pairs, newer}
    again = compat.Pair(
        exported_by="2.9.1+cu128",
        served_by="2.8.0+cu128",
        line="r25.10",
        format="torchscript",
        models=(DIFFERS,),
    )
    replaced = run._merged(shipped, compat.Table(measured="x", server="2.51.0", pairs=(again,)))
    assert again in replaced.pairs
    assert shipped.pairs[0] not in replaced.pairs  # the leg ran again: its pairs are the new ones


def test_a_pt2_row_names_only_the_releases_whose_backend_serves_torch_aoti() -> None:
    """26.02 bundles libtorch 2.11 as 26.03 does, but its backend has no PT2 path (versions.toml)."""
    assert not VERSIONS.release("26.02").serves_torch_aoti
    pt2 = compat.Pair(
        exported_by="2.9.1+cu128", served_by="2.11.0+cu130", line="pytorch_backend r26.05 (55bbe27)",
        format="pt2", models=(PARITY,),
    )  # fmt: skip
    torchscript = dataclasses.replace(pt2, format="torchscript")
    assert compat.stands_in_for(pt2) == ["r26.03"]
    assert compat.stands_in_for(torchscript) == ["r26.02", "r26.03"]
    page = compat.render(compat.Table(measured="2026-12-08", server="2.51.0", pairs=(pt2, torchscript)))
    assert "| 2.11.0+cu130 (26.03) | pytorch_backend r26.05 (55bbe27), standing in for r26.03 | pt2 |" in page
    assert (
        "| 2.11.0+cu130 (26.02, 26.03) | pytorch_backend r26.05 (55bbe27), standing in for r26.02, r26.03 |"
        in page
    )


def test_each_row_names_the_branches_its_line_stands_in_for() -> None:
    pair = compat.Pair(
        exported_by="2.9.1+cu128", served_by="2.13.0+cu130", line="pytorch_backend r26.05 (55bbe27)",
        format="torchscript", models=(PARITY,),
    )  # fmt: skip
    assert compat.stands_in_for(pair) == ["r26.07"]
    page = compat.render(compat.Table(measured="2026-12-07", server="2.51.0", pairs=(pair,)))
    assert "| 2.13.0+cu130 (26.07) | pytorch_backend r26.05 (55bbe27), standing in for r26.07 |" in page
    own = compat.Pair(
        exported_by="2.9.1+cu128", served_by="2.12.1+cu130", line="pytorch_backend r26.05 (55bbe27)",
        format="torchscript", models=(PARITY,),
    )  # fmt: skip
    assert compat.stands_in_for(own) == ["r26.04", "r26.06"]  # 26.05 is its own line
    newest = compat.Pair(
        exported_by="2.9.1+cu128", served_by="2.15.0+cu132", line="pytorch_backend r26.05 (55bbe27)",
        format="torchscript", models=(PARITY,),
    )  # fmt: skip
    assert "2.15.0+cu132 (no release states it)" in compat.render(
        compat.Table(measured="2026-12-07", server="2.51.0", pairs=(newest,))
    )


def test_the_committed_page_is_the_tables() -> None:
    assert (ROOT / compat.PAGE).read_text(encoding="utf-8") == compat.render(compat.load()), (
        f"{compat.PAGE} is stale: run `{compat.REGENERATE}`"
    )


def test_the_readmes_answer_is_the_tables() -> None:
    """The README says every NGC release from 25.08 to 26.08 serves a torch 2.9 TorchScript export with parity, and
    26.03 to 26.08 its PT2 package, and torch 2.15's exports serve on the 2.9 and 2.12 builds: true only while every
    such pair of the table is."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "from 25.08 to 26.08" in readme
    assert "PT2 (`torch_aoti`) on 26.03 to 26.08" in readme
    newest = VERSIONS.newest_compat
    for minor in VERSIONS.compat_reverse:
        for fmt in ("torchscript", "pt2") if minor == "2.12" else ("torchscript",):
            pair = compat.load().pair(newest.minor, minor, fmt)  # type: ignore[union-attr]
            assert pair is not None, (minor, fmt)
            assert pair.verdict == "parity", pair.describe()
    table = compat.load()
    assert table is not None
    ours = minor_of(VERSIONS.pytorch.torch)
    for release in VERSIONS.triton_releases:
        if not release.backend_torch or not "25.08" <= release.ngc <= "26.08":
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
    served = next(m for m in first.models if m.loads)
    refused = replace(
        first,
        models=tuple(replace(m, loads=False, error="refused") if m is served else m for m in first.models),
    )
    assert run.held(replace(shipped, pairs=(refused, *shipped.pairs[1:]))) == 1
    said = capsys.readouterr().err
    assert f"{first.exported_minor} -> {first.served_minor} {first.format}" in said
    assert "nox -s compat -- --write" in said


POLAR = "Unknown builtin op: aten::linalg_polar."
FORETOLD = compat.ModelResult(
    model="edge_polar",
    loads=False,
    error=f"Internal: failed to load model 'edge_polar': {POLAR} Could not",
    predicted=POLAR,
)


@pytest.mark.parametrize(
    ("model", "disagrees"),
    [
        (FORETOLD, False),  # refused as predicted, in the predicted words
        (
            compat.ModelResult(model="edge_polar", loads=True, parity=True, predicted=POLAR),
            True,
        ),  # loaded after all
        (compat.ModelResult(model="edge_polar", loads=False, error="Internal: other", predicted=POLAR), True),
        (REFUSED, True),  # an operator refusal nobody predicted
        (
            compat.ModelResult(model="f", loads=False, error="Internal: unexpected platform"),
            False,
        ),  # not ours to say
        (PARITY, False),
        (UNEXPORTED, False),
    ],
    ids=[
        "foretold",
        "loaded-against-prediction",
        "refused-otherwise",
        "unforetold",
        "other-refusal",
        "parity",
        "unexported",
    ],
)
def test_the_doctors_prediction_is_held_to_what_the_server_did(
    model: compat.ModelResult, disagrees: bool
) -> None:
    assert model.disagrees is disagrees


def test_a_foretold_refusal_is_shown_beside_the_pairs_verdict_and_does_not_make_it() -> None:
    pair = _pair(PARITY, FORETOLD)
    assert pair.verdict == "parity"
    assert pair.foretold == (FORETOLD,)
    assert "refused as the doctor predicted: edge_polar" in pair.describe()
    table = compat.Table(measured="2026-12-07", server="2.51.0", pairs=(pair,))
    page = compat.render(table)
    assert f"parity; refused as the doctor predicted: edge_polar (`{POLAR}`)" in page
    assert "edge_polar refused as the doctor predicted" in page
