"""`repoguard plan`: weights (Hush eq. 1), sampling probabilities and the calibrated noise
multiplier for the next training run, against what the ledger says each secret already spent."""
from __future__ import annotations

NAME = "plan"
HELP = "weight examples (Hush LP), calibrate the noise per secret, write plan/ (reads the ledger)"


def register(parser) -> None:
    from repoguard.commands._common import add_json_flag, add_path_argument

    add_path_argument(parser)
    parser.add_argument("--batch-size", type=float, default=None, metavar="B",
                        help="expected batch size B (default: [plan] batch_size when the config sets it, else the "
                             "batch rule from the number of untied examples; plan.json extra.batch_rule says which)")
    parser.add_argument("--steps", type=int, default=None, metavar="T",
                        help="training steps T (default: [plan] steps when the config sets it, else the batch rule)")
    parser.add_argument("--clip-norm", type=float, default=None, metavar="C", help="per-example clip norm C")
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--c", type=float, default=None, help="LP scale c (budgets c·cap_j)")
    g.add_argument("--sweep", action="store_true", help="sweep c = 2^-6…2^4 and pick max Σw/σ")
    parser.add_argument("--accountant", choices=("best", "kl", "renyi"), default=None)
    parser.add_argument("--adjacency", choices=("zero-out", "replace"), default=None)
    parser.add_argument("--cap", choices=("kl", "gdp"), default=None,
                        help="per-secret LP budget: kl(r‖p) (Hush) or Φ⁻¹(1−p)−Φ⁻¹(1−r) (SecPE)")
    parser.add_argument("--undetected", default=None, metavar="off|k=1,p=…,r=…",
                        help="undetected-secret floor for this run (default: [defaults] undetected, on: k = 1 at "
                             "the default p, r); \"off\" opts out, and every output says so")
    add_json_flag(parser)


def run(args) -> int:
    from repoguard.commands._common import resolve_repo

    _repo, config, out = resolve_repo(args, allow_plain=True)
    from repoguard.pipeline.scheduled import run_lock

    with run_lock(out):        # one command at a time spends or writes OUT (issue 32 A)
        return _run(args, config, out)


def _run(args, config, out) -> int:
    from repoguard.accounting.ledger import verify
    from repoguard.commands._common import print_json
    from repoguard.core.errors import InputError, PolicyError
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import build_plan, save_plan
    from repoguard.planning.summary import CalibrationProgress, plan_summary

    pc = config.plan
    clip = args.clip_norm if args.clip_norm is not None else pc.clip_norm
    c = 0.0 if args.sweep else (args.c if args.c is not None else pc.c)
    from repoguard.planning.limits import check_plan_values

    check_plan_values(batch_size=args.batch_size, steps=args.steps, clip_norm=args.clip_norm)
    check_plan_values(clip_norm=clip, names={"clip_norm": "[plan] clip_norm"})
    if not (c >= 0 and c < float("inf")):
        raise InputError(f"--c: must be ≥ 0 (0 sweeps), not {c!r}")
    inc = load_incidence(out)
    from repoguard.source.corpus import check_corpus

    check_corpus(out, inc.example_ids)     # the corpus `train` reads, verified now (issue 41 item 8)
    from repoguard.analyzers.unmatched import warn

    warn(inc.summary.get("unmatched") or {})
    from repoguard.source.split import split_from_config
    split = split_from_config(inc.example_ids, pc)
    from repoguard.planning.batch_rule import choose_batch, untied_count

    # the same choice as `run`'s plan stage: flag, else [plan] in the file, else the batch rule
    choice = choose_batch(config, untied_count(inc, pc), batch_size=args.batch_size, steps=args.steps)
    batch, steps = choice["batch_size"], choice["steps"]
    check_plan_values(batch_size=batch, steps=steps, names={"batch_size": "[plan] batch_size", "steps": "[plan] steps"})
    from repoguard.accounting.published import check_published, mark_insecure

    check_published(out, out / "ledger.jsonl")       # a deleted ledger never resets the budget
    # The whole chain and every side file, as `repoguard ledger verify` checks them (issue 41 item 9):
    # `spending` alone checks the last entry's files, and `train` would refuse the plan later.
    check = verify(out / "ledger.jsonl")
    if not check["ok"]:
        raise PolicyError(f"{out / 'ledger.jsonl'}: ledger fails verification ({check['problems'][0]}); "
                          "refusing to plan against it (`repoguard ledger verify` lists every problem)")
    from repoguard.planning import undetected

    target = undetected.resolve(config, args.undetected)
    spent = undetected.spent_for(out / "ledger.jsonl", target)
    from repoguard.accounting.clear_exposures import mark_plan, plan_exposures

    exposures, clear_runs = plan_exposures(out / "ledger.jsonl", inc, config.ledger.acknowledged_exposures,
                                           config_path=config.path)
    # The trainer refuses this plan if other runs are recorded after this head (training/guard.py).
    head = check.get("last_hash") or "0" * 64
    floor = undetected.plan_kwargs(target, training=config.training, batch_size=batch, steps=steps)
    progress = None if (args.quiet or args.json) else CalibrationProgress()
    try:
        from repoguard.planning.value import plan_values

        plan = build_plan(inc, batch_size=batch, steps=steps, clip_norm=clip, c=c, **plan_values(out, inc, pc.objective),
                          cap=args.cap or pc.cap, accountant=args.accountant or pc.accountant,
                          adjacency=args.adjacency or pc.adjacency, spent=spent,
                          progress=progress, holdout=split, **floor)
    finally:
        if progress is not None:
            progress.close()
    plan.extra["ledger_head"] = head
    plan.extra["batch_rule"] = choice
    from repoguard.core.provenance import plan_config_inputs

    plan.extra["inputs"] = plan_config_inputs(config)    # save_plan adds corpus, incidence
    mark_insecure(plan, out / "ledger.jsonl")
    mark_plan(plan, exposures, clear_runs)
    target = save_plan(plan, out)
    summary = plan_summary(plan, target)
    if args.json:
        print_json(summary)
    elif not args.quiet:
        _print(plan, summary)
    return 0


