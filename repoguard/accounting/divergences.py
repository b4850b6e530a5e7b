"""KL and Rényi divergences of the per-secret dominating pair of weighted-Poisson-sampled DP-SGD.

The pair [Hush §4, from Charles et al. 2024 Thm 1], per step, in units of the clip norm C:

    P = Σ_m π_m N(s·m, σ²)   with π the Poisson-binomial pmf of M = Σ_{i∈E_j} Bernoulli(ρ_i)
    Q = N(0, σ²)

s = 1 for add/remove ("zero-out") adjacency, s = 2 for "replace". With z = x/σ and a = s/σ the
log likelihood ratio is L(z) = log Σ_m π_m exp(m·a·z − m²a²/2), and every divergence is a
one-dimensional integral against the standard normal density φ:

    KL(P‖Q)  = ∫ φ e^L L           KL(Q‖P)  = −∫ φ L
    D_α(P‖Q) = log ∫ φ e^{αL} / (α−1)      D_α(Q‖P) = log ∫ φ e^{(1−α)L} / (α−1)

They are computed by the trapezoid rule on a uniform z grid in log space (log-sum-exp), which is
spectrally accurate here because every peak of the integrand is at least as wide as φ; the
integral outside the grid is bounded analytically (below) and *added*, so truncating the range
can only make a divergence larger. KL and Rényi divergences add under composition: T steps cost
T × one step.

Conservative truncation of the pmf. π is computed exactly (binomial pmf per distinct ρ, exact
non-negative convolutions, no cancellation). Probabilities below `PMF_FLOOR` are not resolved in
double precision; their mass is replaced by a rigorous Chernoff upper bound on P(M > m_cap) and
placed on m = n = |E_j| (taken from the largest kept entry). The new mixing distribution
stochastically dominates π, and every f-divergence between the mixture and Q in either direction
is non-decreasing under stochastic dominance of the mixing law: moving mass from m to m+1 changes
D_f by E_Q[f'(P/Q)·(g_{m+1} − g_m)] with g_m = exp(maz − m²a²/2); P/Q is increasing in z,
g_{m+1} − g_m changes sign once and has mean 0 under Q, so the change is ≥ 0 (for D_f(Q‖P) use
f*(t) = t f(1/t), also convex). So every number returned here is an upper bound up to quadrature
rounding, which the tests pin against closed forms and dp_accounting's PLD.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, log_ndtr

from repoguard.accounting.kinds import Adjacency

PMF_FLOOR = 1e-280
DEFAULT_ALPHAS = (1.05, 1.1, 1.15, 1.2, 1.3, 1.4, 1.5, 1.6, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5,
                  4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0,
                  40.0, 48.0, 56.0, 64.0, 80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 384.0, 512.0)
_MAX_GRID = 400_000       # grid points; an α whose integral would need more gets +inf (conservative)
_TAIL_Z = 12.0            # grid margin in standard deviations


# -- the mixing distribution ----------------------------------------------------------------------
@dataclass(frozen=True)
class Mixture:
    """Support `m` (int, ascending) and log-weights `logw` of the (conservatively truncated)
    Poisson-binomial law of M; `n` = number of examples with ρ > 0."""

    m: np.ndarray
    logw: np.ndarray
    n: int


def check_rhos(rhos) -> np.ndarray:
    """ρ as a float array; raises ValueError unless every ρ is in [0, 1]."""
    r = np.asarray(rhos, dtype=float).ravel()
    if r.size and (not np.all(np.isfinite(r)) or r.min() < 0 or r.max() > 1):
        raise ValueError("every sampling probability ρ must lie in [0, 1]")
    return r


def _binom_pmf(k: int, v: float) -> np.ndarray:
    m = np.arange(k + 1)
    if v >= 1.0:
        out = np.zeros(k + 1)
        out[-1] = 1.0
        return out
    lp = gammaln(k + 1) - gammaln(m + 1) - gammaln(k - m + 1) + m * math.log(v) + (k - m) * math.log1p(-v)
    return np.exp(lp)


def _log_tail_bound(vals: np.ndarray, counts: np.ndarray, k: int) -> float:
    """log of a Chernoff bound on P(M ≥ k): min over θ ≥ 0 of Σ log(1−ρ+ρe^θ) − θk."""
    theta = np.concatenate([[0.0], np.geomspace(1e-3, 60.0, 96)])
    with np.errstate(divide="ignore"):
        lm = np.log1p(vals[None, :] * np.expm1(theta[:, None]))
    return float(np.min(lm @ counts - theta * k))


def mixture(rhos) -> Mixture:
    """The Poisson-binomial law of M for `rhos`, exact above PMF_FLOOR, the rest moved to m = n
    (module docstring: stochastically dominating, so divergences stay upper bounds)."""
    r = check_rhos(rhos)
    r = r[r > 0]
    if r.size == 0:
        return Mixture(np.zeros(1, dtype=np.int64), np.zeros(1), 0)
    vals, counts = np.unique(r, return_counts=True)
    pmf = np.ones(1)
    for v, k in zip(vals, counts):
        pmf = np.convolve(pmf, _binom_pmf(int(k), float(v)))   # non-negative: no cancellation
    n = int(r.size)
    pmf = np.clip(pmf, 0.0, None)
    ok = pmf >= PMF_FLOOR
    first, last = int(np.argmax(ok)), int(len(ok) - 1 - np.argmax(ok[::-1]))
    pmf[first] += pmf[:first].sum()          # low end (ρ near 1): move up onto the first kept point
    dropped = float(pmf[last + 1:].sum())
    m = np.arange(first, last + 1)
    pmf = pmf[first:last + 1].copy()
    if last < n:
        # P(M > last) ≤ Chernoff; plus what double precision may have flushed to zero on the way
        lt = _log_tail_bound(vals, counts, last + 1)
        lt = float(np.logaddexp(lt, math.log(n * len(vals)) - 690.0))
        lt = min(lt, 0.0)
        excess = max(0.0, math.exp(lt) - dropped)
        if pmf[0] > 2 * excess:              # the rest comes from the lowest point: dominance holds
            pmf[0] -= excess
        m = np.append(m, n)
        with np.errstate(divide="ignore"):
            logw = np.append(np.log(pmf), lt)
    else:
        with np.errstate(divide="ignore"):
            logw = np.log(pmf)
    keep = np.isfinite(logw)
    return Mixture(m[keep].astype(np.int64), logw[keep], n)


# -- quadrature -----------------------------------------------------------------------------------
def logsumexp(x, axis=None):
    """log Σ exp(x) along `axis` (numpy only: scipy's version costs more in overhead here)."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 2 and x.shape[1] == 2 and axis in (1, -1):
        return logsumexp2(x[:, 0], x[:, 1])
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out.squeeze(axis=axis) if axis is not None else float(out.reshape(()))


def logsumexp2(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """`logsumexp(np.stack([x0, x1], axis=1), axis=1)`, bit for bit, without numpy's reduction
    machinery (slow along an axis of length 2: a one-step pair of one example, (1−ρ)N(0) +
    ρN(a), has two components, and the plan evaluates thousands of such rows per σ). For two
    terms the maximum is exact and every summation order gives the same sum."""
    m = np.maximum(x0, x1)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(x0 - m) + np.exp(x1 - m)) + m


def _log_ratio(z: np.ndarray, mix: Mixture, a: float) -> np.ndarray:
    """L(z) = log Σ_m π_m exp(m a z − m² a²/2), shape of z; chunked to bound memory."""
    ma = mix.m * a
    off = mix.logw - ma * ma / 2
    out = np.empty(z.size)
    step = max(1, 2_000_000 // max(1, ma.size))
    for lo in range(0, z.size, step):
        zz = z[lo:lo + step]
        out[lo:lo + step] = logsumexp(off[None, :] + zz[:, None] * ma[None, :], axis=1)
    return out


def _log_phi(z):
    return -0.5 * z * z - 0.5 * math.log(2 * math.pi)


def _step(a: float) -> float:
    # the integrand changes dominant component every a in z and every peak is ≥ φ wide
    return 0.25 / max(1.0, a)


@dataclass(frozen=True)
class StepDivergences:
    """One step's divergences in nats: `kl` = (P‖Q, Q‖P); `renyi` maps α → (P‖Q, Q‖P)."""

    kl: tuple[float, float]
    renyi: dict[float, tuple[float, float]]


def step_divergences(mix: Mixture, a: float, alphas=DEFAULT_ALPHAS, *, kl: bool = True,
                     max_divergence=math.inf, h: float | None = None) -> StepDivergences:
    """KL and Rényi divergences, both directions, for one step of the pair with a = s/σ.

    Returns upper bounds (module docstring). An order α is reported as +inf (conservative;
    harmless because bounds take the minimum over α) when a lower bound on its divergence already
    exceeds `max_divergence` nats per step (a scalar or one value per α: callers pass the
    divergence at which that α's bound stops being useful), or when its integral would need more
    than _MAX_GRID grid points; KL then becomes its convexity bound E[M²]a²/2 (a tiny σ). `h`
    overrides the grid step (tests use it to check convergence)."""
    al = np.asarray(tuple(float(x) for x in alphas), dtype=float)
    want_kl = kl
    if mix.n == 0 or a == 0.0:
        return StepDivergences((0.0, 0.0), {float(x): (0.0, 0.0) for x in al})
    h = h or _step(a)
    ma = mix.m * a
    lw = mix.logw
    log_k = math.log(len(lw))
    lo, hi = -_TAIL_Z, _TAIL_Z
    if kl:
        heavy = ma[lw >= lw.max() - 100.0]
        klo, khi = min(lo, heavy.min() - _TAIL_Z), max(hi, heavy.max() + _TAIL_Z)
        if (khi - klo) / h > _MAX_GRID:
            kl = False          # a tiny σ (a ≫ 1): the grid alone would be GBs; bound it instead
        else:
            lo, hi = klo, khi
    use = np.zeros(al.size, dtype=bool)
    if al.size:
        A = al[:, None]
        solo = A * lw + A * (A - 1) * ma * ma / 2        # log E_Q[(π_m g_m)^α] ≤ log moment
        smax = np.maximum(solo.max(axis=1), 0.0)
        use = smax / (al - 1) <= np.broadcast_to(np.asarray(max_divergence, float), al.shape)
        need = solo + A * log_k >= smax[:, None] - 45.0
        top = al * np.max(np.where(need, ma, 0.0), axis=1) + np.sqrt(2 * (al * log_k + 45.0))
        c = (1 - A) * lw + A * (A - 1) * ma * ma / 2
        bottom = np.max(-(A - 1) * ma - np.sqrt(2 * np.maximum(0.0, 45.0 + c)), axis=1)
        s0, s1 = np.minimum(bottom, -_TAIL_Z), np.maximum(top, _TAIL_Z)
        for i in np.argsort(s1 - s0):
            if not use[i]:
                continue
            if (max(hi, s1[i]) - min(lo, s0[i])) / h > _MAX_GRID:
                use[i] = False
                continue
            lo, hi = min(lo, s0[i]), max(hi, s1[i])
    z = np.arange(lo, hi + h / 2, h)
    L = _log_ratio(z, mix, a)
    lphi = _log_phi(z)
    kl_pair = (0.0, 0.0)
    if want_kl and not kl:
        # KL is jointly convex: KL(Σπ_m N(ma)‖N(0)) ≤ Σπ_m m²a²/2, and KL(N(0)‖Σπ_m N(ma)) ≤ the
        # same (convex in its second argument): a finite upper bound for both directions
        kl_pair = (float(a * a * np.sum(np.exp(lw) * mix.m.astype(float) ** 2) / 2),) * 2
    if kl:
        kl_pair = (_kl_forward(z, L, lphi, h, mix, a), _kl_reverse(z, L, lphi, h, mix, a))
    fwd = np.full(al.size, math.inf)
    rev = np.full(al.size, math.inf)
    if use.any():
        fwd[use] = _renyi_forward(z, L, lphi, h, mix, a, al[use], log_k)
        rev[use] = _renyi_reverse(z, L, lphi, h, mix, a, al[use])
    return StepDivergences(kl_pair, {float(x): (float(f), float(r)) for x, f, r in zip(al, fwd, rev)})


def _kl_forward(z, L, lphi, h, mix, a) -> float:
    """∫ φ e^L L plus a bound on the part outside the grid (only positive parts count)."""
    lp = lphi + L
    mx = lp.max()
    wts = np.exp(lp - mx) * h
    wts[0] *= 0.5
    wts[-1] *= 0.5
    val = float(np.sum(wts * L) * math.exp(mx))
    # right tail: L(z) ≤ n·a·z on z > z_hi; P-mass there ≤ Σ π_m Φ̄(z_hi − ma)
    ma = mix.m * a
    zt = z[-1]
    tail = np.exp(mix.logw) * (mix.n * a) * (ma * np.exp(log_ndtr(ma - zt)) + np.exp(_log_phi(zt - ma)))
    return max(0.0, val + float(tail.sum()))


def _kl_reverse(z, L, lphi, h, mix, a) -> float:
    """−∫ φ L plus tail bounds: left uses −L ≤ −log π_m0 − m0 a z + m0²a²/2, right −L ≤ −L(z_hi)."""
    wts = np.exp(lphi) * h
    wts[0] *= 0.5
    wts[-1] *= 0.5
    val = float(-np.sum(wts * L))
    m0, lw0 = float(mix.m[0]), float(mix.logw[0])
    zl, zr = z[0], z[-1]
    c = -lw0 + m0 * m0 * a * a / 2
    left = max(0.0, c) * math.exp(log_ndtr(zl)) + m0 * a * math.exp(_log_phi(zl))
    right = max(0.0, -L[-1]) * math.exp(log_ndtr(-zr))
    return max(0.0, val + left + right)


def _log_trapz_rows(logf: np.ndarray, h: float) -> np.ndarray:
    """Row-wise log ∫ e^{logf} by the trapezoid rule; logf (n_alpha, n_z)."""
    lw = np.full(logf.shape[-1], math.log(h))
    lw[0] = lw[-1] = math.log(h / 2)
    return logsumexp(logf + lw, axis=-1)


def _renyi_forward(z, L, lphi, h, mix, a, al, log_k) -> np.ndarray:
    """log(∫ φ e^{αL}) / (α−1) per α; tails: left L(z) ≤ L(z_lo); right (Σ_m π_m g_m)^α ≤
    K^α Σ_m π_m^α g_m^α with K components, and E_Q[g_m^α; z > z_hi] in closed form."""
    A = al[:, None]
    core = _log_trapz_rows(lphi[None, :] + A * L[None, :], h)
    left = log_ndtr(z[0]) + al * L[0]
    ma = mix.m * a
    right = al * log_k + logsumexp(A * mix.logw + A * (A - 1) * ma * ma / 2 + log_ndtr(A * ma - z[-1]), axis=1)
    return np.maximum(0.0, logsumexp(np.stack([core, left, right]), axis=0) / (al - 1))


def _renyi_reverse(z, L, lphi, h, mix, a, al) -> np.ndarray:
    """log(∫ φ e^{(1−α)L}) / (α−1) per α; tails: left (P/Q) ≥ π_m g_m for each m, right
    L(z) ≥ L(z_hi) because L is increasing."""
    A = al[:, None]
    core = _log_trapz_rows(lphi[None, :] + (1 - A) * L[None, :], h)
    ma = mix.m * a
    left = np.min((1 - A) * mix.logw + A * (A - 1) * ma * ma / 2 + log_ndtr(z[0] + (A - 1) * ma), axis=1)
    right = log_ndtr(-z[-1]) + (1 - al) * L[-1]
    return np.maximum(0.0, logsumexp(np.stack([core, left, right]), axis=0) / (al - 1))


# -- public API -----------------------------------------------------------------------------------
def pair_shift(sigma: float, adjacency: str) -> float:
    """a = s/σ: the shift between the dominating pair's mixture components in units of the noise
    (z = x/σ), with s the adjacency's sensitivity (`kinds.Adjacency`: 1 for "zero-out", 2 for
    "replace") and σ the noise multiplier [Hush §4; module docstring]. Every divergence and PLD
    of the pair depends on σ only through a. Raises ValueError for an unknown adjacency or a σ
    that is not a positive finite number."""
    s = Adjacency.parse(adjacency).sensitivity
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"noise multiplier σ must be a positive number, not {sigma!r}")
    return s / sigma


def kl_divergence(rhos, sigma: float, steps: int = 1, adjacency: str = "zero-out", *,
                  direction: str = "remove") -> float:
    """KL divergence in nats of the dominating pair for one secret over `steps` steps.

    `rhos`: sampling probabilities ρ_i of the examples carrying the secret (E_j), each in [0, 1];
    `sigma`: noise multiplier σ (noise std σ·C); `adjacency`: "zero-out" (sensitivity 1 per
    example) or "replace" (2). `direction`: "remove" = KL(P‖Q) (dp_accounting's remove
    direction), "add" = KL(Q‖P), "max" = the larger. T steps compose additively [Hush §4].
    Raises ValueError for ρ outside [0, 1], σ ≤ 0, steps < 0 or an unknown adjacency/direction."""
    a = pair_shift(sigma, adjacency)
    if steps < 0:
        raise ValueError("steps must be ≥ 0")
    d = step_divergences(mixture(rhos), a, alphas=()).kl
    pick = {"remove": d[0], "add": d[1], "max": max(d)}
    if direction not in pick:
        raise ValueError(f"unknown direction {direction!r}")
    return steps * pick[direction]


def renyi_divergence(rhos, sigma: float, alpha: float, steps: int = 1, adjacency: str = "zero-out", *,
                     direction: str = "max") -> float:
    """Rényi divergence of order α > 1 in nats of the dominating pair over `steps` steps;
    `direction` "remove" (P‖Q), "add" (Q‖P) or "max" (default). Same arguments and errors as
    `kl_divergence`; raises ValueError for α ≤ 1."""
    a = pair_shift(sigma, adjacency)
    if not alpha > 1:
        raise ValueError("Rényi order α must be > 1")
    if steps < 0:
        raise ValueError("steps must be ≥ 0")
    d = step_divergences(mixture(rhos), a, alphas=(float(alpha),), kl=False).renyi[float(alpha)]
    pick = {"remove": d[0], "add": d[1], "max": max(d)}
    if direction not in pick:
        raise ValueError(f"unknown direction {direction!r}")
    return steps * pick[direction]
