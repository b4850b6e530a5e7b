"""Helpers every subcommand shares: resolve the repository, its config and the output directory."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from repoguard.core.config import Config, default_config_path, load_config
from repoguard.source.gitrepo import GitRepo, PlainDir, open_repo

DEFAULT_OUT = ".repoguard"


def common_options(*, suppress: bool = False):
    """Global options (`--config`, `--out`, `-v`, `-q`), accepted before the subcommand, after it
    and after a nested action (`config validate --config F`). The copies after the subcommand use
    SUPPRESS defaults so that `repoguard -v scan` keeps the -v given before it."""
    import argparse

    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config", metavar="FILE", default=d(None),
        help="config file (default: repoguard.toml at the scanned repo's root)",
    )
    common.add_argument(
        "--out", metavar="DIR", default=d(None),
        help="output directory for artefacts (default: .repoguard/ in the scanned repo)",
    )
    common.add_argument("-v", "--verbose", action="count", default=d(0),
                        help="more output; tracebacks on error")
    common.add_argument("-q", "--quiet", action="store_true", default=d(False),
                        help="only errors and results")
    return common


def add_path_argument(parser, *, help: str = "repository to work on (default: current directory)") -> None:
    """Add the optional positional PATH (default ".") to `parser`; `help` replaces its help text."""
    parser.add_argument("path", nargs="?", default=".", metavar="PATH", help=help)


def add_json_flag(parser) -> None:
    """Add `--json` (machine-readable JSON on stdout) to `parser`."""
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def resolve_config(args, root: Path) -> Config:
    """`--config FILE` (must exist) or `repoguard.toml` at `root` (optional: defaults if absent)."""
    if getattr(args, "config", None):
        return load_config(args.config, required=True)
    return load_config(default_config_path(root), required=False)


def resolve_out(args, root: Path) -> Path:
    """The output directory: `--out DIR` resolved to an absolute path, else `root/.repoguard`."""
    out = getattr(args, "out", None)
    return Path(out).resolve() if out else root / DEFAULT_OUT


def resolve_repo(args, path: str | None = None, *, allow_plain: bool = False
                 ) -> tuple[GitRepo | PlainDir, Config, Path]:
    """Open the repository at `path` (default `args.path` or "."), load its config and output dir.

    Raises InputError (exit 2) for a missing/broken repository or an invalid config."""
    target = path if path is not None else getattr(args, "path", None) or "."
    repo = open_repo(target, allow_plain=allow_plain)
    return repo, resolve_config(args, repo.root), resolve_out(args, repo.root)


def make_console(*, stderr: bool = False, **kw):
    """A rich Console for command output. Outside a terminal (piped, redirected, CI logs) lines are
    never cut or wrapped: the width is unbounded and text soft-wraps, so a path or a secret id is
    printed whole (rich's default there is 80 columns, with `…` in table cells)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if not stream.isatty():
        kw.setdefault("width", 100_000)
        kw.setdefault("soft_wrap", True)
    return Console(stderr=stderr, **kw)


def print_json(obj: Any) -> None:
    """Write `obj` to stdout as indented JSON with sorted keys and a final newline; values JSON cannot
    hold (paths, dates) are written as their `str`."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def refusal(exc) -> dict:
    """The `--json` object of a command that did not happen or stopped (cron and CI parse stdout:
    never print nothing, issue 28 item 12): "status" is "locked" (exit 75:
    another run, plan or train holds OUT/run.lock; try again later), "refused" (exit 1: budget or
    findings policy) or "failed"; "error" is the message the stderr line gives."""
    from repoguard.core.errors import PolicyError
    from repoguard.pipeline.scheduled import LockedError

    status = "locked" if isinstance(exc, LockedError) else "refused" if isinstance(exc, PolicyError) else "failed"
    obj = {"status": status, "exit_code": exc.exit_code, "error": str(exc)}
    if isinstance(exc, LockedError):
        obj.update(lock=str(exc.lock) if exc.lock else None, holder_pid=exc.holder_pid, retry=True)
    return obj
