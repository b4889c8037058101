"""The zoo's rows: the families it must cover, and the table of its page (docs/figures/zoo.md) kept to them.
The zoo itself runs in `nox -s zoo` (and its smoke in CI): it exports and serves for real."""

from __future__ import annotations

import re
from pathlib import Path

from tritonpt_ci.zoo import GOAL, PAGE, TABLE_END, TABLE_START, Row, ZooReport, chosen, refusal_problems
from tritonpt_ci.zoo.architectures import ARCHITECTURES, EXPECTED_REFUSALS

ZOO_PAGE = Path(__file__).resolve().parents[2] / PAGE


def test_the_zoo_covers_the_libraries_and_families_users_bring() -> None:
    names = [a.name for a in ARCHITECTURES]
    assert len(names) == len(set(names))
    assert len(names) >= 25
    families = {(a.library, a.family) for a in ARCHITECTURES}
    for wanted in [
        ("torchvision", "classification"),
        ("torchvision", "segmentation"),
        ("torchvision", "video"),
        ("torchvision", "detection"),
        ("transformers", "encoder"),
        ("transformers", "decoder"),
        ("transformers", "vision"),
    ]:
        assert wanted in families, wanted


def test_the_smoke_is_a_few_of_each_kind() -> None:
    smoke = chosen(smoke=True, only=[])
    assert 3 <= len(smoke) <= 6
    assert {a.library for a in smoke} == {"torchvision", "transformers"}


def test_the_zoo_page_table_has_a_row_per_architecture() -> None:
    text = ZOO_PAGE.read_text(encoding="utf-8")
    table = text[text.index(TABLE_START) : text.index(TABLE_END)]
    rows = re.findall(r"^\| (\S+) \(", table, flags=re.MULTILINE)
    assert rows == [a.name for a in ARCHITECTURES], f"run `nox -s zoo -- --page {PAGE}`"


def _row(name: str, *, exported: bool, refusal: str = "") -> Row:
    row = Row(name=name, library="torchvision", version="0.24.1", family="classification", exported=exported)
    row.refusal = refusal
    if exported:
        row.served, row.checks = True, 4
    return row


def test_every_expected_refusal_names_an_architecture_of_the_zoo_and_says_why() -> None:
    names = {a.name for a in ARCHITECTURES}
    assert set(EXPECTED_REFUSALS) <= names
    assert all(r.says and r.why for r in EXPECTED_REFUSALS.values())


def test_an_architecture_that_served_and_is_now_refused_fails_the_zoo_whatever_the_ratio() -> None:
    rows = [_row(f"m{i}", exported=True) for i in range(99)] + [
        _row("resnet18", exported=False, refusal="an op")
    ]
    report = ZooReport(rows=rows, server="s", seconds=1.0)
    assert report.served_share >= GOAL
    assert any(
        p.startswith("resnet18: export refused it, and no refusal of it is expected")
        for p in report.problems()
    )


def test_the_expected_refusal_passes_and_another_reason_or_a_serving_one_does_not() -> None:
    name, expected = next(iter(EXPECTED_REFUSALS.items()))
    good = [_row(name, exported=False, refusal=f"no: {expected.says}: on inputs of shapes ...")]
    assert refusal_problems(good) == []
    other = refusal_problems([_row(name, exported=False, refusal="an op the tracer cannot follow")])
    assert other
    assert "another reason than the expected one" in other[0]
    served = refusal_problems([_row(name, exported=True)])
    assert served
    assert "take it off the list" in served[0]
