"""MkDocs hook: each command page shows the command's own `--help`, generated at build time.

A page writes `<!-- usage: plan -->` (or `<!-- usage: audit risk -->` for an action, `<!-- usage: -->`
for the top level) where the
usage block belongs; the hook puts `repoguard plan --help` there, from the same argparse parser
the command uses (`repoguard.cli.build_parser`), so a page can never list a flag the command does
not have. A marker naming no command stops the build. Width is fixed (100 columns) so the page
does not depend on the terminal that built it.
"""
from __future__ import annotations

import argparse
import os
import re

MARKER = re.compile(r"<!-- usage:\s*([a-z -]*?)\s*-->")   # "" = `repoguard --help`
WIDTH = "100"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def usage(command: str) -> str:
    """`repoguard COMMAND [ACTION] --help` as text. Raises KeyError for an unknown command."""
    from repoguard.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH          # argparse reads the width from $COLUMNS
    try:
        parser = build_parser()
        for word in command.split():
            choices = _subparsers(parser)
            if word not in choices:
                raise KeyError(f"repoguard {command}: no such command")
            parser = choices[word]
        return parser.format_help().rstrip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def commands() -> list[str]:
    """The top-level commands the CLI has (each must have a page under docs/commands/)."""
    from repoguard.cli import build_parser

    return sorted(_subparsers(build_parser()))


def on_page_markdown(markdown: str, page, config, files) -> str:  # MkDocs hook
    """Replace every usage marker with a fenced block of that command's help."""
    return MARKER.sub(lambda m: f"```text\n{usage(m.group(1))}\n```", markdown)
