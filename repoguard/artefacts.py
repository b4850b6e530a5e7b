"""Atomic writes and the output-directory layout shared by every stage.

A stage never leaves a half-written artefact: files are written to a temporary sibling and
renamed into place (`os.replace` is atomic on POSIX), and multi-file artefacts are written into a
temporary directory that replaces the old one in one rename.

Layout of the output directory (default `.repoguard/` in the scanned repo; `--out`):

    corpus/examples.parquet      one row per example (see corpus.EXAMPLE_SCHEMA)
    corpus/excluded.json         files left out, with the reason
    corpus/redaction.json        the rule files the redactor uses for this corpus (credentials.redact)
    scan/findings.json           credential findings (redacted)
    incidence/                   secrets.json, incidence.npz (CSR), evidence.parquet, summary.json
    plan/                        plan.json, plan.npz (w, ρ per example)
    train/                       adapter/, train_log.jsonl, privacy_report.json, checkpoints/
    ledger.jsonl                 hash-chained privacy ledger (append-only)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

FORMAT_VERSION = 1


def user_cache_dir() -> Path:
    """The per-user cache of derived, rebuildable data (compiled rule databases, the stdlib
    lexicon): `$REPOGUARD_CACHE_DIR`, else `$REPOGUARD_CACHE` (the older name), else
    `$XDG_CACHE_HOME/repoguard`, else `~/.cache/repoguard`. Not created here."""
    env = os.environ.get("REPOGUARD_CACHE_DIR") or os.environ.get("REPOGUARD_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "repoguard"


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory and `os.replace`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """JSON with sorted keys and a trailing newline, written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces `path` whole, on error it is removed.

    Use for artefacts of several files that must stay consistent with each other.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_json(path: str | os.PathLike, *, what: str) -> Any:
    """Load a JSON artefact; raise InputError naming the file when it is missing or corrupt."""
    from repoguard.errors import InputError

    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: no {what} here; run the stage that writes it first") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: corrupt {what} ({exc})") from None
