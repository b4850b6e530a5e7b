"""SecretNoise [SecPE Alg. 1, Thm. 2]: which private examples count in each round, with what
probability, and the noise σ that keeps every secret's (p_j, r_j) composed over the T rounds.

Two modes. With the undetected-secret floor on (the default), *every* training example — tied or
untied — enters only through the noisy statistics: untied examples are counted with probability
ρ_u (`UNTIED_RHO`, the floor's sampling rate) and the floor target (k untied examples at ρ_u,
`config.Undetected`) joins the calibration as one more secret, with its own ledger account
(`planning.undetected.FloorAccount`, as `planning.plan.build_plan` does). With the floor off (the
paper's mode) untied examples are public: they build the anchors in the clear and get ρ = 0.

Weights. The LP of Hush eq. 1 with the Gaussian-DP caps η_j = Φ⁻¹(1−p_j) − Φ⁻¹(1−r_j)
[SecPE eq. 6] (`planning.weighting`, `cap="gdp"`), over the *private* examples: tied to a secret
and not held out. Untied examples get ρ_u (floor on) or are public (floor off: they build the
anchors in the clear); held-out examples never enter (ρ = 0).

Inclusion probabilities. ρ_i = w_i / max_k w_k: Hush's ρ = B·w/Σw at the largest expected count
B = Σw / max w that keeps every ρ ≤ 1. (The issue writes ρ_i = w_i / (max w · Σw); read literally
that caps every ρ at 1/Σw, so with Σw ≫ 1 almost no private example would ever be counted. Both
are valid for the accountant, which runs on the ρ actually used; this is the one that uses the
private data the LP allows.) Each round includes example i independently with probability ρ_i.

Dominating pair [SecPE Thm. 2; Charles et al. 2024 Thm 1, as in Hush §4]. One round releases
(ñ, S̃) = (n + m + N(0, σ_n² I_K), s + Σ_priv clip_R(x_i) + N(0, σ_n² I_{K·d})): a private example
adds e_k to the counts and a vector of norm ≤ R = 1 to row k of the sums, so its joint ℓ2
contribution is ≤ Δ = √(1 + R²) = √2 (zero-out adjacency; "replace" doubles it through the
accountant's s). With noise std σ_n = σ·Δ the per-round pair of secret j is, in units of Δ,
P_j = N(Σ_{i∈E_j} Bern(ρ_i), σ²) vs Q = N(0, σ²) — the accountant's pair (`accounting.divergences`)
— and the T rounds compose (KL and Rényi divergences add; the Neyman–Pearson bound composes the
privacy-loss distributions). σ is the smallest noise multiplier for which every secret's bound,
this synthesis composed over T rounds *plus what the ledger says it already spent*, is ≤ r_j
(`accounting.calibrate`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from repoguard.core.errors import InputError, PolicyError

UNTIED_RHO = 1.0                     # ρ_u with the floor on: every untied example is counted every round
RADIUS = 1.0                         # R: private embeddings are clipped to this ℓ2 norm
SENSITIVITY = math.sqrt(1.0 + RADIUS ** 2)   # Δ: one example's joint ℓ2 contribution to (counts, sums)


@dataclass
class NoisePlan:
    """`rho` (n,) inclusion probability per example row (0 for public and held-out rows); `w` the
    LP weights (1 for untied rows, 0 for held-out rows); `private` / `public` bool (n,) masks;
    `sigma` the noise multiplier (units of Δ) and `noise_std` = σ·Δ the std actually added to every
    count and every coordinate of every sum, per round; `rounds` T; `c` the LP scale; `cal` the
    `accounting.calibrate.Calibration` (per secret: cumulative bound, binding bound, this run's
    KL and Rényi divergences over T rounds, pairs)."""

    rho: np.ndarray
    w: np.ndarray
    private: np.ndarray
    public: np.ndarray
    sigma: float
    noise_std: float
    rounds: int
    c: float
    accountant: str
    adjacency: str
    cal: object
    lp: dict = field(default_factory=dict)
    sweep: list = field(default_factory=list)
    clear: np.ndarray | None = None
    floor: dict | None = None
    rho_u: float = 0.0


def private_rho(w: np.ndarray, private: np.ndarray) -> np.ndarray:
    """ρ_i = w_i / max w over the private rows (0 elsewhere, and everywhere if every w is 0)."""
    rho = np.zeros(len(w))
    top = float(np.max(w[private])) if private.any() else 0.0
    if top > 0:
        rho[private] = np.clip(w[private] / top, 0.0, 1.0)
    return rho


def secret_noise(incidence, test: np.ndarray, *, rounds: int, c: float = 0.0, accountant: str = "best",
                 adjacency: str = "zero-out", spent=None, sweep=None, floor=None,
                 untied_rho: float = UNTIED_RHO) -> NoisePlan:
    """[SecPE Alg. 1] weights, inclusion probabilities and the per-round σ for `incidence` (rows
    aligned with `test`, the held-out mask). `c` > 0 fixes the LP scale; 0 sweeps `sweep`
    (default 2^-6…2^4) and keeps the c with the largest Σρ/σ (expected private contributions per
    unit noise: the counts' signal-to-noise), ties to the smaller c. `spent`
    (`accounting.spending.Spent`, None = nothing): what earlier runs spent.

    `floor` (a `config.Undetected`, enabled): untied training rows get ρ = `untied_rho` and the
    floor — k examples at that ρ, target (p, r), after the ledger's spending on its account and
    `spent.legacy` ((σ, T) of runs without one, counted at ρ = 1) — is calibrated with the
    declared secrets as one more secret, so σ meets both. None or disabled: the paper's mode
    (untied rows public, ρ = 0). Raises InputError for bad arguments and PolicyError naming the
    secrets (or the floor) whose earlier spending leaves no σ that works."""
    from repoguard.accounting.calibrate import Infeasible, calibrate
    from repoguard.accounting.spending import Spent
    from repoguard.accounting.divergences import DEFAULT_ALPHAS
    from repoguard.planning.weighting import SWEEP, secret_caps, solve_weights

    if rounds < 1:
        raise InputError(f"--rounds: must be ≥ 1, not {rounds}")
    if c < 0:
        raise InputError(f"--c: must be > 0, not {c}")
    m = incidence.matrix.tocsr()
    n, ns = m.shape
    test = np.asarray(test, dtype=bool)
    if test.shape != (n,):
        raise InputError(f"holdout: {test.shape[0]} entries for {n} examples")
    tied = np.asarray(m.getnnz(axis=1) > 0)
    private = tied & ~test
    public = ~tied & ~test
    secrets = incidence.secrets
    p = np.array([s.p for s in secrets], dtype=float)
    r = np.array([s.r for s in secrets], dtype=float)
    caps = secret_caps(p, r, "gdp")
    alphas = tuple(DEFAULT_ALPHAS)
    spent = spent if spent is not None else Spent()
    prior = spent.arrays(secrets, alphas)
    csc = m.tocsc()
    cols = [csc.indices[csc.indptr[j]:csc.indptr[j + 1]] for j in range(ns)]
    rows = np.flatnonzero(~test)
    enforce = floor is not None and floor.enabled
    acct = None
    if enforce:
        from repoguard.planning.undetected import FloorAccount

        if not 0 < untied_rho <= 1:
            raise InputError(f"untied sampling rate must lie in (0, 1], not {untied_rho}")
        acct = FloorAccount(floor, floor.r, rounds, method=accountant, adjacency=adjacency, alphas=alphas,
                            spent=spent)
    rho_u = float(untied_rho) if enforce and public.any() else 0.0
    # the floor as one more secret (k examples at ρ_u), when some untied example is counted
    cols_all = cols + ([np.arange(floor.k) + n] if rho_u > 0 else [])
    p_all, r_all = (np.append(p, floor.p), np.append(r, acct.r_run)) if rho_u > 0 else (p, r)
    if rho_u > 0:
        prior = prior.plus(acct.spent_arrays())

    def one(cval: float):
        lp = solve_weights(m[rows], caps, cval)
        w = np.zeros(n)
        w[rows] = lp.w
        rho = private_rho(w, private)
        rho[public] = rho_u
        ext = np.append(rho, np.full(floor.k, rho_u)) if rho_u > 0 else rho
        try:
            cal = calibrate([ext[ix] for ix in cols_all], p_all, r_all, rounds, method=accountant,
                            adjacency=adjacency, alphas=alphas, spent=prior)
        except Infeasible as exc:
            if ns in exc.secrets:
                from repoguard.planning.undetected import infeasible_message
                raise PolicyError(infeasible_message(floor, legacy=len(acct.legacy))) from None
            names = ", ".join(secrets[j].id for j in exc.secrets[:5])
            raise PolicyError(f"{len(exc.secrets)} secret(s) ({names}) have already spent their budget in the "
                              "ledger: no noise level lets a synthesis meet their targets") from None
        return lp, w, rho, cal

    table = []
    if c > 0:
        lp, w, rho, cal = one(c)
        chosen = c
    else:
        best = None
        for cval in (sweep or SWEEP):
            lp, w, rho, cal = one(cval)
            score = float(rho.sum()) / cal.sigma
            table.append({"c": cval, "sum_rho": float(rho.sum()), "sigma": cal.sigma, "score": score})
            if best is None or score > best[0] * (1 + 1e-12):
                best = (score, cval, lp, w, rho, cal)
        _, chosen, lp, w, rho, cal = best
    rec = None
    if floor is not None:
        from repoguard.planning.undetected import floor_record

        if enforce:
            rec = floor_record(floor, rho_u=rho_u, sigma=float(cal.sigma),
                               sigma_floor=acct.sigma(rho_u) if rho_u > 0 else 0.0, steps=int(rounds), account=acct,
                               cal=cal if rho_u > 0 else None, index=ns, r_run=acct.r_run, adjacency=adjacency)
            rec["binds"] = bool(rho_u > 0 and rec["sigma_floor"] >= float(cal.sigma) * (1 - 1e-9))
        else:          # the opt-out: untied examples are used in the clear, no bound
            rec = {**floor.record(), "rho": 0.0, "achieved_bound": 1.0, "binding": "off", "meets_r": False,
                   "clear": True}
    return NoisePlan(rho=rho, w=w, private=private, public=public, sigma=float(cal.sigma),
                     noise_std=float(cal.sigma) * SENSITIVITY, rounds=int(rounds), c=float(chosen),
                     accountant=accountant, adjacency=adjacency, cal=cal, lp=lp.stats(), sweep=table,
                     clear=public & (not enforce), floor=rec, rho_u=rho_u)
