"""The canary DP / --no-dp pair of the audit tests, trained once per pytest process (~20 s on CPU).
The set-up itself (test secret, plan, pretrained base) is `fixtures/audit_setup.py`, shared with
bench/; the audit tests import its names they use from here. The canary pair trains what
`repoguard audit canaries` trains by default: the embedded base pretrained on the standard
library (`training.base_model`, cached once per test session) with LoRA on the detected q, v.
`training_config()` adapts lm_head too: the risk test's base, pretrained on a few fixture files
for 300 steps, cannot memorise the canary within 200 steps at lr 1e-2 through q, v alone.
"""
from __future__ import annotations

import dataclasses
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
            cfg = dataclasses.replace(training_config(), lora_targets=())     # the command's default
            doc, runs = run_canary_audit(out=out, root=repo_root, cfg=cfg, secret_id=SECRET,
                                         n_insert=n, n_references=N_REFERENCES, seed=0, noise_seed=1,
                                         device="cpu", return_runs=True)
        _CACHE["pair"] = (out, doc, runs)
    return _CACHE["pair"]
