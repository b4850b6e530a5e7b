"""`accounting.search.narrow`, the one bisection behind σ, q, c and exposure searches."""
from __future__ import annotations

import math

import numpy as np
import pytest

from repoguard.accounting.search import narrow


def test_log_scale_finds_the_threshold_to_the_relative_tolerance():
    calls = []

    def ok(x):
        calls.append(x)
        return x * x >= 2.0

    lo, hi = narrow(ok, 1e-3, 1e3, rel_tol=1e-9)
    assert lo < math.sqrt(2) <= hi and hi / lo - 1 <= 1e-9
    assert calls[0] == pytest.approx(1.0)                 # the geometric mean of the bracket first


def test_largest_x_with_a_property_keeps_the_low_end():
    lo, hi = narrow(lambda c: not (c <= 10.0), 1.0, 100.0, iters=40)   # P(c) = c ≤ 10, true at lo
    assert lo <= 10.0 < hi and lo == pytest.approx(10.0, rel=1e-9)


def test_arithmetic_bisection_stops_at_the_absolute_tolerance():
    lo, hi = narrow(lambda e: e >= 7.25, 0.0, 64.0, log_scale=False, abs_tol=1e-3)
    assert lo < 7.25 <= hi and hi - lo <= 1e-3


def test_arrays_of_brackets_match_the_scalar_search_elementwise():
    thr = np.array([0.1, 2.0, 37.5])
    lo, hi = np.full(3, -5.0), np.full(3, 50.0)
    alo, ahi = narrow(lambda x: x >= thr, lo, hi, log_scale=False, iters=50)
    for j in range(3):
        slo, shi = narrow(lambda x: x >= thr[j], -5.0, 50.0, log_scale=False, iters=50)
        assert (alo[j], ahi[j]) == (slo, shi)


@pytest.mark.parametrize("kw", [{}, {"iters": 3, "rel_tol": 1e-3}])
def test_exactly_one_stopping_rule(kw):
    with pytest.raises(ValueError, match="exactly one"):
        narrow(lambda x: True, 1.0, 2.0, **kw)


def test_log_scale_needs_a_positive_bracket():
    with pytest.raises(ValueError, match="lo > 0"):
        narrow(lambda x: True, 0.0, 2.0, iters=3)
    with pytest.raises(ValueError, match="iters"):
        narrow(lambda x: x > 1, np.zeros(2), np.ones(2), log_scale=False, rel_tol=1e-3)
