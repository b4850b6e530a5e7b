"""The `repoguard` subcommands: each parses its flags, calls one stage package (or `pipeline`),
and prints. One module per subcommand. Each module defines

    NAME: str                         # the subcommand, e.g. "scan"
    HELP: str                         # one line for `repoguard --help`
    def register(parser) -> None      # add its arguments to an argparse parser
    def run(args) -> int              # do the work, return the exit code

Modules keep heavy imports (torch, ortools, spacy) inside `run` so `repoguard --help` stays fast.
Adding a subcommand is adding a module here and its name to `COMMANDS`; modules not yet written
are skipped, so the CLI grows with the stages.
"""
from __future__ import annotations

# Order is the order shown in --help: the pipeline's order.
COMMANDS = (
    "config",
    "scan",
    "analyze",
    "explain",
    "tag",
    "suggest",
    "plan",
    "ledger",
    "model",
    "train",
    "synth",
    "audit",
    "compare",
    "report",
    "run",
)
