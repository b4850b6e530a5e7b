"""`repoguard audit canaries|extract|risk [PATH]`: what a DP and a --no-dp model memorise, and which
training examples a trained run puts at risk (OUT/audit/)."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, add_path_argument, print_json

NAME = "audit"
HELP = ("measure memorisation: canary exposure and k-extractable examples, DP vs --no-dp; "
        "at-risk examples of a trained run (writes OUT/audit/)")


def _global_flags(p) -> None:
    import argparse

    # The global options also after the sub-subcommand; SUPPRESS keeps a value given before it.
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="config file")
    p.add_argument("--out", metavar="DIR", default=argparse.SUPPRESS, help="output directory")
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="only errors and results")
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more output")
    add_path_argument(p)
    add_json_flag(p)


def _common_flags(p) -> None:
    _global_flags(p)
    a = p.add_argument
    a("--steps", type=int, default=None, help="training steps of each run (≤ the plan's T; default T)")
    a("--seed", type=int, default=0, help="seed of sampler, model init, sampling and DP noise (default 0)")
    a("--lr", type=float, default=None, help="learning rate (default: [training])")
    a("--max-length", type=int, default=None, metavar="N", help="tokens per example (default: [training])")
    a("--lora-targets", default=None, metavar="NAMES", help="comma-separated module names (default: [training])")
    a("--device", default="auto", help="auto, cpu, cuda, cuda:N")


def register(parser) -> None:
    """Add the `canaries`, `extract` and `risk` actions with their options to `audit`'s subparser."""
    sub = parser.add_subparsers(dest="audit_kind", metavar="{canaries,extract,risk}", required=True,
                                parser_class=type(parser))
    c = sub.add_parser("canaries", help="plant a canary in a secret's examples; exposure DP vs --no-dp")
    _common_flags(c)
    c.add_argument("--secret", default=None, metavar="ID", help="the secret whose examples carry the canary")
    c.add_argument("--missed", action="store_true",
                   help="plant the canary in examples tied to no secret (a missed secret): its exposure under "
                        "hush, no-dp and drop (and two-phase-noised when the plan reserved σ₁) against the "
                        "undetected floor's predicted ceiling [JFT §5] (writes OUT/audit/missed-canaries.json)")
    c.add_argument("--runs", default=None, metavar="NAMES",
                   help="--missed: comma-separated runs among hush, no-dp, drop, two-phase-noised, "
                        "two-phase-clear (floor off only); default hush,no-dp,drop[,two-phase-noised]")
    c.add_argument("--phase1-steps", type=int, default=None, metavar="T1",
                   help="--missed: phase-1 steps of the two-phase runs (default: the plan's phase-1 reservation, "
                        "else [training] phase1_steps, else T)")
    c.add_argument("--insert", type=int, default=None, metavar="N",
                   help="examples that carry the canary (default: all of the secret's examples with ρ > 0)")
    c.add_argument("--references", type=int, default=10_000, metavar="N",
                   help="reference candidates for the sampled rank (default 10^4)")
    c.add_argument("--name", default="ALPHA_SIGNAL_KEY", help="canary variable name (default ALPHA_SIGNAL_KEY)")
    c.add_argument("--digits", type=int, default=10, help="random hex digits (|R| = 16^digits; default 10)")
    e = sub.add_parser("extract", help="k-extractable memorisation per secret, DP vs --no-dp")
    _common_flags(e)
    e.add_argument("-k", type=int, default=50, help="prefix tokens (default 50; clamped to max_length)")
    e.add_argument("-m", type=int, default=50, help="tokens greedy decoding must reproduce (default 50)")
    e.add_argument("--per-secret", type=int, default=20, metavar="N", help="examples sampled per secret")
    e.add_argument("--max-secrets", type=int, default=50, metavar="N", help="secrets measured (most examples first)")
    r = sub.add_parser("risk", help="rank a trained run's examples by reconstruction risk (lazy sampling)")
    _global_flags(r)
    a = r.add_argument
    a("--run", metavar="DIR", default=None, help="the run: adapter/ + privacy_report.json (default OUT/train)")
    a("--model", metavar="DIR|NAME", default=None,
      help="base model of a --model run: DIR, or a fetched name such as smollm2-135m (default: the run's base_model/)")
    a("-k", type=int, default=32, help="context tokens (default 32; clamped to max_length)")
    a("-m", type=int, default=32, help="span tokens the attack must regenerate (default 32)")
    a("--temperature", type=float, default=0.7, help="the temperature sampler's τ (default 0.7)")
    a("--top-k", type=int, default=40, help="the top-k sampler's k (default 40)")
    a("--sample", type=int, default=None, metavar="N",
      help="score N examples tied to no secret (default all); tied examples, credential ones included, "
           "are always scored, and only the scored examples are read and redacted")
    a("--per-secret", type=int, default=10, metavar="N", help="rows kept per secret (default 10)")
    a("--label", default=None, help="write OUT/audit/risk-LABEL.json instead of risk.json")
    a("--max-length", type=int, default=None, metavar="N", help="tokens per example (default: [training])")
    a("--batch-size", type=int, default=16, metavar="N", help="windows per forward pass (default 16)")
    a("--seed", type=int, default=0, help="seed of the --sample draw (default 0)")
    a("--device", default="auto", help="auto, cpu, cuda, cuda:N")


