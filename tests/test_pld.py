"""The Neyman–Pearson bound from the composed privacy-loss distribution (accounting/pld.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import norm

from repoguard.accounting.bounds import reconstruction_bound
from repoguard.accounting.calibrate import envelope
from repoguard.accounting.divergences import mixture
from repoguard.accounting.pld import delta_curve, pair_from_record, pair_record, pld_bound

RHOS = [0.012, 0.011, 0.0105, 0.0102]          # a binding secret of the Hush §5.1 benchmark


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("p", [1e-4, 1e-10])
def test_single_gaussian_is_exact(sigma, p):
    """One Gaussian: the Neyman–Pearson optimum is Φ(Φ⁻¹(p) + 1/σ) [Hayes et al. 2023]."""
    exact = norm.cdf(norm.ppf(p) + 1 / sigma)
    b, _ = pld_bound(mixture([1.0]), 1 / sigma, 1, p)
    assert exact * (1 - 1e-9) <= b[0] <= exact * 1.01


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.8, 1.2])
def test_matches_dp_accounting_hockey_stick(sigma):
    """δ_T(ε) and min_ε e^ε p + δ_T(ε) against dp_accounting's connect-the-dots PLD of the same
    mixture, composed by its own FFT."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    mix = mixture(RHOS)
    steps, p = 300, 1e-10
    oracle = pldm.from_mixture_gaussian_mechanism(
        sigma, [float(m) for m in mix.m], list(np.exp(mix.logw)), value_discretization_interval=1e-3,
        use_connect_dots=True).self_compose(steps)
    eps = np.linspace(0.5, 20, 40)
    for direction, pmf in (("remove", oracle._pmf_remove), ("add", oracle._pmf_add)):
        ours = delta_curve(mix, 1 / sigma, steps, direction, eps_max=21.0, h=1e-3)
        got = np.interp(eps, ours.eps, ours.delta)
        want = np.array([pmf.get_delta_for_epsilon(e) for e in eps])
        # our δ carries a worst-case FFT round-off term (4·eps·n·T ≈ 2e-8 here) on top
        assert got == pytest.approx(want, rel=2e-3, abs=5e-8)
        assert np.all(got >= want * (1 - 2e-3))
    b, _ = pld_bound(mix, 1 / sigma, steps, p, h=1e-3)
    d = np.array([oracle._pmf_remove.get_delta_for_epsilon(e) for e in np.arange(0, 23.1, 1e-3)])
    want = np.min(np.exp(np.arange(0, 23.1, 1e-3)) * p + d)
    assert b[0] == pytest.approx(want, rel=5e-3, abs=5e-8)


def test_tighter_than_every_divergence_bound_and_converged_in_h():
    # (at bounds below ~1e-7 the worst-case FFT round-off term dominates and the Rényi bound wins;
    # "best" takes the minimum)
    for sigma in (0.7, 0.85, 1.0):
        kl = reconstruction_bound(RHOS, sigma, 2000, 1e-10, "kl")
        ren = reconstruction_bound(RHOS, sigma, 2000, 1e-10, "renyi")
        coarse, fine, finer = (pld_bound(mixture(RHOS), 1 / sigma, 2000, 1e-10, h=h)[0][0] for h in (1e-2, 2e-3, 1e-3))
        assert fine <= min(kl, ren)
        assert fine <= coarse * (1 + 1e-9)                 # a coarser grid is looser, still valid
        assert finer == pytest.approx(fine, rel=2e-3)


def test_runs_compose_like_one_long_run():
    mix, a = mixture(RHOS), 1 / 0.9
    whole = pld_bound(mix, a, 2000, 1e-10)[0][0]
    split = pld_bound(mix, a, 1500, 1e-10, history=((mix, a, 400), (mix, a, 100)))[0][0]
    assert split == pytest.approx(whole, rel=1e-9)
    # a noisier earlier run costs less than the same steps at this run's σ
    cheaper = pld_bound(mix, a, 1500, 1e-10, history=((mix, a / 2, 500),))[0][0]
    assert cheaper < whole


def test_monotone_in_sigma_and_steps():
    mix = mixture(RHOS)
    b = [pld_bound(mix, 1 / s, 1000, 1e-10)[0][0] for s in (0.7, 0.8, 1.0, 1.5)]
    assert all(x > y for x, y in zip(b, b[1:]))
    assert pld_bound(mix, 1.0, 500, 1e-10)[0][0] < pld_bound(mix, 1.0, 1000, 1e-10)[0][0]


def test_envelope_dominates_every_member():
    mixes = [mixture(RHOS), mixture([0.03, 0.001]), mixture([0.01] * 7)]
    env = envelope(mixes)
    assert np.exp(env.logw).sum() == pytest.approx(1.0)
    for mx in mixes:
        for direction in ("remove", "add"):
            e = delta_curve(env, 1.0, 500, direction, eps_max=20.0).delta
            d = delta_curve(mx, 1.0, 500, direction, eps_max=20.0).delta
            # where both are down to their FFT round-off terms, those differ with the window size
            assert np.all(e >= d * (1 - 1e-9) - 1e-7)


def test_pair_record_round_trips_through_json():
    mix = mixture(RHOS)
    rec = json.loads(json.dumps(pair_record(mix, 1 / 0.9, 2000)))
    m2, a2, t2 = pair_from_record(rec)
    assert (a2, t2) == (1 / 0.9, 2000)
    assert pld_bound(m2, a2, t2, 1e-10)[0][0] == pld_bound(mix, 1 / 0.9, 2000, 1e-10)[0][0]
    with pytest.raises(ValueError):
        pair_from_record({"a": 1.0, "steps": 3, "m": [0, 1], "logw": [0.0]})
