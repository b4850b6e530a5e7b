"""The Neyman–Pearson reconstruction bound from the privacy-loss distribution (PLD) of the
T-fold composed dominating pair: the tightest bound the pair allows.

For a pair (P, Q) and any event S (the adversary "reconstructs"), P(S) ≤ e^ε Q(S) + δ(ε) for
every ε, where δ(ε) = E_P[(1 − e^{ε−L})_+] is the hockey-stick divergence and L = log(P/Q) the
privacy loss. An adversary whose prior success is ≤ p therefore succeeds with probability

    r ≤ min_ε  e^ε·p + δ_T(ε)                    [Hush Lemma 3.2 with the hockey-stick
                                                   divergence; Hayes et al. 2023 Thm 2]

and the minimum over ε is the Neyman–Pearson optimum sup{P(S) : Q(S) ≤ p} (up to the ε grid),
so no bound computed from the same pair is smaller; for one Gaussian it is exactly
Φ(Φ⁻¹(p) + 1/σ). The KL and Rényi bounds of `bounds.py` are relaxations of it.

Computation, each step an upper bound:
1. One step's pair (`divergences.py`): P = Σ_m π_m N(m·a, 1), Q = N(0, 1) in z units, a = s/σ;
   L(z) = log Σ_m π_m exp(m a z − m²a²/2) is increasing in z, so δ(ε) has the closed form
   Σ_m π_m Φ̄(z_ε − m a) − e^ε Φ̄(z_ε) with z_ε = L⁻¹(ε) (Newton), in log space.
2. Connect-the-dots discretisation [Doroshenko et al. 2022, Thm 3.3 / Alg. 1]: on the loss grid
   ε_k = ε_0 + k·h the discrete PLD whose δ curve, as a function of e^ε, is the chord through
   the exact (e^{ε_k}, δ(ε_k)). δ is convex in e^ε, so chords lie above it: the discrete pair
   dominates the true one, and dominating pairs compose [Zhu, Dong & Wang 2022, Thm 10].
   δ above the last knot is kept as mass at +∞ (pessimistic).
3. T-fold composition by FFT (the PLD of the composition is the T-fold convolution) on a
   circular window: mass wrapping in from either side only adds to the window (conservative),
   mass beyond the window's top is bounded by a Chernoff bound from the discrete PLD's moment
   generating function and added to δ, and a worst-case FFT round-off term is added too.
Both directions, (P‖Q) and (Q‖P), are computed and the larger bound is used.

Across training runs, each run's pair is kept in the ledger (`pair_record`: the mixture, a and
the steps completed) and `pld_bound(..., history=...)` convolves the earlier runs' PLDs with this
run's, so a secret with earlier spending gets the composed Neyman–Pearson bound too; a run whose
pair the ledger does not know (None) falls back to the divergences, which add across runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import log_ndtr, ndtri

from repoguard.accounting.divergences import Mixture, logsumexp, logsumexp2

DEFAULT_H = 2e-3          # loss-grid step (nats) of the one-step discretisation
_TOP_TAIL = 1e-20         # each component's P-mass above the last knot is below this
_LOG_FLOOR = math.log(1e-30)   # components lighter than this are moved up onto a heavier m
_SD_MARGIN = 30.0         # composed-window half-width in standard deviations of the sum
_MAX_FFT = 1 << 22        # window points; a wider window is refused (the bound becomes 1)
_MAX_KNOTS = 60_000       # one-step knots; a wider loss range (large ρ·a) is cut (pessimistically)
_EPS_MACH = np.finfo(float).eps


@dataclass(frozen=True)
class DeltaCurve:
    """δ_T(ε) of a T-fold composed pair on the grid `eps` (ascending, ≥ 0, nats): `delta` are
    upper bounds, valid at every grid point; `h` the grid step."""

    eps: np.ndarray
    delta: np.ndarray
    h: float

    def bound(self, prior) -> tuple[np.ndarray, np.ndarray]:
        """min_ε e^ε·p + δ_T(ε) over the grid for each prior p (array). Returns (bound ≤ 1,
        the minimising ε)."""
        p = np.atleast_1d(np.asarray(prior, float))
        if self.eps.size == 0:
            return np.ones_like(p), np.zeros_like(p)
        lp = np.log(p)[:, None]
        # e^ε p + δ in log space would need δ > 0; work in linear space with ε ≤ log(1/p)
        val = np.exp(np.minimum(lp + self.eps[None, :], 1.0)) + self.delta[None, :]
        k = np.argmin(val, axis=1)
        return np.minimum(1.0, val[np.arange(p.size), k]), self.eps[k]


def _coarsen(mix: Mixture) -> Mixture:
    """Drop components lighter than 1e-30 by moving their mass onto a larger m (stochastic
    dominance of the mixing law: divergences in both directions can only grow; see
    `divergences.py`). Keeps the one-step grid short without loosening the bound measurably."""
    keep = mix.logw >= _LOG_FLOOR
    if keep.all():
        return mix
    m, lw = mix.m.copy(), mix.logw.copy()
    kept = np.nonzero(keep)[0]
    pos = np.searchsorted(kept, np.arange(m.size))     # the next kept component at or above i
    target = np.where(pos < kept.size, kept[np.minimum(pos, kept.size - 1)], -1)
    top_mass = logsumexp(lw[target < 0]) if np.any(target < 0) else -np.inf
    new_lw = np.full(kept.size, -np.inf)
    for slot, k in enumerate(kept):
        new_lw[slot] = logsumexp(lw[target == k])
    new_m = m[kept]
    if np.isfinite(top_mass):                    # mass above the last kept m stays on the top m
        new_m = np.append(new_m, m[-1])
        new_lw = np.append(new_lw, top_mass)
    return Mixture(new_m, new_lw, mix.n)


def _log_ratio_and_slope(z: np.ndarray, ma: np.ndarray, off: np.ndarray):
    """L(z) and L'(z) for the mixture (vectorised over z)."""
    if ma.size == 2:        # one example's pair: the same operations column by column (logsumexp2)
        t0, t1 = off[0] + z * ma[0], off[1] + z * ma[1]
        L = logsumexp2(t0, t1)
        return L, np.exp(t0 - L) * ma[0] + np.exp(t1 - L) * ma[1]
    t = off[None, :] + z[:, None] * ma[None, :]
    L = logsumexp(t, axis=1)
    dL = np.sum(np.exp(t - L[:, None]) * ma[None, :], axis=1)
    return L, dL


