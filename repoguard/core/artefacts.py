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
import errno
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


# What a full disk (or quota) looks like: errno, or the text that libraries writing natively put in
# their own exceptions (safetensors: "IoError(Os { code: 28, kind: StorageFull, … })").
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXT = ("no space left on device", "disk quota exceeded", "storagefull", "os error 28")


def disk_full(exc: BaseException) -> bool:
    """True when `exc` (or an exception it was raised from) says the disk or quota is full."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        if any(t in str(exc).lower() for t in _FULL_TEXT):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def full_error(path: str | os.PathLike, exc: BaseException) -> OSError:
    """The one error a full disk becomes: OSError(ENOSPC) naming the file being written (the CLI
    prints it as one line with its own exit code, `errors.EXIT_IOERR`)."""
    code = exc.errno if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS else errno.ENOSPC
    return OSError(code, "no space left on device" if code == errno.ENOSPC else "disk quota exceeded", str(path))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory and `os.replace`.
    Raises OSError naming `path` (`full_error`) when the disk is full; the temporary is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if disk_full(exc):
            raise full_error(path, exc) from exc
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` as UTF-8 to `path` atomically (`atomic_write_bytes`: a temporary file renamed into
    place). Raises the full-disk error (exit 74) when the disk is full; other OSErrors propagate."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """JSON with sorted keys and a trailing newline, written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces `path` whole, on error it is removed.

    Use for artefacts of several files that must stay consistent with each other. A full disk
    becomes OSError(ENOSPC) naming the file that was being written (the newest in the temporary
    directory, under its final name), whichever library wrote it; `path` is left as it was.
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
    except BaseException as exc:
        where = _being_written(tmp, path, exc) if disk_full(exc) else None
        shutil.rmtree(tmp, ignore_errors=True)
        if where is not None:
            raise full_error(where, exc) from exc
        raise


def _being_written(tmp: Path, path: Path, exc: BaseException) -> Path:
    """The final name of the file a failed write in `tmp` was writing: the one the error names,
    else the newest file there, else `path` itself."""
    named = getattr(exc, "filename", None)
    if named:
        with contextlib.suppress(ValueError):
            return path / Path(named).relative_to(tmp)
        return Path(named)
    files = [f for f in tmp.rglob("*") if f.is_file()]
    if not files:
        return path
    return path / max(files, key=lambda f: f.stat().st_mtime_ns).relative_to(tmp)


def read_json(path: str | os.PathLike, *, what: str) -> Any:
    """Load a JSON artefact; raise InputError naming the file when it is missing or corrupt."""
    from repoguard.core.errors import InputError

    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: no {what} here; run the stage that writes it first") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: corrupt {what} ({exc})") from None
