"""`repoguard suggest [PATH]`: propose candidate secrets (ownership silos, codenames, credentials)
as a repoguard.toml snippet with the evidence for each; nothing is declared silently."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, add_path_argument, print_json

NAME = "suggest"
HELP = "propose candidate secrets (ownership silos, codenames, credentials) as a TOML snippet"


def register(parser) -> None:
    """Add `suggest`'s arguments to its subparser: PATH, `--json`, `--kinds`, `--all`."""
    add_path_argument(parser)
    add_json_flag(parser)
    parser.add_argument("--kinds", default="silo,codename,credential", metavar="KINDS",
                        help="comma-separated: silo, codename, credential (default: all)")
    parser.add_argument("--all", action="store_true",
                        help="show every candidate with all its evidence (default: a screenful, the "
                             "3 best silos, 5 codenames and 2 credentials)")
    parser.add_argument("--per-module", type=int, default=None, metavar="N",
                        help="propose a silo with more than N modules as one secret per module (more of "
                             "its examples' weight kept at the same targets; each module protected on its own)")


def run(args) -> int:
    """Print the candidate secrets as a repoguard.toml snippet (tagging.suggest), with notes on those
    already declared and those ranked lower and not shown (or `--json`). Returns 0; raises
    InputError (exit 2) for an unknown kind."""
    from repoguard.commands._common import resolve_repo
    from repoguard.core.errors import InputError
    from repoguard.tagging.suggest import DEFAULT_LIMITS, suggest

    repo, config, _out = resolve_repo(args)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ("silo", "codename", "credential")]
    if bad:
        raise InputError(f"--kinds: unknown kind {bad[0]!r} (known: silo, codename, credential)")
    if args.per_module is not None and args.per_module < 1:
        raise InputError(f"--per-module: must be ≥ 1 (modules a silo may hold before it is split), not {args.per_module}")
    result = suggest(repo, config, kinds=kinds, limits=None if args.all else DEFAULT_LIMITS,
                     split_above=args.per_module)
    if args.json:
        print_json(result)
    else:
        print(result["toml"], end="")
        covered = [c for c in result["candidates"] if c["covered_by"]]
        for c in covered:
            print(f"# already declared: {c['kind']} {c['id']} (covered by {', '.join(c['covered_by'])})")
        more = [f"{n} {kind}" for kind, n in result["omitted"].items() if n]
        if more:
            print(f"# ranked lower and not shown: {', '.join(more)} candidates; --all shows them")
    return 0
