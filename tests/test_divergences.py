"""Divergences of the dominating pair: closed forms, dp_accounting's PLD, conservativeness."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import binom

from repoguard.accounting.divergences import (
    Mixture, kl_divergence, mixture, renyi_divergence, step_divergences,
)


@pytest.mark.parametrize("sigma,expected", [(1.0, 35.2853), (2.0, 6.3626), (4.0, 1.4506)])
def test_kl_matches_issue_values(sigma, expected):
    assert kl_divergence([0.002] * 75, sigma, 2000) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("sigma,disc", [(4.0, 1e-3), (2.0, 3e-3), pytest.param(1.0, 3e-3, marks=pytest.mark.slow)])
def test_kl_matches_dp_accounting_pld(sigma, disc):
    """Mean of the remove-direction privacy-loss PMF (connect-the-dots, pessimistic) is KL(P‖Q)."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    n = 75
    pmf = binom.pmf(np.arange(n + 1), n, 0.002)
    keep = pmf > 1e-30
    pld = pldm.from_mixture_gaussian_mechanism(
        sigma, list(np.arange(n + 1)[keep].astype(float)), list(pmf[keep] / pmf[keep].sum()),
        value_discretization_interval=disc, use_connect_dots=True, pessimistic_estimate=True)
    rem = pld._pmf_remove
    losses = (rem._lower_loss + np.arange(len(rem._probs))) * rem._discretization
    oracle = 2000 * float(np.sum(losses * rem._probs))
    ours = kl_divergence([0.002] * 75, sigma, 2000)
    assert ours == pytest.approx(oracle, rel=5e-4)
    assert ours <= oracle * (1 + 1e-9)          # the pessimistic PLD rounds losses up


@pytest.mark.parametrize("sigma", [0.3, 0.5, 1.0, 2.0, 10.0, 1e4])
@pytest.mark.parametrize("adjacency,s", [("zero-out", 1.0), ("replace", 2.0)])
def test_single_gaussian_closed_forms(sigma, adjacency, s):
    mu2 = (s / sigma) ** 2
    for direction in ("remove", "add", "max"):
        assert kl_divergence([1.0], sigma, 3, adjacency, direction=direction) == pytest.approx(3 * mu2 / 2, rel=1e-9)
    for alpha in (1.5, 2.0, 8.0):
        assert renyi_divergence([1.0], sigma, alpha, 2, adjacency) == pytest.approx(2 * alpha * mu2 / 2, rel=1e-9)


def test_renyi_order_two_closed_form():
    """E_Q[(P/Q)²] = Σ_{m,m'} π_m π_m' exp(m m' a²) for the Gaussian mixture."""
    rh = [0.3, 0.1, 0.05, 0.5, 0.02]
    a = 0.8
    mix = mixture(rh)
    exact = float(logsumexp(mix.logw[:, None] + mix.logw[None, :] + np.outer(mix.m, mix.m) * a * a))
    assert renyi_divergence(rh, 1 / a, 2.0, direction="remove") == pytest.approx(exact, rel=1e-10)


def test_reverse_direction_is_computed_and_smaller_here():
    fwd = kl_divergence([0.002] * 75, 1.0, 1, direction="remove")
    rev = kl_divergence([0.002] * 75, 1.0, 1, direction="add")
    assert 0 < rev < fwd
    assert kl_divergence([0.002] * 75, 1.0, 1, direction="max") == fwd


def test_monotone_in_rho_sigma_and_group():
    base = kl_divergence([0.01] * 10, 1.0)
    assert kl_divergence([0.02] + [0.01] * 9, 1.0) > base         # larger ρ
    assert kl_divergence([0.01] * 11, 1.0) > base                 # one more example
    assert kl_divergence([0.01] * 10, 1.5) < base                 # more noise
    assert renyi_divergence([0.01] * 10, 1.0, 4.0) > renyi_divergence([0.01] * 10, 1.0, 2.0)


def test_quadrature_converged():
    mix = mixture(np.linspace(1e-3, 0.3, 12))
    for a in (0.2, 1.0, 3.0):
        coarse = step_divergences(mix, a, alphas=(1.5, 4.0, 16.0))
        fine = step_divergences(mix, a, alphas=(1.5, 4.0, 16.0), h=0.01 / max(1, a))
        assert coarse.kl == pytest.approx(fine.kl, rel=1e-8)
        for al in (1.5, 4.0, 16.0):
            assert coarse.renyi[al] == pytest.approx(fine.renyi[al], rel=1e-8)


