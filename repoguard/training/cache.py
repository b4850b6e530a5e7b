"""Where repoguard keeps models it builds or fetches (the embedded base, fetched bases, their
downloads): one directory per user, shared by every repository and run."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`$REPOGUARD_CACHE_DIR`, else `$XDG_CACHE_HOME/repoguard`, else `~/.cache/repoguard`."""
    if os.environ.get("REPOGUARD_CACHE_DIR"):
        return Path(os.environ["REPOGUARD_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "repoguard"
