"""The privacy ledger: an append-only, hash-chained record of every training run and of the
divergence each secret spent in it.

KL and Rényi divergences add under composition, across steps and across runs [Hush §4], so the
ledger is the sum that later plans start from (docs/privacy.md "The ledger: composition across runs"). Format (`OUT/ledger.jsonl`,
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
The file, its locks and the per-process parse cache are in `ledger_io.py`; verification
in `ledger_verify.py`; this module records runs and reads what secrets have spent.

Spending: a run may be recorded several times (started, checkpoints, completed); the *last*
entry of each run id counts. Rényi orders missing from an entry count as +inf (unknown).
"""
from __future__ import annotations

import errno
import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from repoguard.accounting import ledger_state as ls
from repoguard.accounting.spending import Spent, SpendingEvent
from repoguard.accounting.ledger_io import (  # noqa: F401  (re-exported: the ledger's public API)
    CLEAR_VERSION, GENESIS, LEDGER_VERSION, READABLE_VERSIONS, STATUSES, canonical, check_side_file,
    clear_caches, entry_hash, entry_run, entry_secrets, exclusive_lock, head_path, read_chain,
    owner_only, read_entries, shared_lock, side_dir)
from repoguard.accounting.ledger_verify import state_from_entries, verify  # noqa: F401
from repoguard.core.artefacts import atomic_write_json, disk_full, full_error
from repoguard.core.errors import InputError, PolicyError


def plan_digest(plan) -> str:
    """SHA-256 of the plan's scalars, weights and per-secret promises: ties a run to its plan."""
    h = hashlib.sha256()
    h.update(canonical({"sigma": plan.sigma, "batch_size": plan.batch_size, "steps": plan.steps,
                        "clip_norm": plan.clip_norm, "c": plan.c, "accountant": plan.accountant,
                        "adjacency": plan.adjacency,
                        "secrets": [[s.id, s.kl_spent] for s in plan.secrets]}))
    h.update(plan.rho.astype("<f8").tobytes())
    return h.hexdigest()


def record_run(ledger_path: str | Path, plan, *, run_id: str, steps_completed: int, status: str,
               randomness: str | None = None, clear_example_ids: Sequence[str] = (),
               phases: dict | None = None, base_head: str | None = None) -> dict:
    """Append one entry for `run_id` and return it. Spending scales with steps_completed /
    plan.steps (divergences add per step); Rényi orders that were +inf in the plan are left out
    (they then count as +inf). `randomness` (when given) records where the run's batches and noise
    came from ("os-entropy", or "insecure-reproducible": a test run with no guarantee).
    `clear_example_ids` (when non-empty) are the ids of the examples a public phase of this run
    trained on without noise [Shi et al. 2022 §3]: stored in a content-addressed side file
    (`clear_ids.py`) whose digest the entry carries, so a later analysis that ties one of them to
    a secret reports that secret as exposed (`clear_exposures.py`). Raises InputError for bad arguments
    (including a clear id that is not a training example of `plan`, or a held-out one) and
    `phases` (when given): a two-phase run's phase-1 record and undetected-secret floor
    (`training.phases`), stored as given. A plan with an undetected-secret floor
    (`plan.extra["undetected_floor"]`) also spends on the floor's account (`undetected.py`), and
    the entry records "floor": {account, enabled (False = the opt-out), k, p, r, achieved_bound}.
    Raises InputError for bad arguments (including a clear
    id that is not a training example of `plan`, or a held-out one) and PolicyError if the ledger
    fails verification (a tampered ledger is never extended) or, with `base_head`, when the
    compare-and-swap of `append_entry` fails (a stale plan)."""
    if status not in STATUSES:
        raise InputError(f"ledger: status must be one of {', '.join(STATUSES)}, not {status!r}")
    if not 0 <= steps_completed <= plan.steps:
        raise InputError(f"ledger: steps_completed {steps_completed} outside 0..{plan.steps}")
    path = Path(ledger_path)
    secrets = {e.secret: e.record() for e in run_events(plan, steps_completed, phase=2 if phases else None)}
    floor = (getattr(plan, "extra", None) or {}).get("undetected_floor") or {}
    acct = floor.get("account")
    fields = {"run_id": str(run_id), "plan_digest": plan_digest(plan), "sigma": plan.sigma,
              "batch_size": plan.batch_size, "steps": plan.steps, "steps_completed": int(steps_completed),
              "status": status, "accountant": plan.accountant, "adjacency": plan.adjacency}
    if randomness is not None:
        fields["randomness"] = str(randomness)
    if floor:
        fields["floor"] = {"account": (acct or {}).get("id"), "enabled": bool(floor.get("enabled", True)),
                           "k": floor.get("k"), "p": floor.get("p"), "r": floor.get("r"),
                           "achieved_bound": floor.get("achieved_bound")}
    if phases is not None:
        fields["phases"] = phases
    if len(clear_example_ids):
        from repoguard.accounting.clear_ids import check_plan_ids

        check_plan_ids(plan, clear_example_ids)
    return append_entry(path, fields, secrets, clear_example_ids=clear_example_ids, base_head=base_head)


