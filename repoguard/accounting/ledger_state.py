"""What every secret has spent, carried forward from ledger entry to ledger entry, and the
columnar side files that hold it (`ledger.py` chains their digests).

Per secret the state is (i) the divergences summed over runs — KL and Rényi divergences add
under composition [Hush §4], and an order α missing from any counted run counts as +inf — and
(ii) the runs' dominating pairs for the Neyman–Pearson bound (`pld.py`) as a list of parts
(Mixture, a = s/σ, steps), or "unknown" when some counted run spent without recording its pair.
Everything is held in numpy arrays (one row per secret, one flat ragged table of parts), so an
append costs a few vectorised passes over the secrets, not a Python loop per secret.

Parts are merged as they are added, so a year of nightly runs does not grow a secret's history
without bound:
* exactly: a new part with the same mixing law and the same a as a carried one adds its steps
  to it (the T₁-fold composition of a pair with its T₂-fold composition is its (T₁+T₂)-fold
  composition) — no loss;
* by dominance, only for a secret with more than MAX_PARTS distinct parts (c of them): its parts
  are sorted by a and the c − MAX_PARTS smallest gaps in log a are joined (agglomerating the
  closest noise levels first: a nightly run adds one part, so one gap is joined a night), and
  each run of joined parts is replaced by one part with a = the largest a of the run, the
  envelope mixing law (survival function P(M ≥ k) the pointwise maximum of the parts';
  `calibrate.envelope`), n the largest n and the summed steps. So a secret carries at most
  MAX_PARTS parts after every append, whatever the spread of σ over the year.

Why the merged part is an upper bound. Per step the pair is P = Σ_m π_m N(m·a, 1) against
Q = N(0, 1) (`divergences.py`). (1) A smaller a is a post-processing of a larger one (scale z by
a'/a and add independent N(0, 1 − (a'/a)²) noise maps the a-pair onto the a'-pair, P and Q
alike), so the pair at the run's largest a dominates each member's [data processing for the
hockey-stick divergence, both directions]. (2) A stochastically larger mixing law gives a
larger hockey-stick divergence in both directions (`pld_table.py` docstring, proof in
`divergences.py`); the envelope is stochastically larger than every member's law. (3)
Dominating pairs compose [Zhu, Dong & Wang 2022, "Optimal accounting of differential privacy
via characteristic function", Thm 10]: the composition of the members' T_i-fold pairs is
dominated by the (Σ T_i)-fold composition of the merged pair. Hence δ_T(ε) of the merged history
is ≥ that of the full history at every ε, and the Neyman–Pearson bound min_ε e^ε p + δ_T(ε)
[Hush Lemma 3.2 with the hockey-stick divergence] computed from the merged history is an upper
bound on the one computed from every raw entry. Only the pair list is merged: the KL and Rényi
sums stay exact (they are sums of floats, equal to the raw composition up to rounding).

Side files (Parquet, zstd, byte-stream-split floats): `run-<seq>.parquet`, one row per secret
of that entry (`secret`, `kl`, `renyi:<α>` with NaN for an order not recorded, `pair_a`,
`pair_steps`, `pair_n`, `pair_m`, `pair_logw`, null when the secret could not be sampled);
`summary-<seq>.parquet`, the state of the completed runs up to entry seq (`secret`, `kl`,
`renyi:<α>` NaN = +inf, `pairs_known`, and list columns `part_a`, `part_steps`, `part_n`,
`part_m`, `part_logw`).
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_PARTS = 32           # distinct parts per secret before merging by dominance


# -- a ragged table of pair parts -----------------------------------------------------------------
@dataclass
class Parts:
    """Pair parts as flat arrays: part i belongs to row `sec[i]`, has a = s/σ `a[i]`, `steps[i]`
    steps, `n[i]` examples, and mixing law support `m[off[i]:off[i+1]]` with log-weights
    `lw[off[i]:off[i+1]]` (a `divergences.Mixture`)."""

    sec: np.ndarray
    a: np.ndarray
    steps: np.ndarray
    n: np.ndarray
    off: np.ndarray
    m: np.ndarray
    lw: np.ndarray

    @staticmethod
    def empty() -> "Parts":
        """No parts (off = [0])."""
        z = np.zeros(0, np.int64)
        return Parts(z, np.zeros(0), z, z, np.zeros(1, np.int64), z, np.zeros(0))

    def __len__(self) -> int:
        return int(self.sec.size)

    def lengths(self) -> np.ndarray:
        """int64 (n_parts,): each part's number of mixture support points."""
        return np.diff(self.off)

    def take(self, idx) -> "Parts":
        """The parts at `idx` (int array), in that order."""
        idx = np.asarray(idx, np.int64)
        ln = self.lengths()[idx]
        off = np.zeros(idx.size + 1, np.int64)
        np.cumsum(ln, out=off[1:])
        flat = np.repeat(self.off[:-1][idx] - off[:-1], ln) + np.arange(off[-1])
        return Parts(self.sec[idx], self.a[idx], self.steps[idx], self.n[idx], off, self.m[flat], self.lw[flat])

    @staticmethod
    def concat(ps: list["Parts"]) -> "Parts":
        """The parts of `ps` one after another (offsets rebased; empty inputs skipped)."""
        ps = [p for p in ps if len(p)]
        if not ps:
            return Parts.empty()
        offs, base = [np.zeros(1, np.int64)], 0
        for p in ps:
            offs.append(p.off[1:] + base)
            base += int(p.off[-1])
        return Parts(*(np.concatenate([getattr(p, f) for p in ps]) for f in ("sec", "a", "steps", "n")),
                     np.concatenate(offs), np.concatenate([p.m for p in ps]), np.concatenate([p.lw for p in ps]))

    def record(self, i: int) -> dict:
        """Part i as a pair record ({"a", "steps", "m", "logw", "n"}; `pld.pair_from_record`)."""
        s, e = self.off[i], self.off[i + 1]
        return {"a": float(self.a[i]), "steps": int(self.steps[i]), "m": self.m[s:e].tolist(),
                "logw": self.lw[s:e].tolist(), "n": int(self.n[i])}


