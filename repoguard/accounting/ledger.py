"""The privacy ledger: an append-only, hash-chained record of every training run and of the
divergence each secret spent in it.

KL and Rényi divergences add under composition, across steps and across runs [Hush §4], so the
ledger is the sum that later plans start from (DESIGN.md "Ledger"). Format (`OUT/ledger.jsonl`,
format version 1): one JSON object per line,

    {"v": 1, "seq": k, "prev": <hash of entry k−1 or 64 zeros>, "run_id", "time" (UTC ISO),
     "plan_digest", "sigma", "batch_size", "steps", "steps_completed", "status", "accountant",
     "adjacency", "secrets": {id: {"kl": nats, "renyi": {"α": nats}, "pair": {...} | null}},
     "randomness" (optional: "os-entropy", or "insecure-reproducible" for a test run whose
     batches and noise derive from a seed and so carry no guarantee), "hash": <sha256>}

"pair" is the run's dominating pair of that secret (`pld.pair_record`: a = s/σ, the steps
completed, the mixing law), so that a later plan can compose the privacy-loss distributions of
all runs for the Neyman–Pearson bound (`pld.py`); null when the secret could not be sampled.
Entries written before pairs were recorded lack the key; the secret's earlier runs then count
as unknown to that bound, and only the divergences are used.

`hash` is the SHA-256 of the entry's canonical JSON (sorted keys, no spaces) without "hash";
`prev` chains it to the entry before, so an edit, a deletion or a reordering anywhere breaks the
chain. A sidecar `ledger.jsonl.head` (written atomically after each append) holds the count and
the last hash, which catches truncation of whole lines at the end; an append whose head update
was interrupted shows as one verified entry beyond the head and is accepted with a note. Appends
take an exclusive `fcntl` lock and are fsync'ed; a torn last line (crash mid-write) fails
verification until repaired by hand.

Spending: a run may be recorded several times (started, checkpoints, completed); the *last*
entry of each run id counts. Rényi orders missing from an entry count as +inf (unknown).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from repoguard.artefacts import atomic_write_json
from repoguard.errors import InputError, PolicyError

LEDGER_VERSION = 1
GENESIS = "0" * 64
STATUSES = ("started", "running", "completed", "interrupted", "failed")


def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no insignificant spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def entry_hash(entry: dict) -> str:
    """SHA-256 (hex) of the entry's canonical JSON without its "hash" field."""
    return hashlib.sha256(canonical({k: v for k, v in entry.items() if k != "hash"})).hexdigest()


def plan_digest(plan) -> str:
    """SHA-256 of the plan's scalars, weights and per-secret promises: ties a run to its plan."""
    h = hashlib.sha256()
    h.update(canonical({"sigma": plan.sigma, "batch_size": plan.batch_size, "steps": plan.steps,
                        "clip_norm": plan.clip_norm, "c": plan.c, "accountant": plan.accountant,
                        "adjacency": plan.adjacency,
                        "secrets": [[s.id, s.kl_spent] for s in plan.secrets]}))
    h.update(plan.rho.astype("<f8").tobytes())
    return h.hexdigest()


def _head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+b")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield fh
    finally:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


