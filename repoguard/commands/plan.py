"""`repoguard plan`: weights (Hush eq. 1), sampling probabilities and the calibrated noise
multiplier for the next training run, against what the ledger says each secret already spent."""
from __future__ import annotations

NAME = "plan"
HELP = "weight examples (Hush LP), calibrate the noise per secret, write plan/ (reads the ledger)"


def register(parser) -> None:
    """`plan [PATH]` and the plan flags it shares with `run` (`_plan_flags.add_plan_flags`)."""
    from repoguard.commands._common import add_json_flag, add_path_argument
    from repoguard.commands._plan_flags import add_plan_flags

    add_path_argument(parser)
    add_plan_flags(parser)
    add_json_flag(parser)


def run(args) -> int:
    """Plan against OUT's incidence and ledger under the run lock; 0 when the plan is written.
    Raises InputError (bad flags or inputs, exit 2) and PolicyError (a budget spent, exit 1)."""
    from repoguard.commands._common import resolve_repo
    from repoguard.commands._plan_flags import check_plan_flags

    check_plan_flags(args)
    _repo, config, out = resolve_repo(args, allow_plain=True)
    from repoguard.pipeline.scheduled import run_lock

    with run_lock(out):        # one command at a time spends or writes OUT (issue 32 A)
        return _run(args, config, out)


def _run(args, config, out) -> int:
    from repoguard.commands._common import print_json
    from repoguard.commands._plan_flags import print_settings, settings_from_args
    from repoguard.planning.make import make_plan

    settings = settings_from_args(config, args)
    made = make_plan(config, out, settings, show_progress=not (args.quiet or args.json))
    if args.verbose and not args.json:
        print_settings(made.settings, "plan settings")
    if args.json:
        print_json(made.summary)
    elif not args.quiet:
        _print(made.plan, made.summary)
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
        from repoguard.planning.make import NO_SECRETS

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