def _parts_from_records(rows, recs) -> Parts:
    if not recs:
        return Parts.empty()
    ln = np.array([len(d["m"]) for d in recs], np.int64)
    off = np.zeros(len(recs) + 1, np.int64)
    np.cumsum(ln, out=off[1:])
    m = np.fromiter((int(x) for d in recs for x in d["m"]), np.int64, int(off[-1]))
    lw = np.fromiter((float(x) for d in recs for x in d["logw"]), float, int(off[-1]))
    n = np.array([int(d["n"]) if d.get("n") is not None else int(max(d["m"])) for d in recs], np.int64)
    return Parts(np.asarray(rows, np.int64), np.array([float(d["a"]) for d in recs]),
                 np.array([int(d["steps"]) for d in recs], np.int64), n, off, m, lw)


# -- one entry's spending, columnar ---------------------------------------------------------------
PAIR_NO_KEY, PAIR_NULL, PAIR_SET = 0, 1, 2


@dataclass
class Run:
    """One ledger entry's per-secret spending: `ids` (k,), `kl` (k,) nats, `alphas` (A,) Rényi
    orders as strings, `ren` (k, A) nats (+inf = order not recorded), `pair_state` (k,) int8
    (PAIR_SET, PAIR_NULL: not sampled, PAIR_NO_KEY: a format-1 record written before pairs were
    recorded) and `parts` (one per PAIR_SET row; `sec` = row in this run)."""

    ids: list
    kl: np.ndarray
    alphas: list
    ren: np.ndarray
    pair_state: np.ndarray
    parts: Parts

    @staticmethod
    def from_dict(secrets: dict) -> "Run":
        """From {sid: {"kl", "renyi": {α: nats}, "pair"?: record | None}} (a record without "pair"
        is a format-1 record)."""
        ids = list(secrets)
        recs = [secrets[s] for s in ids]
        alphas = _alphas(d.get("renyi", {}) for d in recs)
        col = {a: i for i, a in enumerate(alphas)}
        ren = np.full((len(ids), len(alphas)), np.inf)
        for j, d in enumerate(recs):
            for a, v in d.get("renyi", {}).items():
                ren[j, col[str(a)]] = float(v)
        ren[np.isnan(ren)] = np.inf
        state = np.array([PAIR_NO_KEY if "pair" not in d else PAIR_NULL if d["pair"] is None else PAIR_SET
                          for d in recs], np.int8)
        rows = np.nonzero(state == PAIR_SET)[0]
        return Run(ids, np.array([float(d.get("kl", 0.0)) for d in recs]), alphas, ren, state,
                   _parts_from_records(rows, [recs[j]["pair"] for j in rows]))

    def to_dict(self) -> dict:
        """Inverse of `from_dict`."""
        out = {}
        where = {int(s): i for i, s in enumerate(self.parts.sec)}
        for j, sid in enumerate(self.ids):
            d = {"kl": float(self.kl[j]),
                 "renyi": {a: float(v) for a, v in zip(self.alphas, self.ren[j]) if math.isfinite(v)}}
            if self.pair_state[j] != PAIR_NO_KEY:
                d["pair"] = self.parts.record(where[j]) if self.pair_state[j] == PAIR_SET else None
            out[sid] = d
        return out


