"""This run's per-secret targets under a budget fraction: how much of each secret's remaining
headroom r − b₀ one run may spend, b₀ the bound the ledger's spending already certifies.

Used by planning (`planning.make.make_plan`) for every declared or detected secret and for the
undetected-secret floor's ledger account alike."""
from __future__ import annotations

import dataclasses


def run_targets(secrets, ledger_spent: dict, fraction: float, ledger_pairs: dict | None = None) -> list:
    """This run's targets: r_run = b₀ + f·(r − b₀), f = `fraction` in (0, 1], b₀ the *certified*
    bound the ledger's spending alone gives: the minimum of the KL and Rényi bounds (Hush Lemma
    3.2) and, where `ledger_pairs` (`accounting.ledger.spent_pairs`) holds the secret's earlier
    runs, the Neyman–Pearson bound of their composed pairs (`pld.pld_bound` with nothing added, as
    the calibration's budget check does). σ calibrated to r_run leaves (1 − f) of the headroom to
    later runs, so after night k the binding secret sits near (1 − (1−f)^k)·r (docs/privacy.md
    "The ledger: composition across runs"); f = 1 spends all of it.

    `secrets`: objects with `id`, `p`, `r` (dataclasses, e.g. `analyzers.incidence.Secret`);
    `ledger_spent`: id → (KL in nats, {α: Rényi divergence}) (`accounting.ledger.spending`).
    Returns a new list, each secret with r replaced by r_run; a secret already at or over r keeps
    r (the plan then refuses it). Secrets with the same history share one Neyman–Pearson
    evaluation."""
    from repoguard.accounting.spent_bounds import spent_bound

    if fraction >= 1:
        return list(secrets)
    cache: dict[tuple, float] = {}
    out = []
    for s in secrets:
        kl0, ren0 = ledger_spent.get(s.id, (0.0, {}))
        b0, _ = spent_bound(kl0, ren0, s.p, (ledger_pairs or {}).get(s.id), cache=cache)
        out.append(dataclasses.replace(s, r=b0 + fraction * (s.r - b0)) if b0 < s.r else s)
    return out