def run(args) -> int:
    """Run the audit `args.audit_kind` names and print its result (log lines, or `--json`); the
    document is also written under OUT/audit/. Returns 0; raises InputError (exit 2) for a bad flag
    value or combination."""
    import dataclasses
    import logging

    from repoguard.commands._common import resolve_repo
    from repoguard.core.errors import InputError

    repo, config, out = resolve_repo(args, allow_plain=True)
    if args.audit_kind == "risk":
        return _risk(args, repo, config, out)
    over = {"learning_rate": args.lr, "max_length": args.max_length,
            "lora_targets": tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
            if args.lora_targets else None}
    cfg = dataclasses.replace(config.training, **{k: v for k, v in over.items() if v is not None})
    if args.steps is not None and args.steps < 1:
        raise InputError(f"--steps: must be ≥ 1, got {args.steps}")
    quiet = getattr(args, "quiet", False)
    common = dict(out=out, root=repo.root, cfg=cfg, steps=args.steps, seed=args.seed,
                  noise_seed=args.seed + 0x5EED, device=args.device, show_progress=not quiet)
    log = logging.getLogger("repoguard")
    if args.audit_kind == "canaries":
        from repoguard.audit.canaries import CanaryFormat, run_canary_audit

        if not 1 <= args.digits <= 64 or not args.name.isidentifier():
            raise InputError("--name must be an identifier and --digits in 1..64")
        if not args.missed and (args.runs is not None or args.phase1_steps is not None):
            raise InputError("--runs and --phase1-steps go with --missed")
        if args.missed:
            return _missed(args, common, CanaryFormat(name=args.name, length=args.digits),
                           (config.defaults.p, config.defaults.r), log, quiet)
        if args.secret is None:
            raise InputError("audit canaries: give --secret ID (or --missed for a secret nobody declared)")
        doc = run_canary_audit(secret_id=args.secret, n_insert=args.insert, n_references=args.references,
                               fmt=CanaryFormat(name=args.name, length=args.digits), **common)
        if args.json:
            print_json(doc)
        elif not quiet:
            log.info("canary planted in %d examples of %s (%s)", doc["n_inserted"], args.secret,
                     "all its examples with ρ > 0" if args.insert is None else "--insert")
            for label, r in doc["runs"].items():
                log.info("%-6s exposure %.2f bits (sampled, rank %d of %d) / %.2f bits (skew-normal) of %g",
                         label, r["exposure_sampled"], r["rank_in_sample"], r["n_references"] + 1,
                         r["exposure_skewnorm"], doc["log2_space_size"])
            log.info("→ %s", out / "audit" / "canaries.json")
        return 0
    from repoguard.audit.extraction import run_extract_audit

    if args.per_secret < 1 or args.max_secrets < 1:
        raise InputError("--per-secret and --max-secrets must be ≥ 1")
    doc = run_extract_audit(k=args.k, m=args.m, per_secret=args.per_secret, max_secrets=args.max_secrets, **common)
    if args.json:
        print_json(doc)
    elif not quiet:
        if doc["note"]:
            log.info("%s", doc["note"])
        if doc.get("reference"):
            log.warning("warning: %s", doc["reference"])
        for name, g in doc["groups"].items():
            log.info("%-40s dp %s  no-dp %s  (%d sampled)", name, _pct(g.get("dp")), _pct(g.get("no-dp")), g["n_sampled"])
        log.info("→ %s", out / "audit" / "extraction.json")
    return 0


