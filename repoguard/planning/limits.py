"""The ranges a plan's B, T and C must lie in, checked before any stage runs (issue 41 item 10:
`plan --steps 99999999999999999999` reached the calibration and was reported as "the secrets'
budget is spent by earlier runs").

The upper ends are far beyond any real run, so they refuse only typing slips: the batch rule picks
T = 200 and B ≤ 256 (`batch_rule`), DP fine-tuning papers train for at most ~10⁵ steps, and a
per-example clip norm is of the order of 1. Past them the accountants' arithmetic (T·log terms,
B·T example-gradients) stops describing a run that could be trained.
"""
from __future__ import annotations

import math

from repoguard.core.errors import InputError

MAX_STEPS = 1_000_000          # T: a million DP-SGD steps
MAX_BATCH_SIZE = 1e9           # B: expected examples per step (B ≤ Σw is checked by the plan)
MAX_CLIP_NORM = 1e6            # C: per-example gradient clip norm


def check_plan_values(*, batch_size=None, steps=None, clip_norm=None, names: dict | None = None) -> None:
    """Raise InputError (one line, naming the flag or config key) unless 0 < B ≤ MAX_BATCH_SIZE,
    T an integer in 1…MAX_STEPS and 0 < C ≤ MAX_CLIP_NORM, all finite; None values are not checked.
    `names` maps "batch_size", "steps", "clip_norm" to what the user wrote (default the flags
    `--batch-size`, `--steps`, `--clip-norm`)."""
    names = {"batch_size": "--batch-size", "steps": "--steps", "clip_norm": "--clip-norm", **(names or {})}
    if steps is not None and not (isinstance(steps, int) and 1 <= steps <= MAX_STEPS):
        raise InputError(f"{names['steps']}: training steps T must be an integer in 1…{MAX_STEPS:,}, not {steps!r}")
    for key, top, what in (("batch_size", MAX_BATCH_SIZE, "expected batch size B"),
                           ("clip_norm", MAX_CLIP_NORM, "clip norm C")):
        v = {"batch_size": batch_size, "clip_norm": clip_norm}[key]
        if v is None:
            continue
        try:
            ok = math.isfinite(float(v)) and 0 < float(v) <= top
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise InputError(f"{names[key]}: {what} must be > 0 and ≤ {top:g}, not {v!r}")
