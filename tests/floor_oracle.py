"""An independent oracle for the undetected-secret floor: dp_accounting's privacy-loss
distribution of each Poisson-subsampled Gaussian part (connect-the-dots, FFT self-composition,
parts composed; both adjacency directions, its δ is the max), turned into the Neyman–Pearson
reconstruction bound min_ε e^ε·p + δ(ε) [Hush Lemma 3.2 / docs/privacy.md "The Neyman–Pearson bound"].
Shares no code with repoguard's accountant."""
from __future__ import annotations

import numpy as np


def floor_bound(parts, p: float, h: float = 1e-3) -> float:
    """Bound for a secret in one example (k = 1) run through `parts` [(ρ, σ, T), …] at prior p."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    pld = None
    for rho, sigma, steps in parts:
        one = pldm.from_gaussian_mechanism(standard_deviation=float(sigma), sensitivity=1.0,
                                           sampling_prob=float(rho), value_discretization_interval=h,
                                           use_connect_dots=True).self_compose(int(steps))
        pld = one if pld is None else pld.compose(one)
    eps = np.arange(0.0, np.log(1 / p) + 1.0, 2e-3)
    return float(min(1.0, np.min(np.exp(eps) * p + np.asarray(pld.get_delta_for_epsilon(eps)))))
