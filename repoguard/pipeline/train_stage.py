"""The `repoguard train` stage: plan + corpus → OUT/train/ (adapter, base_model, logs, report).

Reads `OUT/plan/` (ρ, σ, B, T, C) and `OUT/corpus/` (example texts), redacts credentials,
tokenises, builds or loads the model, applies LoRA and runs `trainer.train`. With no `--model`,
the embedded base (pretrained on the standard library, `base_model.embedded_base`; it never saw
the repository) is copied to `OUT/train/base_model/` so the adapter reloads offline.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from repoguard.core.artefacts import atomic_dir
from repoguard.core.config import DEFAULT_PROTECTION, Protection, TrainingConfig
from repoguard.core.errors import InputError

log = logging.getLogger("repoguard")


@dataclass(frozen=True)
class RunOptions:
    """What the command line adds to `[training]`: None = keep the config value."""

    steps: int | None = None
    private: bool = True
    resume: bool = False
    device: str = "auto"
    insecure_reproducible: bool = False  # tests only: sampler and noise from `[training] seed`
    keep_checkpoint: bool = False        # keep the final checkpoint (secret material) after completion
    show_progress: bool = True
    floor: Protection = DEFAULT_PROTECTION  # `[defaults]` (p, r): a noised phase 1's target (plan without a floor)
    config_digest: str | None = None     # `provenance.analysis_config_digest` of the config in use
    floor_digest: str | None = None      # `provenance.floor_digest` of the config in use


def run_training(*, root: Path, out: Path, cfg: TrainingConfig, opts: RunOptions,
                 ledger_path: Path | None = None) -> dict:
    """Train per the plan in `out`; returns the privacy report (plus output paths). The run is
    recorded in `ledger_path` (default `out/ledger.jsonl`; scheduled runs share one ledger).

    Raises InputError (missing plan/corpus/model, bad flags, a plan edited or made from another
    config, corpus or incidence: `provenance.check_plan_inputs`) and PolicyError (ledger changed since
    the plan, no redaction or ledger available, a DP invariant violated)."""
    import torch

    from repoguard.source.corpus import load_corpus
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import TokenSeqs, default_redactor, example_texts
    from repoguard.training.ddp import init_from_env, shutdown, sync_parameters
    from repoguard.training.guard import LedgerGuard
    from repoguard.training.base_model import check_manifest, embedded_base, write_manifest
    from repoguard.training.model import (TINY_LORA_TARGETS, apply_lora, limit_cpu_threads, load_model,
                                          pick_device, save_base_model)
    from repoguard.training.memory import enable_gradient_checkpointing
    from repoguard.training.precision import prepare_model, resolve_precision
    from repoguard.training.trainer import TrainSettings, train

    plan = load_plan(out)
    grouped = [s.id for s in plan.secrets if s.n_examples > 1]
    if opts.private and plan.adjacency == "replace" and grouped:   # a plan.json from before issue 19
        raise InputError(f"{out / 'plan' / 'plan.json'}: --adjacency replace is unsound for secrets carried by "
                         f"several examples ({', '.join(grouped[:5])}{' …' if len(grouped) > 5 else ''}); "
                         "re-plan with --adjacency zero-out")
    from repoguard.core.provenance import check_plan_inputs

    # The plan must be the one `plan` wrote (digest) for this config, corpus and incidence (issue 32 E, I).
    check_plan_inputs(plan, out, config_digest=opts.config_digest, floor=opts.floor_digest)
    corpus = load_corpus(out, root)
    texts = example_texts(corpus, plan.example_ids, redactor=default_redactor(out, root))
    dist = init_from_env()
    try:
        device = pick_device(opts.device)
        limit_cpu_threads(device)
        train_dir = out / "train"
        base_dir = train_dir / "base_model"
        base_digest = None
        if cfg.model:
            model, tok = load_model(cfg.model, device=device)
        elif opts.resume and base_dir.is_dir():
            base_digest = check_manifest(base_dir)      # what the checkpoints were trained from
            model, tok = load_model(base_dir, device=device, bf16=False)
        else:
            model, tok = embedded_base(max_length=cfg.max_length, show_progress=opts.show_progress)
            if dist.is_main:
                with atomic_dir(base_dir) as tmp:
                    save_base_model(model, tok, tmp)
                    base_digest = write_manifest(tmp)
            model = model.to(device)
        # The embedded base is pretrained: attention adapters suffice (why: model.TINY_LORA_TARGETS).
        targets = cfg.lora_targets or (() if cfg.model else TINY_LORA_TARGETS)
        model = apply_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                           targets=targets, seed=cfg.seed)
        if not cfg.model:   # lets AutoPeftModelForCausalLM find the embedded base offline
            model.peft_config["default"].base_model_name_or_path = str(base_dir.resolve())
        precision = resolve_precision(cfg.precision, device)
        prepare_model(model, precision)
        if cfg.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        sync_parameters([p for p in model.parameters() if p.requires_grad], dist)
        seqs = TokenSeqs(texts, tok, max_length=cfg.max_length)      # tokenised as sampled
        settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size,
                                 checkpoint_every=cfg.checkpoint_every, steps=opts.steps,
                                 private=opts.private, seed=cfg.seed,
                                 insecure_reproducible=opts.insecure_reproducible,
                                 keep_final_checkpoint=opts.keep_checkpoint, precision=precision,
                                 per_example=cfg.per_example_grads, base_model=base_digest)
        evaluator = _evaluator(out, model, tok, plan, texts, seqs, cfg) if dist.is_main else None
        log.info("training %d examples on %s: σ=%.4g, B=%g, T=%d, C=%g%s", len(seqs), device, plan.sigma,
                 plan.batch_size, settings.steps or plan.steps, plan.clip_norm,
                 "" if opts.private else " (--no-dp: no clipping, no noise)")
        if cfg.phases == 2:
            report = _two_phase(out, model, tok, plan, seqs, cfg, opts, settings, dist, evaluator,
                                ledger_path or out / "ledger.jsonl")
        else:
            report = train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=train_dir,
                           settings=settings, ledger=LedgerGuard(ledger_path or out / "ledger.jsonl"),
                           resume=opts.resume, dist=dist, show_progress=opts.show_progress, evaluator=evaluator)
    finally:
        shutdown(dist)
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return {**report, "adapter": str(train_dir / "adapter"),
            "base_model": str(base_dir) if not cfg.model else cfg.model}


def _two_phase(out: Path, model, tok, plan, seqs, cfg: TrainingConfig, opts: RunOptions, settings, dist,
               evaluator, ledger_path: Path) -> dict:
    """`[training] phases = 2`: the public phase, then the plan (`training.phases`)."""
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.training.phases import PhaseOne, prepare, run_two_phase

    floor = (plan.extra.get("undetected_floor") or {})
    target = (floor["p"], floor["r"]) if "p" in floor and "r" in floor else (opts.floor.p, opts.floor.r)
    setup = prepare(plan, load_incidence(out), PhaseOne.from_config(cfg, floor=target), lr=cfg.learning_rate,
                    private=opts.private)
    p1 = setup.record["phase1"]
    log.info("phase 1 (%s): %d public examples, B₁=%g, T₁=%d, lr₁=%g%s", p1["mode"], p1["n_examples"],
             p1["batch_size"], p1["steps"], p1["learning_rate"],
             f", σ₁={p1['sigma']:.4g}" if p1["mode"] == "noised" else " (no clipping, no noise)")
    ev1 = PeriodicEval(evaluator.evaluator, every=cfg.eval_every) if evaluator is not None else None
    return run_two_phase(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, setup=setup,
                         train_dir=out / "train", settings=settings, ledger_path=ledger_path, resume=opts.resume,
                         dist=dist, show_progress=opts.show_progress, evaluator=evaluator, evaluator1=ev1)


def _evaluator(out: Path, model, tok, plan, texts, seqs, cfg: TrainingConfig):
    """The trainer's held-out evaluation hook for the plan's test examples, or None (no split)."""
    from repoguard.evaluation.metrics import plan_evaluator
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.analyzers.incidence import load_incidence

    ev = plan_evaluator(model, tok, plan=plan, incidence=load_incidence(out), texts=texts, seqs=seqs,
                        max_length=cfg.max_length, max_examples=cfg.eval_max_examples,
                        max_lines=cfg.eval_max_lines, micro_batch_size=cfg.micro_batch_size or 8)
    return PeriodicEval(ev, every=cfg.eval_every) if ev is not None else None


def merge_config(cfg: TrainingConfig, **overrides) -> TrainingConfig:
    """`[training]` with the command-line values that were given (not None) on top."""
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(given) - {f.name for f in dataclasses.fields(cfg)}
    if unknown:
        raise InputError(f"train: unknown settings {sorted(unknown)}")
    return dataclasses.replace(cfg, **given)
