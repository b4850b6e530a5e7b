"""Canaries for missed secrets [JFT §5, "missed" canaries; Carlini et al. 2019 exposure], checked
against the plan's undetected-secret floor (docs/privacy.md "Undetected-secret floor", "Audits").

The canary audit (`audit/canaries.py`) plants a canary in a *declared* secret's examples, which
the plan protects. Here the canary goes into examples tied to *no* secret (public, not held out):
a secret the analyzers and the credential scanner did not see, which only the floor protects.
Runs with the same base model, LoRA initialisation, B, T, learning rate and seeds:

- `hush`             the plan as `repoguard plan` built it (single phase): the canary's examples
                     are sampled at the untied examples' ρ_u under the plan's σ ≥ σ_floor;
- `no-dp`            the plan's ρ, no clipping and no noise (`repoguard train --no-dp`);
- `drop`             examples tied to a secret removed, no noise (`planning.baselines.drop_plan`):
                     the canary sits in untied examples, so `drop` trains on it in the clear;
- `two-phase-noised` phase 1 with the σ₁ the plan reserved (`plan.extra["undetected_floor"]
                     ["phase1"]`, `training.phases`), then the plan — a default only when the plan
                     carries that reservation (without a floor, σ₁ is calibrated for `floor`);
- `two-phase-clear`  phase 1 without noise, then the plan — only on request and only when the
                     plan's floor is off (`training.phases.prepare` refuses it otherwise).

The floor's prediction [Hush Lemma 3.2 at prior 2^−e; phases composed by `accounting.compose`]:
each DP run's pair for the canary's examples (their ρ, σ, T) bounds P[exposure ≥ e] ≤ r(2^−e)
(`_tail`); `predicted_exposure(parts, level)` is the smallest e with that bound ≤ `level`
(0.05: `predicted_exposure_95`), so the measured exposure of a DP run should lie under it with
probability ≥ 95 %. A clear run (σ = 0 on the canary's examples) has no bound: null.

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

from repoguard.core.config import DEFAULT_PROTECTION
from repoguard.core.errors import InputError

RUNS = ("hush", "no-dp", "drop", "two-phase-noised", "two-phase-clear")    # every run this audit knows
LEVEL = 0.05               # predicted_exposure_95: P[exposure ≥ ceiling] ≤ 5 % under the DP run's pair
FLOOR_KEYS = ("k", "p", "r", "r_run", "enabled", "rho", "sigma_floor", "sigma", "steps", "achieved_bound",
              "binding", "meets_r", "binds", "phase1")


def default_runs(plan) -> tuple[str, ...]:
    """The runs of an audit of `plan` when none are asked for: `hush`, `no-dp`, `drop`, and
    `two-phase-noised` when the plan reserved σ₁ for a noised phase 1."""
    floor = plan.extra.get("undetected_floor") or {}
    return ("hush", "no-dp", "drop") + (("two-phase-noised",) if floor.get("phase1") else ())


def check_runs(plan, runs) -> tuple[str, ...]:
    """`runs` validated against `plan`. Raises InputError for an unknown or repeated run, and for
    `two-phase-clear` while the plan's floor is on (a clear phase 1 breaks it)."""
    runs = tuple(runs)
    bad = [r for r in runs if r not in RUNS]
    if bad or not runs or len(set(runs)) != len(runs):
        raise InputError(f"--runs {','.join(runs)}: give distinct runs among {', '.join(RUNS)}")
    if "two-phase-clear" in runs and (plan.extra.get("undetected_floor") or {}).get("enabled"):
        raise InputError("--runs two-phase-clear: a clear phase 1 breaks the plan's undetected-secret floor and is "
                         "refused; it is available only for a plan made with [defaults] undetected = \"off\"")
    return runs