def read_entries(ledger_path: str | Path) -> list[dict]:
    """Parse every line; raises PolicyError naming the line on a torn or corrupt line."""
    path = Path(ledger_path)
    if not path.exists():
        return []
    out = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        raise PolicyError(f"{path}:{len(lines)}: torn last line (no newline): an append was interrupted")
    for n, line in enumerate(lines, 1):
        try:
            e = json.loads(line)
            if not isinstance(e, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{path}:{n}: corrupt ledger line ({exc})") from None
        out.append(e)
    return out


def verify(ledger_path: str | Path) -> dict:
    """Check the whole chain. Returns {"ok", "entries", "problems": [str], "notes": [str],
    "last_hash"}; never raises for tampering (the caller decides), only for unreadable files."""
    path = Path(ledger_path)
    problems: list[str] = []
    notes: list[str] = []
    try:
        entries = read_entries(path)
    except PolicyError as exc:
        return {"ok": False, "entries": None, "problems": [str(exc)], "notes": [], "last_hash": None}
    prev = GENESIS
    for k, e in enumerate(entries):
        where = f"{path}:{k + 1}"
        if e.get("seq") != k:
            problems.append(f"{where}: sequence number {e.get('seq')!r}, expected {k} (reordered or deleted)")
        if e.get("prev") != prev:
            problems.append(f"{where}: chain broken (prev hash does not match entry {k})")
        if e.get("hash") != entry_hash(e):
            problems.append(f"{where}: entry hash mismatch (edited)")
        prev = e.get("hash", "")
    head = _head_path(path)
    if head.exists():
        try:
            h = json.loads(head.read_text())
            count, last = int(h["count"]), str(h["last_hash"])
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{head}: corrupt head ({exc})")
        else:
            if count > len(entries):
                problems.append(f"{path}: truncated: head says {count} entries, file has {len(entries)}")
            elif count > 0 and entries[count - 1].get("hash") != last:
                problems.append(f"{path}: entry {count} does not match the head's hash (rewritten)")
            elif count == 0 and last != GENESIS:
                problems.append(f"{head}: head of an empty ledger must be the genesis hash")
            elif count < len(entries):
                notes.append(f"{len(entries) - count} entry(ies) beyond the head (interrupted head update)")
    elif entries:
        problems.append(f"{head}: missing head file (ledger truncated or replaced?)")
    return {"ok": not problems, "entries": len(entries), "problems": problems, "notes": notes,
            "last_hash": prev if entries else GENESIS}


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def record_run(ledger_path: str | Path, plan, *, run_id: str, steps_completed: int, status: str,
               randomness: str | None = None) -> dict:
    """Append one entry for `run_id` and return it. Spending scales with steps_completed /
    plan.steps (divergences add per step); Rényi orders that were +inf in the plan are left out
    (they then count as +inf). `randomness` (when given) records where the run's batches and noise
    came from ("os-entropy", or "insecure-reproducible": a test run with no guarantee). Raises InputError for bad arguments and PolicyError if the ledger
    fails verification (a tampered ledger is never extended)."""
    if status not in STATUSES:
        raise InputError(f"ledger: status must be one of {', '.join(STATUSES)}, not {status!r}")
    if not 0 <= steps_completed <= plan.steps:
        raise InputError(f"ledger: steps_completed {steps_completed} outside 0..{plan.steps}")
    path = Path(ledger_path)
    frac = steps_completed / plan.steps
    secrets = {}
    for s in plan.secrets:
        pair = dict(getattr(s, "pair", None) or {}) or None
        if pair is not None:
            pair["steps"] = int(steps_completed)
        secrets[s.id] = {"kl": s.kl_spent * frac,
                         "renyi": {a: v * frac for a, v in s.renyi_spent.items() if _finite(v)},
                         "pair": pair if steps_completed > 0 else None}
    with _locked(path):
        check = verify(path)
        if not check["ok"]:
            raise PolicyError(f"{path}: refusing to append to a ledger that fails verification: {check['problems'][0]}")
        n = check["entries"]
        entry = {
            "v": LEDGER_VERSION, "seq": n, "prev": check["last_hash"], "run_id": str(run_id),
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "plan_digest": plan_digest(plan), "sigma": plan.sigma, "batch_size": plan.batch_size,
            "steps": plan.steps, "steps_completed": int(steps_completed), "status": status,
            "accountant": plan.accountant, "adjacency": plan.adjacency, "secrets": secrets,
        }
        if randomness is not None:
            entry["randomness"] = str(randomness)
        entry["hash"] = entry_hash(entry)
        line = canonical(entry) + b"\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        atomic_write_json(_head_path(path), {"count": n + 1, "last_hash": entry["hash"]})
    return entry


def _verified_entries(path: Path) -> list[dict]:
    check = verify(path)
    if not check["ok"]:
        raise PolicyError(f"{path}: ledger fails verification ({check['problems'][0]}); "
                          "refusing to plan against it")
    return read_entries(path)


def _last_per_run(entries: list[dict], skip_run: str | None) -> list[dict]:
    """The last entry of every run id (a run is recorded at start, checkpoints and end)."""
    last: dict[str, dict] = {}
    for e in entries:
        if e.get("run_id") != skip_run:
            last[e["run_id"]] = e
    return list(last.values())


def spending(ledger_path: str | Path) -> tuple[dict, dict]:
    """`(spent_of(entries), pairs_of(entries))` from one verified read of the ledger. Raises
    PolicyError if the ledger fails verification."""
    entries = _verified_entries(Path(ledger_path))
    return spent_of(entries), pairs_of(entries)


def spent(ledger_path: str | Path) -> dict[str, tuple[float, dict[str, float]]]:
    """What each secret has spent: {secret_id: (kl nats, {α (str): Rényi nats})}, the sum over
    run ids of each run's last entry. An α absent from any counted entry of a secret is dropped
    (= +inf). Raises PolicyError if the ledger fails verification."""
    return spent_of(_verified_entries(Path(ledger_path)))


def spent_of(entries: list[dict], skip_run: str | None = None) -> dict[str, tuple[float, dict[str, float]]]:
    """`spent` over already-read entries, leaving out run id `skip_run`."""
    out: dict[str, tuple[float, dict[str, float] | None]] = {}
    for e in _last_per_run(entries, skip_run):
        for sid, d in e.get("secrets", {}).items():
            kl, ren = out.get(sid, (0.0, None))
            r = {str(a): float(v) for a, v in d.get("renyi", {}).items()}
            ren = r if ren is None else {a: ren[a] + r[a] for a in ren.keys() & r.keys()}
            out[sid] = (kl + float(d.get("kl", 0.0)), ren)
    return {k: (v[0], v[1] or {}) for k, v in out.items()}


def spent_pairs(ledger_path: str | Path) -> dict[str, list[dict] | None]:
    """Each secret's earlier runs as pair records ({"a", "steps", "m", "logw", "n"}), from the
    last entry of every run id; None for a secret some counted entry spent on without recording
    its pair. Raises PolicyError if the ledger fails verification."""
    return pairs_of(_verified_entries(Path(ledger_path)))


def pairs_of(entries: list[dict], skip_run: str | None = None) -> dict[str, list[dict] | None]:
    """`spent_pairs` over already-read entries, leaving out run id `skip_run`."""
    out: dict[str, list[dict] | None] = {}
    for e in _last_per_run(entries, skip_run):
        for sid, d in e.get("secrets", {}).items():
            have = out.get(sid, [])
            if "pair" not in d:
                out[sid] = None if float(d.get("kl", 0.0)) > 0 or have is None else have
                continue
            if have is not None and d["pair"] is not None:
                have = have + [d["pair"]]
            out[sid] = have
    return out
