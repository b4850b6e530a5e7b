"""The one path from the incidence to a written plan, for `repoguard plan` and `run`'s plan stage.

    plan_settings(config, flags…) -> Settings     B, T, C, c, cap, accountant, adjacency, the
                                                  undetected floor and the budget fraction, each
                                                  from its flag, the config file or the default
    make_plan(config, out, settings, …) -> Made   load and check the inputs, read the ledger,
                                                  set this run's targets, build (Hush LP + the
                                                  calibration), certify and write OUT/plan/

`build_plan` (planning/plan.py) does the arithmetic; this module is the only caller that feeds it
a command's inputs, so `plan` and `run` cannot drift apart again.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from repoguard.core.config import Config, TrainingConfig
from repoguard.core.errors import InputError, PolicyError
from repoguard.core.settings import FLAG, Settings, resolve

# Settings name → config key (None: a setting with no config key)
PLAN_KEYS = {"batch_size": "plan.batch_size", "steps": "plan.steps", "clip_norm": "plan.clip_norm",
             "c": "plan.c", "cap": "plan.cap", "accountant": "plan.accountant", "adjacency": "plan.adjacency",
             "undetected": "defaults.undetected", "budget_fraction": None}

NO_SECRETS = ("no secrets declared or found: nothing to protect (every example w = 1; σ is a token, "
              "so a secret nobody declared gets no bound)")


def plan_settings(config: Config, *, batch_size: float | None = None, steps: int | None = None,
                  clip_norm: float | None = None, c: float | None = None, sweep: bool = False,
                  cap: str | None = None, accountant: str | None = None, adjacency: str | None = None,
                  undetected: str | None = None, budget_fraction: float | None = None) -> Settings:
    """The plan's settings from the flags (None = not given) and `config`: `sweep` is c = 0 from
    the flag; `undetected` ("off" or "k=1,p=…,r=…") is parsed into a `config.Undetected` against
    `[defaults]`; `budget_fraction` None means the whole remaining headroom (f = 1, not recorded
    in plan.json's extra). B and T hold the flag or `[plan]` value here; `make_plan` replaces
    them by the batch rule's choice when neither set them. Raises InputError for a malformed
    `undetected`."""
    from repoguard.planning.undetected import resolve as resolve_floor

    flags = {"batch_size": batch_size, "steps": steps, "clip_norm": clip_norm, "c": 0.0 if sweep else c,
             "cap": cap, "accountant": accountant, "adjacency": adjacency,
             "undetected": resolve_floor(config, undetected) if undetected is not None else None,
             "budget_fraction": budget_fraction}
    s = resolve(config, flags, PLAN_KEYS)
    for k in ("batch_size", "steps"):      # `[plan]`'s built-in 64 / 200 are not what a plan uses
        if s.source(k) == "default":
            s = s.with_value(k, None)
    return s


@dataclass
class Made:
    """What `make_plan` made: the plan (`planning.plan.Plan`), the directory written, its summary
    (`planning.summary.plan_summary`), the ledger head it was planned against (hex SHA-256), the
    configured r of each secret (before the budget fraction) and the settings with the B and T
    chosen."""

    plan: object
    target: Path
    summary: dict
    head: str
    configured_r: dict
    settings: Settings


def _flag(settings: Settings, name: str):
    return settings[name] if settings.source(name) == FLAG else None


def make_plan(config: Config, out: Path, settings: Settings, *, ledger: Path | None = None,
              training: TrainingConfig | None = None, warn_unmatched: bool = True,
              show_progress: bool = False, n_untied: int | None = None) -> Made:
    """Build, certify and write the plan in `out/plan/` from `out`'s incidence and corpus and the
    ledger (`ledger`, default out/ledger.jsonl): weights w (Hush eq. 1 LP), sampling probabilities
    ρ = B·w/Σw and the noise σ calibrated so every secret's cumulative bound over the ledger stays
    ≤ its run target (r, or b₀ + f·(r − b₀) under a budget fraction f, `accounting.targets`), the
    undetected-secret floor included. `training` (default `config.training`) says whether a
    noised phase 1 reserves σ₁; `warn_unmatched` repeats the analyzer's warning about declared
    paths that matched nothing; `n_untied` is the batch rule's n when the caller counted it.

    Raises InputError (bad B, T, C, c or f; missing or stale corpus/incidence) and PolicyError
    (a ledger that fails verification, a published or exposed secret, a budget already spent)."""
    from repoguard.accounting.clear_exposures import mark_plan, plan_exposures
    from repoguard.accounting.ledger import verify
    from repoguard.accounting.published import check_published, mark_insecure
    from repoguard.accounting.targets import run_targets
    from repoguard.analyzers.incidence import Secret, load_incidence
    from repoguard.planning import undetected
    from repoguard.planning.batch_rule import choose_batch, untied_count
    from repoguard.planning.limits import check_plan_values
    from repoguard.planning.plan import build_plan, save_plan
    from repoguard.planning.summary import CalibrationProgress, plan_summary
    from repoguard.source.split import split_from_config

    pc = config.plan
    ledger = Path(ledger) if ledger is not None else out / "ledger.jsonl"
    clip, c = settings["clip_norm"], settings["c"]
    check_plan_values(clip_norm=clip, names={"clip_norm": _name(settings, "clip_norm")})
    if not (c is not None and c >= 0 and c < float("inf")):
        raise InputError(f"{_name(settings, 'c')}: must be ≥ 0 (0 sweeps), not {c!r}")
    frac = settings["budget_fraction"]
    if frac is not None and not 0 < frac <= 1:
        raise InputError(f"--budget-fraction: must be in (0, 1], not {frac!r}")
    inc = load_incidence(out)
    from repoguard.source.corpus import check_corpus

    check_corpus(out, inc.example_ids)     # the corpus `train` reads, verified now (issue 41 item 8)
    if warn_unmatched:
        from repoguard.analyzers.unmatched import warn

        warn(inc.summary.get("unmatched") or {})
    split = split_from_config(inc.example_ids, pc)
    # B and T: the flag, else [plan] in the file, else the batch rule
    choice = choose_batch(config, untied_count(inc, pc) if n_untied is None else n_untied,
                          batch_size=_flag(settings, "batch_size"), steps=_flag(settings, "steps"))
    batch, steps = choice["batch_size"], choice["steps"]
    check_plan_values(batch_size=batch, steps=steps, names={"batch_size": "[plan] batch_size", "steps": "[plan] steps"})
    src = {"given": FLAG, "config": "file", "default rule": "default"}
    settings = (settings.with_value("batch_size", batch, src[choice["sources"]["batch_size"]])
                .with_value("steps", steps, src[choice["sources"]["steps"]]))
    check_published(out, ledger)       # a deleted ledger never resets the budget
    # The whole chain and every side file, as `repoguard ledger verify` checks them (issue 41 item 9):
    # `spending` alone checks the last entry's files, and `train` would refuse the plan later.
    check = verify(ledger)
    if not check["ok"]:
        raise PolicyError(f"{ledger}: ledger fails verification ({check['problems'][0]}); "
                          "refusing to plan against it (`repoguard ledger verify` lists every problem)")
    target = settings["undetected"]
    spent = undetected.spent_for(ledger, target)     # an accounting.spending.Spent
    exposures, clear_runs = plan_exposures(ledger, inc, config.ledger.acknowledged_exposures,
                                           config_path=config.path)
    # The trainer refuses this plan if other runs are recorded after this head (training/guard.py).
    head = check.get("last_hash") or "0" * 64
    configured_r = {x.id: x.r for x in inc.secrets}
    r_run = None
    if frac is not None:
        inc = dataclasses.replace(inc, secrets=run_targets(inc.secrets, spent.divergences, frac, spent.pairs))
        # the floor's ledger account follows the budget fraction like a secret
        if target.enabled:
            acct = Secret(target.account, "undetected", target.p, target.r)
            r_run = run_targets([acct], spent.divergences, frac, spent.pairs)[0].r
    floor = undetected.floor_plan(target, training=training or config.training, batch_size=batch,
                                  steps=steps, r_run=r_run)
    progress = CalibrationProgress() if show_progress else None
    try:
        from repoguard.planning.value import plan_values

        plan = build_plan(inc, batch_size=batch, steps=steps, clip_norm=clip, c=c,
                          **plan_values(out, inc, pc.objective), cap=settings["cap"],
                          accountant=settings["accountant"], adjacency=settings["adjacency"],
                          spent=spent, progress=progress, holdout=split, floor=floor)
    finally:
        if progress is not None:
            progress.close()
    plan.extra["ledger_head"] = head
    if frac is not None:
        plan.extra["budget_fraction"] = frac
    plan.extra["batch_rule"] = choice
    from repoguard.core.provenance import plan_config_inputs

    plan.extra["inputs"] = plan_config_inputs(config)    # save_plan adds corpus, incidence
    mark_insecure(plan, ledger)
    mark_plan(plan, exposures, clear_runs)
    plan.extra["settings"] = settings.record()
    written = save_plan(plan, out)
    return Made(plan, written, plan_summary(plan, written), head, configured_r, settings)


def _name(settings: Settings, name: str) -> str:
    """How the user wrote setting `name`: its flag, or its `[plan]` key."""
    return f"--{name.replace('_', '-')}" if settings.source(name) == FLAG else f"[plan] {name}"
