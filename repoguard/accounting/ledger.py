"""The privacy ledger: an append-only, hash-chained record of every training run and of the
divergence each secret spent in it.

KL and Rényi divergences add under composition, across steps and across runs [Hush §4], so the
ledger is the sum that later plans start from (DESIGN.md "Ledger"). Format (`OUT/ledger.jsonl`,
format version 2): one JSON object per line,

    {"v": 2, "seq": k, "prev": <hash of entry k−1 or 64 zeros>, "run_id", "time" (UTC ISO),
     "plan_digest", "sigma", "batch_size", "steps", "steps_completed", "status", "accountant",
     "adjacency", "n_secrets", "randomness" (optional: "os-entropy", or "insecure-reproducible"
     for a test run whose batches and noise derive from a seed and so carry no guarantee),
     "spending": {"file": "run-<k>.parquet", "sha256"},     per-secret spending of this entry
     "summary": {"file": "summary-<k>.parquet", "sha256"},  state carried forward (below)
     "hash": <sha256>}

Side files live in `ledger.jsonl.d/` beside the (symlink-resolved) ledger; their layout is in
`ledger_state.py`. Per secret an entry spends {"kl": nats, "renyi": {"α": nats}, "pair": {...} |
null}: "pair" is the run's dominating pair (`pld.pair_record`: a = s/σ, the steps completed, the
mixing law), so a later plan can compose privacy-loss distributions for the Neyman–Pearson bound
(`pld.py`); null when the secret could not be sampled.

Carried-forward state. `summary-<k>` holds, per secret, the divergences summed over every run
whose last entry up to k is "completed" and those runs' pairs merged (`ledger_state.State`). A
plan reads that one file plus the spending files of the few runs still open (last entry not
"completed"), not every earlier entry; only the newest summary is kept (older ones are
superseded checkpoints and are deleted after the append; their digests stay in the chain).

Format 1 (before side files): the per-secret records sit inline under "secrets" (older entries
may lack "pair"; the secret's earlier runs then count as unknown to the Neyman–Pearson bound).
Such entries are still read, verified and composed; the first format-2 append computes the
summary from them.

`hash` is the SHA-256 of the entry's canonical JSON (sorted keys, no spaces) without "hash";
`prev` chains it to the entry before, so an edit, a deletion or a reordering anywhere breaks the
chain, and the side files' digests are inside the hashed entry, so an edited, swapped or missing
side file is caught too. A sidecar `ledger.jsonl.head` (written atomically after each append)
holds the count and the last hash, which catches truncation of whole lines at the end; an append
whose head update was interrupted shows as one verified entry beyond the head and is accepted
with a note. Appends take an exclusive `fcntl` lock and are fsync'ed; a torn last line (crash
mid-write) fails verification until repaired by hand.

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
from typing import Any, Iterator, Sequence

from repoguard.accounting import ledger_state as ls
from repoguard.artefacts import atomic_write_json
from repoguard.errors import InputError, PolicyError

LEDGER_VERSION = 2
READABLE_VERSIONS = (1, 2)
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


def side_dir(path: str | Path) -> Path:
    """The side-file directory of ledger `path`: `<ledger>.d` beside the symlink-resolved file."""
    real = Path(path).resolve()
    return real.with_name(real.name + ".d")


def entry_secrets(path: str | Path, e: dict) -> dict:
    """One entry's per-secret records {sid: {"kl", "renyi", "pair"?}}: inline (format 1) or from
    its spending file (format 2). Raises PolicyError if the file is missing or unreadable."""
    if "spending" not in e:
        return e.get("secrets", {})
    f = side_dir(path) / str(e["spending"]["file"])
    try:
        return ls.read_run(f)
    except (OSError, ValueError, KeyError) as exc:
        raise PolicyError(f"{f}: ledger spending file unreadable ({exc})") from None


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


def _check_side(path: Path, ref, where: str, what: str) -> list[str]:
    """Problems with one side file named by an entry: missing, or its SHA-256 differs."""
    try:
        f = side_dir(path) / str(ref["file"])
        want = str(ref["sha256"])
    except (TypeError, KeyError):
        return [f"{where}: malformed {what} reference"]
    if "/" in str(ref["file"]) or not f.is_file():
        return [f"{where}: {what} file {f} missing (deleted or ledger truncated?)"]
    if ls.file_digest(f) != want:
        return [f"{where}: {what} file {f.name} does not match its digest (edited or swapped)"]
    return []


def verify(ledger_path: str | Path, *, side_files: bool = True, deep: bool = False) -> dict:
    """Check the whole chain. With `side_files` every spending file's digest is checked too (the
    last entry's and the newest summary's always are); with `deep` the newest summary is also
    recomputed from every entry's spending and compared (it must equal the full composition).
    Returns {"ok", "entries", "problems": [str], "notes": [str], "last_hash"}; never raises for
    tampering (the caller decides), only for unreadable files."""
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
        if e.get("v") not in READABLE_VERSIONS:
            problems.append(f"{where}: ledger format {e.get('v')!r} is not one this version reads "
                            f"({', '.join(map(str, READABLE_VERSIONS))}); upgrade repoguard")
        if "spending" in e and (side_files or k == len(entries) - 1):
            problems += _check_side(path, e["spending"], where, "spending")
        if "summary" in e and k == len(entries) - 1:
            problems += _check_side(path, e["summary"], where, "summary")
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
    if deep and not problems and entries and "summary" in entries[-1]:
        problems += _deep_check(path, entries)
    return {"ok": not problems, "entries": len(entries), "problems": problems, "notes": notes,
            "last_hash": prev if entries else GENESIS}


def _deep_check(path: Path, entries: list[dict]) -> list[str]:
    """The newest summary against the state recomputed from every entry's spending file."""
    want = _state_from_entries(path, entries)
    have = ls.read_state(side_dir(path) / entries[-1]["summary"]["file"])
    bad = [sid for sid in want.kl.keys() | have.kl.keys()
           if sid not in want.kl or sid not in have.kl
           or not math.isclose(want.kl[sid], have.kl[sid], rel_tol=1e-9, abs_tol=1e-300)
           or want.ren[sid].keys() != have.ren[sid].keys()
           or any(not math.isclose(want.ren[sid][a], have.ren[sid][a], rel_tol=1e-9) for a in want.ren[sid])
           or (want.pairs.get(sid, []) is None) != (have.pairs.get(sid, []) is None)]
    return [f"{path}: summary of entry {len(entries)} differs from the composition of the entries for "
            f"{len(bad)} secret(s), e.g. {sorted(bad)[:3]}"] if bad else []


