"""The plan flags `repoguard plan` and `repoguard run` share: one definition each (name, type,
help), the checks that need no config, and the resolved plan settings they give
(`planning.make.plan_settings`)."""
from __future__ import annotations


def add_plan_flags(parser) -> None:
    """Add B, T, C, c/--sweep, cap, accountant, adjacency, the undetected floor and the budget
    fraction to `parser` (an ArgumentParser or an argument group). Every default is None: the
    value then comes from `[plan]` / `[defaults]` in the config, else the built-in default."""
    a = parser.add_argument
    a("--batch-size", type=float, default=None, metavar="B",
      help="expected batch size B (default: [plan] batch_size when the config sets it, else the batch rule "
           "B = 5·n/T clamped to 16…256 and ≤ n/3, n the number of untied training examples; plan.json "
           "extra.batch_rule says which)")
    a("--steps", type=int, default=None, metavar="T",
      help="training steps T (default: [plan] steps when the config sets it, else the batch rule's T = 200)")
    a("--clip-norm", type=float, default=None, metavar="C", help="per-example clip norm C (default: [plan] clip_norm)")
    x = parser.add_mutually_exclusive_group()
    x.add_argument("--c", type=float, default=None,
                   help="LP scale c: budgets c·cap_j (default: [plan] c; 0 sweeps)")
    x.add_argument("--sweep", action="store_true", help="sweep c = 2^-6…2^4 and pick max Σw/σ")
    a("--cap", choices=("kl", "gdp"), default=None,
      help="per-secret LP budget: kl(r‖p) (Hush) or Φ⁻¹(1−p)−Φ⁻¹(1−r) (SecPE) (default: [plan] cap)")
    a("--accountant", choices=("best", "kl", "renyi"), default=None, help="default: [plan] accountant")
    a("--adjacency", choices=("zero-out", "replace"), default=None, help="default: [plan] adjacency")
    a("--undetected", default=None, metavar="off|k=1,p=…,r=…",
      help="undetected-secret floor for this run (default: [defaults] undetected, on: k = 1 at the default "
           "p, r); \"off\" opts out, and every output says so")
    a("--budget-fraction", type=float, default=None, metavar="F",
      help="spend at most this share of each secret's remaining headroom r − b₀ "
           "(default 1; 0.5 with `run --scheduled`, so later runs keep a budget)")


def check_plan_flags(args) -> None:
    """The plan flags checked before anything runs: 0 < B, 1 ≤ T, 0 < C within
    `planning.limits`, c ≥ 0 and finite, 0 < f ≤ 1. Raises InputError, one line naming the flag."""
    import math

    from repoguard.core.errors import InputError
    from repoguard.planning.limits import check_plan_values

    check_plan_values(batch_size=args.batch_size, steps=args.steps, clip_norm=args.clip_norm)
    if args.c is not None and not (math.isfinite(args.c) and args.c >= 0):
        raise InputError(f"--c: must be ≥ 0 (0 sweeps), not {args.c!r}")
    f = args.budget_fraction
    if f is not None and not 0 < f <= 1:
        raise InputError(f"--budget-fraction: must be in (0, 1], not {f!r}")


def settings_from_args(config, args, *, budget_fraction: float | None = None):
    """`planning.make.plan_settings` from the parsed plan flags; `budget_fraction` (the run's
    default, 1 or 0.5 with --scheduled) applies when --budget-fraction is not given."""
    from repoguard.core.settings import DEFAULT
    from repoguard.planning.make import plan_settings

    s = plan_settings(config, batch_size=args.batch_size, steps=args.steps, clip_norm=args.clip_norm, c=args.c,
                      sweep=args.sweep, cap=args.cap, accountant=args.accountant, adjacency=args.adjacency,
                      undetected=args.undetected, budget_fraction=args.budget_fraction)
    if args.budget_fraction is None and budget_fraction is not None:
        s = s.with_value("budget_fraction", budget_fraction, DEFAULT)
    return s


def print_settings(settings, title: str = "settings") -> None:
    """`-v`: every resolved setting with its source, one line each, on stderr."""
    from repoguard.commands._common import make_console

    err = make_console(stderr=True, highlight=False)
    err.print(f"{title} (flag, file or default):", markup=False)
    for line in settings.lines():
        err.print(f"  {line}", markup=False)