def _print(plan, summary) -> None:
    from rich.table import Table

    from repoguard.commands._common import make_console

    con = make_console()
    if plan.extra.get("sweep"):
        t = Table(title="c sweep (Hush Fig. 1a/1c): pick max Σw/σ")
        for col in ("c", "frac w>0", "Σw", "σ", "Σw/σ"):
            t.add_column(col, justify="right")
        for row in plan.extra["sweep"]:
            sig = row["sigma"]
            mark = " ◀" if row["c"] == plan.c else ""
            t.add_row(f"{row['c']:g}{mark}", f"{row['frac_positive']:.3f}", f"{row['sum_w']:.4g}",
                      f"{sig:.4g}" if sig else "—", f"{row['score']:.4g}")
        con.print(t)
        from repoguard.planning.retention import sweep_retention_flat
        if sweep_retention_flat(plan.extra["sweep"]):
            con.print("retention does not change with c (Σw within 0.5 %): c only trades the secrets' own "
                      "weight against σ")
    ret = {r["secret"]: r for r in (summary.get("retention") or {}).get("per_secret", [])}
    if not plan.secrets:
        from repoguard.pipeline.stages import NO_SECRETS

        con.print(NO_SECRETS, markup=False)
    t = Table(title=f"per-secret bounds (σ = {plan.sigma:.4g}, B = {plan.batch_size:g}, T = {plan.steps})")
    for col in ("secret", "|E_j|", "Σw", "retained Σw/n", "p", "r", "bound", "binding", "KL (nats)"):
        t.add_column(col, justify="right" if col not in ("secret", "binding") else "left", overflow="fold")
    for s in sorted(plan.secrets, key=lambda s: -s.achieved_bound / s.r)[:50]:
        kept = (ret.get(s.id) or {}).get("retained")
        t.add_row(s.id, str(s.n_examples), f"{s.sum_w:.3g}", "—" if kept is None else f"{kept:.3f}", f"{s.p:.2g}",
                  f"{s.r:.3g}", f"{s.achieved_bound:.3g}", s.binding, f"{s.kl_spent:.3g}")
    if plan.secrets:
        con.print(t)
    from repoguard.planning.retention import secret_lines

    for line in secret_lines(summary.get("least_retained")):
        con.print(line, markup=False, style="bold red" if "not trained on" in line else None)
    _print_directories(con, summary.get("retention"))
    from repoguard.accounting.clear_exposures import print_lines

    for line in print_lines(summary.get("exposures") or []):
        con.print(line, markup=False)
    from repoguard.accounting.published import insecure_lines

    for line in insecure_lines(summary.get("insecure_runs") or {}):
        con.print(line, markup=False, style="bold red")
    kl = summary.get("sigma_paper_kl")
    ratio = summary.get("sigma_ratio_kl_over_this")
    lp = summary["lp"]
    if summary.get("sigma_uniform"):
        con.print(f"uniform DP-SGD (w = 1, ρ = B/n) needs σ = {summary['sigma_uniform']:.5g} for the same targets: "
                  f"noise reduction σ_uniform/σ = {summary['noise_reduction']:.3g}×")
    _print_floor(con, summary.get("undetected_floor"), summary.get("floor_bought"), summary.get("sigma_uniform"))
    if summary.get("batch_rule"):
        from repoguard.planning.batch_rule import batch_rule_line

        con.print(batch_rule_line(summary["batch_rule"]), markup=False)
    if summary.get("holdout"):
        h = summary["holdout"]
        con.print(f"held out for evaluation: {h['n_files']} files, {h['n_examples']} examples (ρ = 0; "
                  f"split {h['digest'][:12]})")
    con.print(f"σ = {plan.sigma:.5g} ({plan.accountant}); the paper's KL accountant needs σ = "
              f"{kl:.5g} ({ratio:.3g}×)" if kl and ratio else f"σ = {plan.sigma:.5g} ({plan.accountant})")
    objective = "" if summary.get("objective", "examples") == "examples" else f", objective {summary['objective']}"
    con.print(f"LP: {lp['solver']}{objective}, {lp['iterations']} iterations, gap {lp['gap']}, Σw = {summary['sum_w']:.5g}, "
              f"c = {plan.c:g}; plan written to {summary['plan_dir']}")


