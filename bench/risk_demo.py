"""The at-risk ranking on the fixture monorepo, --no-dp vs DP (docs/results.md "At-risk ranking").

Builds the fixture, commits a canary line at the top of every file of the test secret of
fixtures/audit_setup.py (trading/alpha/, services/risk/, libs/pricing/: 21 examples), pretrains
the tiny base on held-out public files (reports/, analytics/, tools/ *.py, left out of the
corpus), trains a --no-dp run (lr 1e-2) and a DP run (σ from the accountant, lr 1e-3) for 200
steps on the same plan, and prints the head of each run's risk table. Usage:
    python bench/risk_demo.py [WORKDIR]
"""
from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))     # repo_tools, audit_setup (shared with tests/)


def main() -> None:
    from audit_setup import (HELD_OUT, LR, SECRET, K, M, one_thread, plant_canary, prepare_out,
                             pretrained_public_base, training_config)
    from repo_tools import build, git
    from repoguard.audit.risk import run_risk_audit, table_lines
    from repoguard.training.data import default_redactor
    from repoguard.pipeline.train_stage import RunOptions, run_training

    work = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="risk-demo-"))
    repo = build(work / "monorepo")
    plant_canary(repo)
    held = [p for p in git(repo, "ls-files").split("\n") if p.startswith(HELD_OUT) and p.endswith(".py")]
    red = default_redactor()
    base = pretrained_public_base([red((repo / p).read_text(), p)[0] for p in held], work / "base",
                                  max_length=training_config().max_length)
    cfg = dataclasses.replace(training_config(), model=str(base))
    for label in ("no-dp", "dp"):
        out = work / label
        prepare_out(repo, out, steps=200, exclude=tuple(held))
        t0 = time.perf_counter()
        with one_thread():
            run_training(root=repo, out=out, cfg=dataclasses.replace(cfg, learning_rate=LR[label]),
                         opts=RunOptions(private=label == "dp", device="cpu", show_progress=False))
            t1 = time.perf_counter()
            doc = run_risk_audit(out=out, root=repo, cfg=cfg, k=K, m=M, device="cpu")
        t2 = time.perf_counter()
        print(f"== {label}: train {t1 - t0:.1f} s, risk audit {t2 - t1:.1f} s ({doc['n_windows']} windows), "
              f"σ = {doc['sigma']}")
        top = doc["top"][:5]
        print("global top 5:", [(r["rank"], r["path"], r["window"]) for r in top])
        only = {**doc, "secrets": [t for t in doc["secrets"] if t["secret"] == SECRET]}
        print("\n".join(table_lines(only, rows=5)))


if __name__ == "__main__":
    main()