# -- the carried-forward state --------------------------------------------------------------------
class State:
    """Per secret (row): `kl` nats, `ren` (rows, len(alphas)) Rényi nats (+inf = unknown),
    `known` whether its pairs are known, and `parts` (sorted by row). `index` maps secret id →
    row. `add(run)` adds one run's spending (module docstring)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.kl = np.zeros(0)
        self.alphas: list[str] = []
        self.ren = np.zeros((0, 0))
        self.known = np.zeros(0, bool)
        self._parts = Parts.empty()
        self._pending: list[Parts] = []       # raw parts not yet sorted in (merge=False)

    @property
    def parts(self) -> Parts:
        """Every carried part, sorted by row (stable: in the order added)."""
        if self._pending:
            both = Parts.concat([self._parts, *self._pending])
            self._parts, self._pending = both.take(np.argsort(both.sec, kind="stable")), []
        return self._parts

    @parts.setter
    def parts(self, value: Parts) -> None:
        self._parts, self._pending = value, []

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, run, *, merge: bool = True) -> None:
        """Add one run (`Run`, or the dict `Run.from_dict` takes). KL adds; each Rényi order adds
        (+inf where either side lacks it); a format-1 record that spent makes the secret's pairs
        unknown; a recorded pair is appended to a known history, then merged (`merge`: exact,
        then by dominance past MAX_PARTS; module docstring) or kept raw (`merge=False`)."""
        if not isinstance(run, Run):
            run = Run.from_dict(run)
        rows = np.fromiter((self.index.get(s, -1) for s in run.ids), np.int64, len(run.ids))
        new = np.nonzero(rows < 0)[0]
        if new.size:
            base = len(self.ids)
            for k, j in enumerate(new):
                self.index[run.ids[j]] = base + k
                self.ids.append(run.ids[j])
            rows[new] = base + np.arange(new.size)
            self.kl = np.concatenate([self.kl, np.zeros(new.size)])
            self.ren = np.concatenate([self.ren, np.zeros((new.size, len(self.alphas)))])
            self.known = np.concatenate([self.known, np.ones(new.size, bool)])
        # Rényi: union of orders; an order one side lacks is +inf there
        alphas = _alphas([self.alphas, run.alphas])
        if alphas != self.alphas:
            ren = np.full((len(self.ids), len(alphas)), np.inf)
            pos = [alphas.index(a) for a in self.alphas]
            ren[:, pos] = self.ren
            if new.size:                      # a new secret starts from 0 in every order
                ren[np.ix_(rows[new], [alphas.index(a) for a in alphas if a not in self.alphas])] = 0.0
            self.ren, self.alphas = ren, alphas
        add = np.full((len(run.ids), len(alphas)), np.inf)
        if run.alphas:
            add[:, [alphas.index(a) for a in run.alphas]] = run.ren
        self.ren[rows] += add
        self.kl[rows] += run.kl
        keep = ~np.all(np.isinf(self.ren), axis=0) if len(self.ids) else np.zeros(len(alphas), bool)
        if not keep.all():                    # an order no secret has any more
            self.ren = self.ren[:, keep]
            self.alphas = [a for a, k in zip(self.alphas, keep) if k]
        # pairs
        lost = rows[(run.pair_state == PAIR_NO_KEY) & (run.kl > 0)]
        if lost.size:
            self.known[lost] = False
            self.parts = self.parts.take(np.nonzero(self.known[self.parts.sec])[0])
        p = run.parts
        if len(p):
            p = Parts(rows[p.sec], p.a, p.steps, p.n, p.off, p.m, p.lw)
            p = p.take(np.nonzero(self.known[p.sec])[0])
            if merge:
                self.parts = _merge(self.parts, p)
            else:
                self._pending.append(p)

    def spent(self) -> dict[str, tuple[float, dict[str, float]]]:
        """{secret: (kl, {α: nats})} — `ledger.spent`'s format (orders at +inf left out)."""
        fin = np.isfinite(self.ren)
        al = self.alphas
        return {sid: (float(self.kl[j]), {al[k]: float(self.ren[j, k]) for k in np.nonzero(fin[j])[0]})
                for j, sid in enumerate(self.ids)}

    def pairs(self) -> dict[str, list[dict] | None]:
        """{secret: [pair record, ...] or None (unknown)} — `ledger.spent_pairs`'s format."""
        out: dict[str, list[dict] | None] = {sid: ([] if k else None) for sid, k in zip(self.ids, self.known)}
        for i in range(len(self.parts)):
            out[self.ids[int(self.parts.sec[i])]].append(self.parts.record(i))
        return out

    def parts_per_secret(self) -> np.ndarray:
        """(rows,) the number of carried parts of each secret."""
        return np.bincount(self.parts.sec, minlength=len(self.ids))


