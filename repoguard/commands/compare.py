"""`repoguard compare [PATH]`: train every arm (hush, hush-kl, hush-gdp, uniform, drop-dp, drop,
no-dp, two-phase, two-phase-noised) from the same base with the plan's B, T and held-out split, every
protected arm at the same declared targets and undetected floor (`--undetected`, default the
config's) against one ledger snapshot, and print their held-out metrics (and, when both the hush
and no-dp arms are there, how DP moves their at-risk examples). `--floors r1,r2,…` trains the
protected arms (and `synth` when named) again at each floor level: the Pareto picture of floor
bound against public loss. `--synth-n/-rounds/-variations/-clusters` set the opt-in synth arm's
SecPE settings (default `synth_arm.SYNTH_ARM`)."""
from __future__ import annotations

NAME = "compare"
HELP = ("train the alternatives (uniform DP-SGD, dropping secret files, no DP…) at equal protection and compare "
        "held-out metrics")


def register(parser) -> None:
    """Add `compare`'s arguments to its subparser: PATH, `--json`, the arms, floors, repeats, steps,
    synth-arm and risk options."""
    from repoguard.commands._common import add_json_flag, add_path_argument

    add_path_argument(parser)
    add_json_flag(parser)
    parser.add_argument("--arms", default=None, metavar="NAMES",
                        help="comma-separated arms (default: hush,hush-kl,hush-gdp,uniform,drop-dp,drop,no-dp,"
                        "two-phase,two-phase-noised; opt-in: synth, a SecPE corpus fine-tuned on without noise)")
    parser.add_argument("--undetected", default=None, metavar="off|k=1,p=…,r=…",
                        help="undetected-secret floor every protected arm meets (default: [defaults] undetected; "
                             "same syntax as `repoguard plan --undetected`)")
    parser.add_argument("--floors", default=None, metavar="R1,R2,…",
                        help="also train the protected arms at each floor level r (e.g. 1e-3,1e-2,0.1; p and k "
                             "of the floor, declared targets unchanged): floor bound against public loss")
    parser.add_argument("--repeats", "--seeds", type=int, default=1, metavar="N",
                        help="train every arm N times (fresh randomness, LoRA init seed + i) and report "
                             "mean ± sd of the held-out losses (default 1)")
    parser.add_argument("--steps", type=int, default=None, help="steps per arm (default: the plan's T)")
    parser.add_argument("--phase1-steps", type=int, default=None, metavar="T1",
                        help="phase-1 steps of the two-phase arms (default: [training] phase1_steps, else T)")
    from repoguard.evaluation.synth_arm import SYNTH_ARM

    for name, flag, meta, what in (("n", "--synth-n", "N", "examples kept per round (N_syn)"),
                                   ("rounds", "--synth-rounds", "T", "rounds"),
                                   ("variations", "--synth-variations", "L", "variations per kept example"),
                                   ("clusters", "--synth-clusters", "K", "anchors (K-means clusters)")):
        # Read as text and checked by `synth_arm.synth_settings`: a one-line error naming the flag.
        parser.add_argument(flag, dest=f"synth_{name}", default=None, metavar=meta,
                            help=f"synth arm: SecPE {what} (default {SYNTH_ARM[name]}; a positive integer)")
    parser.add_argument("--synth-prompt", default=None, metavar="TEXT",
                        help="synth arm: public text every generated sample starts from (e.g. $'```python\\n' "
                             "for an instruction-tuned base such as smollm2-135m; see `repoguard synth --prompt`)")
    parser.add_argument("--fresh", action="store_true", help="retrain arms whose saved result matches")
    parser.add_argument("--no-risk", action="store_true",
                        help="skip the at-risk ranking of the hush and no-dp arms (audit risk on both)")
    parser.add_argument("--risk-sample", type=int, default=500, metavar="N",
                        help="untied examples the risk ranking scores (default 500; tied and credential "
                             "examples always; 0 = none of them)")


def run(args) -> int:
    """Train the arms `args` name (evaluation.compare.run_compare) and print their held-out metrics
    table, and the at-risk table when both hush and no-dp ran (or `--json`). Returns 0; raises
    InputError (exit 2) for an unknown arm or a bad flag value."""
    from repoguard.commands._common import print_json, resolve_repo
    from repoguard.core.errors import InputError
    from repoguard.evaluation.compare import ARMS, OPT_IN_ARMS, parse_floors, run_compare
    from repoguard.evaluation.compare_text import format_table
    from repoguard.planning.undetected import resolve

    repo, config, out = resolve_repo(args, allow_plain=True)
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip()) if args.arms else ARMS
    unknown = [a for a in arms if a not in ARMS + OPT_IN_ARMS]
    if unknown or not arms:
        raise InputError(f"--arms: unknown arm(s) {', '.join(unknown) or '(none)'} "
                         f"(known: {', '.join(ARMS + OPT_IN_ARMS)})")
    if args.steps is not None and args.steps < 1:
        raise InputError(f"--steps: must be ≥ 1, got {args.steps}")
    if args.risk_sample < 0:
        raise InputError(f"--risk-sample: must be ≥ 0, got {args.risk_sample}")
    if args.repeats < 1:
        raise InputError(f"--repeats: must be ≥ 1, got {args.repeats}")
    if args.phase1_steps is not None and args.phase1_steps < 1:
        raise InputError(f"--phase1-steps: must be ≥ 1, got {args.phase1_steps}")
    from repoguard.evaluation.synth_arm import synth_settings

    synth = synth_settings({k: getattr(args, f"synth_{k}", None)
                            for k in ("n", "rounds", "variations", "clusters", "prompt")})
    floor = resolve(config, args.undetected)
    floors = parse_floors(args.floors, floor.p) if args.floors is not None else None
    doc = run_compare(root=repo.root, out=out, cfg=config.training, arms=arms, steps=args.steps,
                      resume=not args.fresh, show_progress=not (args.quiet or args.json),
                      floor=floor, risk=not args.no_risk, floors=floors,
                      risk_sample=args.risk_sample, phase1_steps=args.phase1_steps, repeats=args.repeats,
                      synth=synth)
    if args.json:
        print_json(doc)
    elif not args.quiet:
        print(format_table(doc))
        if doc.get("risk"):
            from repoguard.audit.risk_compare import table_lines

            print("\n" + "\n".join(table_lines(doc["risk"])))
    return 0