def _pct(x) -> str:
    return "   -  " if x is None else f"{100 * x:5.1f}%"


def _risk(args, repo, config, out) -> int:
    import dataclasses
    import logging
    import re
    from pathlib import Path

    from repoguard.audit.lazy import Sampler
    from repoguard.audit.risk import run_risk_audit, table_lines
    from repoguard.core.errors import InputError

    if args.label is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", args.label):
        raise InputError(f"--label {args.label!r}: letters, digits, . _ - only")
    try:
        samplers = (Sampler(), Sampler(temperature=args.temperature), Sampler(top_k=args.top_k))
    except ValueError as exc:
        raise InputError(f"--temperature/--top-k: {exc}") from None
    cfg = config.training if args.max_length is None else dataclasses.replace(config.training, max_length=args.max_length)
    name = "risk.json" if args.label is None else f"risk-{args.label}.json"
    doc = run_risk_audit(out=out, root=repo.root, cfg=cfg, run_dir=Path(args.run) if args.run else None,
                         model_dir=args.model, k=args.k, m=args.m, samplers=samplers, sample=args.sample,
                         per_secret=args.per_secret, seed=args.seed, device=args.device,
                         batch_size=args.batch_size, dest=out / "audit" / name)
    if args.json:
        print_json(doc)
    elif not getattr(args, "quiet", False):
        log = logging.getLogger("repoguard")
        kind = {True: "DP", False: "--no-dp", None: "unknown"}[doc["private"]]
        log.info("%d windows of %d examples (%s run); k = %d context, m = %d span tokens%s", doc["n_windows"],
                 doc["n_scored_examples"], kind, doc["k"], doc["m"], f" ({doc['note']})" if doc["note"] else "")
        for line in table_lines(doc):
            log.info("%s", line)
        log.info("→ %s", out / "audit" / name)
    return 0


def _missed(args, common: dict, fmt, floor, log, quiet) -> int:
    """`audit canaries --missed` (`audit.missed`)."""
    from repoguard.audit.missed import run_missed_canary_audit
    from repoguard.commands._common import print_json
    from repoguard.core.errors import InputError

    if args.secret is not None:
        raise InputError("--missed plants the canary in examples tied to no secret: leave --secret out")
    if args.phase1_steps is not None and args.phase1_steps < 1:
        raise InputError(f"--phase1-steps: must be ≥ 1, got {args.phase1_steps}")
    common = {k: v for k, v in common.items() if k != "noise_seed"}
    runs = None if args.runs is None else tuple(r.strip() for r in args.runs.split(",") if r.strip())
    doc = run_missed_canary_audit(n_insert=args.insert or 1, n_references=args.references, fmt=fmt, floor=floor,
                                  phase1_steps=args.phase1_steps, runs=runs, **common)
    if args.json:
        print_json(doc)
    elif not quiet:
        from repoguard.audit.missed import table_lines

        (log.warning if doc["floor_off"] else log.info)("%s", doc["floor_status"])
        log.info("canary in %d untied example(s) (ρ = %s); exposure sampled / skew-normal, %d references; "
                 "ceiling: P[exposure ≥ ceiling] ≤ %g under the run's DP pair", doc["n_inserted"],
                 ", ".join(f"{x:.3g}" for x in doc["rho_inserted_plan"]), doc["n_references"], doc["level"])
        for line in table_lines(doc):
            log.info("%s", line)
        log.info("→ %s", common["out"] / "audit" / "missed-canaries.json")
    return 0