def run_events(plan, steps_completed: int, *, phase: int | None = None) -> list[SpendingEvent]:
    """What a run of `plan` that completed `steps_completed` of its T steps spent: one
    `spending.SpendingEvent` per secret of the plan and, when the plan has an undetected-secret
    floor with an account (`plan.extra["undetected_floor"]["account"]`, `undetected.py`), one for
    that account (it composes across runs like a secret). Divergences scale with the steps
    completed; the pairs carry them (`SpendingEvent.scaled`)."""
    t = int(steps_completed)
    events = [SpendingEvent.scaled(s.id, kl=s.kl_spent, renyi=s.renyi_spent, pair=getattr(s, "pair", None),
                                   sigma=plan.sigma, steps=t, planned_steps=plan.steps, phase=phase)
              for s in plan.secrets]
    floor = (getattr(plan, "extra", None) or {}).get("undetected_floor") or {}
    acct = floor.get("account")
    if acct and acct.get("id"):
        events.append(SpendingEvent.scaled(acct["id"], kl=float(acct.get("kl") or 0.0), renyi=acct.get("renyi") or {},
                                           pair=acct.get("pair"), sigma=plan.sigma, steps=t,
                                           planned_steps=plan.steps, phase=phase))
    return events


def append_entry(ledger_path: str | Path, fields: dict, secrets, *,
                 clear_example_ids: Sequence[str] = (), base_head: str | None = None) -> dict:
    """Append one format-2 entry: `fields` (run_id, status and the run's scalars) and `secrets`
    ({sid: {"kl", "renyi", "pair"}}, or a columnar `ledger_state.Run`) written to a spending file; the carried-forward summary is
    updated from the previous one (module docstring). Non-empty `clear_example_ids` add the
    "clear" reference (format 3, `record_run`). Returns the entry, with "secrets" added for the
    caller (not stored inline). Raises PolicyError if the ledger fails verification.

    `base_head` (compare-and-swap): the ledger head the run was planned and checked against
    (an entry hash, or GENESIS). Under the append's lock every entry after it must be this run's
    own (`fields["run_id"]`), else PolicyError and nothing is written: another run spent in
    between, so this run's σ no longer keeps the cumulative bounds ≤ r (issue 32 A)."""
    path = Path(ledger_path)
    if fields.get("status") not in STATUSES:
        raise InputError(f"ledger: status must be one of {', '.join(STATUSES)}, not {fields.get('status')!r}")
    run = secrets if isinstance(secrets, ls.Run) else ls.Run.from_dict(secrets)
    with exclusive_lock(path):
        check = verify(path, side_files=False)
        if not check["ok"]:
            raise PolicyError(f"{path}: refusing to append to a ledger that fails verification: {check['problems'][0]}")
        entries = read_entries(path)
        if base_head is not None:
            _compare_and_swap(path, entries, base_head, str(fields.get("run_id")))
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
            state = state_from_entries(path, entries + [entry])
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
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) != len(line):        # a short write: the disk filled up
                raise OSError(errno.ENOSPC, "no space left on device", str(path))
            os.fsync(fd)
        except BaseException as exc:
            os.ftruncate(fd, size)                      # no torn line: the chain stays verifiable
            if disk_full(exc):
                raise full_error(path, exc) from exc
            raise
        finally:
            os.close(fd)
        atomic_write_json(head_path(path), {"count": n + 1, "last_hash": entry["hash"]})
        for f in d.glob("summary-*.parquet"):     # superseded checkpoints
            if f.name != entry["summary"]["file"]:
                f.unlink(missing_ok=True)
        owner_only(path)                          # also repairs a ledger made world-readable before
    return {**entry, "secrets": secrets}


