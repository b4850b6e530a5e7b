"""`repoguard analyze [PATH]`: tie training examples to secrets; write corpus + incidence."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, add_path_argument, print_json

NAME = "analyze"
HELP = "tie training examples to secrets (declared, imports, ownership, co-change, codenames)"


def register(parser) -> None:
    """Add `analyze`'s arguments to its subparser: PATH, `--json`, `--only NAMES`."""
    add_path_argument(parser)
    add_json_flag(parser)
    parser.add_argument("--only", metavar="NAMES", default=None,
                        help="comma-separated analyzers to run (default: [analyzers] enabled)")


def run(args) -> int:
    """Run `repoguard analyze` as `args` say: write OUT/corpus/ and OUT/incidence/, then print the
    summary (a table per analyzer, or `--json`). Returns 0; raises InputError (exit 2) for an unknown
    analyzer in `--only`, a missing repository or an invalid config."""
    from repoguard.analyzers.analyze import run_analyze
    from repoguard.commands._common import resolve_repo

    repo, config, out = resolve_repo(args)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    result = run_analyze(repo, config, out, only=only)
    s = result.summary
    if args.json:
        print_json({"out": str(out), **s})
        return 0
    from rich.table import Table

    from repoguard.commands._common import make_console

    console = make_console()
    console.print(f"{s['files']} files, {s['examples']} examples, {s['secrets']} secrets, "
                  f"{s['incidences']} incidences (corpus {s['corpus_seconds']:.1f} s, "
                  f"total {s['total_seconds']:.1f} s) → {out / 'incidence'}")
    table = Table("analyzer", "files", "incidences", "evidence", "seconds")
    for name, row in s["per_analyzer"].items():
        table.add_row(name, str(row["files"]), str(row["incidences"]), str(row["evidence"]),
                      f"{row['seconds']:.2f}")
    console.print(table)
    for reason, row in s.get("left_out", {}).items():
        if row["files"]:
            console.print(f"  left out: {row['files']} file(s) ({reason}: {row['why']})")
    for sid, n in s["per_secret"].items():
        console.print(f"  {sid}: {n} examples")
    return 0