def _print_floor(con, fl: dict | None, bought: dict | None, sigma_uniform) -> None:
    """The undetected-secret floor: target, achieved, σ_floor next to σ_uniform, what it bought."""
    from repoguard.planning.undetected import describe

    con.print(describe(fl), markup=False, style=None if not fl or fl.get("enabled", True) else "bold red")
    if not fl:
        return
    shown = ", ".join(f"k = {k}: {b:.3g}" for k, b in fl["bounds"].items())
    extra = f"; σ_uniform = {sigma_uniform:.4g}" if sigma_uniform else ""
    con.print(f"  this run alone, by k: {shown}; σ = {fl.get('sigma') or 0:.4g}, σ_floor = "
              f"{fl.get('sigma_floor') or 0:.4g}{extra}"
              + ("; the floor sets σ" if fl.get("binds") else ""), markup=False)
    if fl.get("phase1"):
        ph = fl["phase1"]
        con.print(f"  phase 1 (noised) reserved: σ₁ = {ph['sigma']:.4g} at ρ₁ = {ph['rho']:.3g}, T₁ = {ph['steps']} "
                  f"(r₁ = {ph['r']:.3g})", markup=False)
    if bought and bought.get("tied_sum_w_without_floor") is not None:
        con.print(f"  tied weight the floor's noise buys back: Σw over {bought['tied_examples']} tied examples "
                  f"{bought['tied_sum_w_without_floor']:.4g} → {bought['tied_sum_w']:.4g} "
                  f"(c {bought['c_without_floor']:g} → {bought['c']:.4g})", markup=False)


def _print_directories(con, ret: dict | None, limit: int = 15) -> None:
    """What training keeps per top-level directory (the `limit` least retained)."""
    from rich.table import Table

    if not ret or not ret.get("per_directory"):
        return
    rows = ret["per_directory"]
    t = Table(title=f"what training keeps per top-level directory (Σw/n = {ret['retained']:.3f} overall; "
                    f"{min(limit, len(rows))} least retained of {len(rows)})")
    for col in ("directory", "examples", "tied", "Σw", "retained Σw/n", "held out"):
        t.add_column(col, justify="left" if col == "directory" else "right", overflow="fold")
    for r in rows[:limit]:
        t.add_row(r["directory"], str(r["examples"]), str(r["tied"]), f"{r['sum_w']:.4g}",
                  "—" if r["retained"] is None else f"{r['retained']:.3f}", str(r["held_out"]))
    con.print(t)
