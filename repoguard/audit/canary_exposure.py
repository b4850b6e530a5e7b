"""Canary exposure (Carlini, Liu, Erlingsson, Kos, Song 2019, "The Secret Sharer", §4).

A canary s[r] is a format s with a secret r drawn uniformly from a space R (here 10 hex digits,
|R| = 16^10). The model's *log-perplexity* of a candidate is Px(s[r]) = −log2 Pr(s[r]) in bits.
The rank of the inserted canary is its position among all candidates sorted by log-perplexity
(1 = most likely). Exposure [§4, Def. 4]:

    exposure = log2 |R| − log2 rank            ∈ [0, log2 |R|]

Two estimators, as in the paper:
  * sampling [§4.2]: rank among N references drawn uniformly from R plus the canary itself;
    the estimate log2(N+1) − log2 rank_sample is exact in expectation of the rank fraction and
    saturates at log2(N+1) (a canary beating every reference);
  * extrapolation [§4.3]: the reference log-perplexities are close to skew-normal; fit
    `scipy.stats.skewnorm` and take exposure ≈ −log2 CDF(Px(canary)), which reaches beyond log2 N.

What DP promises about it [Hush Lemma 3.2]: guessing the canary's top-k candidates succeeds a
priori with probability k/|R|, so for a secret whose divergences give the posterior bound r(p) at
prior p, P[rank ≤ k] ≤ r(k/|R|), i.e. P[exposure ≥ e] ≤ r(2^−e).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


def exposure_from_rank(rank: float, space_size: float) -> float:
    """log2|R| − log2 rank [Carlini et al. 2019, Def. 4]. `rank` in [1, |R|] (1 = most likely).

    Raises ValueError outside that range."""
    if not (space_size >= 1 and 1 <= rank <= space_size):
        raise ValueError(f"rank must lie in [1, |R|], got rank={rank}, |R|={space_size}")
    return math.log2(space_size) - math.log2(rank)


def sampled_rank(canary: float, references) -> int:
    """Rank of the canary's log-perplexity among itself and the references: 1 + #{ref < canary}.

    Ties count in the canary's favour (a tie is not evidence against memorisation)."""
    refs = np.asarray(references, dtype=float)
    return 1 + int(np.count_nonzero(refs < canary))


def skewnorm_exposure(canary: float, references, *, max_exposure: float | None = None) -> tuple[float, dict]:
    """−log2 CDF_fit(canary) with a skew-normal fitted to the reference log-perplexities
    [Carlini et al. 2019 §4.3]. Returns (exposure in bits, {"a", "loc", "scale"} of the fit).

    The log-CDF is used so deep tails stay finite; `max_exposure` (log2|R|) caps the estimate,
    since no rank is below 1. Raises ValueError with fewer than 10 references."""
    from scipy.stats import skewnorm

    refs = np.asarray(references, dtype=float)
    if refs.size < 10:
        raise ValueError("need at least 10 reference log-perplexities to fit a skew-normal")
    a, loc, scale = skewnorm.fit(refs)
    log_cdf = float(skewnorm.logcdf(canary, a, loc, scale))
    # −inf: beyond float range in the left tail, i.e. more exposed than any rank can express.
    e = -log_cdf / math.log(2) if math.isfinite(log_cdf) else math.inf
    e = max(0.0, e)
    if max_exposure is not None:
        e = min(e, max_exposure)
    return e, {"a": float(a), "loc": float(loc), "scale": float(scale)}


@dataclass(frozen=True)
class Exposure:
    """One canary's exposure under one model. Log-perplexities in bits; exposures in bits."""

    canary_log_perplexity: float
    n_references: int
    rank_in_sample: int
    exposure_sampled: float          # log2(N+1) − log2 rank_in_sample; at most log2(N+1)
    exposure_skewnorm: float         # −log2 CDF of the fitted skew-normal, capped at log2|R|
    max_exposure: float              # log2 |R|
    fit: dict

    def to_json(self) -> dict:
        """Every field as plain JSON (exposures in bits, log-perplexity in bits)."""
        return asdict(self)


def estimate_exposure(canary: float, references, *, space_size: float) -> Exposure:
    """Both estimators for one canary log-perplexity against sampled reference candidates.

    `references`: log-perplexities (bits) of N candidates drawn uniformly from R (N ≥ 10;
    the paper and this tool use N ≥ 10^4). `space_size`: |R|."""
    refs = np.asarray(references, dtype=float)
    rank = sampled_rank(canary, refs)
    top = math.log2(space_size)
    sk, fit = skewnorm_exposure(canary, refs, max_exposure=top)
    return Exposure(canary_log_perplexity=float(canary), n_references=int(refs.size), rank_in_sample=rank,
                    exposure_sampled=exposure_from_rank(rank, refs.size + 1), exposure_skewnorm=sk,
                    max_exposure=top, fit=fit)


def exposure_tail_bound(exposure: float, *, kl: float, renyi: dict[str, float]) -> float:
    """Upper bound on P[exposure ≥ e] for a canary inside a secret's examples, given that secret's
    divergences for the run (T steps composed, nats): the reconstruction bound at prior 2^−e
    [Hush Lemma 3.2; guessing the top 2^(log2|R|−e) candidates has prior 2^−e].

    Returns a probability in [2^−e, 1]; 1 when e ≤ 0."""
    from repoguard.accounting.bounds import best_renyi_bound, kl_bound

    if exposure <= 0:
        return 1.0
    prior = 2.0 ** (-min(exposure, 1000.0))
    prior = max(prior, 1e-300)
    best = float(kl_bound(kl, prior)) if math.isfinite(kl) else 1.0
    alphas = [float(a) for a, v in renyi.items() if v is not None and math.isfinite(v)]
    if alphas:
        d = np.array([renyi[a] for a in renyi if renyi[a] is not None and math.isfinite(renyi[a])], float)
        best = min(best, float(best_renyi_bound(d, alphas, prior)[0]))
    return min(1.0, best)


def exposure_at_level(level: float, *, kl: float, renyi: dict[str, float], max_exposure: float) -> float:
    """The smallest exposure e (bits) with `exposure_tail_bound(e) ≤ level`: under the DP run an
    exposure ≥ e has probability ≤ level. Returns `max_exposure` when even that is not reached.
    (`accounting.search.narrow` on e, 60 halvings; the tail bound decreases as e grows.) Raises
    ValueError for `level` outside (0, 1)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if exposure_tail_bound(max_exposure, kl=kl, renyi=renyi) > level:
        return max_exposure
    from repoguard.accounting.search import narrow

    return narrow(lambda e: exposure_tail_bound(e, kl=kl, renyi=renyi) <= level, 0.0, float(max_exposure),
                  log_scale=False, iters=60)[1]
