"""Progress display for long loops (rich), silent under -q or when stderr is not a terminal."""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

_console = Console(stderr=True)


def enabled() -> bool:
    """Progress is shown only when INFO logging is on and stderr is a terminal."""
    return logging.getLogger("repoguard").isEnabledFor(logging.INFO) and sys.stderr.isatty()


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator:
    """Context manager yielding `advance(n=1)`; a no-op function when progress is disabled."""
    if not enabled():
        yield lambda n=1: None
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=_console, transient=True) as p:
        task = p.add_task(description, total=total)
        yield lambda n=1: p.advance(task, n)
