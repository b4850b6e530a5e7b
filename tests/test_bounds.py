"""Reconstruction bounds (Hush Lemma 3.2) against the exact single-Gaussian answer."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from repoguard.accounting.bounds import kl_bound, reconstruction_bound, renyi_bound
from repoguard.accounting.bounds import binary_kl


@pytest.mark.parametrize("p", [1e-4, 1e-10])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_single_gaussian_oracle(p, sigma):
    """r = Φ(Φ⁻¹(p) + 1/σ) is exact for one Gaussian [Hayes et al. 2023; SecPE Lemma 3.2]."""
    exact = norm.cdf(norm.ppf(p) + 1 / sigma)
    bounds = {m: reconstruction_bound([1.0], sigma, 1, p, m) for m in ("kl", "renyi", "pld", "best")}
    for m, b in bounds.items():
        assert b >= exact, m
    assert bounds["best"] <= 2 * exact
    assert bounds["best"] == min(bounds["kl"], bounds["renyi"], bounds["pld"])
    # the Neyman–Pearson bound is the exact answer up to its loss grid
    assert bounds["pld"] <= exact * 1.01


def test_renyi_far_tighter_than_kl_for_small_priors():
    b_kl = reconstruction_bound([1.0], 1.0, 1, 1e-10, "kl")
    b_best = reconstruction_bound([1.0], 1.0, 1, 1e-10, "best")
    assert b_best < b_kl / 100


def test_kl_bound_inverts_binary_kl():
    p = np.array([1e-10, 1e-4, 0.1])
    d = np.array([1e-3, 0.5, 0.2])
    q = kl_bound(d, p)
    assert np.all(q >= p)
    assert binary_kl(q, p) == pytest.approx(d, rel=1e-9)
    assert kl_bound(0.0, 1e-3) == pytest.approx(1e-3)
    assert kl_bound(np.log(1e10) + 1, 1e-10) == 1.0          # kl(1‖p) = log 1/p: no bound below 1


def test_renyi_bound_solves_hellinger_equation():
    p, alpha, d = 1e-6, 3.0, 2.0
    q = float(renyi_bound(d, alpha, p))
    lhs = q ** alpha * p ** (1 - alpha) + (1 - q) ** alpha * (1 - p) ** (1 - alpha)
    assert lhs == pytest.approx(np.exp((alpha - 1) * d), rel=1e-9)
    assert renyi_bound(np.inf, 2.0, p) == 1.0
    assert renyi_bound(0.0, 2.0, p) == pytest.approx(p)


def test_bounds_increase_with_divergence_and_steps():
    b = [reconstruction_bound([0.01] * 20, 2.0, t, 1e-8) for t in (10, 100, 1000)]
    assert b[0] < b[1] < b[2]
    assert reconstruction_bound([0.01] * 20, 2.0, 100, 1e-8, adjacency="replace") > b[1]


def test_bad_method():
    with pytest.raises(ValueError):
        reconstruction_bound([0.1], 1.0, 1, 1e-3, "hockey")
    with pytest.raises(ValueError):
        reconstruction_bound([0.1], 1.0, 1, 0.0)
