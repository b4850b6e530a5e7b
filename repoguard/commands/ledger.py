"""`repoguard ledger show|verify`: the hash-chained record of what each secret has spent, and the
secrets exposed by runs that trained in the clear (`accounting/clear_exposures.py`)."""
from __future__ import annotations

NAME = "ledger"
HELP = "show or verify the privacy ledger (hash-chained spending per secret)"


def register(parser) -> None:
    """`ledger show|verify [--deep] [--json] [PATH]`: each action is a subparser of its own, so
    options go before or after PATH (`ledger verify --json PATH` and `ledger verify PATH --json`
    alike); `--json` is also accepted before the action."""
    import argparse

    from repoguard.commands._common import add_path_argument, common_options

    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    acts = parser.add_subparsers(dest="action", metavar="{show,verify}", required=True,
                                 parser_class=type(parser))
    for name, text in (("show", "show the runs and what each secret has spent"),
                       ("verify", "verify the chain, the head and every side file's digest")):
        p = acts.add_parser(name, help=text, description=text, parents=[common_options(suppress=True)])
        add_path_argument(p)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="machine-readable JSON on stdout")
        if name == "verify":
            p.add_argument("--deep", action="store_true",
                           help="also recompute the carried-forward summary from every entry")


def run(args) -> int:
    """Run `ledger verify` (returns 1 when the chain or a side file does not check, else 0) or
    `ledger show` (the runs and what each secret spent against its target; returns 0). Raises
    PolicyError (exit 1) from `show` when the chain is broken."""
    from repoguard.accounting.clear_exposures import ledger_exposures
    from repoguard.accounting.ledger import read_entries, spent, verify
    from repoguard.commands._common import make_console, print_json, resolve_repo

    _repo, config, out = resolve_repo(args, allow_plain=True)
    path = out / "ledger.jsonl"
    if args.action == "verify":
        check = verify(path, deep=getattr(args, "deep", False))
        counts = run_counts(read_entries(path)) if check["ok"] else {}
        if args.json:
            print_json({"ledger": str(path), **check, **counts})
        elif not args.quiet or not check["ok"]:

            con = make_console(stderr=not check["ok"])
            if check["ok"]:
                con.print(f"{path}: ok, {describe_counts(counts)}" + "".join(f"; {n}" for n in check["notes"]),
                          soft_wrap=True)
            for p in check["problems"]:
                con.print(f"[red]{p}[/red]")
        return 0 if check["ok"] else 1
    totals = spent(path)  # raises PolicyError when the chain is broken (verified once, cached)
    exp = ledger_exposures(path, out, config.ledger.acknowledged_exposures)
    from repoguard.accounting.published import insecure_history, insecure_lines

    insecure = insecure_history(path)     # secrets an insecure-reproducible run trained: no guarantee
    runs = [{k: e.get(k) for k in ("seq", "run_id", "time", "status", "sigma", "batch_size", "steps",
                                   "steps_completed", "plan_digest", "randomness", "floor")} for e in read_entries(path)]
    if args.json:
        bounds = secret_bounds(path, out, config)
        print_json({"ledger": str(path), "runs": runs, "insecure": insecure,
                    "spent": {k: {"kl": v[0], "renyi": v[1], "insecure_runs": insecure.get(k, []),
                                  **(bounds.get(k) or {})}
                              for k, v in totals.items()}, **exp})
        return 0
    if not args.quiet:
        from rich.table import Table

        con = make_console()
        last = latest_records(runs)
        t = Table(title=f"runs in {path} ({len(last)} runs, {len(runs)} records)")
        for col in ("#", "run", "time", "status", "σ", "B", "steps", "records", "undetected floor"):
            t.add_column(col)
        for r, n in last:
            t.add_row(str(r["seq"]), str(r["run_id"]), str(r["time"]), str(r["status"]), f"{r['sigma']:.4g}",
                      f"{r['batch_size']:g}", f"{r['steps_completed']}/{r['steps']}", str(n),
                      _floor_cell(r.get("floor")))
        con.print(t)
        t = Table(title="spent per secret (sum over runs): certified bound against target")
        for col in ("secret", "bound", "target r", "prior p", "within target", "certified by", "KL (nats)",
                    "Rényi orders recorded"):
            t.add_column(col)
        bounds = secret_bounds(path, out, config)
        for k, (kl, ren) in sorted(totals.items()):
            b = bounds.get(k)
            cells = (("?", "?", "?", "? (secret not in the incidence or config)", "—") if b is None else
                     (f"{b['bound']:.3g}", f"{b['r']:g}", f"{b['p']:g}", "yes" if b["within"] else "NO",
                      b["how"]))
            t.add_row(k + (" (undetected-secret floor)" if k.startswith("@undetected") else ""), *cells,
                      f"{kl:.4g}", str(len(ren)))
        con.print(t)
        for line in insecure_lines(insecure):
            con.print(line, markup=False, style="bold red")
        _print_exposures(con, exp)
    return 0


