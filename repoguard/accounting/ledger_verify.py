"""Verifying the ledger: the chain (`ledger_io`), every side file's digest, and with `deep` the
carried-forward summary recomputed from every entry's spending (format in `ledger.py`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from repoguard.accounting import ledger_state as ls
from repoguard.accounting.ledger_io import read_chain, check_side_file, shared_lock, entry_run, side_dir
from repoguard.core.errors import PolicyError


def verify(ledger_path: str | Path, *, side_files: bool = True, deep: bool = False) -> dict:
    """Check the whole chain. With `side_files` every spending file's digest is checked too (the
    last entry's and the newest summary's always are); with `deep` the newest summary is also
    recomputed from every entry's spending and compared (it must equal the full composition).
    Returns {"ok", "entries", "problems": [str], "notes": [str], "last_hash"}; never raises for
    tampering (the caller decides), only for unreadable files."""
    path = Path(ledger_path)
    with shared_lock(path):
        try:
            entries, chain_problems, notes, last = read_chain(path)
        except PolicyError as exc:
            return {"ok": False, "entries": None, "problems": [str(exc)], "notes": [], "last_hash": None}
        problems = list(chain_problems)
        clear_seen: set[str] = set()
        for k, e in enumerate(entries):
            where = f"{path}:{k + 1}"
            if "spending" in e and (side_files or k == len(entries) - 1):
                problems += check_side_file(path, e["spending"], where, "spending")
            if "summary" in e and k == len(entries) - 1:
                problems += check_side_file(path, e["summary"], where, "summary")
            if "clear" in e and (side_files or k == len(entries) - 1) and repr(e["clear"]) not in clear_seen:
                clear_seen.add(repr(e["clear"]))       # a run's records share one file: hash it once
                problems += _check_clear(path, e["clear"], where, deep=deep)
        if deep and not problems and entries and "summary" in entries[-1]:
            problems += _deep_check(path, entries)
    return {"ok": not problems, "entries": len(entries), "problems": problems, "notes": list(notes),
            "last_hash": last}


def _check_clear(path: Path, ref, where: str, *, deep: bool) -> list[str]:
    """Problems with a clear-phase ids file: missing or edited (digest), and with `deep` ids
    that no longer hash to the file's content-addressed name."""
    bad = check_side_file(path, ref, where, "clear-phase ids")
    if bad or not deep:
        return bad
    from repoguard.accounting.clear_ids import check_content

    problem = check_content(side_dir(path) / str(ref["file"]))
    return [f"{where}: {problem}"] if problem else []


def _deep_check(path: Path, entries: list[dict]) -> list[str]:
    """The newest summary against the state recomputed from every entry's spending file."""
    want = state_from_entries(path, entries)
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


def state_from_entries(path: Path, entries: list[dict]) -> ls.State:
    """Carried-forward state after `entries` (completed runs only), computed from scratch."""
    last: dict[str, dict] = {}
    for e in entries:
        last.pop(e["run_id"], None)
        last[e["run_id"]] = e
    st = ls.State()
    for e in sorted((e for e in last.values() if e.get("status") == "completed"), key=lambda e: e["seq"]):
        st.add(entry_run(path, e))
    return st
