"""The differential tier: the validator's verdicts held against the real server's (see test_validate_vs_triton.py)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("tritonpt").addoption(
        "--reports", default="reports", help="folder for differential.md (default reports/)"
    )
