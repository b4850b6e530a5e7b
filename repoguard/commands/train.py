"""`repoguard train [PATH]`: weighted-Poisson DP-SGD LoRA fine-tuning per OUT/plan/ → OUT/train/."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, add_path_argument, print_json

NAME = "train"
HELP = "fine-tune the code model with LoRA by weighted DP-SGD, as the plan says (writes OUT/train/)"


def register(parser) -> None:
    """Add `train`'s arguments to its subparser: PATH, `--json`, model and LoRA settings, steps, seed,
    device, `--no-dp`, `--resume`, `--insecure-reproducible`, `--keep-checkpoint` and the phase flags."""
    add_path_argument(parser)
    add_json_flag(parser)
    a = parser.add_argument
    a("--model", metavar="DIR|NAME", default=None,
      help="local Hugging Face checkpoint, or smollm2-135m once fetched (`repoguard model fetch smollm2-135m`) "
           "(default: embedded tiny model)")
    a("--max-length", type=int, default=None, metavar="N", help="tokens per example (truncated)")
    a("--lora-r", type=int, default=None, metavar="R")
    a("--lora-alpha", type=int, default=None, metavar="A")
    a("--lora-dropout", type=float, default=None, metavar="P")
    a("--lora-targets", default=None, metavar="NAMES", help="comma-separated module names (default: detected)")
    a("--lr", type=float, default=None, help="AdamW learning rate")
    a("--micro-batch-size", type=int, default=None, metavar="N", help="examples per forward pass (memory)")
    a("--checkpoint-every", type=int, default=None, metavar="STEPS")
    a("--steps", type=int, default=None, help="stop after this many steps (≤ the plan's T)")
    a("--seed", type=int, default=None, help="seed of model/LoRA init and of --no-dp runs (default: config "
      "seed); a private run's batches and noise always come from OS entropy")
    a("--device", default="auto", help="auto, cpu, cuda, cuda:N (default: auto)")
    a("--no-dp", action="store_true", help="utility baseline: same sampler, no clipping, no noise")
    a("--resume", action="store_true", help="continue from the latest checkpoint in OUT/train/checkpoints")
    a("--insecure-reproducible", action="store_true",
      help="TESTS ONLY: derive a private run's batches and noise from --seed (no privacy guarantee)")
    a("--keep-checkpoint", action="store_true",
      help="keep the final checkpoint after the run (it holds the generator states: never publish it)")
    add_phase_flags(parser)


def add_phase_flags(parser) -> None:
    """--two-phase, --phase1, --phase1-steps, --phase1-lr (`train` and `run`)."""
    g = parser.add_argument_group("two-phase fine-tuning (default: [training] phases, phase1, …)")
    g.add_argument("--two-phase", action="store_true",
                   help="train on the public examples first (tied to no secret, not held out), then run the plan")
    g.add_argument("--phase1", choices=("clear", "noised"), default=None,
                   help="phase 1 without noise (clear, default) or DP-SGD with σ₁ for the undetected-secret "
                        "floor (noised); implies --two-phase")
    g.add_argument("--phase1-steps", type=int, default=None, metavar="T1", help="phase-1 steps (default: the plan's T)")
    g.add_argument("--phase1-lr", type=float, default=None, metavar="LR", help="phase-1 learning rate (default: --lr)")


def phase_overrides(args) -> dict:
    """`[training]` overrides from the phase flags; raises InputError for bad values."""
    from repoguard.core.errors import InputError

    if args.phase1_steps is not None and args.phase1_steps < 1:
        raise InputError(f"--phase1-steps: must be ≥ 1, got {args.phase1_steps}")
    if args.phase1_lr is not None and not args.phase1_lr > 0:
        raise InputError(f"--phase1-lr: must be > 0, got {args.phase1_lr}")
    return {"phases": 2 if (args.two_phase or args.phase1) else None, "phase1": args.phase1,
            "phase1_steps": args.phase1_steps, "phase1_lr": args.phase1_lr}


def run(args) -> int:
    """Train as OUT/plan/ says (pipeline.train_stage.run_training) under OUT/run.lock (rank 0 only
    under torchrun) and print the run's σ, B, C and adapter path (or `--json`). Returns 0; raises
    InputError (exit 2) for a non-positive or out-of-range flag value."""
    import logging

    from repoguard.commands._common import resolve_repo
    from repoguard.core.errors import InputError
    from repoguard.pipeline.train_stage import RunOptions, merge_config, run_training

    repo, config, out = resolve_repo(args, allow_plain=True)
    for flag in ("max_length", "lora_r", "lora_alpha", "micro_batch_size", "checkpoint_every", "steps"):
        v = getattr(args, flag)
        if v is not None and v < (0 if flag == "lora_alpha" else 1):
            raise InputError(f"--{flag.replace('_', '-')}: must be positive, got {v}")
    if args.lora_dropout is not None and not 0 <= args.lora_dropout < 1:
        raise InputError(f"--lora-dropout: must be in [0, 1), got {args.lora_dropout}")
    if args.lr is not None and not args.lr > 0:
        raise InputError(f"--lr: must be > 0, got {args.lr}")
    targets = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip()) if args.lora_targets else None
    cfg = merge_config(config.training, model=args.model, max_length=args.max_length, lora_r=args.lora_r,
                       lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout, lora_targets=targets,
                       learning_rate=args.lr, micro_batch_size=args.micro_batch_size,
                       checkpoint_every=args.checkpoint_every, seed=args.seed, **phase_overrides(args))
    from contextlib import nullcontext

    from repoguard.core.provenance import analysis_config_digest, floor_digest
    from repoguard.pipeline.scheduled import run_lock

    opts = RunOptions(steps=args.steps, private=not args.no_dp, resume=args.resume, device=args.device,
                      insecure_reproducible=args.insecure_reproducible, keep_checkpoint=args.keep_checkpoint,
                      show_progress=not args.quiet, floor=config.defaults,
                      config_digest=analysis_config_digest(config), floor_digest=floor_digest(config))
    from repoguard.training.ddp import launched_rank

    # One command at a time spends privacy or writes OUT (issue 32 A); under a real torchrun launch
    # rank 0 holds it for the job, and only a real launch lets a process skip it (issue 41 item 3).
    rank = launched_rank() or 0
    with run_lock(out) if rank == 0 else nullcontext():
        report = run_training(root=repo.root, out=out, cfg=cfg, opts=opts)
    if rank != 0:    # under torchrun only rank 0 reports
        return 0
    if args.json:
        print_json(report)
    elif not args.quiet:
        logging.getLogger("repoguard").info(
            "%s %d/%d steps, σ=%.4g, B=%g, C=%g → %s", "trained" if report["private"] else "trained (NO DP)",
            report["steps_completed"], report["steps"], report["sigma"], report["batch_size"],
            report["clip_norm"], report["adapter"])
    return 0
