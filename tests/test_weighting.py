"""The weighting LP (Hush eq. 1) against scipy's HiGHS, caps, and the c rule."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.stats import norm

from repoguard.planning.weighting import SweepRow, binary_kl, pick_c, secret_caps, solve_weights


def _random_incidence(seed, n=120, k=15, density=0.06):
    rng = np.random.default_rng(seed)
    m = sp.random(n, k, density=density, random_state=rng, format="csr").astype(bool)
    caps = rng.uniform(0.05, 1.0, k)
    return m, caps


def _highs(m, caps, c):
    m = sp.csr_matrix(m, dtype=float)
    tied = np.asarray(m.getnnz(axis=1) > 0)
    a = m[tied].T
    res = linprog(-np.ones(a.shape[1]), A_ub=a, b_ub=c * caps, bounds=(0, 1), method="highs")
    assert res.status == 0
    return -res.fun + (~tied).sum()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("solver", ["glop", "pdlp"])
def test_lp_optimum_matches_highs(seed, solver):
    m, caps = _random_incidence(seed)
    for c in (0.25, 1.0, 4.0):
        res = solve_weights(m, caps, c, solver=solver, tolerance=1e-8)
        w = res.w
        assert np.all((w >= 0) & (w <= 1))
        assert np.all(m.T.astype(float) @ w <= c * caps * (1 + 1e-9) + 1e-12)   # feasible
        assert w.sum() == pytest.approx(_highs(m, caps, c), rel=1e-5 if solver == "pdlp" else 1e-9)
        assert res.solver == solver.upper()
        assert res.iterations >= 0 and res.gap >= 0


def test_untied_examples_keep_full_weight_and_are_not_variables():
    m = sp.csr_matrix(np.array([[1, 0], [1, 1], [0, 0], [0, 1], [0, 0]], dtype=bool))
    res = solve_weights(m, np.array([0.5, 0.3]), 1.0)
    assert res.w[2] == 1.0 and res.w[4] == 1.0
    assert res.n_vars == 3 and res.n_constraints == 2
    assert res.w[[0, 1]].sum() <= 0.5 + 1e-12 and res.w[[1, 3]].sum() <= 0.3 + 1e-12


def test_caps():
    p, r = np.array([1e-10, 1e-4]), np.array([1e-3, 1e-2])
    kl = secret_caps(p, r, "kl")
    assert kl[0] == pytest.approx(1e-3 * math.log(1e-3 / 1e-10) + (1 - 1e-3) * math.log((1 - 1e-3) / (1 - 1e-10)))
    assert secret_caps(p, r, "gdp") == pytest.approx(norm.isf(p) - norm.isf(r))
    assert binary_kl(0.3, 0.3) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        secret_caps(p, r, "eps")


def test_pick_c_maximises_signal_to_noise():
    rows = [SweepRow(0.5, 0.5, 100.0, 2.0, 50.0, {}), SweepRow(1.0, 0.6, 150.0, 2.5, 60.0, {}),
            SweepRow(2.0, 0.7, 180.0, 4.0, 45.0, {}), SweepRow(4.0, 0.9, 300.0, math.inf, 0.0, {})]
    assert pick_c(rows).c == 1.0
    tie = [SweepRow(2.0, 0.5, 100.0, 2.0, 50.0, {}), SweepRow(1.0, 0.5, 50.0, 1.0, 50.0, {})]
    assert pick_c(tie).c == 1.0
    with pytest.raises(ValueError):
        pick_c([SweepRow(1.0, 0.1, 1.0, math.inf, 0.0, {})])


def test_bad_arguments():
    m, caps = _random_incidence(0)
    with pytest.raises(ValueError):
        solve_weights(m, caps[:-1], 1.0)
    with pytest.raises(ValueError):
        solve_weights(m, caps, 0.0)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("solver", ["glop", "pdlp"])
def test_valued_objective_matches_highs_and_keeps_the_constraints(seed, solver):
    """Issue 44 item 3: with `value`, the LP maximises Σ v·w under the same constraints (HiGHS
    agrees on the optimum), and spends a secret's budget on its most valuable examples."""
    m, caps = _random_incidence(seed)
    v = np.random.default_rng(100 + seed).uniform(0.1, 3.0, m.shape[0])
    tied = np.asarray(m.getnnz(axis=1) > 0)
    a = sp.csr_matrix(m, dtype=float)[tied].T
    res = linprog(-v[tied], A_ub=a, b_ub=caps, bounds=(0, 1), method="highs")
    got = solve_weights(m, caps, 1.0, solver=solver, tolerance=1e-8, value=v)
    assert np.all(m.T.astype(float) @ got.w <= caps * (1 + 1e-9) + 1e-12)
    assert float(v[tied] @ got.w[tied]) == pytest.approx(-res.fun, rel=1e-5 if solver == "pdlp" else 1e-9)
    two = sp.csr_matrix(np.array([[1], [1], [0]], dtype=bool))        # one secret, budget for one example
    w = solve_weights(two, np.array([1.0]), 1.0, solver="glop", value=np.array([1.0, 4.0, 1.0])).w
    assert w.tolist() == [0.0, 1.0, 1.0]


def test_code_tokens_values_count_prose_a_quarter():
    from types import SimpleNamespace as NS

    from repoguard.planning.value import example_values

    ex = [NS(id="a.py#0", n_bytes=4000, language="python"), NS(id="README.md#0", n_bytes=4000, language="markdown"),
          NS(id="b.py#0", n_bytes=1000, language="python")]
    assert example_values(ex, ["a.py#0"], "examples") is None
    v = example_values(ex, ["a.py#0", "README.md#0", "b.py#0"], "code-tokens")
    assert v.mean() == pytest.approx(1.0) and v[0] == pytest.approx(4 * v[1]) == pytest.approx(4 * v[2])
    with pytest.raises(ValueError):
        example_values(ex, ["gone.py#0"], "code-tokens")