def _state_from_entries(path: Path, entries: list[dict]) -> ls.State:
    """Carried-forward state after `entries` (completed runs only), computed from scratch."""
    last: dict[str, dict] = {}
    for e in entries:
        last.pop(e["run_id"], None)
        last[e["run_id"]] = e
    st = ls.State()
    for e in sorted((e for e in last.values() if e.get("status") == "completed"), key=lambda e: e["seq"]):
        st.add(entry_secrets(path, e))
    return st


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def record_run(ledger_path: str | Path, plan, *, run_id: str, steps_completed: int, status: str,
               randomness: str | None = None, clear_example_ids: Sequence[str] = (),
               phases: dict | None = None) -> dict:
    """Append one entry for `run_id` and return it. Spending scales with steps_completed /
    plan.steps (divergences add per step); Rényi orders that were +inf in the plan are left out
    (they then count as +inf). `randomness` (when given) records where the run's batches and noise
    came from ("os-entropy", or "insecure-reproducible": a test run with no guarantee).
    `clear_example_ids`: the examples a two-phase run's clear public phase trained on; `phases`:
    its phase-1 record and undetected-secret floor (`training.phases`), stored as given. Raises InputError for bad arguments and PolicyError if the ledger
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
    fields = {"run_id": str(run_id), "plan_digest": plan_digest(plan), "sigma": plan.sigma,
              "batch_size": plan.batch_size, "steps": plan.steps, "steps_completed": int(steps_completed),
              "status": status, "accountant": plan.accountant, "adjacency": plan.adjacency}
    if randomness is not None:
        fields["randomness"] = str(randomness)
    if clear_example_ids:
        fields["clear_phase"] = {"n_examples": len(clear_example_ids)}
    if phases is not None:
        fields["phases"] = phases
    return append_entry(path, fields, secrets)


def append_entry(ledger_path: str | Path, fields: dict, secrets: dict) -> dict:
    """Append one format-2 entry: `fields` (run_id, status and the run's scalars) and `secrets`
    ({sid: {"kl", "renyi", "pair"}}) written to a spending file; the carried-forward summary is
    updated from the previous one (module docstring). Returns the entry, with "secrets" added
    for the caller (not stored inline). Raises PolicyError if the ledger fails verification."""
    path = Path(ledger_path)
    if fields.get("status") not in STATUSES:
        raise InputError(f"ledger: status must be one of {', '.join(STATUSES)}, not {fields.get('status')!r}")
    with _locked(path):
        check = verify(path, side_files=False)
        if not check["ok"]:
            raise PolicyError(f"{path}: refusing to append to a ledger that fails verification: {check['problems'][0]}")
        entries = read_entries(path)
        n = check["entries"]
        d = side_dir(path)
        d.mkdir(parents=True, exist_ok=True)
        run_file = f"run-{n:08d}.parquet"
        entry = {"v": LEDGER_VERSION, "seq": n, "prev": check["last_hash"],
                 "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **fields,
                 "n_secrets": len(secrets),
                 "spending": {"file": run_file, "sha256": ls.write_run(d / run_file, secrets)}}
        last = _last_status(entries)
        prev_summary = entries[-1].get("summary") if entries else None
        rid = str(fields["run_id"])
        if last.get(rid) == "completed" or (prev_summary is None and entries):
            # a completed run recorded again, or a format-1 ledger: compose from the entries
            state = _state_from_entries(path, entries + [entry])
        elif fields["status"] == "completed":
            state = ls.read_state(d / prev_summary["file"]) if prev_summary else ls.State()
            state.add(secrets)
        else:
            state = None                      # an open run: the summary does not change
        if state is None and prev_summary is not None:
            entry["summary"] = dict(prev_summary)
        else:
            name = f"summary-{n:08d}.parquet"
            entry["summary"] = {"file": name, "sha256": ls.write_state(d / name, state or ls.State())}
        entry["hash"] = entry_hash(entry)
        line = canonical(entry) + b"\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        atomic_write_json(_head_path(path), {"count": n + 1, "last_hash": entry["hash"]})
        for f in d.glob("summary-*.parquet"):     # superseded checkpoints
            if f.name != entry["summary"]["file"]:
                f.unlink(missing_ok=True)
    return {**entry, "secrets": secrets}


def _last_status(entries: list[dict]) -> dict[str, str]:
    """{run_id: status of its last entry}."""
    return {e["run_id"]: e.get("status") for e in entries}


def _verified_entries(path: Path) -> list[dict]:
    check = verify(path, side_files=False)      # the chain, the last entry's and summary's files
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


def spending(ledger_path: str | Path, *, skip_run: str | None = None) -> tuple[dict, dict]:
    """`(spent, pairs)` — what each secret has spent ({sid: (kl nats, {α: Rényi nats})}) and its
    earlier runs' pair records (list, or None where unknown) — over the last entry of every run id
    except `skip_run`. Reads the newest carried-forward summary plus the open runs' spending files
    (module docstring); a format-1 ledger, or a `skip_run` that already completed, is composed
    from the entries. Raises PolicyError if the ledger fails verification."""
    path = Path(ledger_path)
    entries = _verified_entries(path)
    if not entries:
        return {}, {}
    last = _last_status(entries)
    summary = entries[-1].get("summary")
    if summary is None or last.get(skip_run) == "completed":
        kept = _last_per_run(entries, skip_run)
        return spent_of(kept, path=path), pairs_of(kept, path=path)
    state = ls.read_state(side_dir(path) / summary["file"])
    lasts = {e["run_id"]: e for e in entries}
    for e in sorted(lasts.values(), key=lambda e: e["seq"]):
        if e.get("status") == "completed" or e["run_id"] == skip_run:
            continue
        if "spending" in e:
            bad = _check_side(path, e["spending"], f"{path}:{e['seq'] + 1}", "spending")
            if bad:
                raise PolicyError(f"{bad[0]}; refusing to plan against it")
        state.add(entry_secrets(path, e))
    return state.spent(), dict(state.pairs)


def spent(ledger_path: str | Path) -> dict[str, tuple[float, dict[str, float]]]:
    """What each secret has spent: {secret_id: (kl nats, {α (str): Rényi nats})}, the sum over
    run ids of each run's last entry. An α absent from any counted entry of a secret is dropped
    (= +inf). Raises PolicyError if the ledger fails verification."""
    return spending(ledger_path)[0]


def spent_of(entries: list[dict], skip_run: str | None = None, *, path: str | Path | None = None
             ) -> dict[str, tuple[float, dict[str, float]]]:
    """`spent` composed from the raw entries (the last of each run id, leaving out `skip_run`);
    `path` (the ledger) is needed to read format-2 entries' spending files."""
    st = ls.State()
    for e in _last_per_run(entries, skip_run):
        st.add(_secrets_for(e, path), merge=False)
    return st.spent()


def spent_pairs(ledger_path: str | Path) -> dict[str, list[dict] | None]:
    """Each secret's earlier runs as pair records ({"a", "steps", "m", "logw", "n"}); None for a
    secret some counted entry spent on without recording its pair. Raises PolicyError if the
    ledger fails verification."""
    return spending(ledger_path)[1]


def pairs_of(entries: list[dict], skip_run: str | None = None, *, path: str | Path | None = None
             ) -> dict[str, list[dict] | None]:
    """`spent_pairs` composed from the raw entries (every run's pair, unmerged), leaving out
    `skip_run`; `path` as in `spent_of`."""
    st = ls.State()
    for e in _last_per_run(entries, skip_run):
        st.add(_secrets_for(e, path), merge=False)
    return dict(st.pairs)


def _secrets_for(e: dict, path) -> dict:
    if "spending" in e and path is None:
        raise ValueError("format-2 ledger entries need the ledger path to read their spending files")
    return entry_secrets(path, e) if path is not None else e.get("secrets", {})
