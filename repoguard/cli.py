"""The `repoguard` command: parses arguments, calls one stage, maps errors to exit codes.

Thin by design (docs/design.md "Packages and layering"; pre-commit's `commands/`): every subcommand lives in
`repoguard/commands/<name>.py`; this module only wires them up.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
import warnings
from typing import Sequence

from repoguard import __version__
from repoguard.core.artefacts import disk_full
from repoguard.commands import COMMANDS
from repoguard.commands._common import common_options
from repoguard.core.errors import EXIT_INTERNAL, EXIT_IOERR, EXIT_USAGE, RepoguardError

log = logging.getLogger("repoguard")


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (argparse's own default is a usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"repoguard: error: {message} (see --help)\n")
        sys.exit(EXIT_USAGE)


def _load_commands() -> list:
    modules = []
    for name in COMMANDS:
        mod_name = f"repoguard.commands.{name.replace('-', '_')}"
        if importlib.util.find_spec(mod_name) is None:
            continue
        modules.append(importlib.import_module(mod_name))
    return modules


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (every subcommand that exists in this install)."""
    common = common_options()
    sub_common = common_options(suppress=True)
    parser = _Parser(
        prog="repoguard",
        description="Scan a monorepo for credentials and trade secrets, and fine-tune a code model "
        "on it with a per-secret bound on reconstruction (Hush weighted DP-SGD).",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"repoguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _load_commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP, parents=[sub_common])
        mod.register(p)
        p.set_defaults(_run=mod.run)
    return parser


LIBRARIES = ("torch", "torch._subclasses.fake_tensor", "transformers", "peft", "opacus", "accelerate",
             "matplotlib", "spacy", "tree_sitter_languages", "urllib3")


def _configure_logging(verbose: int, quiet: bool) -> None:
    """Our log lines at INFO (WARNING with -q, DEBUG with -vv); library log lines and Python
    warnings (FutureWarning/DeprecationWarning of transformers, torch, peft…) only with -vv,
    unless the user set their own `-W`/PYTHONWARNINGS filters, which are left alone."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    # Libraries log at INFO/WARNING too: torch's FakeTensor registers an atexit dump of its cache
    # stats that printed after "repoguard: interrupted", transformers announces deprecations.
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose > 1 else logging.ERROR)
    if sys.warnoptions:
        return
    if verbose > 1:
        warnings.simplefilter("default")
        return
    for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    # UserWarnings raised inside a library (Opacus hooks, torch) are the library's business.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(?!repoguard)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script. Returns the exit code (0 ok, 1 policy, 2 usage/input,
    70 internal error, 74 an output could not be written (disk full), 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _configure_logging(args.verbose, args.quiet)
    try:
        return int(args._run(args) or 0)
    except RepoguardError as exc:
        if getattr(args, "json", False):   # stdout is parsed: a JSON object says why
            from repoguard.commands._common import print_json, refusal

            print_json(refusal(exc))
            sys.stdout.flush()
        if args.verbose:
            raise
        sys.stderr.write(f"repoguard: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("repoguard: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a file we could not read or write: name it, one line
        if args.verbose:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        if disk_full(exc):
            sys.stderr.write(f"repoguard: error: {where}no space left on device (or quota exceeded); "
                             "nothing was half-written: free space and re-run\n")
            return EXIT_IOERR
        sys.stderr.write(f"repoguard: error: {where}{exc.strerror or exc}\n")
        return EXIT_USAGE
    except Exception as exc:  # a bug: still one line, the traceback behind -v
        if args.verbose:
            raise
        if disk_full(exc):      # a library's own error for a full disk, outside repoguard's writers
            sys.stderr.write("repoguard: error: no space left on device (or quota exceeded) while writing "
                             f"({type(exc).__name__}); free space and re-run\n")
            return EXIT_IOERR
        msg = " ".join(str(exc).split())[:300]
        sys.stderr.write(f"repoguard: internal error: {type(exc).__name__}: {msg} "
                         "(re-run with -v for the traceback, and please report it)\n")
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
