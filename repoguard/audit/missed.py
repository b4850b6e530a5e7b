"""Canaries for missed secrets [JFT §5, "missed" canaries; Carlini et al. 2019 exposure].

The canary audit (`audit/canaries.py`) plants a canary in a *declared* secret's examples, which
the plan protects. Here the canary goes into examples tied to *no* secret (public, not held out):
a secret the analyzers and the credential scanner did not see. Three runs with the same base
model, LoRA initialisation, B, T, learning rate and seeds are compared:

- `hush`             the plan alone (single phase): the canary's examples are sampled with the
                     untied examples' ρ under the plan's σ — the undetected-secret floor;
- `two-phase-clear`  phase 1 on the public examples without noise (T₁ steps), then the plan;
- `two-phase-noised` phase 1 with σ₁ calibrated for the undetected floor (`training.phases`).

Exposure (bits) of each, and the tail bound P[exposure ≥ e] ≤ r(2^−e) of each run's pair for
those examples [Hush Lemma 3.2; phases composed by `accounting.compose`; 1 for a clear phase].
Output `OUT/audit/missed-canaries.json` (format version 1); the canary is stored only as a
SHA-256 and its first 4 characters. These are measuring runs (seeded, never released, nothing in
the ledger).
"""
from __future__ import annotations

import copy
import hashlib
import math
import shutil
from pathlib import Path

import numpy as np

from repoguard.errors import InputError

RUNS = ("hush", "two-phase-clear", "two-phase-noised")