def _exact_log_pmf(rhos):
    lp = np.array([0.0])
    for r in rhos:
        new = np.full(lp.size + 1, -np.inf)
        new[:-1] = lp + math.log1p(-r)
        new[1:] = np.logaddexp(new[1:], lp + math.log(r))
        lp = new
    return lp


@pytest.mark.parametrize("floor", [1e-280, 1e-12, 1e-6])
def test_truncated_pmf_is_conservative(monkeypatch, floor):
    """Tail mass below PMF_FLOOR goes to m = n with a Chernoff bound: every divergence, both
    directions, is ≥ the exact one (raising the floor makes the truncation bite)."""
    from repoguard.accounting import divergences

    monkeypatch.setattr(divergences, "PMF_FLOOR", floor)
    rhos = np.concatenate([np.full(30, 0.02), np.full(10, 0.1)])
    mix = mixture(rhos)
    assert mix.m[-1] == 40 and (floor < 1e-100 or mix.m.size < 41)  # truncated, tail on n
    exact = Mixture(np.arange(41), _exact_log_pmf(rhos), 40)
    for a in (0.05, 0.3, 1.0):
        t = step_divergences(mix, a, alphas=(1.1, 1.5, 3.0))
        e = step_divergences(exact, a, alphas=(1.1, 1.5, 3.0))
        for i in (0, 1):
            assert t.kl[i] >= e.kl[i] * (1 - 1e-9)
            for al in (1.1, 1.5, 3.0):
                assert t.renyi[al][i] >= e.renyi[al][i] * (1 - 1e-9)
        if floor < 1e-100:
            assert t.kl[0] == pytest.approx(e.kl[0], rel=1e-9)


@pytest.mark.parametrize("n,rho,sigma", [(1, 1e-6, 0.3), (1, 1.0, 1e4), (10_000, 1e-6, 0.3),
                                         (10_000, 1e-3, 1e4), (50, 1.0, 0.3), (10_000, 1e-4, 1.0)])
def test_stable_across_ranges(n, rho, sigma):
    sd = step_divergences(mixture(np.full(n, rho)), 1 / sigma, alphas=(1.5, 2.0, 32.0))
    assert all(math.isfinite(x) and x >= 0 for x in sd.kl)
    assert all(x >= 0 for v in sd.renyi.values() for x in v)
    if rho == 1.0:   # M = n surely: a single Gaussian with mean n
        assert sd.kl[0] == pytest.approx((n / sigma) ** 2 / 2, rel=1e-9)


def test_bad_inputs():
    with pytest.raises(ValueError):
        kl_divergence([1.5], 1.0)
    with pytest.raises(ValueError):
        kl_divergence([0.1], 0.0)
    with pytest.raises(ValueError):
        kl_divergence([0.1], 1.0, adjacency="swap")
    with pytest.raises(ValueError):
        renyi_divergence([0.1], 1.0, 1.0)
    assert kl_divergence([], 1.0, 10) == 0.0
    assert kl_divergence([0.0, 0.0], 1.0, 10) == 0.0


def test_batch_matches_scalar():
    """The vectorised path used by calibration agrees with the scalar quadrature."""
    from repoguard.accounting.batch import batch_mixtures, batch_step_divergences
    from repoguard.accounting.divergences import DEFAULT_ALPHAS

    rng = np.random.default_rng(3)
    sets = [np.sort(rng.random(rng.integers(1, 12)) * rng.choice([1e-4, 1e-2, 0.3])) for _ in range(40)]
    sets += [np.full(100, 1e-3), np.full(70, 0.5), np.array([1.0]), np.full(5, 0.999), np.zeros(0)]
    mixes = batch_mixtures(sets)
    al = np.asarray(DEFAULT_ALPHAS)
    for a, thr in ((0.5, 0.05), (3.0, 1.0), (0.01, 1e-4)):
        kl, ren = batch_step_divergences(mixes, a, al, thr)
        for i, s in enumerate(sets):
            ref = mixture(s)
            assert np.array_equal(ref.m, mixes[i].m)
            sd = step_divergences(ref, a, al, max_divergence=thr)
            assert kl[i] == pytest.approx(sd.kl, rel=1e-9, abs=1e-14)
            want = np.array([sd.renyi[float(x)] for x in al])
            assert np.array_equal(np.isinf(want), np.isinf(ren[i]))
            f = np.isfinite(want)
            assert ren[i][f] == pytest.approx(want[f], rel=1e-9, abs=1e-12)
