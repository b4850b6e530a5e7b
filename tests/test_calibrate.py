"""σ calibration (Hush Alg. 2 lines 4–5): meets every target, and only just."""
from __future__ import annotations

import numpy as np
import pytest

from repoguard.accounting.bounds import reconstruction_bound
from repoguard.accounting.calibrate import Infeasible, calibrate, calibrate_sigma
from repoguard.accounting.spending import SpentArrays


def _instance(seed=0, n=25):
    rng = np.random.default_rng(seed)
    rhos = [rng.random(rng.integers(1, 8)) * 0.05 for _ in range(n)]
    rhos += [rhos[0].copy(), rhos[1][::-1].copy()]          # equal multisets share work
    p = np.full(len(rhos), 1e-10)
    p[::3] = 1e-4
    r = rng.uniform(2e-4, 1e-3, len(rhos)) + p
    return rhos, p, r


@pytest.mark.parametrize("method", ["best", "kl", "renyi"])
def test_calibrated_sigma_is_tight(method):
    rhos, p, r = _instance()
    steps = 500
    cal = calibrate(rhos, p, r, steps, method=method)
    sigma = cal.sigma
    ok = [reconstruction_bound(rh, sigma, steps, pj, method) <= rj for rh, pj, rj in zip(rhos, p, r)]
    assert all(ok)
    below = sigma * (1 - 1e-3)
    missed = [reconstruction_bound(rh, below, steps, pj, method) > rj for rh, pj, rj in zip(rhos, p, r)]
    assert any(missed)
    assert np.all(cal.evals.bound <= r)
    assert cal.stats["groups"] == len(rhos) - 2


def test_best_needs_least_noise_and_replace_doubles():
    rhos, p, r = _instance(1, 10)
    s_best = calibrate_sigma(rhos, p, r, 300, "best")
    s_kl = calibrate_sigma(rhos, p, r, 300, "kl")
    s_ren = calibrate_sigma(rhos, p, r, 300, "renyi")
    assert s_best <= min(s_kl, s_ren) * (1 + 1e-4)
    assert s_kl > 3 * s_best                           # the Rényi family pays off at p = 1e-10
    s_rep = calibrate_sigma(rhos, p, r, 300, "best", adjacency="replace")
    assert s_rep == pytest.approx(2 * s_best, rel=1e-4)


@pytest.mark.slow
def test_spent_budget_raises_sigma_and_exhaustion_is_infeasible():
    rhos, p, r = [np.full(3, 0.02)], np.array([1e-10]), np.array([1e-3])
    fresh = calibrate(rhos, p, r, 200)
    again = calibrate(rhos, p, r, 200, spent=SpentArrays(fresh.evals.kl, fresh.evals.renyi, [(fresh.pairs[0],)]))
    assert again.sigma > fresh.sigma
    assert again.evals.bound[0] <= r[0]
    # the first run had less noise than 400 steps in one run need, so the second needs more
    assert again.sigma >= calibrate(rhos, p, r, 400).sigma * (1 - 1e-4)
    # without the earlier run's pair the Neyman–Pearson bound cannot be composed, and the
    # divergences that run spent (at a σ certified by that bound) leave nothing
    if fresh.evals.binding[0].startswith("pld"):
        with pytest.raises(Infeasible):
            calibrate(rhos, p, r, 200, spent=SpentArrays(fresh.evals.kl, fresh.evals.renyi))
    with pytest.raises(Infeasible) as exc:
        calibrate(rhos, p, r, 200, spent=SpentArrays(np.array([1.0]), np.full((1, len(fresh.alphas)), 50.0)))
    assert exc.value.secrets == [0]


def test_unsampled_secret_costs_nothing():
    cal = calibrate([np.zeros(3), np.full(2, 0.01)], np.array([1e-10, 1e-10]), np.array([1e-3, 1e-3]), 100)
    assert cal.evals.kl[0] == 0.0 and cal.evals.bound[0] == pytest.approx(1e-10)


def test_bad_arguments():
    with pytest.raises(ValueError):
        calibrate([[0.1]], [1e-3], [1e-4], 10)          # r < p
    with pytest.raises(ValueError):
        calibrate([[0.1]], [1e-4], [1e-3], 10, method="pld")


def test_kl_only_batch_path_handles_groups_too_wide_to_share_a_grid():
    """Regression (astral-sh/ruff, B = 16): a KL-only calibration passes no Rényi orders, and a
    group too wide for the shared grid took the scalar path and crashed assigning them."""
    import numpy as np

    from repoguard.accounting import batch
    from repoguard.accounting import divergences as dv
    from repoguard.accounting.divergences import kl_divergence

    big = np.full(500, 0.5)
    mixes = [dv.mixture(big), dv.mixture(np.full(2, 1e-4))]
    a = 5.0
    kl, ren = batch.batch_step_divergences(mixes, a, [], np.full((2, 0), np.inf), kl=True)
    assert ren.shape == (2, 0, 2)
    # The scalar path's KL (P‖Q) agrees with the public one-step divergence at σ = 1/a.
    assert kl[0, 0] == pytest.approx(kl_divergence(big, 1 / a, 1), rel=1e-9)


def test_refused_neyman_pearson_passes_are_counted():
    """With no Neyman–Pearson budget the groups that wanted the bound are counted as refused, and
    σ can only come out larger (divergences alone)."""
    rhos, p, r = [np.full(3, 0.02), np.full(2, 0.03)], np.full(2, 1e-4), np.full(2, 2e-3)
    full = calibrate(rhos, p, r, 200)
    assert full.stats["pld_refused_groups"] == 0 and full.stats["pld_evaluations"] > 0
    none = calibrate(rhos, p, r, 200, pld_budget=0)
    assert none.stats["pld_evaluations"] == 0 and none.stats["pld_budget_spent"]
    assert none.stats["pld_refused_groups"] >= 1
    assert none.sigma >= full.sigma


@pytest.mark.parametrize("method", ["best", "kl"])
def test_passes_at_agrees_with_the_calibrated_sigma(method):
    """`passes_at` (issue 45: the plan asks it instead of calibrating when it only compares the
    secrets' σ with the floor's) says yes at the calibrated σ and no just below it."""
    from repoguard.accounting.calibrate import passes_at

    rhos, p, r = _instance(2, 12)
    steps = 200
    sigma = calibrate(rhos, p, r, steps, method=method).sigma
    assert passes_at(rhos, p, r, steps, sigma, method=method)
    assert passes_at(rhos, p, r, steps, sigma * 1.5, method=method)
    assert not passes_at(rhos, p, r, steps, sigma * (1 - 1e-3), method=method)
    # earlier spending that alone breaks a target: no σ passes
    spent = np.zeros(len(p))
    spent[0] = 50.0
    from repoguard.accounting.divergences import DEFAULT_ALPHAS

    assert not passes_at(rhos, p, r, steps, sigma * 10, method="kl",
                         spent=SpentArrays(spent, np.zeros((len(p), len(DEFAULT_ALPHAS)))))
