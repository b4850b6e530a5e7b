"""What `repoguard run`'s stages share: the run's settings, the context every stage function
sees, the content digests a stage's inputs reduce to, and `OUT/run_state.json` (format in
`runner`)."""
from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from repoguard import __version__
from repoguard.core.artefacts import FORMAT_VERSION, atomic_write_json
from repoguard.core.config import Config
from repoguard.core.errors import PolicyError
from repoguard.planning.batch_rule import choose_batch

STATE_FILE = "run_state.json"
AUDIT_STEPS = 20


@dataclass(frozen=True)
class RunSettings:
    """What `repoguard run` adds to the config; None keeps the config's (or run's) default."""

    batch_size: float | None = None
    steps: int | None = None
    clip_norm: float | None = None
    c: float | None = None
    sweep: bool = False
    cap: str | None = None
    accountant: str | None = None
    adjacency: str | None = None
    model: str | None = None
    max_length: int | None = None
    lora_r: int | None = None
    lr: float | None = None
    micro_batch_size: int | None = None
    seed: int | None = None
    device: str = "auto"
    no_dp: bool = False
    insecure_reproducible: bool = False  # tests only: the private run's batches and noise from `seed`
    keep_checkpoint: bool = False
    undetected: str | None = None       # --undetected: the floor for this run (None = [defaults])
    budget_fraction: float = 1.0        # share of each secret's remaining headroom this run may spend
    audit: bool = False
    audit_steps: int | None = None
    from_stage: str | None = None
    fail_on_findings: bool = False
    show_progress: bool = True
    ledger_path: Path | None = None      # default OUT/ledger.jsonl; scheduled runs share one
    phases: int | None = None            # two-phase fine-tuning (`training.phases`): [training] overrides
    phase1: str | None = None
    phase1_steps: int | None = None
    phase1_lr: float | None = None
    # The plan settings `repoguard run` resolved (`planning.make.plan_settings`, with their
    # sources); None: resolved from the fields above (a RunSettings built in code)
    plan_settings: object | None = field(default=None, compare=False)


# -- digests --------------------------------------------------------------------------------------
def digest(obj) -> str:
    """SHA-256 (hex) of the canonical JSON of `obj`."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
                          .encode("utf-8")).hexdigest()


def source_digest(repo) -> dict:
    """What the checkout holds: HEAD, a digest of the index's (path, blob SHA, mode) and the SHA-256
    of every tracked file modified in the working tree (scan and corpus read the working tree)."""
    files = repo.tracked_files()
    dirty = {}
    if getattr(repo, "is_git", False):
        out = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=no"], cwd=repo.root,
                             capture_output=True).stdout.decode("utf-8", "surrogateescape")
        for rec in out.split("\0"):
            if len(rec) > 3 and rec[1] in "MT":
                p = repo.root / rec[3:]
                dirty[rec[3:]] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
    return {"head": getattr(repo, "head", None), "index": digest([(f.path, f.blob_sha, f.mode) for f in files]),
            "dirty": dirty, "files": len(files)}


def ledger_heads(path: Path, own_runs: set[str]) -> tuple[str, str]:
    """(last entry hash, last hash of an entry not written by `own_runs`); genesis when empty.
    Raises PolicyError for a ledger that fails verification."""
    from repoguard.accounting.ledger import GENESIS, read_entries, verify

    check = verify(path)
    if not check["ok"]:
        raise PolicyError(f"{path}: ledger fails verification ({check['problems'][0]}); refusing to run")
    entries = read_entries(path)
    foreign = [e for e in entries if e.get("run_id") not in own_runs]
    return (entries[-1]["hash"] if entries else GENESIS), (foreign[-1]["hash"] if foreign else GENESIS)


# -- the context ----------------------------------------------------------------------------------
@dataclass
class Context:
    """What every stage function sees: the checkout, its config (and the config file's bytes, for
    the digests), the output directory, the run's settings, the state being recorded, the progress
    printer, and per stage the info dict it returned (or recorded, when skipped)."""

    repo: object
    config: Config
    config_bytes: bytes
    config_path: str | None
    out: Path
    settings: RunSettings
    state: dict
    say: Callable[[str], None]
    infos: dict = field(default_factory=dict)
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    @property
    def ledger(self) -> Path:
        """The ledger this run reads and appends to: the settings' `ledger_path` (a scheduled run's
        shared ledger), else OUT/ledger.jsonl."""
        return Path(self.settings.ledger_path) if self.settings.ledger_path else self.out / "ledger.jsonl"

    def recorded(self, stage: str) -> dict:
        """What run_state.json recorded for `stage` in an earlier run ({} when nothing)."""
        return self.state.get("stages", {}).get(stage, {})


def load_state(out: Path) -> dict:
    """OUT/run_state.json, or an empty state when absent, unreadable or of another format."""
    try:
        doc = json.loads((out / STATE_FILE).read_text())
        if doc.get("format_version") == FORMAT_VERSION:
            return doc
    except (OSError, ValueError, AttributeError):
        pass
    return {"format_version": FORMAT_VERSION, "stages": {}}


def save_state(ctx: Context) -> None:
    """Write OUT/run_state.json atomically (after every stage, so a failure keeps what finished)."""
    ctx.state["repoguard_version"] = __version__
    atomic_write_json(ctx.out / STATE_FILE, ctx.state)


def plan_defaults(config: Config, settings: RunSettings, n_public: int) -> tuple[float, int]:
    """(B, T) for `run`'s plan: `choose_batch` with the run's flags."""
    rec = choose_batch(config, n_public, batch_size=settings.batch_size, steps=settings.steps)
    return rec["batch_size"], rec["steps"]
