"""The Poisson-family table of Neyman–Pearson bounds (accounting/pld_table.py)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import poisson

from repoguard.accounting.bounds import reconstruction_bound
from repoguard.accounting.calibrate import calibrate
from repoguard.accounting.divergences import mixture
from repoguard.accounting.pld import pld_bound
from repoguard.accounting.pld_table import (GRID_RATIO, PoissonTable, capped_poisson, dominating_lambda,
                                            grid_index)


def test_poisson_stochastically_dominates_the_poisson_binomial():
    rng = np.random.default_rng(0)
    for _ in range(20):
        rho = rng.uniform(0.0, 0.6, rng.integers(1, 30))
        lam = dominating_lambda(rho)
        pb = np.exp(mixture(rho).logw)
        surv_pb = np.cumsum(pb[::-1])[::-1]                    # P(M ≥ k), k = 0..n
        k = np.arange(surv_pb.size)
        surv_cap = np.where(k <= rho.size, poisson.sf(k - 1, lam), 0.0)
        assert np.all(surv_pb <= surv_cap * (1 + 1e-12) + 1e-300)
    assert dominating_lambda([0.2, 1.0]) == np.inf
    lam = np.array([1e-3, 0.05, 0.7])
    k = grid_index(lam)
    assert np.all(GRID_RATIO ** k >= lam) and np.all(GRID_RATIO ** (k - 1) < lam)


def test_capped_poisson_law_sums_to_one():
    m = capped_poisson(0.3, 5)
    assert np.exp(m.logw).sum() == pytest.approx(1.0, rel=1e-12) and m.m[-1] == 5


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.8])
def test_table_is_an_upper_bound_on_the_oracle_and_close_to_it(sigma):
    """The table's bound for a secret is ≥ dp_accounting's Neyman–Pearson value for that secret's
    own (Poisson-binomial) pair, and agrees with dp_accounting's value for the capped-Poisson pair
    it computes."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    steps, p = 300, 1e-10
    rho = [0.012, 0.011, 0.0105, 0.0102]

    def oracle(mix):
        pld = pldm.from_mixture_gaussian_mechanism(
            sigma, [float(x) for x in mix.m], list(np.exp(mix.logw)), value_discretization_interval=1e-3,
            use_connect_dots=True).self_compose(steps)
        eps = np.arange(0, 23.1, 1e-3)
        return max(float(np.min(np.exp(eps) * p + np.asarray(pmf.get_delta_for_epsilon(eps))))
                   for pmf in (pld._pmf_remove, pld._pmf_add))

    k = int(grid_index(dominating_lambda(rho)))
    table = PoissonTable(1 / sigma, steps, n_max=len(rho), eps_max=float(np.log(1 / p)))
    got = table.bound(k, [p], 1e-3)[0][0]
    assert got >= oracle(mixture(rho)) * (1 - 2e-3)
    assert got == pytest.approx(oracle(capped_poisson(GRID_RATIO ** k, len(rho))), rel=5e-3)
    assert got >= pld_bound(mixture(rho), 1 / sigma, steps, p, h=1e-3)[0][0]
    assert table.evaluations == 1 and table.bound(k, [p, 1e-6], 1e-3)[0][0] == got   # cached per (k, h)


@pytest.mark.slow
def test_calibration_certifies_by_the_table_and_stays_valid():
    """Many weak secrets that the divergence bounds miss: the table certifies most, every target
    is met by the exact Neyman–Pearson bound too, and σ is below the Rényi-only σ."""
    rng = np.random.default_rng(3)
    base = np.array([0.012, 0.011, 0.0105, 0.0102])
    rhos = [base * rng.uniform(0.5, 1.0) for _ in range(60)]
    p = np.full(len(rhos), 1e-10)
    r = rng.uniform(2e-4, 1e-3, len(rhos))
    steps = 2000
    best = calibrate(rhos, p, r, steps, method="best")
    ren = calibrate(rhos, p, r, steps, method="renyi")
    assert best.sigma < ren.sigma
    assert best.stats["pld_certified_by"]["table"] > 0 and best.stats["pld_table_evaluations"] > 0
    assert np.all(best.evals.bound <= r)
    for j in range(0, len(rhos), 7):                     # the reported bound is a true upper bound
        exact = min(pld_bound(mixture(rhos[j]), 1 / best.sigma, steps, p[j])[0][0],
                    reconstruction_bound(rhos[j], best.sigma, steps, p[j], "renyi"))
        assert exact <= best.evals.bound[j] * (1 + 1e-9) <= r[j] * (1 + 1e-9)
