"""`repoguard run [PATH]`: the whole pipeline, scan → analyze → plan → train → (audit) → report,
skipping stages whose inputs did not change (OUT/run_state.json). `--scheduled` for cron/CI.

Exit codes: 0 done; 1 policy (a secret's budget would be exceeded — stopped before training — or
findings with --fail-on-findings); 2 bad input; 75 another scheduled run holds OUT/run.lock."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, add_path_argument, print_json

NAME = "run"
HELP = "run the whole pipeline (scan, analyze, plan, train, audit, report); --scheduled for cron/CI"

SCHEDULED_FRACTION = 0.5


def register(parser) -> None:
    """`run [PATH]` with its own flags, the plan flags it shares with `plan` and the training flags."""
    add_path_argument(parser)
    add_json_flag(parser)
    a = parser.add_argument
    from repoguard.pipeline.registry import names

    a("--from", dest="from_stage", choices=names(), default=None, metavar="STAGE",
      help=f"re-run from this stage on ({', '.join(names())})")
    a("--scheduled", action="store_true",
      help="cron/CI mode: lock, new run directory OUT/runs/<time>-<id>/ with OUT/runs/latest, shared ledger")
    a("--audit", action="store_true", help="also run the extraction audit (trains a DP and a --no-dp model)")
    a("--audit-steps", type=int, default=None, metavar="T", help="steps of each audit model (default 20)")
    a("--fail-on-findings", action="store_true", help="exit 1 after the scan when it finds credentials")
    from repoguard.commands._plan_flags import add_plan_flags

    add_plan_flags(parser.add_argument_group("plan (default: [plan] in the config)"))
    t = parser.add_argument_group("training (default: [training] in the config)")
    t.add_argument("--model", metavar="DIR|NAME", default=None,
                   help="local Hugging Face checkpoint, or smollm2-135m once fetched "
                        "(`repoguard model fetch smollm2-135m`) (default: embedded tiny model)")
    t.add_argument("--max-length", type=int, default=None, metavar="N")
    t.add_argument("--lora-r", type=int, default=None, metavar="R")
    t.add_argument("--lr", type=float, default=None)
    t.add_argument("--micro-batch-size", type=int, default=None, metavar="N")
    t.add_argument("--seed", type=int, default=None,
                   help="seed of model/LoRA init, --no-dp runs and the audit (never a private run's batches or noise)")
    t.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    t.add_argument("--no-dp", action="store_true", help="utility baseline: no clipping, no noise")
    t.add_argument("--insecure-reproducible", action="store_true",
                   help="TESTS ONLY: derive the private run's batches and noise from --seed (no privacy guarantee)")
    t.add_argument("--keep-checkpoint", action="store_true",
                   help="keep the final checkpoint after training (it holds the generator states: never publish it)")
    from repoguard.commands.train import add_phase_flags

    add_phase_flags(parser)


def run(args) -> int:
    """Run the pipeline (under the run lock, or as a scheduled run) and print its summary; 0 when
    done. Raises InputError (exit 2) and PolicyError (exit 1) as the module docstring says."""
    import logging
    import sys

    from repoguard.commands._common import resolve_repo
    from repoguard.core.config import default_config_path
    from repoguard.pipeline.context import RunSettings
    from repoguard.pipeline.runner import run_pipeline

    phases = check_flags(args)
    repo, config, out = resolve_repo(args)
    check_config_flags(args, config)
    config_path = args.config or (str(default_config_path(repo.root))
                                  if default_config_path(repo.root).is_file() else None)
    quiet = args.quiet or args.json
    from repoguard.commands._plan_flags import print_settings, settings_from_args

    plan_s = settings_from_args(config, args, budget_fraction=SCHEDULED_FRACTION if args.scheduled else 1.0)
    train_s = training_settings(config, args, phases)
    if args.verbose and not args.json:
        print_settings(plan_s, "plan settings")
        print_settings(train_s, "training settings")
    settings = RunSettings(
        batch_size=args.batch_size, steps=args.steps, clip_norm=args.clip_norm, c=args.c, sweep=args.sweep,
        cap=args.cap, accountant=args.accountant, adjacency=args.adjacency, model=args.model,
        max_length=args.max_length, lora_r=args.lora_r, lr=args.lr, micro_batch_size=args.micro_batch_size,
        seed=args.seed, device=args.device,
        no_dp=args.no_dp, insecure_reproducible=args.insecure_reproducible,
        keep_checkpoint=args.keep_checkpoint, audit=args.audit, audit_steps=args.audit_steps,
        undetected=args.undetected, budget_fraction=plan_s["budget_fraction"], plan_settings=plan_s,
        from_stage=args.from_stage, fail_on_findings=args.fail_on_findings, show_progress=not quiet,
        phases=phases["phases"], phase1=phases["phase1"], phase1_steps=phases["phase1_steps"],
        phase1_lr=phases["phase1_lr"])
    from repoguard.commands._common import make_console

    err = make_console(stderr=True, highlight=False)
    say = (lambda s: None) if quiet else (lambda s: err.print(s, markup=False))
    # a refusal under --json prints its JSON object in cli.main (`_common.refusal`)
    if args.scheduled:
        from repoguard.pipeline.scheduled import run_scheduled

        summary = run_scheduled(repo, config, config_path=config_path, out=out, settings=settings, say=say)
    else:
        from repoguard.pipeline.scheduled import run_lock

        with run_lock(out):
            summary = run_pipeline(repo, config, config_path=config_path, out=out, settings=settings, say=say)
    summary["budget_left"] = None if args.no_dp else budget_left(summary)
    if args.json:
        print_json(summary)
    elif not args.quiet:
        _print(summary, make_console(highlight=False))
    logging.getLogger("repoguard").debug("run summary: %s", summary)
    sys.stdout.flush()
    return 0


def check_flags(args) -> dict:
    """Every flag that needs no config, checked before any stage runs (issue 41 item 7: a bad
    `--budget-fraction` surfaced only in the plan stage, after scan and analyze had re-run and
    made the good plan stale). Returns the phase overrides (`train.phase_overrides`); raises
    InputError, one line naming the flag."""
    import math

    from repoguard.commands.train import phase_overrides
    from repoguard.commands._plan_flags import check_plan_flags
    from repoguard.core.errors import InputError

    for flag in ("max_length", "lora_r", "micro_batch_size", "audit_steps"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InputError(f"--{flag.replace('_', '-')}: must be ≥ 1, got {v}")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise InputError(f"--lr: must be > 0, got {args.lr}")
    check_plan_flags(args)
    return phase_overrides(args)


# Training settings name → `[training]` key, for `-v` (`core.settings.resolve`)
TRAIN_KEYS = {"model": "training.model", "max_length": "training.max_length", "lora_r": "training.lora_r",
              "lr": "training.learning_rate", "micro_batch_size": "training.micro_batch_size",
              "seed": "training.seed", "phases": "training.phases", "phase1": "training.phase1",
              "phase1_steps": "training.phase1_steps", "phase1_lr": "training.phase1_lr"}


def training_settings(config, args, phases: dict):
    """The training settings of this run, each from its flag or `[training]` with its source
    (`core.settings.Settings`): what `-v` prints. `phases`: `train.phase_overrides(args)`."""
    from repoguard.core.settings import resolve

    flags = {k: getattr(args, k) for k in TRAIN_KEYS if k not in phases} | phases
    return resolve(config, flags, TRAIN_KEYS)


def check_config_flags(args, config) -> None:
    """The flags read against the config or the machine, before any stage runs: `--undetected`
    (parsed with the config's defaults), `--model` (a local directory) and `--device`."""
    from pathlib import Path

    from repoguard.core.errors import InputError
    from repoguard.planning.undetected import resolve

    resolve(config, args.undetected)
    if args.model is not None and not Path(args.model).is_dir():
        raise InputError(f"--model: {args.model}: no such directory (a local Hugging Face checkpoint)")
    if args.device not in ("", "auto"):
        from repoguard.training.model import pick_device

        pick_device(args.device)


def _print(s: dict, con) -> None:
    from rich.table import Table

    from repoguard.planning.make import NO_SECRETS
    from repoguard.planning.retention import secret_lines

    def num(x, fmt=".4g"):
        return "—" if x is None else format(x, fmt)

    t = Table(title="repoguard run", show_header=False)
    t.add_column("what", overflow="fold")
    t.add_column("value", overflow="fold")
    rows = [
        ("stages run / skipped", f"{', '.join(s['ran']) or '—'} / {', '.join(s['skipped']) or '—'}"),
        ("credentials found (redacted)", num(s["credentials_found"], "d")),
        ("files / examples", f"{num(s['files'], 'd')} / {num(s['examples'], 'd')}"),
        ("secrets / incidences", f"{num(s['secrets'], 'd')} / {num(s['incidences'], 'd')}"),
        ("retained fraction Σw/n", num(s["retained_fraction"], ".3f")),
        *([("least retained declared secrets", "\n".join(lines))] if (lines := secret_lines(s.get("least_retained"))) else []),
        ("noise multiplier σ", f"{num(s['sigma'])} (B = {num(s['batch_size'], 'g')}, T = {num(s['steps'], 'd')})"),
        # the worst secret's ratio only: the smallest is p/r of a secret no example of which is sampled
        ("achieved/target bound, worst secret", f"{num(s['bound_ratio_max'], '.3g')}"
                                  f" (tightest: {s['binding_secret']})" if s["bound_ratio_max"] is not None
                                  or s["secrets"] != 0 else NO_SECRETS),
        ("undetected floor (k untied examples)", _floor_cell(s.get("undetected_floor"))),
        ("adapter", s["adapter"] or "—"),
        ("report", s["report"] or "—"),
        ("ledger", s["ledger"]),
    ]
    if s.get("budget_left"):
        rows.append(("privacy budget left for the next run", s["budget_left"]["line"]))
    if s.get("exposures"):
        rows.append(("exposed by a clear phase (bound 1, acknowledged)",
                     "; ".join(f"{x['secret']} by {x['run_id']} ({x['n_examples']} examples)" for x in s["exposures"])))
    if s.get("insecure_runs"):
        rows.append(("INSECURE (trained by an insecure-reproducible run)",
                     "; ".join(f"{k} by {', '.join(v)}" for k, v in sorted(s["insecure_runs"].items()))))
    if s.get("run_dir"):
        rows.append(("run directory (latest)", f"{s['run_dir']} ({s['latest']})"))
    if not con.is_terminal:
        # piped or logged: a table would be as wide as its longest cell (the budget line is ~300
        # columns), so one "what: value" line per row, a multi-line value indented under it
        con.print("repoguard run", markup=False, highlight=False)
        for k, v in rows:
            first, *rest = str(v).split("\n")
            con.print(f"  {k}: {first}", markup=False, highlight=False)
            for line in rest:
                con.print(f"      {line}", markup=False, highlight=False)
        return
    for k, v in rows:
        t.add_row(k, str(v))
    con.print(t)


# At or above this share of a target spent, the next run on the ledger has (almost) no headroom.
SPENT = 0.99


def budget_left(s: dict) -> dict | None:
    """What this run leaves the next run on the same ledger, in words (issue 41 item 13): the
    tightest account (a secret, by its cumulative achieved bound over r, or the undetected-secret
    floor) and the share of its target this run's plan brings it to. At `SPENT` or more the next
    run must add far more noise or is refused (`bench/budget_fraction.py`: at the default budget
    fraction 1 the fixture's next plan is refused by the floor and getmoto/moto's needs 46× the
    noise; at 0.5 run 1's σ is 1.06× / 1.04× that of f = 1 and run 2's 3.2× / 1.31× run 1's),
    and the line says how to keep headroom. Returns {"tightest", "spent", "line"} or None (no plan)."""
    cands = []
    if s.get("bound_ratio_max") is not None:
        cands.append((float(s["bound_ratio_max"]), f"secret {s.get('binding_secret')}"))
    fl = s.get("undetected_floor") or {}
    if fl.get("enabled", True) and fl.get("achieved_bound") is not None and fl.get("r"):
        cands.append((float(fl["achieved_bound"]) / float(fl["r"]), f"the undetected-secret floor (k = {fl.get('k')})"))
    if not cands:
        return None
    spent, who = max(cands)
    if spent >= SPENT:
        line = (f"none: this run brings {who} to its target ({spent:.0%} of r), so a next run on this ledger "
                "must add far more noise, or is refused; `--budget-fraction 0.5` (what --scheduled uses) keeps "
                "half of the headroom for later runs at a little more noise now")
    else:
        line = f"{1 - spent:.0%} of the tightest target ({who}: this run brings it to {spent:.0%} of r)"
    return {"tightest": who, "spent": spent, "line": line}


def _floor_cell(fl: dict | None) -> str:
    if not fl:
        return "—"
    if not fl.get("enabled", True):
        return f"OFF (opt-out): an undetected secret in k = {fl['k']} example(s) gets bound {fl['achieved_bound']:.3g}"
    return (f"k = {fl['k']}: bound {fl['achieved_bound']:.3g} ≤ r = {fl['r']:g} at p = {fl['p']:g}"
            + (" (the floor sets σ)" if fl.get("binds") else ""))
