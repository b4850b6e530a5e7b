"""Closed-form checks of the exposure maths [Carlini et al. 2019 §4] and of its DP tail bound."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm, skewnorm

from repoguard.accounting.bounds import kl_bound
from repoguard.audit.canary_exposure import (estimate_exposure, exposure_at_level, exposure_from_rank,
                                      exposure_tail_bound, sampled_rank, skewnorm_exposure)

R = 16.0 ** 10


def test_exposure_from_rank_closed_form():
    assert exposure_from_rank(1, R) == pytest.approx(40.0)            # ranked first: log2|R| − 0
    assert exposure_from_rank(R, R) == pytest.approx(0.0)             # ranked last
    assert exposure_from_rank(2 ** 20, R) == pytest.approx(20.0)
    assert exposure_from_rank(R / 2, R) == pytest.approx(1.0)
    for bad in (0, R + 1):
        with pytest.raises(ValueError):
            exposure_from_rank(bad, R)


def test_sampled_rank_and_saturation():
    refs = np.arange(10.0, 10010.0)                                    # 10^4 references, log-ppl 10..10009
    assert sampled_rank(5.0, refs) == 1
    assert sampled_rank(10.0, refs) == 1                              # ties favour the canary
    assert sampled_rank(10.5, refs) == 2
    assert sampled_rank(1e9, refs) == 10001
    e = estimate_exposure(5.0, refs, space_size=R)
    assert e.rank_in_sample == 1 and e.exposure_sampled == pytest.approx(math.log2(10001))
    mid = estimate_exposure(5009.5, refs, space_size=R)               # better than exactly half
    assert mid.exposure_sampled == pytest.approx(math.log2(10001 / 5001))


def test_skewnorm_extrapolation_agrees_with_the_exact_rank():
    """References drawn from a known skew-normal: for canaries inside the sampled range the fitted
    CDF matches the exact sampled rank (within sampling error); beyond it, the extrapolation
    matches the true distribution's tail, which sampling cannot reach."""
    a, loc, scale = 4.0, 150.0, 12.0
    refs = skewnorm.rvs(a, loc=loc, scale=scale, size=20_000, random_state=np.random.default_rng(7))
    for q in (0.5, 0.1, 0.01, 0.001):
        x = float(np.quantile(refs, q))
        sk, fit = skewnorm_exposure(x, refs, max_exposure=40)
        exact = math.log2((refs.size + 1) / sampled_rank(x, refs))
        assert sk == pytest.approx(exact, abs=0.15 + 0.05 * exact), q
        assert sk == pytest.approx(-math.log2(q), abs=0.2 + 0.05 * -math.log2(q))
    far = loc - 4 * scale                                              # CDF ≈ 1e-9, beyond 20 000 samples
    true = -skewnorm.logcdf(far, a, loc, scale) / math.log(2)
    sk, fit = skewnorm_exposure(far, refs, max_exposure=1000)
    assert sampled_rank(far, refs) == 1                               # sampling saturates ...
    assert sk > math.log2(refs.size + 1) + 5                          # ... the fit does not
    assert sk == pytest.approx(true, rel=0.15)
    assert fit["a"] == pytest.approx(a, rel=0.3) and fit["scale"] == pytest.approx(scale, rel=0.1)


def test_skewnorm_is_capped_and_never_negative():
    refs = norm.rvs(size=1000, random_state=np.random.default_rng(1)) + 100
    assert skewnorm_exposure(-1e6, refs, max_exposure=40.0)[0] == 40.0   # beyond float range → cap
    assert skewnorm_exposure(1e6, refs, max_exposure=40.0)[0] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError):
        skewnorm_exposure(1.0, refs[:5])


def test_tail_bound_is_the_reconstruction_bound_at_prior_two_to_minus_e():
    kl = 0.3
    for e in (1.0, 5.0, 20.0):
        assert exposure_tail_bound(e, kl=kl, renyi={}) == pytest.approx(float(kl_bound(kl, 2.0 ** -e)))
    assert exposure_tail_bound(0.0, kl=kl, renyi={}) == 1.0
    assert exposure_tail_bound(30.0, kl=0.0, renyi={}) == pytest.approx(2.0 ** -30)   # no leakage: the prior
    # Rényi terms can only tighten it, and the bound falls as exposure grows.
    ren = {"2": 0.2, "8": 2.0}
    vals = [exposure_tail_bound(e, kl=kl, renyi=ren) for e in (2, 6, 12, 24)]
    assert all(v <= exposure_tail_bound(e, kl=kl, renyi={}) + 1e-15 for v, e in zip(vals, (2, 6, 12, 24)))
    assert vals == sorted(vals, reverse=True)


def test_exposure_at_level_inverts_the_tail_bound():
    kl, ren = 0.05, {"2": 0.06, "4": 0.2}
    e = exposure_at_level(1e-3, kl=kl, renyi=ren, max_exposure=40)
    assert exposure_tail_bound(e, kl=kl, renyi=ren) <= 1e-3 < exposure_tail_bound(e - 0.01, kl=kl, renyi=ren)
    assert exposure_at_level(1e-3, kl=1e6, renyi={}, max_exposure=40) == 40     # no useful guarantee