def _alphas(groups) -> list[str]:
    seen: dict[str, None] = {}
    for g in groups:
        for a in g:
            seen.setdefault(str(a), None)
    return sorted(seen, key=float)


def _same_mixture(x: Parts, i: np.ndarray, y: Parts, j: np.ndarray) -> np.ndarray:
    """Elementwise: is part x[i] the same mixing law (m, logw, n) as part y[j]?"""
    li, lj = x.lengths()[i], y.lengths()[j]
    ok = (li == lj) & (x.n[i] == y.n[j])
    i, j, ln = i[ok], j[ok], li[ok]
    if i.size == 0:
        return ok
    start = np.zeros(i.size + 1, np.int64)
    np.cumsum(ln, out=start[1:])
    rel = np.arange(start[-1]) - np.repeat(start[:-1], ln)
    fi, fj = np.repeat(x.off[:-1][i], ln) + rel, np.repeat(y.off[:-1][j], ln) + rel
    bad = (x.m[fi] != y.m[fj]) | (x.lw[fi] != y.lw[fj])
    nbad = np.bincount(np.repeat(np.arange(i.size), ln), weights=bad, minlength=i.size)
    ok[np.nonzero(ok)[0]] = nbad == 0
    return ok


def _merge(old: Parts, new: Parts) -> Parts:
    """Carried parts `old` (sorted by row, pairwise distinct per row) plus `new` (one per row at
    most): exact merge, then dominance merge of every row over MAX_PARTS (module docstring)."""
    if len(new):
        # exact: a new part equal in (row, a, mixing law) to a carried one adds its steps to it
        key_a = np.unique(np.concatenate([old.a, new.a]), return_inverse=True)[1]
        ko = old.sec * (1 << 32) + key_a[:len(old)]
        kn = new.sec * (1 << 32) + key_a[len(old):]
        order = np.argsort(ko, kind="stable")
        lo, hi = np.searchsorted(ko[order], kn, "left"), np.searchsorted(ko[order], kn, "right")
        cnt = hi - lo
        cand_new = np.repeat(np.arange(len(new)), cnt)
        cand_old = order[np.repeat(lo, cnt) + np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)]
        same = _same_mixture(new, cand_new, old, cand_old)
        hit_new, first = np.unique(cand_new[same], return_index=True)
        if hit_new.size:
            steps = old.steps.copy()
            np.add.at(steps, cand_old[same][first], new.steps[hit_new])
            old = Parts(old.sec, old.a, steps, old.n, old.off, old.m, old.lw)
            new = new.take(np.setdiff1d(np.arange(len(new)), hit_new))
        both = Parts.concat([old, new])
        parts = both.take(np.argsort(both.sec, kind="stable"))
    else:
        parts = old
    count = np.bincount(parts.sec) if len(parts) else np.zeros(0, np.int64)
    over = np.nonzero(count > MAX_PARTS)[0]
    if over.size == 0:
        return parts
    return _dominance_merge(parts, over)


