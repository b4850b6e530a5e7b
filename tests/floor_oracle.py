"""An independent oracle for the undetected-secret floor: dp_accounting's privacy-loss
distribution of the Poisson-subsampled Gaussian (connect-the-dots), self-composed and composed
across parts, turned into the Neyman–Pearson reconstruction bound min_ε e^ε·p + δ(ε) [Hush
Lemma 3.2 / DESIGN.md "Neyman–Pearson bound"]. Shares no code with repoguard's accountant."""
from __future__ import annotations

import numpy as np


def floor_bound(parts, p: float, *, h: float = 1e-3, eps_max: float = 40.0) -> float:
    """Bound for one example (k = 1) run through `parts` [(ρ, σ, T), …] at prior p."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    total = None
    for rho, sigma, steps in parts:
        one = pldm.from_gaussian_mechanism(float(sigma), sampling_prob=float(rho),
                                           value_discretization_interval=h, use_connect_dots=True)
        one = one.self_compose(int(steps))
        total = one if total is None else total.compose(one)
    eps = np.arange(0.0, eps_max, 0.01)
    delta = np.array([total.get_delta_for_epsilon(float(e)) for e in eps])
    return float(min(1.0, np.min(np.exp(eps) * p + delta)))
