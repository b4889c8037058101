"""Compare served (or reloaded) outputs with eager references, with per-dtype tolerances.

Integers and bool compare exactly. Floats use numpy.allclose's rule ``|a - r| <= atol + rtol * |r|``.
A comparison reports the maximum absolute error, the maximum relative error (guarded against zero
references) and the worst element, so a failure says how far off and where.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tritonpt.spec import Tolerance

# Relative error divides by max(|reference|, _TINY) so zeros in the reference do not explode it.
_TINY = 1e-12


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The result of comparing one output array with its reference."""

    name: str
    ok: bool
    shape_ok: bool
    dtype_ok: bool
    max_abs_error: float
    max_rel_error: float
    worst_index: tuple[int, ...]
    worst_actual: float
    worst_expected: float
    mismatched: int
    total: int
    tolerance: Tolerance
    detail: str = ""

    def describe(self) -> str:
        if not self.shape_ok or not self.dtype_ok:
            return f"{self.name}: {self.detail}"
        verdict = "ok" if self.ok else "MISMATCH"
        return (
            f"{self.name}: {verdict}; max abs error {self.max_abs_error:.3g}, max rel error "
            f"{self.max_rel_error:.3g} (atol {self.tolerance.atol:g}, rtol {self.tolerance.rtol:g}); "
            f"{self.mismatched}/{self.total} elements out of tolerance; worst at {list(self.worst_index)}: "
            f"got {self.worst_actual!r}, expected {self.worst_expected!r}"
        )


def compare(
    name: str,
    actual: npt.NDArray[np.generic],
    expected: npt.NDArray[np.generic],
    tolerance: Tolerance,
) -> Comparison:
    """Compare ``actual`` with ``expected`` elementwise under ``tolerance``."""
    if actual.shape != expected.shape:
        detail = f"shape {list(actual.shape)} differs from the reference's {list(expected.shape)}"
        return _unmatched(name, expected, tolerance, shape_ok=False, detail=detail)
    if actual.dtype != expected.dtype:
        detail = f"dtype {actual.dtype} differs from the reference's {expected.dtype}"
        return _unmatched(name, expected, tolerance, dtype_ok=False, detail=detail)
    if expected.size == 0:
        return Comparison(
            name=name, ok=True, shape_ok=True, dtype_ok=True, max_abs_error=0.0, max_rel_error=0.0,
            worst_index=(), worst_actual=float("nan"), worst_expected=float("nan"), mismatched=0, total=0,
            tolerance=tolerance,
        )  # fmt: skip
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    abs_err = np.abs(a - e)
    # NaN in the same place on both sides counts as equal, as in numpy.allclose(equal_nan=True).
    both_nan = np.isnan(a) & np.isnan(e)
    abs_err = np.where(both_nan, 0.0, abs_err)
    abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)
    rel_err = abs_err / np.maximum(np.abs(e), _TINY)
    # A NaN reference allows nothing but NaN (handled above), so its allowance is 0.
    allowed = np.nan_to_num(tolerance.atol + tolerance.rtol * np.abs(e), nan=0.0)
    bad = abs_err > allowed
    # The worst element is the one furthest beyond its allowance (or the largest error if all pass).
    excess = abs_err - allowed
    worst = np.unravel_index(int(np.argmax(excess)), expected.shape)
    return Comparison(
        name=name,
        ok=not bool(bad.any()),
        shape_ok=True,
        dtype_ok=True,
        max_abs_error=float(abs_err.max()),
        max_rel_error=float(rel_err.max()),
        worst_index=tuple(int(i) for i in worst),
        worst_actual=actual[worst].item(),
        worst_expected=expected[worst].item(),
        mismatched=int(bad.sum()),
        total=int(expected.size),
        tolerance=tolerance,
    )


def _unmatched(
    name: str,
    expected: npt.NDArray[np.generic],
    tolerance: Tolerance,
    *,
    detail: str,
    shape_ok: bool = True,
    dtype_ok: bool = True,
) -> Comparison:
    """A comparison that could not look at values: every element counts as mismatched."""
    return Comparison(
        name=name, ok=False, shape_ok=shape_ok, dtype_ok=dtype_ok, max_abs_error=float("nan"),
        max_rel_error=float("nan"), worst_index=(), worst_actual=float("nan"), worst_expected=float("nan"),
        mismatched=int(expected.size), total=int(expected.size), tolerance=tolerance, detail=detail,
    )  # fmt: skip
