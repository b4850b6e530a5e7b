"""`repoguard scan`: find credentials in a working tree, a plain directory, given files, the
staged change or the history. Exit 1 on new (non-baselined) findings, 0 otherwise, 2 on bad input."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

NAME = "scan"
HELP = "find hard-coded credentials (working tree, --staged, --history, files); exit 1 on new findings"

log = logging.getLogger("repoguard")


def register(parser) -> None:
    parser.add_argument("targets", nargs="*", metavar="PATH",
                        help="a directory to scan (default: .), or files to scan (as pre-commit passes them)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--history", action="store_true",
                      help="scan every commit's added lines; report the introducing commit")
    mode.add_argument("--staged", action="store_true", help="scan the staged change (pre-commit)")
    parser.add_argument("--since", metavar="REV", help="with --history (implied): only commits after REV")
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
    parser.add_argument("--update-baseline", action="store_true",
                        help="write all current findings to the baseline file and exit 0")
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: all cores)")
    parser.add_argument("--max-file-bytes", type=int, default=None, metavar="N",
                        help="scan at most N bytes of each file (default: config scan.max_file_bytes)")


def run(args) -> int:
    from repoguard.artefacts import atomic_write_json, atomic_write_text
    from repoguard.commands._common import resolve_repo
    from repoguard.credentials import report
    from repoguard.credentials.baseline import apply_baseline, load_baseline, write_baseline
    from repoguard.credentials.keys import key_id, repo_key
    from repoguard.credentials.rules import load_rules
    from repoguard.credentials.scan import Scanner, walk_plain
    from repoguard.errors import InputError
    from repoguard.gitrepo import PlainDir

    fmt = "json" if args.json else (args.format or "text")
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs: must be at least 1")
    targets = args.targets or ["."]
    dirs = [t for t in targets if Path(t).is_dir()]
    explicit = not (len(targets) == 1 and dirs)
    if explicit:
        missing = [t for t in targets if not Path(t).is_file() and not Path(t).is_symlink()]
        if missing:
            raise InputError(f"{missing[0]}: no such file (give one directory or a list of files)")
    if args.since and args.staged:
        raise InputError("--since: a history option; it cannot be combined with --staged")
    if args.since:
        args.history = True
    if (args.history or args.staged) and (explicit or args.no_git):
        raise InputError("--history/--staged scan a git repository: give at most one directory, without --no-git")

    base = "." if explicit else targets[0]
    if args.no_git:
        repo = PlainDir(base)
        from repoguard.commands._common import resolve_config, resolve_out
        config, out_dir = resolve_config(args, repo.root), resolve_out(args, repo.root)
    else:
        repo, config, out_dir = resolve_repo(args, base, allow_plain=explicit)
    sc = config.scan
    # Rule files named in the config are relative to the repository root; on the CLI, to the cwd.
    rule_files = list(args.rules) or config.scan_rule_files(repo.root)
    use_default = sc.use_default_rules if not args.rules else False
    ruleset = load_rules(rule_files=rule_files, use_default=use_default or not rule_files)
    max_bytes = args.max_file_bytes or sc.max_file_bytes
    if max_bytes <= 0:
        raise InputError("--max-file-bytes: must be positive")
    key = repo_key(repo.root)       # keyed fingerprints: no published file is an offline verifier
    scanner = Scanner(ruleset, jobs=args.jobs, max_file_bytes=max_bytes, exclude=_excluder(sc.exclude), key=key)
    root = str(repo.root)

    scanned_paths: set[str] | None = None
    if args.staged:
        result = scanner.scan_staged(repo)
        scanned_paths = {f.path for f in result.findings}
    elif args.history:
        result = scanner.scan_history(repo, since=args.since, all_refs=args.all_refs)
    else:
        if explicit:
            rels = []
            for t in targets:
                full = os.path.abspath(t)
                real_parent = os.path.realpath(os.path.dirname(full))
                rel = os.path.relpath(os.path.join(real_parent, os.path.basename(full)), root)
                if rel.startswith(".."):
                    raise InputError(f"{t}: outside the repository {root}")
                rels.append(Path(rel).as_posix())
            strip = ""
            scanned_paths = set(rels)
        else:
            sub = os.path.relpath(os.path.realpath(base), root)
            strip = "" if sub == "." else Path(sub).as_posix() + "/"
            listing = walk_plain(root) if args.no_git else [f.path for f in repo.tracked_files()]
            rels = [p for p in listing if p.startswith(strip)]
        result = scanner.scan_files(root, rels, strip=strip)

    findings, stats = result.findings, result.stats
    if args.baseline or sc.baseline:
        bpath = Path(args.baseline or os.path.join(root, sc.baseline))
        if args.update_baseline:
            n = write_baseline(bpath, findings, key_id=key_id(key))
            if not args.quiet:
                sys.stderr.write(f"repoguard: wrote {n} baseline entries to {bpath}\n")
            return 0
        br = apply_baseline(findings, load_baseline(bpath, key_id=key_id(key)), scanned_paths=scanned_paths)
        stats.update(baselined=len(br.suppressed), stale_baseline=br.stale)
        findings = br.new
    elif args.update_baseline:
        raise InputError("--update-baseline needs --baseline FILE (or scan.baseline in the config)")
    stats["findings"] = len(findings)

    text = {"text": lambda: report.to_text(findings, stats),
            "json": lambda: report.to_json(findings, stats),
            "sarif": lambda: report.to_sarif(findings, stats, ruleset)}[fmt]()
    if args.output:
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
    if not (explicit or args.staged or args.no_git):
        try:  # the artefact other stages read (redacted findings only)
            atomic_write_json(out_dir / "scan" / "findings.json",
                              {"findings": [f.to_json() for f in result.findings], "stats": stats})
        except OSError as exc:
            log.warning("repoguard: could not write %s (%s)", out_dir / "scan", exc.strerror)
    if not args.quiet:
        for e in stats.get("stale_baseline", []):
            sys.stderr.write(f"repoguard: stale baseline entry {e.get('rule_id')} in {e.get('path')}\n")
        what = f"{stats.get('commits', 0)} commits" if args.history else f"{stats.get('files', 0)} files"
        sys.stderr.write(f"repoguard: {len(findings)} new finding(s) in {what}, "
                         f"{stats.get('bytes', 0) / 1e6:.1f} MB in {stats['seconds']:.2f} s "
                         f"({stats['engine']}, {stats['jobs']} jobs)\n")
    return 1 if findings else 0


def _excluder(patterns):
    if not patterns:
        return lambda p: False
    import pathspec
    return pathspec.GitIgnoreSpec.from_lines(patterns).match_file