def _dominance_merge(parts: Parts, over: np.ndarray) -> Parts:
    """For every row in `over` (more than MAX_PARTS parts): sort its parts by a and join the
    (count − MAX_PARTS) smallest gaps in log a, so its parts fall into MAX_PARTS runs of close
    a; each run of two or more parts becomes one part (`_envelopes`: the largest a, the envelope
    law, the summed steps). Ties in the gaps are broken by position (deterministic)."""
    sel = np.nonzero(np.isin(parts.sec, over))[0]
    rest = np.setdiff1d(np.arange(len(parts)), sel)
    p = parts.take(sel)
    p = p.take(np.lexsort((p.a, p.sec)))
    la = np.log(p.a)
    same = p.sec[1:] == p.sec[:-1]
    gap = np.where(same, la[1:] - la[:-1], np.inf)            # gap i: between parts i and i+1
    need = np.bincount(p.sec) - MAX_PARTS                      # joins each row needs
    gsec = p.sec[:-1]
    order = np.lexsort((np.arange(gap.size), gap, gsec))     # by row, then gap, then position
    first = np.searchsorted(gsec[order], gsec[order], "left")
    rank = np.empty(gap.size, np.int64)
    rank[order] = np.arange(gap.size) - first
    join = same & (rank < need[gsec])
    grp = np.cumsum(np.concatenate([[True], ~join])) - 1
    size = np.bincount(grp)
    single = size[grp] == 1
    keep = p.take(np.nonzero(single)[0])
    multi = np.nonzero(~single)[0]
    merged = _envelopes(p.take(multi), grp[multi]) if multi.size else Parts.empty()
    out = Parts.concat([parts.take(rest), keep, merged])
    return out.take(np.argsort(out.sec, kind="stable"))


def _envelopes(p: Parts, grp: np.ndarray) -> Parts:
    """One part per group id in `grp`: a = max a, steps summed, n = max n, mixing law the
    envelope (survival function the pointwise maximum; `calibrate.envelope`)."""
    gids, g = np.unique(grp, return_inverse=True)
    ng = gids.size
    first = np.zeros(ng, np.int64)
    first[g] = np.arange(len(p))                      # any member: a group is within one row
    a = np.full(ng, -np.inf)
    np.maximum.at(a, g, p.a)
    n = np.zeros(ng, np.int64)
    np.maximum.at(n, g, p.n)
    steps = np.bincount(g, weights=p.steps, minlength=ng).astype(np.int64)
    # dense pmf over 0..max m per part, survival by reverse cumsum within each part (by length,
    # so no sum runs across parts: tails keep their precision)
    top = np.maximum.reduceat(p.m, p.off[:-1]) if len(p) else np.zeros(0, np.int64)
    dl = top + 1
    doff = np.zeros(len(p) + 1, np.int64)
    np.cumsum(dl, out=doff[1:])
    pmf = np.zeros(int(doff[-1]))
    ln = p.lengths()
    np.add.at(pmf, np.repeat(doff[:-1], ln) + p.m, np.exp(p.lw))
    surv = np.zeros_like(pmf)
    for L in np.unique(dl):
        idx = np.nonzero(dl == L)[0]
        pos = doff[:-1][idx][:, None] + np.arange(L)[None, :]
        surv[pos] = np.cumsum(pmf[pos][:, ::-1], axis=1)[:, ::-1]
    # the group's survival: pointwise maximum over its parts, 0 past each part's top
    gtop = np.zeros(ng, np.int64)
    np.maximum.at(gtop, g, top)
    goff = np.zeros(ng + 1, np.int64)
    np.cumsum(gtop + 2, out=goff[1:])                 # one extra 0 past the top
    gs = np.zeros(int(goff[-1]))
    rel = np.arange(int(doff[-1])) - np.repeat(doff[:-1], dl)
    np.maximum.at(gs, np.repeat(goff[:-1][g], dl) + rel, surv)
    gs[goff[:-1]] = np.maximum(gs[goff[:-1]], 1.0)
    grel = np.arange(int(goff[-1])) - np.repeat(goff[:-1], gtop + 2)
    last = grel == np.repeat(gtop + 1, gtop + 2)
    gpmf = np.clip(gs - np.append(gs[1:], 0.0), 0.0, None)
    gid = np.repeat(np.arange(ng), gtop + 2)
    keep = (gpmf > 0) & ~last
    cnt = np.bincount(gid[keep], minlength=ng)
    off = np.zeros(ng + 1, np.int64)
    np.cumsum(cnt, out=off[1:])
    return Parts(p.sec[first], a, steps, n, off, grel[keep].astype(np.int64), np.log(gpmf[keep]))


