"""`repoguard run --scheduled`: the pipeline as cron or CI calls it, safely.

- **One at a time.** An exclusive, non-blocking `fcntl.flock` on `OUT/run.lock`; a second run
  while one holds it exits with `EXIT_LOCKED` (75, sysexits' EX_TEMPFAIL: "try again later") and
  writes nothing. The kernel drops the lock when the process dies, so a crash never wedges cron.
- **A new run directory** `OUT/runs/<UTC timestamp>-<6 hex>/` per run, holding every stage's
  artefacts; `OUT/runs/latest` is a symlink to the last run that finished, replaced atomically
  (symlink to a temporary name, then `os.replace`), so readers never see it missing or half-made.
- **One ledger.** Every run plans against and records into `OUT/ledger.jsonl` (the run
  directory's `ledger.jsonl` is a symlink to it, for the report): σ is calibrated so each secret's
  *cumulative* bound over all runs stays ≤ r_j [Hush Lemma 3.2; divergences add across runs]. A
  run that cannot stay within some secret's budget stops in the plan stage, before training, with
  a PolicyError naming the secrets (exit 1), and `latest` keeps pointing at the previous run.
- **Incremental analysis.** The analyzer cache `OUT/cache/` (per blob SHA) is shared by all runs,
  and the new run directory starts from the last run's scan and analysis artefacts and their
  recorded digests, so unchanged stages are skipped and changed files alone are re-parsed.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from repoguard.core.artefacts import atomic_write_json
from repoguard.core.errors import PolicyError, RepoguardError

EXIT_LOCKED = 75
LOCK_FILE = "run.lock"
CARRIED = ("scan", "corpus", "incidence")      # artefacts a new run starts from (analysis only)


class LockedError(RepoguardError):
    """Another scheduled run holds the lock. Exit code 75 (EX_TEMPFAIL). `lock`: the lock file;
    `holder_pid`: the process id the holder wrote into it (None when unreadable)."""

    exit_code = EXIT_LOCKED

    def __init__(self, message: str, *, lock: Path | None = None, holder_pid: int | None = None):
        super().__init__(message)
        self.lock, self.holder_pid = lock, holder_pid


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[Path]:
    """Hold `out/run.lock` exclusively for the block; raises LockedError at once if it is held.
    `run`, `plan` and `train` hold it: one command at a time spends privacy or writes the plan."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(out, 0o700)       # the output directory is owner-only (plan, adapters, ledger)
    except OSError:
        pass
    path = out / LOCK_FILE
    fh = open(path, "a+")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                fh.seek(0)
                pid = fh.read().strip()
                raise LockedError(f"{path}: another repoguard run, plan or train holds the lock; not starting "
                                  f"(exit {EXIT_LOCKED}: try again later)", lock=path,
                                  holder_pid=int(pid) if pid.isdigit() else None) from None
            raise
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield path
    finally:
        fh.close()       # closing drops the flock


def new_run_id(now: datetime | None = None) -> str:
    """A scheduled run's id: its UTC start time `YYYYMMDDTHHMMSSZ` (`now`, default the clock) and
    6 random hex digits, so two runs started in the same second get distinct directories."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def point_latest(runs: Path, run_id: str) -> Path:
    """Atomically make `runs/latest` a relative symlink to `runs/run_id`."""
    latest = runs / "latest"
    tmp = runs / f".latest.{os.getpid()}.{secrets.token_hex(2)}"
    os.symlink(run_id, tmp)
    os.replace(tmp, latest)
    return latest


def _prepare(out: Path, run_dir: Path) -> dict | None:
    """Link the shared ledger and cache into `run_dir` and copy the last run's analysis there;
    returns the state to start from (scan/analyze records only) or None."""
    from repoguard.pipeline.context import load_state

    (out / "cache").mkdir(exist_ok=True)
    for name in ("ledger.jsonl", "ledger.jsonl.head"):
        os.symlink(Path("..") / ".." / name, run_dir / name)
    os.symlink(Path("..") / ".." / "cache", run_dir / "cache")
    prev = out / "runs" / "latest"
    if not prev.is_dir():
        return None
    prev = prev.resolve()
    for name in CARRIED:
        if (prev / name).is_dir():
            shutil.copytree(prev / name, run_dir / name, symlinks=True)
    old = load_state(prev)
    stages = {k: v for k, v in old.get("stages", {}).items() if k in ("scan", "analyze")}
    return {"format_version": old["format_version"], "stages": stages, "previous_run": prev.name}


def run_scheduled(repo, config, *, config_path: str | None, out: Path, settings,
                  say: Callable[[str], None] = lambda s: None) -> dict:
    """One scheduled run under the lock; returns the pipeline summary plus "run_dir", "latest",
    "previous_run". Raises LockedError (75), PolicyError (1: budget, findings) or InputError (2)."""
    from dataclasses import replace

    from repoguard.pipeline.runner import run_pipeline

    out = Path(out)
    with run_lock(out):
        runs = out / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        run_id = new_run_id()
        run_dir = runs / run_id
        run_dir.mkdir()
        seed = _prepare(out, run_dir)
        prev = seed.get("previous_run") if seed else None
        say(f"scheduled run {run_id}" + (f" (after {prev})" if prev else " (first)") + f" → {run_dir}")
        try:
            summary = run_pipeline(repo, config, config_path=config_path, out=run_dir,
                                   settings=replace(settings, ledger_path=out / "ledger.jsonl"),
                                   say=say, seed_state=seed)
        except RepoguardError as exc:
            atomic_write_json(run_dir / "status.json", {"status": "refused" if isinstance(exc, PolicyError)
                                                        else "failed", "error": str(exc)})
            if isinstance(exc, PolicyError):
                raise PolicyError(f"scheduled run {run_id} stopped before training: {exc}") from None
            raise
        atomic_write_json(run_dir / "status.json", {"status": "completed"})
        latest = point_latest(runs, run_id)
    return {**summary, "run_dir": str(run_dir), "latest": str(latest), "previous_run": prev}
