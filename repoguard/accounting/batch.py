"""The divergences of `divergences.py`, vectorised over many secrets' dominating pairs at once.

Calibrating σ for 10⁵ secrets cannot afford a Python-level quadrature per secret. Here the
mixing laws of many groups are built by one padded Poisson-binomial recursion, and their KL and
Rényi divergences (both directions, all orders) are integrated on one shared z grid with numpy
broadcasting over (group, α, z). The formulas, tail bounds and skipping rules are exactly those
of `divergences.step_divergences` (see its module docstring for why each is an upper bound);
groups that do not fit the shared grid (very wide integration ranges) or whose pmf needs
truncation fall back to the scalar code, so results agree with it to rounding (tested).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from repoguard.accounting import divergences as dv
from repoguard.accounting.divergences import Mixture, logsumexp, mixture, step_divergences

BATCH_MAX_N = 64          # groups with more sampled examples use the scalar path
_GRID_CAP = 4000          # grid points a group may need to share the batch grid
_CHUNK_CELLS = 3_000_000  # group × α × z cells per numpy chunk


def batch_mixtures(sets: list[np.ndarray]) -> list[Mixture]:
    """`mixture(s)` for every ρ multiset in `sets` (positive ρ only), by one padded recursion per
    size bucket; multisets whose pmf falls below PMF_FLOOR (truncation needed) use `mixture`."""
    out: list[Mixture | None] = [None] * len(sets)
    sizes = np.array([s.size for s in sets], dtype=np.int64)
    for nb in (1, 2, 4, 8, 16, 32, 64):
        lo = nb // 2 + 1 if nb > 1 else 0
        idx = np.nonzero((sizes >= lo) & (sizes <= nb))[0]
        if idx.size == 0:
            continue
        rho = np.zeros((idx.size, nb))
        for k, j in enumerate(idx):
            rho[k, :sizes[j]] = sets[j]
        pmf = np.zeros((idx.size, nb + 1))
        pmf[:, 0] = 1.0
        for c in range(nb):                     # add example c: exact, no cancellation
            r = rho[:, c:c + 1]
            pmf[:, 1:] = pmf[:, 1:] * (1 - r) + pmf[:, :-1] * r
            pmf[:, 0] *= 1 - rho[:, c]
        for k, j in enumerate(idx):
            n = int(sizes[j])
            row = pmf[k, :n + 1]
            if n and row.min() >= dv.PMF_FLOOR:
                out[j] = Mixture(np.arange(n + 1, dtype=np.int64), np.log(row), n)
    return [m if m is not None else mixture(s) for m, s in zip(out, sets)]


def _pad(mixes: list[Mixture]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = max(m.m.size for m in mixes)
    M = np.zeros((len(mixes), k))
    LW = np.full((len(mixes), k), -np.inf)
    for i, m in enumerate(mixes):
        M[i, :m.m.size] = m.m
        LW[i, :m.m.size] = m.logw
    return M, LW, np.array([m.n for m in mixes], dtype=float)


def batch_step_divergences(mixes: list[Mixture], a: float, alphas, max_divergence, *, kl: bool = True
                           ) -> tuple[np.ndarray, np.ndarray]:
    """One step's divergences for every mixture at a = s/σ. `max_divergence`: (n_groups, n_alpha)
    per-step thresholds (an α whose lower bound exceeds it is +inf, as in `step_divergences`).
    Returns (kl (n, 2) [P‖Q, Q‖P], renyi (n, n_alpha, 2)); zeros for unsampled groups."""
    al = np.asarray(alphas, dtype=float)
    n = len(mixes)
    thr = np.broadcast_to(np.asarray(max_divergence, float), (n, al.size))
    kl_out = np.zeros((n, 2))
    ren_out = np.zeros((n, al.size, 2))
    live = [i for i, m in enumerate(mixes) if m.n > 0]
    if not live or a == 0.0:
        return kl_out, ren_out
    h = dv._step(a)
    M, LW, N = _pad([mixes[i] for i in live])
    lo, hi, use = _ranges(M * a, LW, al, thr[live], kl)
    wide = (hi - lo) / h > _GRID_CAP
    for k in np.nonzero(wide)[0]:                  # too wide to share: scalar path
        i = live[k]
        sd = step_divergences(mixes[i], a, al, kl=kl, max_divergence=thr[i])
        kl_out[i] = sd.kl
        if al.size:  # KL-only calibration passes no orders
            ren_out[i] = [sd.renyi[float(x)] for x in al]
    keep = np.nonzero(~wide)[0]
    if keep.size == 0:
        return kl_out, ren_out
    # sort by range so each chunk's shared grid stays tight
    keep = keep[np.lexsort((lo[keep], np.round((hi[keep] - lo[keep]) / (8 * h))))]
    per_group = max(1, al.size) * max(1.0, float(np.max(hi[keep] - lo[keep])) / h)
    step = max(1, int(_CHUNK_CELLS // per_group))
    for s in range(0, keep.size, step):
        ks = keep[s:s + step]
        z = np.arange(lo[ks].min(), hi[ks].max() + h / 2, h)
        cols = np.nonzero(use[ks].any(axis=0))[0]        # orders no group here can use: skip
        k_kl, k_ren = _integrate(z, h, M[ks] * a, LW[ks], N[ks], al[cols], use[ks][:, cols], kl, a)
        rows = [live[k] for k in ks]
        kl_out[rows] = k_kl
        full = np.full((ks.size, al.size, 2), np.inf)
        full[:, cols] = k_ren
        ren_out[rows] = full
    return kl_out, ren_out


def _ranges(ma, lw, al, thr, kl):
    """Per group: the z range all its used orders (and KL) need, and which orders are used."""
    fin = np.isfinite(lw)
    log_k = np.log(fin.sum(axis=1))
    tz = dv._TAIL_Z
    lo = np.full(ma.shape[0], -tz)
    hi = np.full(ma.shape[0], tz)
    if kl:
        heavy = fin & (lw >= np.max(lw, axis=1, keepdims=True) - 100.0)
        lo = np.minimum(lo, np.min(np.where(heavy, ma, np.inf), axis=1) - tz)
        hi = np.maximum(hi, np.max(np.where(heavy, ma, -np.inf), axis=1) + tz)
    A = al[None, :, None]
    ma2 = (ma * ma)[:, None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        solo = np.where(fin[:, None, :], A * lw[:, None, :] + A * (A - 1) * ma2 / 2, -np.inf)
        smax = np.maximum(solo.max(axis=2), 0.0)
        use = smax / (al - 1) <= thr
        need = solo + A * log_k[:, None, None] >= smax[:, :, None] - 45.0
        top = al * np.max(np.where(need, ma[:, None, :], 0.0), axis=2) + np.sqrt(2 * (al * log_k[:, None] + 45.0))
        c = np.where(fin[:, None, :], (1 - A) * lw[:, None, :] + A * (A - 1) * ma2 / 2, np.inf)
        bottom = np.max(np.where(fin[:, None, :], -(A - 1) * ma[:, None, :] - np.sqrt(2 * np.maximum(0.0, 45.0 + c)),
                                 -np.inf), axis=2)
    s0 = np.where(use, np.minimum(bottom, -tz), np.inf)
    s1 = np.where(use, np.maximum(top, tz), -np.inf)
    lo = np.minimum(lo, s0.min(axis=1, initial=np.inf))
    hi = np.maximum(hi, s1.max(axis=1, initial=-np.inf))
    return lo, hi, use


def _integrate(z, h, ma, lw, n, al, use, kl, a):
    """Trapezoid integrals plus tail bounds, as in divergences._kl_* and _renyi_*."""
    fin = np.isfinite(lw)
    log_k = np.log(fin.sum(axis=1))
    off = lw - ma * ma / 2
    L = logsumexp(off[:, None, :] + z[None, :, None] * ma[:, None, :], axis=2)        # (g, z)
    lphi = dv._log_phi(z)
    trap = np.full(z.size, math.log(h))
    trap[0] = trap[-1] = math.log(h / 2)
    w = np.exp(lw)
    out_kl = np.zeros((ma.shape[0], 2))
    if kl:
        lp = lphi[None, :] + L + trap[None, :]
        mx = lp.max(axis=1, keepdims=True)
        fwd = np.sum(np.exp(lp - mx) * L, axis=1) * np.exp(mx[:, 0])
        zt = z[-1]
        tail = np.sum(np.where(fin, w * (n[:, None] * a) * (ma * np.exp(log_ndtr(ma - zt))
                                                          + np.exp(dv._log_phi(zt - ma))), 0.0), axis=1)
        out_kl[:, 0] = np.maximum(0.0, fwd + tail)
        pw = np.exp(lphi + trap)
        rev = -np.sum(pw[None, :] * L, axis=1)
        m0 = ma[:, 0]
        cc = -lw[:, 0] + m0 * m0 / 2
        left = np.maximum(0.0, cc) * math.exp(log_ndtr(z[0])) + m0 * math.exp(dv._log_phi(z[0]))
        right = np.maximum(0.0, -L[:, -1]) * math.exp(log_ndtr(-z[-1]))
        out_kl[:, 1] = np.maximum(0.0, rev + left + right)
    A = al[None, :, None]
    base = (lphi + trap)[None, None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        core_f = logsumexp(base + A * L[:, None, :], axis=2)
        core_r = logsumexp(base + (1 - A) * L[:, None, :], axis=2)
        left_f = log_ndtr(z[0]) + al[None, :] * L[:, :1]
        ma2 = (ma * ma)[:, None, :]
        rt = np.where(fin[:, None, :], A * lw[:, None, :] + A * (A - 1) * ma2 / 2
                      + log_ndtr(A * ma[:, None, :] - z[-1]), -np.inf)
        right_f = al[None, :] * log_k[:, None] + logsumexp(rt, axis=2)
        lt = np.where(fin[:, None, :], (1 - A) * lw[:, None, :] + A * (A - 1) * ma2 / 2
                      + log_ndtr(z[0] + (A - 1) * ma[:, None, :]), np.inf)
        left_r = lt.min(axis=2)
        right_r = log_ndtr(-z[-1]) + (1 - al)[None, :] * L[:, -1:]
        fwd_r = np.maximum(0.0, logsumexp(np.stack([core_f, left_f, right_f]), axis=0) / (al - 1))
        rev_r = np.maximum(0.0, logsumexp(np.stack([core_r, left_r, right_r]), axis=0) / (al - 1))
    ren = np.stack([np.where(use, fwd_r, np.inf), np.where(use, rev_r, np.inf)], axis=2)
    return out_kl, ren
