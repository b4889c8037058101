"""The comparison rule, checked against values worked out by hand."""

from __future__ import annotations

import numpy as np

from tritonpt.parity import compare
from tritonpt.spec import Tolerance, tolerance_for


def test_integers_compare_exactly() -> None:
    expected = np.array([[1, 2, 3]], dtype=np.int32)
    result = compare("o", np.array([[1, 2, 4]], dtype=np.int32), expected, Tolerance.exact())
    assert not result.ok
    assert (result.mismatched, result.total) == (1, 3)
    assert result.worst_index == (0, 2)
    assert (result.worst_actual, result.worst_expected) == (4, 3)
    assert result.max_abs_error == 1.0


def test_float_within_allclose_bound() -> None:
    # |1.0001 - 1| = 1e-4 <= 1e-4 + 1e-4 * 1 -> ok; |2.001 - 2| = 1e-3 > 1e-4 + 2e-4 -> mismatch.
    expected = np.array([1.0, 2.0], dtype=np.float32)
    tol = Tolerance(atol=1e-4, rtol=1e-4)
    assert compare("o", np.array([1.0001, 2.0], dtype=np.float32), expected, tol).ok
    bad = compare("o", np.array([1.0, 2.001], dtype=np.float32), expected, tol)
    assert not bad.ok
    assert bad.worst_index == (1,)
    assert abs(bad.max_rel_error - 0.0005) < 1e-6
    assert "MISMATCH" in bad.describe()


def test_relative_error_is_guarded_against_zero_references() -> None:
    result = compare("o", np.array([1e-6], dtype=np.float64), np.array([0.0]), Tolerance(atol=1e-5, rtol=0.0))
    assert result.ok
    assert np.isfinite(result.max_rel_error)


def test_nan_matches_only_nan() -> None:
    expected = np.array([np.nan, 1.0])
    assert compare("o", np.array([np.nan, 1.0]), expected, Tolerance.exact()).ok
    assert not compare("o", np.array([0.0, 1.0]), expected, Tolerance(atol=1.0, rtol=1.0)).ok


def test_shape_and_dtype_mismatches_are_reported_not_broadcast() -> None:
    expected = np.zeros((2, 3), dtype=np.float32)
    shape = compare("o", np.zeros((3,), dtype=np.float32), expected, Tolerance.exact())
    assert not shape.ok
    assert not shape.shape_ok
    assert "shape [3] differs" in shape.describe()
    dtype = compare("o", np.zeros((2, 3), dtype=np.float64), expected, Tolerance.exact())
    assert not dtype.ok
    assert not dtype.dtype_ok


def test_tolerances_by_dtype_and_device() -> None:
    assert tolerance_for("TYPE_INT64") == Tolerance.exact()
    assert tolerance_for("TYPE_BOOL", gpu=True) == Tolerance.exact()
    assert tolerance_for("TYPE_FP32").atol < tolerance_for("TYPE_FP32", gpu=True).atol
    custom = Tolerance(atol=0.5, rtol=0.0)
    assert tolerance_for("TYPE_FP16", overrides={"TYPE_FP16": custom}) == custom
