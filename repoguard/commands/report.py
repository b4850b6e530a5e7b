"""`repoguard report [PATH]`: OUT/report/report.html (self-contained) and OUT/report/report.json."""
from __future__ import annotations

from repoguard.commands._common import add_json_flag, add_path_argument, print_json

NAME = "report"
HELP = "write a self-contained HTML report (and report.json) of findings, plan, training and audits"


def register(parser) -> None:
    """Add `report`'s arguments to its subparser: PATH, `--json`."""
    add_path_argument(parser)
    add_json_flag(parser)


def run(args) -> int:
    """Write OUT/report/report.html and report.json from the artefacts in OUT; warnings that a run gave
    no privacy go to stderr first, even with `--json` or `-q`. Returns 0."""
    import logging
    import sys

    from repoguard.commands._common import resolve_repo
    from repoguard.report import build_report

    repo, _config, out = resolve_repo(args, allow_plain=True)
    result = build_report(out, repo_name=repo.root.name)
    from repoguard.accounting.published import insecure_lines

    for line in ([result["no_privacy"]] if result["no_privacy"] else []) + insecure_lines(result["insecure"]):
        sys.stderr.write(f"repoguard: {line}\n")     # first, on stderr, even with --json or -q
    if args.json:
        print_json(result)
    elif not args.quiet:
        logging.getLogger("repoguard").info("report (%d KiB) → %s", result["html_bytes"] // 1024, result["html"])
    return 0
