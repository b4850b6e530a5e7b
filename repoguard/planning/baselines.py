"""Plans of the baselines that train without noise (no clipping, no σ): `--no-dp` on every
training example, and "drop" — the examples tied to a secret removed [the "drop" arm of the Hush
evaluation, §5.1]. Shared by `evaluation.protection` (the compare arms) and `audit.missed` (the
missed-canary audit), so the audit need not import the evaluation layer.
"""
from __future__ import annotations

import numpy as np

from repoguard.core.errors import InputError


def clear_plan(base_plan, keep: np.ndarray, *, name: str):
    """A plan that samples the examples of `keep` (bool (n_examples,), plan order) uniformly,
    ρ = B/n_keep, without noise (σ recorded as 1.0, unused; cap "none"), with `base_plan`'s B, T,
    C, c, accountant, adjacency, example ids and held-out split. `name` labels the error.
    Raises InputError when fewer than B examples are kept."""
    from repoguard.planning.plan import Plan

    n = int(keep.sum())
    if n < base_plan.batch_size:
        raise InputError(f"compare: arm {name} has {n} training examples, fewer than B = {base_plan.batch_size:g}")
    w = keep.astype(float)
    return Plan(sigma=1.0, c=base_plan.c, cap="none", accountant=base_plan.accountant,
                adjacency=base_plan.adjacency, example_ids=list(base_plan.example_ids), w=w,
                rho=base_plan.batch_size * w / n, test=base_plan.test_mask, extra={},
                batch_size=base_plan.batch_size, steps=base_plan.steps, clip_norm=base_plan.clip_norm)


def drop_plan(base_plan, incidence):
    """`clear_plan` of the training examples tied to no secret of `incidence` (the "drop"
    baseline: no noise, so nothing it trains on may carry a known secret). Raises InputError as
    `clear_plan`."""
    tied = np.asarray(incidence.matrix.getnnz(axis=1) > 0)
    return clear_plan(base_plan, ~base_plan.test_mask & ~tied, name="drop")
