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
     "clear": {"file": "clear-<h>.parquet", "sha256", "n"}  (optional; then "v" is 3) the ids
              of the examples a public phase trained on without noise (`clear_ids.py`)
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
with a note. Appends take an exclusive `fcntl` lock and are fsync'ed; readers (`verify`,
`read_entries`, `spending`) take a shared one, so a reader never sees the summary an append is
replacing vanish; a torn last line (crash mid-write) fails verification until repaired by hand.
Within one process the parsed, chain-checked entries are cached per state of the file (inode,
size, mtime, ctime and the head's bytes) and side-file digests per state of each file, so a
command that checks the ledger, reads its entries and its spending parses and hashes it once.

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
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from repoguard.accounting import ledger_state as ls
from repoguard.artefacts import atomic_write_json
from repoguard.errors import InputError, PolicyError

LEDGER_VERSION = 2
CLEAR_VERSION = 3        # an entry with a "clear" reference: older readers must refuse, not ignore it
READABLE_VERSIONS = (1, 2, 3)
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
    return entry_run(path, e).to_dict()


def entry_run(path: str | Path, e: dict) -> ls.Run:
    """One entry's spending as a columnar `ledger_state.Run` (inline format-1 records or the
    entry's spending file). Raises PolicyError if the file is missing or unreadable."""
    if "spending" not in e:
        return ls.Run.from_dict(e.get("secrets", {}))
    f = side_dir(path) / str(e["spending"]["file"])
    try:
        return ls.read_run_table(f)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise PolicyError(f"{f}: ledger spending file unreadable ({exc})") from None


# -- locking: appends hold an exclusive flock on the ledger file, readers a shared one ------------
_held = threading.local()      # ledger files this thread holds a lock on (flock is per open file)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+b")
    key = str(Path(path).resolve())
    held = _held.__dict__.setdefault("paths", set())
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        held.add(key)
        yield fh
    finally:
        held.discard(key)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


@contextlib.contextmanager
def _shared(path: Path) -> Iterator[None]:
    """Shared lock on the ledger while a reader reads it and its side files, so an append (which
    replaces the summary and deletes the superseded one) never runs in between. A no-op when the
    ledger does not exist or this thread already holds a lock on it."""
    key = str(Path(path).resolve())
    held = _held.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        held.add(key)
        yield
    finally:
        held.discard(key)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


# -- the chain, parsed and checked once per state of the file --------------------------------------
_CACHE: dict[str, tuple] = {}      # resolved path → (file key, entries, problems, notes, last_hash)
_CACHE_LOCK = threading.Lock()


def _file_key(path: Path) -> tuple | None:
    """(inode, size, mtime ns, ctime ns) of the ledger and the bytes of its head: any append,
    edit or replacement changes it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    try:
        head = _head_path(path).read_bytes()
    except FileNotFoundError:
        head = None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, head)


def _chain(path: Path) -> tuple[list[dict], list[str], list[str], str]:
    """(entries, chain problems, notes, last hash) of the ledger file: every line parsed, the
    chain, sequence, hashes, versions and head checked. Cached per process by `_file_key`, so a
    command that reads the ledger several times parses and hashes it once. Raises PolicyError for
    a torn or corrupt line."""
    key = _file_key(path)
    name = str(path.resolve()) if key is not None else str(path)
    with _CACHE_LOCK:
        hit = _CACHE.get(name)
    if hit is not None and key is not None and hit[0] == key:
        return hit[1], hit[2], hit[3], hit[4]
    entries = _parse(path)
    problems, notes, last = _check_chain(path, entries)
    if key is not None and _file_key(path) == key:       # unchanged while we read it
        with _CACHE_LOCK:
            _CACHE[name] = (key, entries, problems, notes, last)
    return entries, problems, notes, last


def read_entries(ledger_path: str | Path) -> list[dict]:
    """Parse every line; raises PolicyError naming the line on a torn or corrupt line. (The
    entries are shared with this process's cache: do not modify them.)"""
    path = Path(ledger_path)
    with _shared(path):
        return list(_chain(path)[0])


def _parse(path: Path) -> list[dict]:
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


_DIGESTS: dict[tuple, str] = {}    # (file, inode, size, mtime ns, ctime ns) → SHA-256


def _digest(f: Path) -> str:
    """SHA-256 of side file `f`, hashed once per process per state of the file (a rewrite, an
    edit or a swap changes its inode, size or times, and is hashed again)."""
    st = f.stat()
    key = (str(f), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    got = _DIGESTS.get(key)
    if got is None:
        got = ls.file_digest(f)
        if len(_DIGESTS) > 100_000:
            _DIGESTS.clear()
        _DIGESTS[key] = got
    return got


def _check_side(path: Path, ref, where: str, what: str) -> list[str]:
    """Problems with one side file named by an entry: missing, or its SHA-256 differs."""
    try:
        f = side_dir(path) / str(ref["file"])
        want = str(ref["sha256"])
    except (TypeError, KeyError):
        return [f"{where}: malformed {what} reference"]
    if "/" in str(ref["file"]) or not f.is_file():
        return [f"{where}: {what} file {f} missing (deleted or ledger truncated?)"]
    if _digest(f) != want:
        return [f"{where}: {what} file {f.name} does not match its digest (edited or swapped)"]
    return []


def verify(ledger_path: str | Path, *, side_files: bool = True, deep: bool = False) -> dict:
    """Check the whole chain. With `side_files` every spending file's digest is checked too (the
    last entry's and the newest summary's always are); with `deep` the newest summary is also
    recomputed from every entry's spending and compared (it must equal the full composition).
    Returns {"ok", "entries", "problems": [str], "notes": [str], "last_hash"}; never raises for
    tampering (the caller decides), only for unreadable files."""
    path = Path(ledger_path)
    with _shared(path):
        try:
            entries, chain_problems, notes, last = _chain(path)
        except PolicyError as exc:
            return {"ok": False, "entries": None, "problems": [str(exc)], "notes": [], "last_hash": None}
        problems = list(chain_problems)
        clear_seen: set[str] = set()
        for k, e in enumerate(entries):
            where = f"{path}:{k + 1}"
            if "spending" in e and (side_files or k == len(entries) - 1):
                problems += _check_side(path, e["spending"], where, "spending")
            if "summary" in e and k == len(entries) - 1:
                problems += _check_side(path, e["summary"], where, "summary")
            if "clear" in e and (side_files or k == len(entries) - 1) and repr(e["clear"]) not in clear_seen:
                clear_seen.add(repr(e["clear"]))       # a run's records share one file: hash it once
                problems += _check_clear(path, e["clear"], where, deep=deep)
        if deep and not problems and entries and "summary" in entries[-1]:
            problems += _deep_check(path, entries)
    return {"ok": not problems, "entries": len(entries), "problems": problems, "notes": list(notes),
            "last_hash": last}


def _check_chain(path: Path, entries: list[dict]) -> tuple[list[str], list[str], str]:
    """(problems, notes, last hash) of the chain itself: sequence, prev links, entry hashes,
    versions, and the head file."""
    problems: list[str] = []
    notes: list[str] = []
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
    return problems, notes, (prev if entries else GENESIS)


def _check_clear(path: Path, ref, where: str, *, deep: bool) -> list[str]:
    """Problems with a clear-phase ids file: missing or edited (digest), and with `deep` ids
    that no longer hash to the file's content-addressed name."""
    bad = _check_side(path, ref, where, "clear-phase ids")
    if bad or not deep:
        return bad
    from repoguard.accounting.clear_ids import check_content

    problem = check_content(side_dir(path) / str(ref["file"]))
    return [f"{where}: {problem}"] if problem else []


def _deep_check(path: Path, entries: list[dict]) -> list[str]:
    """The newest summary against the state recomputed from every entry's spending file."""
    want = _state_from_entries(path, entries)
    try:
        have = ls.read_state(side_dir(path) / entries[-1]["summary"]["file"])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return [f"{path}: summary of entry {len(entries)} unreadable ({exc})"]
    bad = sorted(set(want.ids) ^ set(have.ids))
    common = [s for s in want.ids if s in have.index]
    if common:
        wi = np.array([want.index[s] for s in common])
        hi = np.array([have.index[s] for s in common])
        al = sorted(set(want.alphas) | set(have.alphas), key=float)

        def ren(st, rows):
            out = np.full((rows.size, len(al)), np.inf)
            if st.alphas:
                out[:, [al.index(a) for a in st.alphas]] = st.ren[rows]
            return out

        rw, rh = ren(want, wi), ren(have, hi)
        fin = np.isfinite(rw)
        off = ((~np.isclose(want.kl[wi], have.kl[hi], rtol=1e-9, atol=1e-300))
               | np.any(fin != np.isfinite(rh), axis=1)
               | np.any(fin & ~np.isclose(np.where(fin, rw, 0), np.where(fin, rh, 0), rtol=1e-9, atol=0), axis=1)
               | (want.known[wi] != have.known[hi])
               | ~_same_parts(want, wi, have, hi))
        bad += [common[k] for k in np.nonzero(off)[0]]
    return [f"{path}: summary of entry {len(entries)} differs from the composition of the entries for "
            f"{len(bad)} secret(s), e.g. {sorted(bad)[:3]}"] if bad else []


def _same_parts(want: ls.State, wi: np.ndarray, have: ls.State, hi: np.ndarray) -> np.ndarray:
    """Per secret: the same carried parts (count, a, steps, n, mixing law) in both states (both
    are built by the same deterministic merge, so they must agree exactly)."""
    cw, ch = want.parts_per_secret()[wi], have.parts_per_secret()[hi]
    ok = cw == ch
    sw = np.zeros(len(want) + 1, np.int64)
    np.cumsum(want.parts_per_secret(), out=sw[1:])
    sh = np.zeros(len(have) + 1, np.int64)
    np.cumsum(have.parts_per_secret(), out=sh[1:])
    rows = np.nonzero(ok)[0]
    cnt = cw[rows]
    rel = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pw = np.repeat(sw[wi[rows]], cnt) + rel
    ph = np.repeat(sh[hi[rows]], cnt) + rel
    same = ((want.parts.a[pw] == have.parts.a[ph]) & (want.parts.steps[pw] == have.parts.steps[ph])
            & ls._same_mixture(want.parts, pw, have.parts, ph))
    nbad = np.bincount(np.repeat(np.arange(rows.size), cnt), weights=~same, minlength=rows.size)
    ok[rows] = nbad == 0
    return ok


def _state_from_entries(path: Path, entries: list[dict]) -> ls.State:
    """Carried-forward state after `entries` (completed runs only), computed from scratch."""
    last: dict[str, dict] = {}
    for e in entries:
        last.pop(e["run_id"], None)
        last[e["run_id"]] = e
    st = ls.State()
    for e in sorted((e for e in last.values() if e.get("status") == "completed"), key=lambda e: e["seq"]):
        st.add(entry_run(path, e))
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
    `clear_example_ids` (when non-empty) are the ids of the examples a public phase of this run
    trained on without noise [Shi et al. 2022 §3]: stored in a content-addressed side file
    (`clear_ids.py`) whose digest the entry carries, so a later analysis that ties one of them to
    a secret reports that secret as exposed (`exposures.py`). Raises InputError for bad arguments
    (including a clear id that is not a training example of `plan`, or a held-out one) and
    `phases` (when given): a two-phase run's phase-1 record and undetected-secret floor
    (`training.phases`), stored as given. Raises InputError for bad arguments (including a clear
    id that is not a training example of `plan`, or a held-out one) and PolicyError if the ledger
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
    if phases is not None:
        fields["phases"] = phases
    if len(clear_example_ids):
        from repoguard.accounting.clear_ids import check_plan_ids

        check_plan_ids(plan, clear_example_ids)
    return append_entry(path, fields, secrets, clear_example_ids=clear_example_ids)


def append_entry(ledger_path: str | Path, fields: dict, secrets, *,
                 clear_example_ids: Sequence[str] = ()) -> dict:
    """Append one format-2 entry: `fields` (run_id, status and the run's scalars) and `secrets`
    ({sid: {"kl", "renyi", "pair"}}, or a columnar `ledger_state.Run`) written to a spending file; the carried-forward summary is
    updated from the previous one (module docstring). Non-empty `clear_example_ids` add the
    "clear" reference (format 3, `record_run`). Returns the entry, with "secrets" added for the
    caller (not stored inline). Raises PolicyError if the ledger fails verification."""
    path = Path(ledger_path)
    if fields.get("status") not in STATUSES:
        raise InputError(f"ledger: status must be one of {', '.join(STATUSES)}, not {fields.get('status')!r}")
    run = secrets if isinstance(secrets, ls.Run) else ls.Run.from_dict(secrets)
    with _locked(path):
        check = verify(path, side_files=False)
        if not check["ok"]:
            raise PolicyError(f"{path}: refusing to append to a ledger that fails verification: {check['problems'][0]}")
        entries = read_entries(path)
        n = check["entries"]
        d = side_dir(path)
        d.mkdir(parents=True, exist_ok=True)
        clear_ref = None
        if len(clear_example_ids):               # first: a tampered ids file refuses before any write
            from repoguard.accounting.clear_ids import store

            known = {str(e["clear"].get("file")): str(e["clear"].get("sha256")) for e in entries
                     if isinstance(e.get("clear"), dict)}
            clear_ref = store(d, clear_example_ids, known)
        run_file = f"run-{n:08d}.parquet"
        entry = {"v": LEDGER_VERSION, "seq": n, "prev": check["last_hash"],
                 "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **fields,
                 "n_secrets": len(run.ids),
                 "spending": {"file": run_file, "sha256": ls.write_run(d / run_file, run)}}
        if clear_ref is not None:
            entry["v"], entry["clear"] = CLEAR_VERSION, clear_ref
        last = _last_status(entries)
        prev_summary = entries[-1].get("summary") if entries else None
        rid = str(fields["run_id"])
        if last.get(rid) == "completed" or (prev_summary is None and entries):
            # a completed run recorded again, or a format-1 ledger: compose from the entries
            state = _state_from_entries(path, entries + [entry])
        elif fields["status"] == "completed":
            state = ls.read_state(d / prev_summary["file"]) if prev_summary else ls.State()
            state.add(run)
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
    return _chain(path)[0]


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
    except `skip_run` (`spending_state`, converted to dicts). Raises PolicyError if the ledger
    fails verification."""
    st = spending_state(ledger_path, skip_run=skip_run)
    return st.spent(), st.pairs()


def spending_state(ledger_path: str | Path, *, skip_run: str | None = None) -> ls.State:
    """What every secret has spent over the last entry of every run id except `skip_run`, as a
    columnar `ledger_state.State`. Reads the newest carried-forward summary plus the open runs'
    spending files (module docstring), under a shared lock (an append cannot replace the summary
    meanwhile); a format-1 ledger, or a `skip_run` that already completed, is composed from the
    entries (pairs merged as the summary's are). Raises PolicyError if the ledger fails
    verification."""
    path = Path(ledger_path)
    with _shared(path):
        entries = _verified_entries(path)
        if not entries:
            return ls.State()
        last = _last_status(entries)
        summary = entries[-1].get("summary")
        if summary is None or last.get(skip_run) == "completed":
            state = ls.State()
            for e in sorted(_last_per_run(entries, skip_run), key=lambda e: e["seq"]):
                state.add(entry_run(path, e))
            return state
        try:
            state = ls.read_state(side_dir(path) / summary["file"])
        except (OSError, ValueError, KeyError, IndexError) as exc:
            raise PolicyError(f"{path}: ledger summary {summary['file']} unreadable ({exc})") from None
        lasts = {e["run_id"]: e for e in entries}
        for e in sorted(lasts.values(), key=lambda e: e["seq"]):
            if e.get("status") == "completed" or e["run_id"] == skip_run:
                continue
            if "spending" in e:
                bad = _check_side(path, e["spending"], f"{path}:{e['seq'] + 1}", "spending")
                if bad:
                    raise PolicyError(f"{bad[0]}; refusing to plan against it")
            state.add(entry_run(path, e))
        return state


def spent(ledger_path: str | Path) -> dict[str, tuple[float, dict[str, float]]]:
    """What each secret has spent: {secret_id: (kl nats, {α (str): Rényi nats})}, the sum over
    run ids of each run's last entry. An α absent from any counted entry of a secret is dropped
    (= +inf). Raises PolicyError if the ledger fails verification."""
    return spending(ledger_path)[0]


def spent_of(entries: list[dict], skip_run: str | None = None, *, path: str | Path | None = None
             ) -> dict[str, tuple[float, dict[str, float]]]:
    """`spent` composed from the raw entries (the last of each run id, leaving out `skip_run`);
    `path` (the ledger) is needed to read format-2 entries' spending files."""
    return raw_state(entries, skip_run, path=path).spent()


def spent_pairs(ledger_path: str | Path) -> dict[str, list[dict] | None]:
    """Each secret's earlier runs as pair records ({"a", "steps", "m", "logw", "n"}); None for a
    secret some counted entry spent on without recording its pair. Raises PolicyError if the
    ledger fails verification."""
    return spending(ledger_path)[1]


def pairs_of(entries: list[dict], skip_run: str | None = None, *, path: str | Path | None = None
             ) -> dict[str, list[dict] | None]:
    """`spent_pairs` composed from the raw entries (every run's pair, unmerged), leaving out
    `skip_run`; `path` as in `spent_of`."""
    return raw_state(entries, skip_run, path=path).pairs()


def raw_state(entries: list[dict], skip_run: str | None = None, *, path: str | Path | None = None
              ) -> ls.State:
    """The full composition from the raw entries (the last of each run id, leaving out
    `skip_run`), pairs unmerged: the reference the carried-forward summary is checked against.
    `path` (the ledger) is needed to read format-2 entries' spending files (ValueError without)."""
    st = ls.State()
    for e in _last_per_run(entries, skip_run):
        if "spending" in e and path is None:
            raise ValueError("format-2 ledger entries need the ledger path to read their spending files")
        st.add(entry_run(path, e) if path is not None else ls.Run.from_dict(e.get("secrets", {})), merge=False)
    return st
