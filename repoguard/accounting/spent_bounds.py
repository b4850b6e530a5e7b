"""The certified bound of what the ledger says a secret has spent, with nothing added: what a
secret stands at after the recorded runs, by the same accountant that certified them.

b₀ = min(KL bound, Rényi bounds over the recorded orders) [Hush Lemma 3.2] and, where the ledger
holds the secret's earlier runs' dominating pairs, the Neyman–Pearson bound of those pairs
composed (`pld.pld_bound` with an empty pair added, as the calibration's budget check does). A
secret the run certified by the Neyman–Pearson bound has divergence bounds above its target, so
reading only the KL bound (issue 41 item 12: compare's drop-dp arm showed 0.048 against r = 0.01
for secrets the run had certified at 0.00999) misstates where it stands.
"""
from __future__ import annotations

import json

import numpy as np


def spent_bound(kl: float, renyi: dict, p: float, pairs=None, *, cache: dict | None = None) -> tuple[float, str]:
    """(b₀, how) for one secret with prior `p` that spent `kl` nats and `renyi` {α: nats}, its
    earlier runs' pair records `pairs` (`accounting.ledger.spent_pairs`; None or empty: unknown).
    `how` is "kl", "renyi:α", "pld" or "prior" (nothing spent). `cache` shares the Neyman–Pearson
    evaluation between secrets with the same history and prior."""
    from repoguard.accounting.bounds import kl_bound, renyi_bound

    if not kl and not renyi and not pairs:
        return float(p), "prior"
    b, how = float(kl_bound(kl, p)), "kl"
    for a, v in (renyi or {}).items():
        x = float(renyi_bound(v, float(a), p))
        if x < b:
            b, how = x, f"renyi:{float(a):g}"
    if pairs and b > p:
        key = (json.dumps(pairs, sort_keys=True), float(p))
        hit = None if cache is None else cache.get(key)
        if hit is None:
            from repoguard.accounting.divergences import Mixture
            from repoguard.accounting.pld import pair_from_record, pld_bound

            nothing = Mixture(np.zeros(1, dtype=np.int64), np.zeros(1), 0)
            hist = tuple(pair_from_record(d) for d in pairs)
            hit = float(pld_bound(nothing, 0.0, 0, p, history=hist)[0][0])
            if cache is not None:
                cache[key] = hit
        if hit < b:
            b, how = hit, "pld"
    return max(b, float(p)), how