def secret_bounds(path, out, config) -> dict:
    """{secret id or floor account: {"bound", "p", "r", "within", "how"}}: where each secret the
    ledger holds stands after every recorded run, certified by the runs' accountant
    (`accounting.spent_bounds.spent_bound`), against its target (p, r) from the incidence in `out`
    (declared and credential secrets), else the config's declared secrets; floor accounts
    ("@undetected:k=K") against the config's `[defaults] undetected` when its k matches."""
    from repoguard.accounting.ledger import spending
    from repoguard.accounting.spent_bounds import spent_bound

    targets = {s.id: (s.p, s.r) for s in config.secrets}
    try:
        from repoguard.analyzers.incidence import load_incidence

        targets.update({s.id: (s.p, s.r) for s in load_incidence(out).secrets})
    except Exception:  # noqa: BLE001 - no or unreadable incidence: the config's targets only
        pass
    und = config.undetected
    targets[und.account] = (und.p, und.r)
    spent, pairs = spending(path)
    cache: dict = {}
    res = {}
    for k, (kl, ren) in spent.items():
        if k not in targets:
            continue
        p, r = targets[k]
        b, how = spent_bound(kl, ren, p, pairs.get(k), cache=cache)
        res[k] = {"bound": b, "p": p, "r": r, "within": bool(b <= r * (1 + 1e-9)), "how": how}
    return res


def latest_records(runs: list[dict]) -> list[tuple[dict, int]]:
    """One row per training run: its last record (the status it ended with, or "running" at its
    last checkpoint) and how many records it appended, in the order the runs started. A run
    appends a record at every checkpoint, so the ledger's entries are not its runs."""
    last: dict = {}
    count: dict = {}
    for r in runs:
        last[r["run_id"]] = r            # dicts keep first-insertion order: runs by start
        count[r["run_id"]] = count.get(r["run_id"], 0) + 1
    return [(r, count[k]) for k, r in last.items()]


def run_counts(entries: list[dict]) -> dict:
    """Runs in the ledger and how its records split: every training run appends a record at each
    checkpoint (status "running") and one when it ends (completed, interrupted, failed).
    Returns {"runs", "records", "checkpoint_records", "final_status": {status: runs}}, a run's
    status being that of its last record."""
    last: dict[str, str] = {}
    checkpoints = 0
    for e in entries:
        last[str(e.get("run_id"))] = str(e.get("status"))
        checkpoints += e.get("status") in ("started", "running")
    final: dict[str, int] = {}
    for st in last.values():
        final[st] = final.get(st, 0) + 1
    return {"runs": len(last), "records": len(entries), "checkpoint_records": checkpoints,
            "final_status": dict(sorted(final.items()))}


def describe_counts(c: dict) -> str:
    """"2 runs (1 completed, 1 interrupted); 5 records, 3 of them checkpoint records"."""
    runs = f"{c['runs']} run{'s' if c['runs'] != 1 else ''}"
    if c["final_status"]:
        runs += " (" + ", ".join(f"{n} {st}" for st, n in c["final_status"].items()) + ")"
    return (f"{runs}; {c['records']} record{'s' if c['records'] != 1 else ''}, "
            f"{c['checkpoint_records']} of them checkpoint record{'s' if c['checkpoint_records'] != 1 else ''}")


def _print_exposures(con, exp: dict) -> None:
    """The runs that trained in the clear and, against the current incidence, the secrets they
    exposed (bound 1)."""
    from rich.table import Table

    if not exp["clear_runs"]:
        return
    t = Table(title="runs with a public phase (trained in the clear)")
    for col in ("run", "time", "examples"):
        t.add_column(col)
    for r in exp["clear_runs"]:
        t.add_row(r["run_id"], r["time"], str(r["n_examples"]))
    con.print(t)
    if exp["exposures"] is None:
        con.print("exposures: no incidence in the output directory (run `repoguard analyze`)")
        return
    if not exp["exposures"]:
        con.print("exposures: none (no example trained in the clear is tied to a secret)")
        return
    t = Table(title="exposed secrets (bound 1: trained in the clear by an earlier run)")
    for col in ("secret", "run", "time", "examples", "e.g.", "acknowledged"):
        t.add_column(col, overflow="fold")
    for x in exp["exposures"]:
        t.add_row(x["secret"], x["run_id"], x["time"], str(x["n_examples"]), ", ".join(x["examples"][:2]),
                  "yes" if x["acknowledged"] else "NO")
    con.print(t)


def _floor_cell(fl: dict | None) -> str:
    """A run's undetected-secret floor: its bound and target, "OFF (opt-out)", or "—" for a run
    recorded before the floor had an account."""
    if not fl:
        return "— (not recorded)"
    b = fl.get("achieved_bound")
    shown = f"{b:.3g}" if isinstance(b, (int, float)) else "?"
    return f"OFF (opt-out), k = {fl.get('k')}: {shown}" if not fl.get("enabled", True) else \
        f"k = {fl.get('k')}: {shown} ≤ {fl.get('r'):g}"