def run_missed_canary_audit(*, out: Path, root: Path, cfg, n_insert: int = 1, n_references: int = 10_000,
                            steps: int | None = None, phase1_steps: int | None = None, seed: int = 0,
                            fmt=None, floor: tuple[float, float] = (1e-10, 1e-3), device: str = "auto",
                            show_progress: bool = False, tiny_size=None) -> dict:
    """Plant one canary in `n_insert` public examples, train the three runs (module docstring),
    measure exposure. `steps` ≤ the plan's T (None = T); `phase1_steps` T₁ (None: `[training]
    phase1_steps`, 0 = T); `floor` the default (p, r) phase 1's σ₁ is calibrated for (k = n_insert).

    Returns the document written to `out/audit/missed-canaries.json`. Raises InputError (missing
    artefacts, `n_insert` outside 1..n_public, N < 100, steps outside 1..T)."""
    from repoguard.artefacts import FORMAT_VERSION, atomic_write_json
    from repoguard.audit.canaries import CanaryFormat, insert_canary
    from repoguard.audit.exposure import estimate_exposure
    from repoguard.audit.runs import public_texts
    from repoguard.audit.scoring import log_perplexity
    from repoguard.corpus import load_corpus
    from repoguard.incidence import load_incidence
    from repoguard.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts, tokenize
    from repoguard.training.model import (TinyConfig, apply_lora, build_tiny_model, limit_cpu_threads, load_model,
                                          pick_device)
    from repoguard.training.phases import PhaseOne, prepare, public_mask, run_two_phase
    from repoguard.training.trainer import TrainSettings, train

    fmt = fmt or CanaryFormat()
    if n_references < 100:
        raise InputError(f"--references {n_references}: need at least 100 (the paper uses ≥ 10^4)")
    plan, inc = load_plan(out), load_incidence(out)
    total = plan.steps if steps is None else int(steps)
    if not 1 <= total <= plan.steps:
        raise InputError(f"--steps: must be in 1..{plan.steps} (the plan's T)")
    plan = _with_steps(plan, total)
    public = public_mask(plan, inc)
    rows_all = np.flatnonzero(public)
    if not 1 <= n_insert <= rows_all.size:
        raise InputError(f"--insert {n_insert}: choose 1..{rows_all.size} (the public examples)")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(rows_all, size=n_insert, replace=False))
    canary, *_ = fmt.draw(rng, 1)
    refs = [r for r in fmt.draw(rng, n_references + 16) if r != canary][:n_references]
    texts = example_texts(load_corpus(out, root), plan.example_ids, redactor=default_redactor(out, root))
    public_txt = public_texts(out, plan.example_ids, texts)          # the tokenizer never sees the canary
    planted = insert_canary(texts, rows, fmt.render(canary))
    dev = pick_device(device)
    limit_cpu_threads(dev)
    if cfg.model:
        base, tok = load_model(cfg.model, device=dev)
    else:
        base, tok = build_tiny_model(public_txt, seed=seed,
                                     size=tiny_size or TinyConfig(max_position=max(512, cfg.max_length)))
        base = base.to(dev)
    seqs = tokenize(planted, tok, max_length=cfg.max_length)
    t1 = int(phase1_steps or cfg.phase1_steps or total)
    settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size, checkpoint_every=total + t1,
                             seed=seed, insecure_reproducible=True)      # an instrument, never released
    candidates = [fmt.render(canary) + "\n"] + [fmt.render(r) + "\n" for r in refs]
    log_dir = out / "audit" / "missed-canaries"
    results = {}
    for label in RUNS:
        model = apply_lora(copy.deepcopy(base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                           targets=cfg.lora_targets, seed=seed)
        run_dir = log_dir / label
        run_dir.mkdir(parents=True, exist_ok=True)
        if label == "hush":
            train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=run_dir, settings=settings,
                  ledger=None, publish=False, show_progress=show_progress)
            parts = [(plan.rho[rows], plan.sigma, total)]
            phase1 = None
        else:
            setup = prepare(plan, inc, PhaseOne(mode=label.rsplit("-", 1)[1], steps=t1, lr=cfg.phase1_lr, k=n_insert,
                                                p=floor[0], r=floor[1]), lr=cfg.learning_rate)
            run_two_phase(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, setup=setup, train_dir=run_dir,
                          settings=settings, ledger_path=None, publish=False, show_progress=show_progress)
            p1 = setup.record["phase1"]
            phase1 = {k: p1[k] for k in ("mode", "steps", "sigma", "rho", "batch_size")}
            parts = [(setup.plan1.rho[rows], p1["sigma"], t1), (plan.rho[rows], plan.sigma, total)]
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        px = log_perplexity(model.eval(), tok, candidates)
        ex = estimate_exposure(px[0], px[1:], space_size=fmt.space_size).to_json()
        for key in ("exposure_sampled", "exposure_skewnorm"):
            ex[key.replace("exposure", "tail_bound")] = _tail(parts, ex[key], plan.adjacency)
        ex["phase1"] = phase1
        results[label] = ex
        del model
    doc = {"format_version": FORMAT_VERSION, "format": fmt.describe(), "space_size": fmt.space_size,
           "log2_space_size": math.log2(fmt.space_size),
           "canary_sha256": hashlib.sha256(canary.encode()).hexdigest(), "canary_redacted": canary[:4] + "…",
           "n_inserted": int(rows.size), "inserted_examples": [plan.example_ids[i] for i in rows],
           "rho_inserted_plan": [float(plan.rho[i]) for i in rows], "sigma": plan.sigma,
           "batch_size": plan.batch_size, "steps": total, "phase1_steps": t1, "clip_norm": plan.clip_norm,
           "floor_target": {"p": floor[0], "r": floor[1], "k": n_insert}, "n_references": n_references,
           "seed": seed, "model": cfg.model or "embedded tiny model", "max_length": cfg.max_length,
           "learning_rate": cfg.learning_rate, "runs": results,
           "reading": "the canary sits in examples tied to no secret (a secret nobody declared or detected); "
                      "P[exposure >= e] <= tail_bound(e) [Hush Lemma 3.2 at prior 2^-e, phases composed]"}
    atomic_write_json(out / "audit" / "missed-canaries.json", doc)
    return doc


def _with_steps(plan, total: int):
    """The plan shortened to `total` steps (σ unchanged: fewer steps spend less)."""
    from dataclasses import replace

    return plan if total == plan.steps else replace(plan, steps=total)


def _tail(parts, exposure: float, adjacency: str) -> float:
    """P[exposure ≥ e] ≤ bound at prior 2^−e of the composed parts (1 when e ≤ 0)."""
    from repoguard.accounting.compose import composed_bound

    if not exposure > 0:
        return 1.0
    return composed_bound(parts, 2.0 ** -exposure, adjacency=adjacency)
