"""One credential scan job: rules from the config (or `--rules`), the scanner over the tree, the
staged change or the history, the baseline, the report, and `OUT/scan/findings.json` (redacted) for
the stages after it. Called by the `scan` command and by `run`'s scan stage with the same options.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from repoguard.core.artefacts import atomic_write_json, atomic_write_text
from repoguard.core.errors import InputError
from repoguard.credentials import report
from repoguard.credentials.baseline import apply_baseline, load_baseline, write_baseline
from repoguard.credentials.keys import key_id, repo_key
from repoguard.credentials.rules import load_rules
from repoguard.credentials.scan import Scanner, walk_plain
from repoguard.source.corpus import OWN_DIR

log = logging.getLogger("repoguard")


def run_scan(args, repo, config, out_dir: Path, *, targets: list[str], explicit: bool, base: str) -> int:
    """Scan `repo` as `args` (the `scan` command's options: history, staged, since, all_refs, no_git,
    format/json, output, rules, baseline, update_baseline, jobs, max_file_bytes, quiet, confidence
    (absent: "high", low-confidence findings left out)) say.

    targets: the PATH arguments; explicit: they name files (pre-commit), not one directory; base:
    the directory scanned. Returns the exit status: 1 on new (non-baselined) findings, else 0.
    Raises InputError on bad options or a path outside the repository."""
    fmt = "json" if args.json else (args.format or "text")
    sc = config.scan
    # Rule files named in the config are relative to the repository root; on the CLI, to the cwd.
    rule_files = list(args.rules) or config.scan_rule_files(repo.root)
    use_default = sc.use_default_rules if not args.rules else False
    ruleset = load_rules(rule_files=rule_files, use_default=use_default or not rule_files)
    max_bytes = args.max_file_bytes or sc.max_file_bytes
    if max_bytes <= 0:
        raise InputError("--max-file-bytes: must be positive")
    key = repo_key(repo.root)       # keyed fingerprints: no published file is an offline verifier
    root = str(repo.root)
    bpath = Path(args.baseline or os.path.join(root, sc.baseline)) if (args.baseline or sc.baseline) else None
    scanner = Scanner(ruleset, jobs=args.jobs, max_file_bytes=max_bytes,
                      exclude=_excluder(sc.exclude, _inside(bpath, root)), key=key)

    scanned_paths: set[str] | None = None
    if args.staged:
        result = scanner.scan_staged(repo)
        scanned_paths = {f.path for f in result.findings}
    elif args.history:
        result = scanner.scan_history(repo, since=args.since, all_refs=args.all_refs,
                                      rev=getattr(args, "range", None) or "HEAD")
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
    if stats.get("truncated"):
        stats["max_file_bytes"] = max_bytes
    if getattr(args, "confidence", "high") != "low":  # low: kept for redaction, not reported
        findings = [f for f in findings if f.confidence != "low"]
        stats["low_confidence"] = len(result.findings) - len(findings)
    reported = findings
    if bpath is not None:
        if args.update_baseline:
            # A partial scan (files, --staged) updates the entries of what it scanned and keeps
            # the others: `scan --update-baseline a.py` must not forget every other file's entries.
            keep = {}
            if scanned_paths is not None and bpath.exists():
                keep = {fp: e for fp, e in load_baseline(bpath, key_id=key_id(key)).items()
                        if e.get("path") not in scanned_paths}
            n = write_baseline(bpath, findings, key_id=key_id(key), keep=keep.values())
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
                              {"findings": [f.to_json() for f in reported], "stats": stats})
        except OSError as exc:
            log.warning("repoguard: could not write %s (%s)", out_dir / "scan", exc.strerror)
    if not args.quiet:
        for e in stats.get("stale_baseline", []):
            sys.stderr.write(f"repoguard: stale baseline entry {e.get('rule_id')} in {e.get('path')}\n")
        what = f"{stats.get('commits', 0)} commits" if args.history else f"{stats.get('files', 0)} files"
        known = f" ({stats['baselined']} known, in the baseline)" if stats.get("baselined") else ""
        sys.stderr.write(f"repoguard: {len(findings)} new finding(s){known} in {what}, "
                         f"{stats.get('bytes', 0) / 1e6:.1f} MB in {stats['seconds']:.2f} s "
                         f"({stats['engine']}, {stats['jobs']} jobs)\n")
        if fmt != "text" or args.output:   # the text report carries them as `note:` lines
            for n in report.notes(stats):
                sys.stderr.write(f"repoguard: note: {n}\n")
    return 1 if findings else 0


def _inside(path: Path | None, root: str) -> str | None:
    """`path` relative to `root` (POSIX), or None when it lies outside or is None."""
    if path is None:
        return None
    rel = os.path.relpath(os.path.realpath(path), root)
    return None if rel.startswith("..") else Path(rel).as_posix()


def _excluder(patterns, baseline: str | None = None):
    """Config `scan.exclude` (gitignore patterns), plus always repoguard's own files: everything
    below a `.repoguard/` directory at any depth (the manifest's secret ids,
    `credential:password-assignment:HASH`, match the password rules; a committed
    `.repoguard/scan/findings.json` gave 51 "generic-hex-secret" findings on its own keyed
    fingerprints in moto), as `--no-git` walks skip them, and the baseline in use wherever it
    lies (its fingerprints sit next to rule names such as `stripe-access-token`: a keyword rule
    read one as a key, and committing the baseline was blocked by the hook it serves)."""
    def own(p: str) -> bool:
        return p.startswith(OWN_DIR + "/") or f"/{OWN_DIR}/" in p or p == baseline
    if not patterns:
        return own
    import pathspec
    match = pathspec.GitIgnoreSpec.from_lines(patterns).match_file
    return lambda p: own(p) or match(p)
