"""What every secret has spent, carried forward from ledger entry to ledger entry, and the
columnar side files that hold it (`ledger.py` chains their digests).

Per secret the state is (i) the divergences summed over runs — KL and Rényi divergences add
under composition [Hush §4], and an order α missing from any counted run counts as +inf — and
(ii) the runs' dominating pairs for the Neyman–Pearson bound (`pld.py`) as a list of parts
(Mixture, a = s/σ, steps), or "unknown" when some counted run spent without recording its pair.

Parts are merged as they are added, so a year of nightly runs does not grow a secret's history
without bound:
* exactly: parts with the same mixing law and the same a add their steps (the T₁-fold
  composition of a pair with its T₂-fold composition is its (T₁+T₂)-fold composition);
* by dominance, only when a secret has more than MAX_PARTS distinct parts: each part's a is
  rounded *up* to the grid A_GRID^k and the parts in one cell are replaced by one part with the
  envelope mixing law (survival function the pointwise maximum; `calibrate.envelope`) and the
  summed steps. A larger a is less noise (the smaller-a pair is its post-processing) and a
  stochastically larger mixing law gives a larger hockey-stick divergence in both directions
  (`pld_table.py` docstring), so each replaced part is dominated, and dominating pairs compose
  [Zhu, Dong & Wang 2022, Thm 10]: every bound computed from the merged history is an upper
  bound on the one from the full history.

Side files (Parquet, zstd): `run-<seq>.parquet`, one row per secret of that entry (`secret`,
`kl`, `renyi:<α>` with NaN for an order not recorded, `pair_a`, `pair_steps`, `pair_n`, `pair_m`,
`pair_logw`, null when the secret could not be sampled); `summary-<seq>.parquet`, the state of
the completed runs up to entry seq (`secret`, `kl`, `renyi:<α>` NaN = +inf, `pairs_known`, and
list columns `part_a`, `part_steps`, `part_n`, `part_m`, `part_logw`).
"""
from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np

MAX_PARTS = 16           # distinct parts per secret before merging by dominance
A_GRID = 1.01            # a is rounded up to A_GRID^k when merging by dominance


def _pair_key(d: dict) -> tuple:
    return (float(d["a"]), tuple(int(x) for x in d["m"]), tuple(float(x) for x in d["logw"]), int(d.get("n", 0)))


def merge_parts(parts: list[dict]) -> list[dict]:
    """Merge pair records ({"a", "steps", "m", "logw", "n"}) as the module docstring says: exact
    merge of equal pairs; past MAX_PARTS, dominance merge on the a grid. Returns new records."""
    acc: dict[tuple, dict] = {}
    for d in parts:
        k = _pair_key(d)
        if k in acc:
            acc[k] = {**acc[k], "steps": int(acc[k]["steps"]) + int(d["steps"])}
        else:
            acc[k] = {"a": float(d["a"]), "steps": int(d["steps"]), "m": [int(x) for x in d["m"]],
                      "logw": [float(x) for x in d["logw"]], "n": int(d.get("n", max(d["m"])))}
    out = list(acc.values())
    if len(out) <= MAX_PARTS:
        return out
    from repoguard.accounting.calibrate import envelope
    from repoguard.accounting.divergences import Mixture

    cells: dict[int, list[dict]] = {}
    for d in out:
        k = math.ceil(math.log(d["a"]) / math.log(A_GRID) - 1e-12)
        while A_GRID ** k < d["a"]:
            k += 1
        cells.setdefault(k, []).append(d)
    merged = []
    for k, ds in sorted(cells.items()):
        env = envelope([Mixture(np.asarray(d["m"], dtype=np.int64), np.asarray(d["logw"]), d["n"]) for d in ds])
        merged.append({"a": float(A_GRID ** k), "steps": sum(int(d["steps"]) for d in ds),
                       "m": [int(x) for x in env.m], "logw": [float(x) for x in env.logw],
                       "n": max(int(d["n"]) for d in ds)})
    return merged


class State:
    """Per secret: KL (nats), Rényi {α: nats} (an α absent = +inf), and pair parts (None =
    unknown). `add(secrets)` adds one run's per-secret records ({"kl", "renyi", "pair"}; a record
    without the "pair" key is a format-1 entry written before pairs were recorded)."""

    def __init__(self) -> None:
        self.kl: dict[str, float] = {}
        self.ren: dict[str, dict[str, float]] = {}
        self.pairs: dict[str, list[dict] | None] = {}

    def copy(self) -> "State":
        s = State()
        s.kl, s.ren = dict(self.kl), {k: dict(v) for k, v in self.ren.items()}
        s.pairs = {k: (None if v is None else list(v)) for k, v in self.pairs.items()}
        return s

    def add(self, secrets: dict, *, merge: bool = True) -> None:
        for sid, d in secrets.items():
            r = {str(a): float(v) for a, v in d.get("renyi", {}).items()}
            if sid in self.kl:
                old = self.ren[sid]
                self.ren[sid] = {a: old[a] + r[a] for a in old.keys() & r.keys()}
                self.kl[sid] += float(d.get("kl", 0.0))
            else:
                self.kl[sid], self.ren[sid] = float(d.get("kl", 0.0)), r
            have = self.pairs.get(sid, [])
            if "pair" not in d:
                self.pairs[sid] = None if float(d.get("kl", 0.0)) > 0 or have is None else have
                continue
            if have is not None and d["pair"] is not None:
                have = merge_parts(have + [d["pair"]]) if merge else have + [d["pair"]]
            self.pairs[sid] = have

    def spent(self) -> dict[str, tuple[float, dict[str, float]]]:
        """{secret: (kl, {α: nats})} — `ledger.spent`'s format."""
        return {k: (self.kl[k], dict(self.ren[k])) for k in self.kl}


