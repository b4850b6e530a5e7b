"""`repoguard scan`: find credentials in a working tree, a plain directory, given files, the
staged change or the history. Exit 1 on new (non-baselined) findings, 0 otherwise, 2 on bad input."""
from __future__ import annotations

from pathlib import Path

NAME = "scan"
HELP = "find hard-coded credentials (working tree, --staged, --history, files); exit 1 on new findings"

def register(parser) -> None:
    """Add `scan`'s arguments to its subparser: the targets, the mode (`--history`, `--staged`,
    `--no-git`), output, rules, baseline, confidence and job options."""
    parser.add_argument("targets", nargs="*", metavar="PATH",
                        help="a directory to scan (default: .), or files to scan (as pre-commit passes them)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--history", action="store_true",
                      help="scan every commit's added lines; report the introducing commit")
    mode.add_argument("--staged", action="store_true", help="scan the staged change (pre-commit)")
    parser.add_argument("--since", metavar="REV", help="with --history (implied): only commits after REV")
    parser.add_argument("--range", metavar="REVS", dest="range",
                        help="with --history (implied): the commits of a revision range, e.g. v1.0..main "
                             "or main~200..main (default: everything reachable from HEAD)")
    parser.add_argument("--all-refs", action="store_true", help="with --history: every branch and tag")
    parser.add_argument("--no-git", action="store_true", help="walk a plain directory (no git needed)")
    parser.add_argument("--format", choices=("text", "json", "sarif"), default=None, help="output format (text)")
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("--output", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    parser.add_argument("--rules", metavar="FILE", action="append", default=[],
                        help="gitleaks-format TOML rule file (replaces the defaults unless it has "
                             "[extend] useDefault = true) or Nosey Parker-style YAML pack (.yaml/.yml, "
                             "added to the defaults); repeatable")
    parser.add_argument("--baseline", metavar="FILE", help="suppress findings listed in this baseline")
    parser.add_argument("--update-baseline", "--write-baseline", action="store_true", dest="update_baseline",
                        help="write the current findings to the baseline file and exit 0 (given files: "
                             "update their entries, keep the others)")
    parser.add_argument("--confidence", choices=("high", "low"), default="high",
                        help="report findings of at least this confidence (high); low adds generic "
                             "findings on a value beside a vendor's name that fits none of that "
                             "vendor's shapes (always redacted from training text)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: all cores)")
    parser.add_argument("--max-file-bytes", type=int, default=None, metavar="N",
                        help="scan at most N bytes of each file (default: config scan.max_file_bytes)")


def run(args) -> int:
    """Check the targets and flags, open the repository (or the plain directory with `--no-git`) and
    run the scan (credentials.job.run_scan). Returns 1 on new (non-baselined) findings, else 0;
    raises InputError (exit 2) for a missing file, `--jobs` < 1, or flags that do not go together."""
    from repoguard.commands._common import resolve_repo
    from repoguard.core.errors import InputError
    from repoguard.credentials.job import run_scan
    from repoguard.source.gitrepo import PlainDir

    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs: must be at least 1")
    targets = args.targets or ["."]
    dirs = [t for t in targets if Path(t).is_dir()]
    explicit = not (len(targets) == 1 and dirs)
    if explicit:
        missing = [t for t in targets if not Path(t).is_file() and not Path(t).is_symlink()]
        if missing:
            raise InputError(f"{missing[0]}: no such file (give one directory or a list of files)")
    for flag in ("since", "range"):
        if getattr(args, flag) and args.staged:
            raise InputError(f"--{flag}: a history option; it cannot be combined with --staged")
        if getattr(args, flag):
            args.history = True
    if args.range and (args.all_refs or args.since):
        raise InputError("--range: give the whole range there (A..B), without --since or --all-refs")
    if args.range is not None and (not args.range.strip() or args.range.startswith("-")):
        raise InputError(f"--range: {args.range!r} is not a revision range (e.g. v1.0..main)")
    if (args.history or args.staged) and (explicit or args.no_git):
        raise InputError("--history/--staged scan a git repository: give at most one directory, without --no-git")

    base = "." if explicit else targets[0]
    if args.no_git:
        repo = PlainDir(base)
        from repoguard.commands._common import resolve_config, resolve_out
        config, out_dir = resolve_config(args, repo.root), resolve_out(args, repo.root)
    else:
        repo, config, out_dir = resolve_repo(args, base, allow_plain=explicit)
    return run_scan(args, repo, config, out_dir, targets=targets, explicit=explicit, base=base)
