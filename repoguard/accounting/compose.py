"""The reconstruction bound of one secret across several mechanisms run one after the other.

A two-phase run (training/phases.py) applies two different weighted-Poisson Gaussian mechanisms
to the same examples: phase 1 with (ρ₁, σ₁, T₁), phase 2 with (ρ₂, σ₂, T₂). Their dominating
pairs compose [Hush §4]: KL and Rényi divergences add (each part's larger direction, so the sum
bounds either direction of the composition), and privacy-loss distributions convolve
(`pld.pld_bound(..., history=...)`). The posterior bound is then Hush Lemma 3.2 on the composed
divergences (KL, every Rényi order) and the Neyman–Pearson bound of the composed pair, the
minimum of the valid bounds. Probabilities are never added: adding the parts' bounds would be
neither tight nor, for f-divergence bounds, the right composition.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Part:
    """One mechanism: the secret's examples' sampling probabilities `rhos` (each in [0, 1]),
    noise multiplier `sigma` (noise std σ·C on the clipped sum; 0 = trained in the clear, no
    bound) and `steps` T."""

    rhos: tuple[float, ...]
    sigma: float
    steps: int


def composed_bound(parts, prior: float, *, adjacency: str = "zero-out", alphas=None,
                   method: str = "best") -> float:
    """Posterior bound on reconstructing one secret after every part in `parts` (Part or
    (rhos, sigma, steps) tuples) [Hush Lemma 3.2 on summed divergences; Neyman–Pearson on the
    convolved privacy-loss distributions]. A part with σ = 0 (no noise) on a sampled example gives
    no bound (1.0); a part with no sampled example (all ρ = 0, or steps = 0) spends nothing.

    `method`: "best" (minimum of KL, Rényi and Neyman–Pearson), "kl" or "renyi".
    Returns a float in [prior, 1]. Raises ValueError for a prior outside (0, 1) or bad parts."""
    from repoguard.accounting.bounds import best_renyi_bound, kl_bound
    from repoguard.accounting.divergences import DEFAULT_ALPHAS, mixture, pair_shift, step_divergences
    from repoguard.accounting.kinds import Accountant
    from repoguard.accounting.pld import pld_bound

    if not 0 < prior < 1:
        raise ValueError("prior p must lie in (0, 1)")
    Accountant.parse(method, "method")
    al = np.asarray(DEFAULT_ALPHAS if alphas is None else alphas, float)
    live = []
    for part in parts:
        rhos, sigma, steps = part if not isinstance(part, Part) else (part.rhos, part.sigma, part.steps)
        rhos = np.asarray(rhos, float)
        if steps < 0 or np.any(rhos < 0) or np.any(rhos > 1):
            raise ValueError("each part needs steps ≥ 0 and every ρ in [0, 1]")
        if steps == 0 or not np.any(rhos > 0):
            continue                                   # never sampled: spends nothing
        if not sigma > 0:
            return 1.0                                 # trained in the clear: no bound
        live.append((mixture(rhos), pair_shift(float(sigma), adjacency), int(steps)))
    if not live:
        return float(prior)
    kl_total, ren_total = 0.0, np.zeros(al.size)
    for mix, a, steps in live:
        sd = step_divergences(mix, a, al, kl=method != "renyi")
        kl_total += steps * max(sd.kl)
        ren_total += steps * np.array([max(sd.renyi[float(x)]) for x in al])
    out = 1.0
    if method in ("best", "kl"):
        out = min(out, float(kl_bound(kl_total, prior)))
    if method in ("best", "renyi") and al.size:
        fin = np.isfinite(ren_total)
        if fin.any():
            out = min(out, float(best_renyi_bound(ren_total[fin], al[fin], prior)[0]))
    if method == "best":
        mix, a, steps = live[-1]
        out = min(out, float(pld_bound(mix, a, steps, prior, history=tuple(live[:-1]))[0][0]))
    return float(max(out, prior)) if math.isfinite(out) else 1.0
