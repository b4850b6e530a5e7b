"""The plan's speed paths in accounting/pld.py give the same bits as the plain computation
(issue 28 item 6: a plan must not change when it gets faster): the two-component logsumexp,
the memoised one-step log-MGF and earlier runs' spectra, and the memo of `pld_bound`."""
from __future__ import annotations

import numpy as np

from repoguard.accounting import pld
from repoguard.accounting.divergences import logsumexp, logsumexp2, mixture


def _reference_lse_rows(x):          # the code before the fast path: numpy's reductions
    m = np.max(x, axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m).squeeze(axis=1)


def test_logsumexp_of_two_columns_is_bit_identical():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5000, 2)) * 50
    x[::7, 0] = -np.inf
    x[::11, 1] = -np.inf
    x[::77] = -np.inf                                # both -inf: log 0
    want = _reference_lse_rows(x)
    assert np.array_equal(logsumexp2(x[:, 0], x[:, 1]), want)
    assert np.array_equal(logsumexp(x, axis=1), want)
    assert np.array_equal(logsumexp(x[:3, :], axis=-1), want[:3])


def test_log_ratio_and_slope_of_one_example_pair_is_bit_identical():
    mix = mixture([0.0123])                          # one example: components m = 0, 1
    a = 1 / 0.43
    ma = mix.m * a
    off = mix.logw - ma * ma / 2
    z = np.linspace(-40, 60, 3001)
    t = off[None, :] + z[:, None] * ma[None, :]
    L_ref = _reference_lse_rows(t)
    dL_ref = np.sum(np.exp(t - L_ref[:, None]) * ma[None, :], axis=1)
    L, dL = pld._log_ratio_and_slope(z, ma, off)
    assert ma.size == 2 and np.array_equal(L, L_ref) and np.array_equal(dL, dL_ref)


def _fresh():
    pld._ONE_STEP.clear()
    pld._BOUNDS.clear()


def test_memoised_bounds_equal_fresh_ones_and_are_not_shared():
    mix, hist = mixture([0.02, 0.015]), ((mixture([0.03]), 1 / 0.7, 40),)
    _fresh()
    b1, e1 = pld.pld_bound(mix, 1 / 0.8, 50, [1e-6, 1e-4], history=hist)
    b2, e2 = pld.pld_bound(mix, 1 / 0.8, 50, [1e-6, 1e-4], history=hist)     # from the memo
    assert np.array_equal(b1, b2) and np.array_equal(e1, e2)
    b2[:] = 0.5                                          # a caller's edit never reaches the memo
    assert np.array_equal(pld.pld_bound(mix, 1 / 0.8, 50, [1e-6, 1e-4], history=hist)[0], b1)


def test_history_parts_memo_gives_the_same_bits_at_every_sigma():
    """An earlier run's spectrum and log-MGF are kept between calls (they recur at every σ a
    calibration tries); each call must equal the same call made with every cache empty."""
    mix = mixture([0.0123])
    hist = ((mixture([0.0123]), 1 / 0.45, 10), (mixture([0.02, 0.01]), 1 / 0.6, 10))
    sigmas = [0.3, 0.4, 0.5, 0.4, 0.35]
    _fresh()
    warm = [pld.pld_bound(mix, 1 / s, 10, 1e-10, history=hist) for s in sigmas]
    for s, (b, e) in zip(sigmas, warm):
        _fresh()
        cold = pld.pld_bound(mix, 1 / s, 10, 1e-10, history=hist)
        assert np.array_equal(cold[0], b) and np.array_equal(cold[1], e)


def test_one_step_cache_keeps_the_pair_met_at_every_sigma(monkeypatch):
    """Least recently used eviction: an earlier run's pair, met at every σ, stays cached while
    this run's pairs (one per σ) come and go."""
    monkeypatch.setattr(pld, "_ONE_STEP_MAX", 4)
    _fresh()
    old = mixture([0.03])
    for k in range(10):
        pld._discrete(old, 1 / 0.7, 5, 2e-3, "remove")
        pld._discrete(mixture([0.01]), 1 / (0.3 + 0.01 * k), 5, 2e-3, "remove")
        assert len(pld._ONE_STEP) <= 4
    assert (old.m.tobytes(), old.logw.tobytes(), 1 / 0.7, 2e-3, "remove") in pld._ONE_STEP


def test_one_step_deltas_reuse_q_tails_bit_for_bit():
    """With an m = 0 component, Q's tails are read off the mixture's m = 0 column."""
    from scipy.special import log_ndtr

    mix = mixture([0.0123, 0.02])
    z = np.linspace(-30, 40, 999)
    ma = mix.m * (1 / 0.4)
    assert ma[0] == 0
    assert np.array_equal(log_ndtr(z[:, None] - ma[None, :])[:, 0], log_ndtr(z))
    assert np.array_equal(log_ndtr(ma[None, :] - z[:, None])[:, 0], log_ndtr(-z))
