"""The differential tier: the validator's verdicts held against the real server's (see test_validate_vs_triton.py)."""

from __future__ import annotations

import pytest

from tritonpt.options import add_arguments


def pytest_addoption(parser: pytest.Parser) -> None:
    add_arguments(parser.getgroup("tritonpt").addoption, ("reports",))  # differential.md goes there
