"""Reconstruction bounds from divergences [Hush Lemma 3.2].

Lemma 3.2: for an f-divergence F with f strictly convex, if F(P_i‖P_j) ≤ F(Bern(q)‖Bern(p)) for
the mechanism's dominating pair, an adversary with prior success ≤ p succeeds with probability
≤ q. So the posterior bound is the smallest q ≥ p at which the Bernoulli divergence reaches the
mechanism's. Two members of the family:

* KL, f(t) = t log t:           kl(q‖p) ≥ D_KL                               (the paper's bound)
* Hellinger/Rényi, f(t) = t^α:  q^α p^{1−α} + (1−q)^α (1−p)^{1−α} ≥ exp((α−1)·D_α), any α > 1

Both left-hand sides increase in q on [p, 1], so each bound is found by bisection on log q,
vectorised over secrets and orders; the bisection returns the upper end of its final bracket, so
rounding can only loosen the bound. A divergence too large for any q < 1 gives the bound 1.
"""
from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from repoguard.accounting.search import narrow

_ITERS = 80          # bisection on log q: bracket width ≤ 2^-80 × |log p|


def binary_kl(q: np.ndarray | float, p: np.ndarray | float) -> np.ndarray:
    """kl(q‖p) = q log(q/p) + (1−q) log((1−q)/(1−p)) in nats, elementwise (0 log 0 = 0)."""
    q = np.asarray(q, dtype=float)
    p = np.asarray(p, dtype=float)
    return xlogy(q, q) - xlogy(q, p) + xlogy(1 - q, 1 - q) - (1 - q) * np.log1p(-p)


def _bisect_log_q(excess, p: np.ndarray, iters: int = _ITERS) -> np.ndarray:
    """Smallest q ∈ [p, 1] with excess(log q) ≥ 0, where `excess` is increasing; 1 if none.
    Returns the upper end of the final bracket, so fewer `iters` give a looser valid bound."""
    lo = np.log(p)
    hi = np.zeros_like(lo)
    at_one = excess(hi) < 0           # even q = 1 does not reach the divergence: no bound
    _, hi = narrow(lambda lq: excess(lq) >= 0, lo, hi, log_scale=False, iters=iters)
    return np.where(at_one, 1.0, np.exp(hi))


def kl_bound(divergence, prior) -> np.ndarray:
    """Smallest q ≥ p with kl(q‖p) ≥ D [Hush Lemma 3.2, f(t) = t log t]. `divergence` D in nats
    (T steps already composed, both directions' maximum), `prior` p in (0, 1); broadcast arrays.
    Returns the posterior bound in [p, 1]."""
    d, p = np.broadcast_arrays(np.asarray(divergence, float), np.asarray(prior, float))
    d, p = d.astype(float).copy(), p.astype(float).copy()
    lp, l1p = np.log(p), np.log1p(-p)

    def excess(lq):
        q = np.exp(lq)
        with np.errstate(divide="ignore", invalid="ignore"):
            one = np.where(q < 1, (1 - q) * (np.log1p(-q) - l1p), 0.0)
        return q * (lq - lp) + one - d

    out = _bisect_log_q(excess, p)
    return np.where(d <= 0, p, out)


def renyi_bound(divergence, alpha, prior, *, iters: int = _ITERS) -> np.ndarray:
    """Smallest q ≥ p with q^α p^{1−α} + (1−q)^α (1−p)^{1−α} ≥ exp((α−1)·D_α) [Hush Lemma 3.2
    with f(t) = t^α, the Hellinger divergence, whose value is exp((α−1)D_α)]. Broadcast arrays of
    Rényi divergence D_α (nats, composed), order α > 1 and prior p. Returns bounds in [p, 1];
    `iters` bisection steps on log q (each result is the bracket's upper end, hence valid)."""
    d, al, p = np.broadcast_arrays(np.asarray(divergence, float), np.asarray(alpha, float),
                                   np.asarray(prior, float))
    d, al, p = d.astype(float).copy(), al.astype(float).copy(), p.astype(float).copy()
    lp, l1p = np.log(p), np.log1p(-p)
    target = (al - 1) * d

    def excess(lq):
        q = np.exp(lq)
        with np.errstate(divide="ignore", invalid="ignore"):
            second = np.where(q < 1, al * np.log1p(-q) + (1 - al) * l1p, -np.inf)
        return np.logaddexp(al * lq + (1 - al) * lp, second) - target

    out = _bisect_log_q(excess, p, iters)
    return np.where(np.isfinite(d), np.where(d <= 0, p, out), 1.0)


def best_renyi_bound(divergences: np.ndarray, alphas, prior) -> tuple[np.ndarray, np.ndarray]:
    """Minimum over orders: `divergences` (..., n_alphas) composed D_α, `prior` (...,).
    Returns (bound (...,), index of the binding α (...,))."""
    al = np.asarray(alphas, float)
    b = renyi_bound(divergences, al, np.asarray(prior, float)[..., None])
    idx = np.argmin(b, axis=-1)
    return np.take_along_axis(b, idx[..., None], axis=-1)[..., 0], idx


METHODS = ("best", "kl", "renyi", "pld")


def reconstruction_bound(rhos, sigma: float, steps: int, prior: float, method: str = "best", *,
                         adjacency: str = "zero-out", alphas=None) -> float:
    """Posterior bound on reconstructing one secret after `steps` steps [Hush Lemma 3.2].

    `rhos`: sampling probabilities ρ_i of the examples carrying the secret; `sigma`: noise
    multiplier; `prior`: p in (0, 1). `method`: "kl" (the paper: kl(q‖p) ≥ T·KL), "renyi" (the
    Hellinger family, minimum over the α grid), "pld" (the Neyman–Pearson bound min_ε e^ε p +
    δ_T(ε) from the composed privacy-loss distribution, `pld.py`) or "best" (minimum of all).
    Each bound takes the larger of the two directions P‖Q, Q‖P. Raises ValueError on bad
    arguments."""
    from repoguard.accounting.divergences import DEFAULT_ALPHAS, mixture, pair_shift, step_divergences
    from repoguard.accounting.pld import pld_bound

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")
    if not 0 < prior < 1:
        raise ValueError("prior p must lie in (0, 1)")
    if steps < 1:
        raise ValueError("steps must be ≥ 1")
    al = np.asarray(DEFAULT_ALPHAS if alphas is None else alphas, float)
    a = pair_shift(sigma, adjacency)
    mix = mixture(rhos)
    out = 1.0
    if method in ("best", "kl", "renyi"):
        sd = step_divergences(mix, a, al if method != "kl" else (), kl=method != "renyi")
        if method in ("best", "kl"):
            out = min(out, float(kl_bound(steps * max(sd.kl), prior)))
        if method in ("best", "renyi"):
            d = steps * np.array([max(sd.renyi[float(x)]) for x in al])
            out = min(out, float(best_renyi_bound(d, al, prior)[0]))
    if method in ("best", "pld"):
        out = min(out, float(pld_bound(mix, a, steps, prior)[0][0]))
    return out
