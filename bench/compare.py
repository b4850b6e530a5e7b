"""`repoguard compare` on the fixture monorepo: prints the arms' table and the noise reduction.

    python bench/compare.py                         # B = 8, T = 20, hush, uniform, drop, no-dp
    python bench/compare.py --steps 40 --arms hush,hush-gdp,uniform,drop,no-dp --json OUT.json
    python bench/compare.py --repo DIR              # an existing checkout (e.g. a fetched public repo)

Builds the fixture (fixtures/build_monorepo.py) in a temporary directory unless --repo is given,
runs `analyze` and `plan` (c = 1 unless --sweep), then `evaluation.compare.run_compare` with the
`[training]` settings overridden by the flags. Every arm starts from the same embedded base model
and is scored on the same held-out examples; sampling/noise seeds are fresh per arm unless --seed
is given. Prints the text table, σ_uniform/σ_hush (the noise reduction; Hush §5.1 reports ≈ 8×)
and the wall time of the whole bench. Keep runs short on a shared machine.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))     # repo_tools: the fixture builder, shared with tests/


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=None, help="checkout to use (default: a fresh fixture)")
    ap.add_argument("--batch-size", type=float, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sweep", action="store_true", help="sweep c (slower) instead of c = 1")
    ap.add_argument("--arms", default="hush,uniform,drop,no-dp")
    ap.add_argument("--lr", type=float, default=2e-2)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--eval-examples", type=int, default=16, help="examples per slice")
    ap.add_argument("--eval-lines", type=int, default=8, help="completed lines per slice")
    ap.add_argument("--phase1-steps", type=int, default=None, metavar="T1",
                    help="phase-1 steps of the two-phase arms (default: the plan's T)")
    ap.add_argument("--seed", type=int, default=None, help="fix sampler/noise seeds (default: fresh)")
    ap.add_argument("--json", type=Path, default=None, help="also write the compare document here")
    args = ap.parse_args(argv)

    from repo_tools import build
    from repoguard.cli import main as cli
    from repoguard.core.config import Undetected, load_config
    from repoguard.evaluation.compare import run_compare
    from repoguard.evaluation.compare_text import format_table
    from repoguard.planning.plan import load_plan

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rg-compare-") as tmp:
        repo = args.repo.resolve() if args.repo else build(Path(tmp) / "monorepo")
        out = Path(tmp) / "out"
        if cli(["analyze", "-q", "--out", str(out), str(repo)]) != 0:
            return 1
        plan_args = ["--sweep"] if args.sweep else ["--c", "1"]
        if cli(["plan", "-q", "--out", str(out), "--batch-size", f"{args.batch_size:g}", "--steps",
                str(args.steps), *plan_args, str(repo)]) != 0:
            return 1
        t_plan = time.perf_counter() - t0
        config = load_config(repo / "repoguard.toml", required=False)
        cfg = dataclasses.replace(config.training, learning_rate=args.lr, max_length=args.max_length,
                                  eval_max_examples=args.eval_examples, eval_max_lines=args.eval_lines)
        arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
        doc = run_compare(root=repo, out=out, cfg=cfg, arms=arms, seed=args.seed, show_progress=False,
                          floor=Undetected(1, config.defaults.p, config.defaults.r), phase1_steps=args.phase1_steps)
        plan = load_plan(out)
    print(format_table(doc))
    su = plan.extra.get("sigma_uniform")
    print(f"\nB={args.batch_size:g}, T={args.steps}, lr={args.lr:g}, max length {args.max_length}; "
          f"σ_hush={plan.sigma:.4g}, σ_uniform={su if su is None else format(su, '.4g')}"
          + (f", noise reduction σ_uniform/σ_hush = {su / plan.sigma:.1f}×" if su else ""))
    print(f"analyze+plan {t_plan:.0f} s, total {time.perf_counter() - t0:.0f} s "
          "(machine: 2 cores, shared with other jobs)")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