# -- Parquet side files ---------------------------------------------------------------------------
def _write_table(path: Path, table) -> str:
    """Write atomically (temp file, fsync, rename); return the file's SHA-256."""
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", use_dictionary=["secret"])
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    digest = file_digest(tmp)
    os.replace(tmp, path)
    return digest


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _alphas(rows) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        for a in r:
            seen.setdefault(str(a), None)
    return sorted(seen, key=float)


def write_run(path: Path, secrets: dict) -> str:
    """One entry's per-secret spending ({sid: {"kl", "renyi", "pair"}}) as a Parquet file; returns
    its SHA-256."""
    import pyarrow as pa

    ids = list(secrets)
    recs = [secrets[s] for s in ids]
    cols: dict = {"secret": pa.array(ids, pa.string()), "kl": pa.array([float(d["kl"]) for d in recs], pa.float64())}
    for a in _alphas(d["renyi"] for d in recs):
        cols[f"renyi:{a}"] = pa.array([float(d["renyi"].get(a, math.nan)) for d in recs], pa.float64())
    prs = [d.get("pair") for d in recs]
    cols["pair_a"] = pa.array([None if p is None else float(p["a"]) for p in prs], pa.float64())
    cols["pair_steps"] = pa.array([None if p is None else int(p["steps"]) for p in prs], pa.int64())
    cols["pair_n"] = pa.array([None if p is None else int(p["n"]) for p in prs], pa.int64())
    cols["pair_m"] = pa.array([None if p is None else [int(x) for x in p["m"]] for p in prs], pa.list_(pa.int64()))
    cols["pair_logw"] = pa.array([None if p is None else [float(x) for x in p["logw"]] for p in prs],
                                 pa.list_(pa.float64()))
    return _write_table(path, pa.table(cols))


def read_run(path: Path) -> dict:
    """Inverse of `write_run`: {sid: {"kl", "renyi", "pair"}}."""
    import pyarrow.parquet as pq

    t = pq.read_table(path).to_pydict()
    ids = t["secret"]
    ren_cols = [(c.split(":", 1)[1], t[c]) for c in t if c.startswith("renyi:")]
    out = {}
    for i, sid in enumerate(ids):
        a = t["pair_a"][i]
        pair = None if a is None else {"a": a, "steps": t["pair_steps"][i], "n": t["pair_n"][i],
                                       "m": t["pair_m"][i], "logw": t["pair_logw"][i]}
        out[sid] = {"kl": t["kl"][i], "renyi": {al: col[i] for al, col in ren_cols if not math.isnan(col[i])},
                    "pair": pair}
    return out


def write_state(path: Path, st: State) -> str:
    """The carried-forward state as a Parquet file; returns its SHA-256."""
    import pyarrow as pa

    ids = list(st.kl)
    cols: dict = {"secret": pa.array(ids, pa.string()), "kl": pa.array([st.kl[s] for s in ids], pa.float64())}
    for a in _alphas(st.ren[s] for s in ids):
        cols[f"renyi:{a}"] = pa.array([st.ren[s].get(a, math.nan) for s in ids], pa.float64())
    parts = [st.pairs.get(s, []) for s in ids]
    cols["pairs_known"] = pa.array([p is not None for p in parts], pa.bool_())
    parts = [p or [] for p in parts]
    cols["part_a"] = pa.array([[float(d["a"]) for d in p] for p in parts], pa.list_(pa.float64()))
    cols["part_steps"] = pa.array([[int(d["steps"]) for d in p] for p in parts], pa.list_(pa.int64()))
    cols["part_n"] = pa.array([[int(d["n"]) for d in p] for p in parts], pa.list_(pa.int64()))
    cols["part_m"] = pa.array([[list(map(int, d["m"])) for d in p] for p in parts], pa.list_(pa.list_(pa.int64())))
    cols["part_logw"] = pa.array([[list(map(float, d["logw"])) for d in p] for p in parts],
                                 pa.list_(pa.list_(pa.float64())))
    return _write_table(path, pa.table(cols))


def read_state(path: Path) -> State:
    """Inverse of `write_state`."""
    import pyarrow.parquet as pq

    t = pq.read_table(path).to_pydict()
    st = State()
    ren_cols = [(c.split(":", 1)[1], t[c]) for c in t if c.startswith("renyi:")]
    for i, sid in enumerate(t["secret"]):
        st.kl[sid] = t["kl"][i]
        st.ren[sid] = {al: col[i] for al, col in ren_cols if not math.isnan(col[i])}
        if not t["pairs_known"][i]:
            st.pairs[sid] = None
            continue
        st.pairs[sid] = [{"a": a, "steps": s, "n": n, "m": m, "logw": lw} for a, s, n, m, lw in
                         zip(t["part_a"][i], t["part_steps"][i], t["part_n"][i], t["part_m"][i], t["part_logw"][i])]
    return st