def _compare_and_swap(path: Path, entries: list[dict], base_head: str, run_id: str) -> None:
    """PolicyError unless every entry after `base_head` belongs to `run_id` (`append_entry`)."""
    hashes = [e.get("hash") for e in entries]
    if base_head == GENESIS:
        after = entries
    elif base_head in hashes:
        after = entries[hashes.index(base_head) + 1:]
    else:
        raise PolicyError(f"{path}: stale plan: the ledger head it was made against ({base_head[:12]}…) is not "
                          "in the ledger; run not recorded, nothing published. Re-run `repoguard plan`")
    others = sorted({str(e.get("run_id")) for e in after if str(e.get("run_id")) != run_id})
    if others:
        raise PolicyError(f"{path}: stale plan: run(s) {', '.join(others[:3])} were recorded after the ledger head "
                          f"it was made against; run {run_id} not recorded, nothing published. "
                          "Re-run `repoguard plan`")


def _last_status(entries: list[dict]) -> dict[str, str]:
    """{run_id: status of its last entry}."""
    return {e["run_id"]: e.get("status") for e in entries}


def _verified_entries(path: Path) -> list[dict]:
    check = verify(path, side_files=False)      # the chain, the last entry's and summary's files
    if not check["ok"]:
        raise PolicyError(f"{path}: ledger fails verification ({check['problems'][0]}); "
                          "refusing to plan against it")
    return read_chain(path)[0]


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
    with shared_lock(path):
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
                bad = check_side_file(path, e["spending"], f"{path}:{e['seq'] + 1}", "spending")
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


def read_spent(ledger_path: str | Path, *, floor_account: str | None = None) -> Spent:
    """What earlier runs spent, as `build_plan` takes it (`spending.Spent`), read once under the
    ledger's shared lock (an append cannot land in between): the spending of every run id's last
    entry (`spending`) and, with `floor_account`, the runs that recorded nothing on it
    (`runs_without`). A missing ledger is empty. Raises PolicyError when the ledger fails
    verification."""
    path = Path(ledger_path)
    if not path.exists():
        return Spent()
    with shared_lock(path):
        spent, pairs = spending(path)
        legacy = tuple(runs_without(path, floor_account)) if floor_account is not None else ()
    return Spent(spent, pairs, legacy)


def runs_without(ledger_path: str | Path, account: str) -> list[tuple[float, int]]:
    """(σ, steps completed) of every run whose last entry spent (steps completed > 0) without a
    record on `account` (recorded before the floor had an account, or for another k). An empty or
    missing ledger gives []."""
    if ledger_path is None or not Path(ledger_path).exists():
        return []
    last: dict[str, dict] = {}
    for e in read_entries(ledger_path):
        last[e["run_id"]] = e
    out = []
    for e in last.values():
        if int(e.get("steps_completed") or 0) <= 0:
            continue
        if (e.get("floor") or {}).get("account") == account:
            continue
        out.append((float(e["sigma"]), int(e["steps_completed"])))
    return out