def _inverse(eps: np.ndarray, ma: np.ndarray, off: np.ndarray, z0: np.ndarray) -> np.ndarray:
    """z with L(z) = ε by safeguarded Newton (L is increasing and convex: log-sum-exp of lines)."""
    z = z0.copy()
    for _ in range(60):
        L, dL = _log_ratio_and_slope(z, ma, off)
        step = (L - eps) / np.maximum(dL, 1e-300)
        z = z - np.clip(step, -4.0, 4.0)
        if np.max(np.abs(step)) < 1e-13 * (1 + np.max(np.abs(z))):
            break
    return z


def _one_step_deltas(mix: Mixture, a: float, h: float, direction: str):
    """Exact one-step δ(ε_k) on the knot grid ε_k = (k0 + k)·h, k = 0..K. Returns (k0, δ, 1 − δ),
    the complement computed on its own so that differences stay exact where δ is near 1."""
    ma = mix.m * a
    off = mix.logw - ma * ma / 2
    has_zero = mix.m[0] == 0
    # z range: the bottom of Q's (or P's lowest component's) support, the top of every heavy
    # component's support
    heavy = mix.logw >= math.log(_TOP_TAIL)
    z_top = float(np.max(ma[heavy] + np.maximum(0.0, -ndtri(_TOP_TAIL / np.exp(mix.logw[heavy])))))
    z_top = max(z_top, -float(ndtri(_TOP_TAIL)))
    z_bot = min(float(ma[0]), 0.0) + float(ndtri(_TOP_TAIL))
    grid = np.array([z_bot, z_top])
    L_ends, _ = _log_ratio_and_slope(grid, ma, off)
    if direction == "remove":            # loss L(z), z ~ P
        lo = float(mix.logw[0]) if has_zero else float(L_ends[0])
        hi = float(L_ends[1])
    else:                                # loss −L(z), z ~ Q
        lo = -float(L_ends[1])
        hi = -float(mix.logw[0]) if has_zero else -float(L_ends[0])
    k0, k1 = math.floor(lo / h), math.ceil(hi / h)
    if k1 - k0 > _MAX_KNOTS:
        # Keep the losses near 0, where δ on ε ≥ 0 is decided: the range above the last knot
        # becomes mass at +∞ (δ of the last knot, `_connect_dots`) and the range below the first
        # knot is moved up onto it (slope −1 there): both pessimistic. A run at a small σ (large
        # a) has losses of hundreds of nats; refusing it made every later bound 1.
        k0 = max(k0, min(-(_MAX_KNOTS // 2), k1 - _MAX_KNOTS))
        k1 = k0 + _MAX_KNOTS
    eps = np.arange(k0, k1 + 1) * h
    target = eps if direction == "remove" else -eps
    # knots beyond the loss's range: remove, ε below the least loss log π_0: δ = 1 − e^ε;
    # add, ε above the largest loss −log π_0: δ = 0
    inside = target > (float(mix.logw[0]) if has_zero else -np.inf)
    d = np.where(direction == "remove", -np.expm1(np.minimum(eps, 0.0)), 0.0) * np.ones(eps.size)
    g = np.where(direction == "remove", np.exp(np.minimum(eps, 0.0)), 1.0) * np.ones(eps.size)
    t = target[inside]
    zg = np.linspace(z_bot - 1, z_top + 1, 2049)       # Newton starts from interpolation
    Lg, _ = _log_ratio_and_slope(zg, ma, off)
    z = _inverse(t, ma, off, np.interp(t, Lg, zg))
    e = eps[inside]
    with np.errstate(divide="ignore", invalid="ignore"):
        nd_below = log_ndtr(z[:, None] - ma[None, :])
        nd_above = log_ndtr(ma[None, :] - z[:, None])
        p_below = logsumexp(mix.logw[None, :] + nd_below, axis=1)
        p_above = logsumexp(mix.logw[None, :] + nd_above, axis=1)
        # Q's tails log Φ(z), log Φ(−z): the m = 0 column when there is one (z − 0 and 0 − z are
        # z and −z exactly, so the same bits), else computed
        q_below = nd_below[:, 0] if ma[0] == 0 else log_ndtr(z)
        q_above = nd_above[:, 0] if ma[0] == 0 else log_ndtr(-z)
        if direction == "remove":        # δ = P(L>ε) − e^ε Q(L>ε); 1 − δ = P(L≤ε) + e^ε Q(L>ε)
            la, lb, lc = p_above, e + q_above, p_below
        else:                            # δ = Q(L<−ε) − e^ε P(L<−ε); 1 − δ = Q(L≥−ε) + e^ε P(L<−ε)
            la, lb, lc = q_below, e + p_below, q_above
        d[inside] = np.where(lb < la, np.exp(la) * -np.expm1(lb - la), 0.0)
        g[inside] = np.exp(np.logaddexp(lb, lc))
    return k0, np.clip(d, 0.0, 1.0), np.clip(g, 0.0, 1.0)


def _connect_dots(k0: int, h: float, delta: np.ndarray, comp: np.ndarray) -> tuple[np.ndarray, float]:
    """Discrete PLD (P-side masses ω_k at losses (k0+k)·h, plus ω_∞) whose δ is the chord of the
    exact δ in e^ε through the knots [Doroshenko et al. 2022, Alg. 1]. Slopes left of the first
    knot are taken as −1 (the steepest possible), so the chord dominates there too."""
    x = np.exp((k0 + np.arange(delta.size)) * h)
    A = np.empty(delta.size + 1)
    A[0] = 1.0
    # −slope of δ(x) on [x_k, x_{k+1}]; where δ ≈ 1 its differences come from the complement
    diff = np.where(delta[:-1] > 0.5, comp[1:] - comp[:-1], delta[:-1] - delta[1:])
    A[1:-1] = diff / np.diff(x)
    A[-1] = 0.0
    # δ is convex in e^ε, so A is non-increasing up to rounding. Rounding is repaired upwards
    # (the running maximum from the right), which only raises the chord: lowering a slope to the
    # left (a running minimum) lowered every later one too, and where δ is flat to 1e-16 (a rare
    # example at a small σ: δ ≈ ρ for hundreds of nats) it dropped that mass, δ far too small.
    A = np.maximum.accumulate(np.clip(A, 0.0, 1.0)[::-1])[::-1]
    omega = x * (A[:-1] - A[1:])
    return omega, float(delta[-1])


@dataclass(frozen=True)
class _Discrete:
    """One step's connect-the-dots PLD: masses ω_k at losses (k0 + k)·h, ω_∞ at +∞, `steps`;
    `memo` holds what `_composed` derives from the one-step PLD alone (its log-MGF at `_LAM`,
    and for an earlier run's part its `steps`-fold spectrum per FFT size), shared by every call
    that meets the same one-step pair: an earlier run's pair recurs at every σ a calibration tries."""

    omega: np.ndarray
    w_inf: float
    k0: int
    steps: int
    memo: dict = field(default_factory=dict, compare=False, repr=False)


def _composed(parts: list[_Discrete], h: float, eps_max: float) -> DeltaCurve:
    """δ on the grid ε = j·h ∈ [0, eps_max] of the composition of every part's `steps`-fold
    self-composition (the PLD of a composition is the convolution of the PLDs)."""
    eps_grid = np.arange(0, math.floor(eps_max / h) + 1) * h
    mu = var = 0.0
    base = 0                                            # least possible sum index
    for d in parts:
        lossk = (d.k0 + np.arange(d.omega.size)) * h
        mass = max(d.omega.sum(), 1e-300)
        # a plain product-sum, not np.dot: BLAS splits a dot this long across threads, and on a
        # busy machine its spinning threads cost 100× the arithmetic (issue 45); these moments
        # only place the window, so their last bits never matter
        m1 = float(np.sum(d.omega * lossk) / mass)
        mu += d.steps * m1
        var += d.steps * float(np.sum(d.omega * (lossk - m1) ** 2) / mass)
        base += d.steps * d.k0
    sd = math.sqrt(var)
    s_lo = max(base * h, min(mu - _SD_MARGIN * sd - 1.0, -1.0))
    s_hi = max(eps_max, 0.0) + 1.0
    if mu + _SD_MARGIN * sd > s_hi:
        s_hi = min(mu + _SD_MARGIN * sd, max(eps_max, 0.0) + 60.0)
    i_lo = math.floor(s_lo / h) - base                 # window bottom, as an index above `base`
    n_win = math.ceil((s_hi - s_lo) / h) + 2
    n = 1 << max(4, (max([n_win] + [d.omega.size for d in parts]) - 1).bit_length())
    if n > _MAX_FFT:
        return DeltaCurve(eps_grid, np.ones(eps_grid.size), h)
    spec = np.ones(n // 2 + 1, dtype=complex)
    for i, d in enumerate(parts):
        key = ("spec", n, d.steps)
        f = d.memo.get(key)
        if f is None:
            w = np.zeros(n)
            np.add.at(w, np.arange(d.omega.size) % n, d.omega)
            f = np.fft.rfft(w) ** d.steps
            if i > 0:                   # an earlier run's part (`delta_curve`): recurs at every σ
                d.memo.clear()          # one size kept, so the cache stays small
                d.memo[key] = f
        spec *= f
    pmf = np.fft.irfft(spec, n)
    # slot j holds the sum index ≡ j (mod n) inside [i_lo, i_lo + n): a rotation sorts them
    pmf = np.clip(np.roll(pmf, -(i_lo % n)), 0.0, None)
    s = (base + i_lo + np.arange(n)) * h                # ascending losses of the window
    # mass of the (finite part of the) sum above the window: Chernoff from the one-step MGFs
    lam = _LAM
    log_mgf = np.zeros(lam.size)
    for d in parts:
        log_mgf += d.steps * _log_mgf(d, h)
    tail = float(np.exp(min(0.0, np.min(-lam * float(s[-1]) + log_mgf))))
    log_none = sum(d.steps * math.log1p(-d.w_inf) if d.w_inf < 1 else -math.inf for d in parts)
    inf_mass = -math.expm1(log_none)                    # some step's loss is +∞
    roundoff = 4.0 * _EPS_MACH * n * sum(d.steps for d in parts)
    # δ(ε) = Σ_{s>ε} pmf(s)(1 − e^{ε−s}) via suffix sums over s ≥ 0
    pos = s >= 0
    sp, pp = s[pos], pmf[pos]
    suf = np.cumsum(pp[::-1])[::-1]
    sufe = np.cumsum((pp * np.exp(-sp))[::-1])[::-1]
    k = np.searchsorted(sp, eps_grid, side="right")   # first s > ε
    tot = np.append(suf, 0.0)[k]
    tote = np.append(sufe, 0.0)[k]
    delta = np.maximum(0.0, tot - np.exp(eps_grid) * tote) + tail + inf_mass + roundoff
    return DeltaCurve(eps_grid, np.minimum(delta, 1.0), h)


def _log_mgf(d: _Discrete, h: float) -> np.ndarray:
    """log E[e^{λ·loss}] of one step's discrete PLD (finite part) at each λ of `_LAM`, memoised
    on `d.memo` (the same operations as inline, so the same bits)."""
    got = d.memo.get(("mgf", h))
    if got is None:
        lossk = (d.k0 + np.arange(d.omega.size)) * h
        # logsumexp(log ω + λ·loss, axis=1) computed in one buffer: the same operations, in place
        t = np.multiply(_LAM[:, None], lossk[None, :])
        with np.errstate(divide="ignore", invalid="ignore"):
            t += np.log(d.omega)[None, :]
            m = np.max(t, axis=1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0.0)
            t -= m
            np.exp(t, out=t)
            got = (np.log(np.sum(t, axis=1, keepdims=True)) + m).squeeze(axis=1)
        d.memo[("mgf", h)] = got
    return got


_LAM = np.geomspace(1e-2, 100.0, 33)     # Chernoff exponents for the mass above the window
_ONE_STEP: dict = {}      # (mixture, a, h, direction) → one step's discrete PLD; earlier runs' pairs
_ONE_STEP_MAX = 256       # recur at every σ a calibration tries


def _discrete(mix: Mixture, a: float, steps: int, h: float, direction: str) -> _Discrete | None:
    if mix.n == 0 or a == 0.0 or steps == 0:
        return None                                     # nothing sampled: loss 0
    key = (mix.m.tobytes(), mix.logw.tobytes(), float(a), float(h), direction)
    hit = _ONE_STEP.pop(key, None)          # least recently used first: an earlier run's pair,
    if hit is None:                         # met at every σ, is never evicted
        mix = _coarsen(mix)
        k0, d, comp = _one_step_deltas(mix, a, h, direction)
        omega, w_inf = _connect_dots(k0, h, d, comp)
        while len(_ONE_STEP) >= _ONE_STEP_MAX:
            _ONE_STEP.pop(next(iter(_ONE_STEP)))
        hit = (omega, w_inf, k0, {})
    _ONE_STEP[key] = hit
    memo = hit[3].setdefault(int(steps), {})            # per step count: spectra are `steps`-fold
    return _Discrete(hit[0], hit[1], hit[2], int(steps), memo)


def delta_curve(mix: Mixture, a: float, steps: int, direction: str = "remove", *,
                eps_max: float = 40.0, h: float = DEFAULT_H, history=()) -> DeltaCurve:
    """Upper bounds on δ_T(ε), ε ∈ [0, eps_max] on a grid of step h, for the T-fold composition
    of one secret's dominating pair at a = s/σ in the given direction ("remove" = (P‖Q), "add" =
    (Q‖P)), composed further with `history`: earlier runs' pairs as (Mixture, a, steps) tuples.
    Raises ValueError for an unknown direction or steps < 0."""
    if direction not in ("remove", "add"):
        raise ValueError(f"unknown direction {direction!r}")
    if steps < 0:
        raise ValueError("steps must be ≥ 0")
    parts = [d for d in (_discrete(m, x, t, h, direction) for m, x, t in ((mix, a, steps), *history))
             if d is not None]
    if not parts:
        eps_grid = np.arange(0, math.floor(eps_max / h) + 1) * h
        return DeltaCurve(eps_grid, np.zeros(eps_grid.size), h)
    return _composed(parts, h, eps_max)


def pld_bound(mix: Mixture, a: float, steps: int, prior, *, h: float = DEFAULT_H, history=()
              ) -> tuple[np.ndarray, np.ndarray]:
    """Neyman–Pearson reconstruction bound (module docstring) for priors `prior` (array, each in
    (0, 1)) after `steps` steps of one secret's pair at a = s/σ, composed with `history` (earlier
    runs' (Mixture, a, steps)): the larger over the two directions of min_ε e^ε p + δ(ε).
    Returns (bounds in [p, 1], the ε (nats) at which each was attained)."""
    p = np.atleast_1d(np.asarray(prior, float))
    key = (_mix_key(mix), float(a), int(steps), p.tobytes(), float(h),
           tuple((_mix_key(m), float(x), int(t)) for m, x, t in history))
    hit = _BOUNDS.get(key)
    if hit is not None:             # a calibration meets the same (pair, σ) again: same bits
        return hit[0].copy(), hit[1].copy()
    eps_max = float(np.log(1.0 / p.min()))
    out, at = np.zeros(p.size), np.zeros(p.size)
    for direction in ("remove", "add"):
        b, e = delta_curve(mix, a, steps, direction, eps_max=eps_max, h=h, history=history).bound(p)
        bigger = b > out
        out = np.where(bigger, b, out)
        at = np.where(bigger, e, at)
    res = np.maximum(out, p), at
    if len(_BOUNDS) >= _BOUNDS_MAX:
        _BOUNDS.clear()
    _BOUNDS[key] = (res[0].copy(), res[1].copy())
    return res


_BOUNDS: dict = {}        # `pld_bound`'s arguments (by value) → its result; the plan's calibrations
_BOUNDS_MAX = 4096        # (c sweep, floor, uniform and KL baselines) repeat some evaluations


def _mix_key(mix: Mixture) -> tuple:
    return (mix.m.tobytes(), mix.logw.tobytes(), int(mix.n))


def pair_record(mix: Mixture, a: float, steps: int) -> dict:
    """A run's pair for the ledger: {"a", "steps", "m", "logw"} of the coarsened mixture (exact
    floats; JSON keeps them bit for bit)."""
    c = _coarsen(mix)
    return {"a": float(a), "steps": int(steps), "m": [int(x) for x in c.m], "logw": [float(x) for x in c.logw],
            "n": int(c.n)}


def pair_from_record(d: dict) -> tuple[Mixture, float, int]:
    """Inverse of `pair_record`: (Mixture, a, steps). Raises KeyError/ValueError if malformed."""
    m = np.asarray(d["m"], dtype=np.int64)
    lw = np.asarray(d["logw"], dtype=float)
    if m.shape != lw.shape or m.size == 0:
        raise ValueError("pair record: m and logw must be non-empty and of equal length")
    return Mixture(m, lw, int(d.get("n", int(m.max())))), float(d["a"]), int(d["steps"])
