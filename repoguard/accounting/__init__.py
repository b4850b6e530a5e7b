"""Takes weights, ρ and σ (from `planning`) and what the ledger says each secret spent; writes
the ledger `OUT/ledger.jsonl`; hands certified bounds and σ back to `planning` and `training`.

Per-secret privacy accounting for weighted-Poisson DP-SGD [Hush §4, Alg. 2].

`divergences` (the dominating pair's KL/Rényi divergences) → `bounds` (Hush Lemma 3.2) →
`calibrate` (σ for every secret's target) → `ledger` (what each secret has spent across runs);
`targets` (a run's share of each secret's remaining headroom, the budget fraction).
`spending` types what a run spends (`SpendingEvent`) and what earlier runs spent (`Spent`);
`kinds` names the choices (adjacency, accountant, cap); `search` is the one bisection.
"""
from repoguard.accounting.bounds import kl_bound, reconstruction_bound, renyi_bound
from repoguard.accounting.calibrate import Infeasible, calibrate, calibrate_sigma
from repoguard.accounting.divergences import DEFAULT_ALPHAS, kl_divergence, renyi_divergence

__all__ = ["DEFAULT_ALPHAS", "Infeasible", "calibrate", "calibrate_sigma", "kl_bound",
           "kl_divergence", "reconstruction_bound", "renyi_bound", "renyi_divergence"]
