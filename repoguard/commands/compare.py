"""`repoguard compare [PATH]`: train every arm (hush, hush-kl, hush-gdp, uniform, drop, no-dp,
two-phase, two-phase-noised) from the same base with the plan's B, T and held-out split, and print
their held-out metrics (and, when both the hush and no-dp arms are there, how DP moves their
at-risk examples)."""
from __future__ import annotations

NAME = "compare"
HELP = "train the alternatives (uniform DP-SGD, dropping secret files, no DP…) and compare held-out metrics"


def register(parser) -> None:
    from repoguard.commands._common import add_json_flag, add_path_argument

    add_path_argument(parser)
    add_json_flag(parser)
    parser.add_argument("--arms", default=None, metavar="NAMES",
                        help="comma-separated arms (default: hush,hush-kl,hush-gdp,uniform,drop,no-dp,"
                        "two-phase,two-phase-noised)")
    parser.add_argument("--steps", type=int, default=None, help="steps per arm (default: the plan's T)")
    parser.add_argument("--phase1-steps", type=int, default=None, metavar="T1",
                        help="phase-1 steps of the two-phase arms (default: [training] phase1_steps, else T)")
    parser.add_argument("--fresh", action="store_true", help="retrain arms whose saved result matches")
    parser.add_argument("--no-risk", action="store_true",
                        help="skip the at-risk ranking of the hush and no-dp arms (audit risk on both)")
    parser.add_argument("--risk-sample", type=int, default=500, metavar="N",
                        help="untied examples the risk ranking scores (default 500; tied and credential "
                             "examples always; 0 = none of them)")


def run(args) -> int:
    from repoguard.commands._common import print_json, resolve_repo
    from repoguard.errors import InputError
    from repoguard.evaluation.compare import ARMS, format_table, run_compare

    repo, config, out = resolve_repo(args, allow_plain=True)
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip()) if args.arms else ARMS
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        raise InputError(f"--arms: unknown arm(s) {', '.join(unknown) or '(none)'} (known: {', '.join(ARMS)})")
    if args.steps is not None and args.steps < 1:
        raise InputError(f"--steps: must be ≥ 1, got {args.steps}")
    if args.risk_sample < 0:
        raise InputError(f"--risk-sample: must be ≥ 0, got {args.risk_sample}")
    if args.phase1_steps is not None and args.phase1_steps < 1:
        raise InputError(f"--phase1-steps: must be ≥ 1, got {args.phase1_steps}")
    doc = run_compare(root=repo.root, out=out, cfg=config.training, arms=arms, steps=args.steps,
                      resume=not args.fresh, show_progress=not (args.quiet or args.json),
                      floor=(config.defaults.p, config.defaults.r), risk=not args.no_risk,
                      risk_sample=args.risk_sample, phase1_steps=args.phase1_steps)
    if args.json:
        print_json(doc)
    elif not args.quiet:
        print(format_table(doc))
        if doc.get("risk"):
            from repoguard.audit.risk_compare import table_lines

            print("\n" + "\n".join(table_lines(doc["risk"])))
    return 0
