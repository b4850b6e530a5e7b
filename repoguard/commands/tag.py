"""`repoguard tag [FILE…]`: the pre-commit hook (id `repoguard-tag`) keeping
`.repoguard/sensitive.toml` up to date for the staged files; exit 1 when it changed it."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, print_json

NAME = "tag"
HELP = "record the secrets of staged files in .repoguard/sensitive.toml (pre-commit hook)"


def register(parser) -> None:
    """Add `tag`'s arguments to its subparser: FILE…, `--all`, `--repo PATH`, `--json`."""
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="staged files to examine (pre-commit passes them; default: all staged)")
    parser.add_argument("--all", action="store_true", dest="all_files",
                        help="rebuild the whole manifest from a full analyze (history included)")
    parser.add_argument("--repo", metavar="PATH", default=".", help="repository (default: current directory)")
    add_json_flag(parser)


def run(args) -> int:
    """Update .repoguard/sensitive.toml for the staged files (or FILE…, or `--all`) and list on stderr
    what changed. Returns 1 when the manifest changed (pre-commit then stops the commit for a
    review), else 0."""
    import sys

    from repoguard.commands._common import resolve_repo
    from repoguard.analyzers.explain import relative_path
    from repoguard.tagging.tag import MANIFEST, tag

    repo, config, out = resolve_repo(args, args.repo)
    paths = [relative_path(repo.root, f) for f in args.files] if args.files else None
    result = tag(repo, config, out, paths=paths, all_files=args.all_files)
    if args.json:
        print_json(result.to_json())
    elif result.changed:
        n = len(result.updated) + len(result.removed)
        sys.stderr.write(
            f"repoguard tag: updated {MANIFEST} ({n} file(s) changed sensitivity). Review it and "
            f"stage it: git add {MANIFEST}\n")
        for p, secrets in sorted(result.updated.items()):
            ties = ", ".join(f"{s} ({'/'.join(a)})" for s, a in sorted(secrets.items()))
            sys.stderr.write(f"  {p}: {ties}\n")
        for p in result.removed:
            sys.stderr.write(f"  {p}: no longer listed\n")
    return 1 if result.changed else 0
