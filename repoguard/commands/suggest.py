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
    result = suggest(repo, config, kinds=kinds, limits=None if args.all else DEFAULT_LIMITS)
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
