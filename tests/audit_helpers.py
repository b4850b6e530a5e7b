"""The canary DP / --no-dp pair of the audit tests, trained once per pytest process (~20 s on CPU).
The set-up itself (test secret, plan, pretrained base) is `fixtures/audit_setup.py`, shared with
bench/; the audit tests import its names they use from here. The canary pair trains the
embedded base pretrained on the standard library (`training.base_model`, cached once per test
session) with `training_config()`: LoRA on q, v and lm_head. Through q, v alone (the command's
default targets) the --no-dp reference reaches only p ≈ 0.2–0.4 per canary token after 200 steps
(any lr in 3e-3…3e-2): greedy extraction then hangs on an argmax that float rounding decides —
1.0 with AVX-512 kernels, 0.0 with AVX2 (`ATEN_CPU_CAPABILITY=avx2`) on the same machine (issue
25). With lm_head adapted the reference reaches p ≈ 0.9–0.99, a margin no kernel flips.
"""
from __future__ import annotations

from pathlib import Path

from audit_setup import SECRET, one_thread, prepare_out, tiny_size, training_config  # noqa: F401

N_REFERENCES = 2000            # the command's default is 10^4; 2000 keeps the test fast

_CACHE: dict = {}


def canary_pair(repo_root: Path, tmp_root: Path):
    """(out, doc, runs): the canary audit on the fixture, run once per process."""
    if "pair" not in _CACHE:
        from repoguard.audit.canaries import run_canary_audit

        out = tmp_root / "out"
        plan, inc = prepare_out(repo_root, out)
        n = int((plan.rho[inc.examples_of(SECRET)] > 0).sum())
        with one_thread():
            cfg = training_config()
            doc, runs = run_canary_audit(out=out, root=repo_root, cfg=cfg, secret_id=SECRET,
                                         n_insert=n, n_references=N_REFERENCES, seed=0, noise_seed=1,
                                         device="cpu", return_runs=True)
        _CACHE["pair"] = (out, doc, runs)
    return _CACHE["pair"]
