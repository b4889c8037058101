"""The zoo's rows: the families it must cover, and the README's table kept to them. The zoo itself runs in
`nox -s zoo` (and its smoke in CI): it exports and serves for real."""

from __future__ import annotations

import re
from pathlib import Path

from tritonpt.testing.zoo import README_END, README_START, chosen
from tritonpt.testing.zoo.architectures import ARCHITECTURES

README = Path(__file__).resolve().parents[2] / "README.md"


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


def test_the_readme_table_has_a_row_per_architecture() -> None:
    text = README.read_text(encoding="utf-8")
    table = text[text.index(README_START) : text.index(README_END)]
    rows = re.findall(r"^\| (\S+) \(", table, flags=re.MULTILINE)
    assert rows == [a.name for a in ARCHITECTURES], "run `nox -s zoo -- --readme README.md`"