def predicted_exposure(parts, adjacency: str, *, level: float = LEVEL, max_exposure: float) -> float | None:
    """The smallest exposure e ∈ (0, `max_exposure`] (bits) with tail bound `_tail(parts, e)` ≤
    `level`: under the pair of `parts` (the canary's examples' (ρ, σ, T) per phase), an exposure
    ≥ e has probability ≤ `level`. None when no such e exists: a clear part (no bound) or a bound
    still above `level` at log2|R|. Bisection on e to 1e-3 bits (the bound decreases as e grows).
    Raises ValueError for `level` outside (0, 1)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if _clear(parts) or _tail(parts, max_exposure, adjacency) > level:
        return None
    from repoguard.accounting.search import narrow

    return narrow(lambda e: _tail(parts, e, adjacency) <= level, 0.0, float(max_exposure), log_scale=False,
                  abs_tol=1e-3)[1]


def run_missed_canary_audit(*, out: Path, root: Path, cfg, n_insert: int = 1, n_references: int = 10_000,
                            steps: int | None = None, phase1_steps: int | None = None, seed: int = 0,
                            fmt=None, floor: tuple[float, float] = (DEFAULT_PROTECTION.p, DEFAULT_PROTECTION.r),
                            device: str = "auto",
                            runs=None, show_progress: bool = False, tiny_size=None) -> dict:
    """Plant one canary in `n_insert` public examples, train `runs` (default `default_runs`;
    module docstring), measure exposure and compare it with each DP run's predicted ceiling.
    `steps` ≤ the plan's T (None = T); `phase1_steps` T₁ (None: the plan's phase-1 reservation,
    else `[training] phase1_steps`, 0 = T); `floor` the (p, r) a noised phase 1 is calibrated for
    when the plan has no floor (k = n_insert). No `cfg.model`: the embedded pretrained base
    (`tiny_size`, tests only: a random tiny model of that size instead).

    Returns the document written to `out/audit/missed-canaries.json`. Raises InputError (missing
    artefacts, `n_insert` outside 1..n_public, N < 100, steps outside 1..T, `check_runs`)."""
    from repoguard.core.artefacts import FORMAT_VERSION, atomic_write_json
    from repoguard.audit.canaries import CanaryFormat, insert_canary
    from repoguard.audit.canary_exposure import estimate_exposure
    from repoguard.audit.runs import public_texts
    from repoguard.audit.scoring import log_perplexity
    from repoguard.source.corpus import load_corpus
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.baselines import drop_plan
    from repoguard.planning.plan import load_plan
    from repoguard.training.base_model import embedded_base
    from repoguard.training.data import default_redactor, example_texts, tokenize
    from repoguard.training.model import (TINY_LORA_TARGETS, apply_lora, build_tiny_model, limit_cpu_threads,
                                          load_model, pick_device)
    from repoguard.training.phases import PhaseOne, prepare, public_mask, run_two_phase
    from repoguard.training.trainer import TrainSettings, train
    from repoguard.planning.undetected import describe

    fmt = fmt or CanaryFormat()
    if n_references < 100:
        raise InputError(f"--references {n_references}: need at least 100 (the paper uses ≥ 10^4)")
    plan, inc = load_plan(out), load_incidence(out)
    runs = check_runs(plan, default_runs(plan) if runs is None else runs)
    total = plan.steps if steps is None else int(steps)
    if not 1 <= total <= plan.steps:
        raise InputError(f"--steps: must be in 1..{plan.steps} (the plan's T)")
    plan = _with_steps(plan, total)
    fl = plan.extra.get("undetected_floor") or {}
    public = public_mask(plan, inc)
    rows_all = np.flatnonzero(public)
    if not 1 <= n_insert <= rows_all.size:
        raise InputError(f"--insert {n_insert}: choose 1..{rows_all.size} (the public examples)")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(rows_all, size=n_insert, replace=False))
    canary, *_ = fmt.draw(rng, 1)
    refs = [r for r in fmt.draw(rng, n_references + 16) if r != canary][:n_references]
    texts = example_texts(load_corpus(out, root), plan.example_ids, redactor=default_redactor(out, root))
    planted = insert_canary(texts, rows, fmt.render(canary))
    dev = pick_device(device)
    limit_cpu_threads(dev)
    if cfg.model:
        base, tok = load_model(cfg.model, device=dev)
    elif tiny_size is not None:
        base, tok = build_tiny_model(public_texts(out, plan.example_ids, texts), seed=seed, size=tiny_size)
        base = base.to(dev)
    else:
        base, tok = embedded_base(max_length=cfg.max_length, device=dev, show_progress=show_progress)
    targets = cfg.lora_targets or (() if cfg.model or tiny_size is not None else TINY_LORA_TARGETS)
    seqs = tokenize(planted, tok, max_length=cfg.max_length)
    reserved = fl.get("phase1") if fl.get("enabled") else None
    t1 = int(phase1_steps or (reserved or {}).get("steps") or cfg.phase1_steps or total)
    # B₁ of the reservation (ρ₁ = B₁/n_public), else [training] phase1_batch_size (0 = B)
    b1 = float(reserved["rho"]) * int(public.sum()) if reserved else float(cfg.phase1_batch_size)
    candidates = [fmt.render(canary) + "\n"] + [fmt.render(r) + "\n" for r in refs]
    top = math.log2(fmt.space_size)
    log_dir = out / "audit" / "missed-canaries"
    results = {}
    for label in runs:
        model = apply_lora(copy.deepcopy(base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                           targets=targets, seed=seed)
        run_dir = log_dir / label
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        run_plan, private = (drop_plan(plan, inc), False) if label == "drop" else (plan, label != "no-dp")
        settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size, steps=total,
                                 checkpoint_every=total + t1, private=private, seed=seed,
                                 insecure_reproducible=True)      # an instrument, never released
        phase1 = None
        if label.startswith("two-phase"):
            setup = prepare(plan, inc, PhaseOne(mode=label.rsplit("-", 1)[1], steps=t1, lr=cfg.phase1_lr,
                                                batch_size=b1, k=n_insert, p=floor[0], r=floor[1]),
                            lr=cfg.learning_rate)
            run_two_phase(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, setup=setup, train_dir=run_dir,
                          settings=settings, ledger_path=None, publish=False, show_progress=show_progress)
            p1 = setup.record["phase1"]
            phase1 = {k: p1[k] for k in ("mode", "steps", "sigma", "rho", "batch_size")}
            parts = [(setup.plan1.rho[rows], p1["sigma"], t1), (plan.rho[rows], plan.sigma, total)]
        else:
            train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=run_plan, train_dir=run_dir,
                  settings=settings, ledger=None, publish=False, show_progress=show_progress)
            parts = [(run_plan.rho[rows], plan.sigma if private else 0.0, total)]
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        px = log_perplexity(model.eval(), tok, candidates)
        ex = estimate_exposure(px[0], px[1:], space_size=fmt.space_size).to_json()
        clear = _clear(parts)
        ceiling = predicted_exposure(parts, plan.adjacency, level=LEVEL, max_exposure=top)
        ex["private"] = not clear
        ex["sigma"] = plan.sigma if private else 0.0
        ex["rho_inserted"] = [float(x) for x in run_plan.rho[rows]]
        ex["phase1"] = phase1
        ex["predicted_exposure_95"] = ceiling
        ex["ceiling"] = ("no bound (the canary's examples are trained in the clear)" if clear else
                         f"P[exposure >= {ceiling:.2f} bits] <= {LEVEL:g}" if ceiling is not None else
                         f"vacuous (tail bound > {LEVEL:g} even at log2|R|)")
        ex["under_ceiling"] = {}
        for key in ("exposure_sampled", "exposure_skewnorm"):
            est = key.split("_", 1)[1]
            ex[f"tail_bound_{est}"] = None if clear else _tail(parts, ex[key], plan.adjacency)
            ex["under_ceiling"][est] = None if ceiling is None else bool(ex[key] <= ceiling)
        results[label] = ex
        del model
    floor_doc = {k: fl[k] for k in FLOOR_KEYS if k in fl} or None
    if floor_doc and "hush" in results and 0 < fl.get("p", 0) < 1:
        # the floor's own point: prior p ↔ exposure log2(1/p); for k = 1 at ρ_u and the plan's T
        # the tail bound there is this run's share of the achieved bound (≤ r)
        e_p = -math.log2(fl["p"])
        hush_parts = [(plan.rho[rows], plan.sigma, total)]
        floor_doc["floor_point"] = {"exposure_bits": e_p, "tail_bound_hush": _tail(hush_parts, e_p, plan.adjacency)}
        floor_doc["prediction_is_floors"] = bool(
            rows.size == int(fl.get("k", 1)) and total == fl.get("steps")
            and np.allclose(plan.rho[rows], float(fl.get("rho") or 0.0), rtol=1e-9, atol=0.0))
    doc = {"format_version": FORMAT_VERSION, "format": fmt.describe(), "space_size": fmt.space_size,
           "log2_space_size": top,
           "canary_sha256": hashlib.sha256(canary.encode()).hexdigest(), "canary_redacted": canary[:4] + "…",
           "n_inserted": int(rows.size), "inserted_examples": [plan.example_ids[i] for i in rows],
           "rho_inserted_plan": [float(plan.rho[i]) for i in rows], "sigma": plan.sigma,
           "batch_size": plan.batch_size, "steps": total, "plan_steps": fl.get("steps"),
           "phase1_steps": t1 if any(r.startswith("two-phase") for r in runs) else None,
           "clip_norm": plan.clip_norm, "n_references": n_references, "seed": seed,
           "model": cfg.model or ("random tiny model (test)" if tiny_size is not None else "embedded tiny model"),
           "max_length": cfg.max_length, "learning_rate": cfg.learning_rate,
           # the plan's floor target (k, p, r, enabled) and what it achieved; null: plan made before the floor
           "undetected_floor": floor_doc,
           "floor_target": {k: fl.get(k) for k in ("k", "p", "r", "enabled")} if fl else None,
           "floor_status": describe(fl or None), "floor_off": bool(fl) and not fl.get("enabled", True),
           "level": LEVEL, "run_order": list(results), "runs": results,
           "reading": "the canary sits in examples tied to no secret (a secret nobody declared or detected); "
                      "a DP run's P[exposure >= e] <= tail_bound(e) [Hush Lemma 3.2 at prior 2^-e, phases "
                      "composed]; predicted_exposure_95 = the smallest e with tail bound <= 0.05; no-dp, drop and "
                      "clear phases have no bound (null); exposure_sampled saturates at log2(N+1)"}
    if doc["floor_off"] and not doc["floor_status"].startswith("UNDETECTED FLOOR OFF"):
        doc["floor_status"] = "UNDETECTED FLOOR OFF: " + doc["floor_status"]
    atomic_write_json(out / "audit" / "missed-canaries.json", doc)
    return doc


def table_lines(doc: dict) -> list[str]:
    """The CLI table: run, exposure (sampled / skew-normal, bits of log2|R|), tail bound at those
    exposures, predicted ceiling, under the ceiling (yes/no; "no bound" for clear runs)."""
    head = ("run", f"exposure bits (of {doc['log2_space_size']:.3g})", "tail bound", "ceiling 95%", "under")
    rows = []
    for label in doc.get("run_order") or list(doc["runs"]):
        r = doc["runs"][label]
        tb = ("no bound" if r["tail_bound_sampled"] is None else
              f"{r['tail_bound_sampled']:.3g} / {r['tail_bound_skewnorm']:.3g}")
        ceil = r["predicted_exposure_95"]
        under = r["under_ceiling"]
        rows.append((label, f"{r['exposure_sampled']:.2f} / {r['exposure_skewnorm']:.2f}", tb,
                     "no bound" if not r["private"] else "vacuous" if ceil is None else f"{ceil:.2f}",
                     "—" if under["sampled"] is None else
                     "/".join("yes" if under[k] else "no" for k in ("sampled", "skewnorm"))))
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head, *rows]]


def _with_steps(plan, total: int):
    """The plan shortened to `total` steps (σ unchanged: fewer steps spend less)."""
    from dataclasses import replace

    return plan if total == plan.steps else replace(plan, steps=total)


def _clear(parts) -> bool:
    """Some part samples the examples without noise (σ = 0, ρ > 0, T > 0): no bound."""
    return any(not sigma > 0 and steps > 0 and np.any(np.asarray(rhos) > 0) for rhos, sigma, steps in parts)


def _tail(parts, exposure: float, adjacency: str) -> float:
    """P[exposure ≥ e] ≤ bound at prior 2^−e of the composed parts (1 when e ≤ 0)."""
    from repoguard.accounting.compose import composed_bound

    if not exposure > 0:
        return 1.0
    return composed_bound(parts, 2.0 ** -exposure, adjacency=adjacency)