def merge_parts(parts: list[dict]) -> list[dict]:
    """Merge one secret's pair records ({"a", "steps", "m", "logw", "n"}) as the module docstring
    says: exact merge of equal pairs; past MAX_PARTS, dominance merge. Returns new records."""
    st = State()
    for d in parts:
        st.add({"_": {"kl": 0.0, "renyi": {}, "pair": d}})
    return st.pairs().get("_", [])


# -- Parquet side files ---------------------------------------------------------------------------
def _write_table(path: Path, table) -> str:
    """Write atomically (temp file, fsync, rename); return the file's SHA-256."""
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    floats = [f.name for f in table.schema if str(f.type) == "double"]
    pq.write_table(table, tmp, compression="zstd", use_dictionary=["secret"],
                   use_byte_stream_split=floats or False)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o600)                       # owner-only, like the ledger
    digest = file_digest(tmp)
    os.replace(tmp, path)
    return digest


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes (`artefacts.file_sha256`)."""
    from repoguard.core.artefacts import file_sha256

    return file_sha256(path)


def _list(offsets: np.ndarray, values, mask=None):
    import pyarrow as pa

    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)


def _ren_columns(cols: dict, alphas: list, ren: np.ndarray) -> None:
    import pyarrow as pa

    for k, a in enumerate(alphas):
        v = ren[:, k].copy()
        v[np.isinf(v)] = np.nan
        cols[f"renyi:{a}"] = pa.array(v, pa.float64())


def write_run(path: Path, secrets) -> str:
    """One entry's per-secret spending (`Run` or {sid: {"kl", "renyi", "pair"}}) as a Parquet
    file; returns its SHA-256."""
    import pyarrow as pa

    run = secrets if isinstance(secrets, Run) else Run.from_dict(secrets)
    k = len(run.ids)
    cols: dict = {"secret": pa.array(run.ids, pa.string()), "kl": pa.array(run.kl, pa.float64())}
    _ren_columns(cols, run.alphas, run.ren)
    p = run.parts
    has = run.pair_state == PAIR_SET
    where = np.full(k, -1, np.int64)
    where[p.sec] = np.arange(len(p))
    full = lambda x, fill: np.where(has, x[np.maximum(where, 0)] if len(p) else fill, fill)  # noqa: E731
    mask = pa.array(~has)
    cols["pair_a"] = pa.array(full(p.a, 0.0), pa.float64(), mask=~has)
    cols["pair_steps"] = pa.array(full(p.steps, 0), pa.int64(), mask=~has)
    cols["pair_n"] = pa.array(full(p.n, 0), pa.int64(), mask=~has)
    q = p.take(where[has])                             # parts in row order
    ln = np.zeros(k, np.int64)
    ln[has] = q.lengths()
    off = np.zeros(k + 1, np.int64)
    np.cumsum(ln, out=off[1:])
    cols["pair_m"] = _list(off, pa.array(q.m, pa.int64()), mask)
    cols["pair_logw"] = _list(off, pa.array(q.lw, pa.float64()), mask)
    return _write_table(path, pa.table(cols))


def _np(col, dtype) -> np.ndarray:
    return col.combine_chunks().to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _ren_read(t) -> tuple[list, np.ndarray]:
    names = [c for c in t.column_names if c.startswith("renyi:")]
    alphas = [c.split(":", 1)[1] for c in names]
    ren = np.stack([_np(t[c], float) for c in names], axis=1) if names else np.zeros((t.num_rows, 0))
    ren = np.where(np.isnan(ren), np.inf, ren)
    order = sorted(range(len(alphas)), key=lambda i: float(alphas[i]))
    return [alphas[i] for i in order], ren[:, order]


def read_run_table(path: Path) -> Run:
    """Inverse of `write_run`, columnar."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    ids = t["secret"].to_pylist()
    alphas, ren = _ren_read(t)
    pa_ = t["pair_a"].combine_chunks()
    has = ~np.asarray(pa_.is_null().to_numpy(zero_copy_only=False), bool)
    rows = np.nonzero(has)[0]
    lm, ll = t["pair_m"].combine_chunks(), t["pair_logw"].combine_chunks()
    offs = np.asarray(lm.offsets.to_numpy(), np.int64)
    ln = (offs[1:] - offs[:-1])[rows]
    off = np.zeros(rows.size + 1, np.int64)
    np.cumsum(ln, out=off[1:])
    flat = np.repeat(offs[:-1][rows] - off[:-1], ln) + np.arange(off[-1])
    vm = np.asarray(lm.values.to_numpy(zero_copy_only=False), np.int64)
    vl = np.asarray(ll.values.to_numpy(zero_copy_only=False), float)
    lo = np.asarray(ll.offsets.to_numpy(), np.int64)
    flat_l = np.repeat(lo[:-1][rows] - off[:-1], ln) + np.arange(off[-1])
    parts = Parts(rows.astype(np.int64), np.asarray(pa_.to_numpy(zero_copy_only=False), float)[rows],
                  _np(t["pair_steps"].fill_null(0), np.int64)[rows], _np(t["pair_n"].fill_null(0), np.int64)[rows],
                  off, vm[flat] if flat.size else np.zeros(0, np.int64), vl[flat_l] if flat_l.size else np.zeros(0))
    state = np.where(has, PAIR_SET, PAIR_NULL).astype(np.int8)
    return Run(ids, _np(t["kl"], float), alphas, ren, state, parts)


