"""Benchmark: remembering what public phases trained in the clear, and finding exposures.

Builds a synthetic incidence of `--examples` examples (ids shaped like the corpus's
`path#chunk@blob`) with `--tied` of them tied to 1 000 secrets, and records `--runs` two-phase runs
(started + completed, as the trainer does), each public phase training on every untied example;
`--distinct` of the runs see a different public set (a changed file), the others the same one, so
the content-addressed side files are shared. Then declares a new secret over 10 of the public
examples and times `exposures.find_exposures` (what `plan` adds). Prints the side files' size,
the append time with and without clear ids (measured in the same run), the lookup time, and
`verify` of every side file.

    .venv/bin/python bench/exposures.py --examples 1000000 --runs 20
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repoguard.accounting.clear_exposures import clear_runs, find_exposures  # noqa: E402
from repoguard.accounting.ledger import append_entry, side_dir, verify  # noqa: E402


class _Incidence:
    def __init__(self, ids, matrix, secrets):
        self.example_ids, self.matrix, self.secrets = ids, matrix, secrets


class _S:
    def __init__(self, sid):
        self.id = sid


def main() -> None:
    import scipy.sparse as sp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1_000_000)
    ap.add_argument("--tied", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--distinct", type=int, default=4)
    a = ap.parse_args()
    n = a.examples
    ids = [f"src/pkg{i // 50}/mod{i % 50}.py#{i % 3}@{i:012x}" for i in range(n)]
    rng = np.random.default_rng(0)
    tied = rng.choice(n, a.tied, replace=False)
    public = np.setdiff1d(np.arange(n), tied)
    tmp = Path(tempfile.mkdtemp())
    ledger = tmp / "ledger.jsonl"
    fields = {"run_id": "", "status": "started", "sigma": 1.0, "batch_size": 64, "steps": 10}
    secrets = {f"s{j}": {"kl": 0.01, "renyi": {"2": 0.02}, "pair": None} for j in range(1000)}
    t_plain = t_clear = 0.0
    for k in range(a.runs):
        pub = public[: len(public) - (k % a.distinct)]          # a few distinct public sets
        clear = [ids[i] for i in pub]
        for status in ("started", "completed"):
            t0 = time.perf_counter()
            append_entry(ledger, {**fields, "run_id": f"plain-{k}", "status": status}, secrets)
            t_plain += time.perf_counter() - t0
            t0 = time.perf_counter()
            append_entry(ledger, {**fields, "run_id": f"two-phase-{k}", "status": status}, secrets,
                         clear_example_ids=clear)
            t_clear += time.perf_counter() - t0
    files = list(side_dir(ledger).glob("clear-*.parquet"))
    size = sum(f.stat().st_size for f in files)
    # a newly declared secret over 10 public examples; 1 000 secrets over the tied ones
    new = public[rng.choice(len(public) - a.distinct, 10, replace=False)]
    rows = np.concatenate([tied, new])
    cols = np.concatenate([rng.integers(0, 1000, tied.size), np.full(10, 1000)])
    m = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n, 1001))
    inc = _Incidence(ids, m, [_S(f"s{j}") for j in range(1000)] + [_S("new")])
    t0 = time.perf_counter()
    runs = clear_runs(ledger)
    t_runs = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = find_exposures(ledger, inc, runs=runs)
    t_find = time.perf_counter() - t0
    t0 = time.perf_counter()
    ok = verify(ledger)["ok"]
    t_verify = time.perf_counter() - t0
    assert {x.secret for x in found} == {"new"} and len(found) == a.runs and ok
    print(f"{n} examples, {len(public)} public, {a.runs} two-phase runs ({2 * a.runs} entries): "
          f"{len(files)} clear-ids file(s), {size / 1e6:.1f} MB ({size / len(files) / len(public):.2f} B/id)")
    print(f"append: {t_plain / (2 * a.runs):.3f} s/entry without ids, {t_clear / (2 * a.runs):.3f} s/entry with "
          f"({t_clear / max(t_plain, 1e-9):.1f}x)")
    print(f"clear_runs {t_runs:.2f} s, find_exposures {t_find:.2f} s ({len(found)} exposures of 'new'), "
          f"verify {t_verify:.2f} s")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