def read_run(path: Path) -> dict:
    """Inverse of `write_run`: {sid: {"kl", "renyi", "pair"}}."""
    return read_run_table(path).to_dict()


def write_state(path: Path, st: State) -> str:
    """The carried-forward state as a Parquet file; returns its SHA-256."""
    import pyarrow as pa

    n = len(st.ids)
    cols: dict = {"secret": pa.array(st.ids, pa.string()), "kl": pa.array(st.kl, pa.float64())}
    _ren_columns(cols, st.alphas, st.ren)
    cols["pairs_known"] = pa.array(st.known, pa.bool_())
    p = st.parts                                       # sorted by row
    sec_off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(p.sec, minlength=n), out=sec_off[1:])
    cols["part_a"] = _list(sec_off, pa.array(p.a, pa.float64()))
    cols["part_steps"] = _list(sec_off, pa.array(p.steps, pa.int64()))
    cols["part_n"] = _list(sec_off, pa.array(p.n, pa.int64()))
    cols["part_m"] = _list(sec_off, _list(p.off, pa.array(p.m, pa.int64())))
    cols["part_logw"] = _list(sec_off, _list(p.off, pa.array(p.lw, pa.float64())))
    return _write_table(path, pa.table(cols))


def read_state(path: Path) -> State:
    """Inverse of `write_state`."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    st = State()
    st.ids = t["secret"].to_pylist()
    st.index = {s: i for i, s in enumerate(st.ids)}
    st.kl = _np(t["kl"], float).copy()
    st.alphas, st.ren = _ren_read(t)
    st.known = _np(t["pairs_known"], bool).copy()
    pa_ = t["part_a"].combine_chunks()
    sec_off = np.asarray(pa_.offsets.to_numpy(), np.int64)
    sec_off = sec_off - sec_off[0]
    nparts = int(sec_off[-1])
    sec = np.repeat(np.arange(len(st.ids)), np.diff(sec_off))
    lm, ll = t["part_m"].combine_chunks(), t["part_logw"].combine_chunks()

    def inner(col, dtype):
        v = col.flatten()                              # parts (respecting the outer offsets)
        offs = np.asarray(v.offsets.to_numpy(), np.int64)
        vals = np.asarray(v.values.to_numpy(zero_copy_only=False), dtype)
        return offs, vals

    om, vm = inner(lm, np.int64)
    ol, vl = inner(ll, float)
    ln = np.diff(om)
    off = np.zeros(nparts + 1, np.int64)
    np.cumsum(ln, out=off[1:])
    fm = np.repeat(om[:-1] - off[:-1], ln) + np.arange(off[-1])
    fl = np.repeat(ol[:-1] - off[:-1], ln) + np.arange(off[-1])
    st.parts = Parts(sec.astype(np.int64), np.asarray(pa_.flatten().to_numpy(zero_copy_only=False), float),
                     np.asarray(t["part_steps"].combine_chunks().flatten().to_numpy(), np.int64),
                     np.asarray(t["part_n"].combine_chunks().flatten().to_numpy(), np.int64),
                     off, vm[fm] if fm.size else np.zeros(0, np.int64), vl[fl] if fl.size else np.zeros(0))
    return st
