"""Benchmark: a year of nightly scheduled runs in the privacy ledger.

Simulates `--nights` runs (each recorded "started", then "completed", as the trainer does) at
`--secrets` secrets, each secret with 4 examples (ρ ~ U[0.005, 0.02], as the binding secrets of
Hush §5.1), T = 2000/365 steps a night, 42 Rényi orders (a few dropped as +inf), and σ re-planned
weekly (52 distinct σ, so a secret's pair history needs the dominance merge of
`ledger_state.py`). Prints the ledger's size on disk, the time to read what every secret has
spent before the last run (`ledger.spending`: newest summary + open runs) against composing it
from every raw entry (`spent_of` / `pairs_of`) in the same run, the check that both agree, and
`ledger verify` (every side file's digest) and `verify --deep` times.

    .venv/bin/python bench/ledger.py --secrets 10000 --nights 365
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repoguard.accounting.batch import batch_mixtures  # noqa: E402
from repoguard.accounting.divergences import DEFAULT_ALPHAS  # noqa: E402
from repoguard.accounting.ledger import append_entry, pairs_of, read_entries, spending, spent_of, verify  # noqa: E402
from repoguard.accounting.pld import _coarsen  # noqa: E402


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secrets", type=int, default=10_000)
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    ids = [f"secret-{j:06d}" for j in range(a.secrets)]
    mixes = [_coarsen(m) for m in batch_mixtures([np.sort(rng.uniform(0.005, 0.02, 4)) for _ in ids])]
    ms = [[int(x) for x in m.m] for m in mixes]
    lws = [[float(x) for x in m.logw] for m in mixes]
    base = rng.uniform(1e-4, 1e-3, a.secrets)
    alphas = [f"{x:g}" for x in DEFAULT_ALPHAS]
    steps = max(1, 2000 // a.nights)
    sigmas = 0.95 * (1 + 0.3 * rng.random(52))
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    path = tmp / "ledger.jsonl"
    t_append = 0.0
    try:
        for night in range(a.nights):
            sigma = float(sigmas[night // 7 % 52])
            scale = steps / sigma ** 2
            secrets = {}
            for j, sid in enumerate(ids):
                kl = float(base[j] * scale)
                ren = {al: kl * float(x) for al, x in zip(alphas, DEFAULT_ALPHAS) if x < 100 or j % 2}
                secrets[sid] = {"kl": kl, "renyi": ren,
                                "pair": {"a": 1 / sigma, "steps": steps, "m": ms[j], "logw": lws[j], "n": 4}}
            fields = {"run_id": f"night-{night:03d}", "plan_digest": "0" * 64, "sigma": sigma, "batch_size": 2048.0,
                      "steps": steps, "accountant": "best", "adjacency": "zero-out"}
            started = {sid: {"kl": 0.0, "renyi": {}, "pair": None} for sid in ids}
            t = time.perf_counter()
            append_entry(path, {**fields, "status": "started", "steps_completed": 0}, started)
            append_entry(path, {**fields, "status": "completed", "steps_completed": steps}, secrets)
            t_append += time.perf_counter() - t
            if night % 30 == 0:
                print(f"  night {night + 1}: {du(tmp) / 1e6:.0f} MB, appends so far {t_append:.0f} s", flush=True)
        size = du(tmp)
        t = time.perf_counter()
        got, got_pairs = spending(path)
        t_summary = time.perf_counter() - t
        t = time.perf_counter()
        entries = read_entries(path)
        raw, raw_pairs = spent_of(entries, path=path), pairs_of(entries, path=path)
        t_raw = time.perf_counter() - t
        worst = max(abs(got[s][0] - raw[s][0]) / raw[s][0] for s in ids)
        parts_carried = max(len(v) for v in got_pairs.values())
        parts_raw = max(len(v) for v in raw_pairs.values())
        t = time.perf_counter()
        v = verify(path)
        t_verify = time.perf_counter() - t
        t = time.perf_counter()
        vd = verify(path, deep=True)
        t_deep = time.perf_counter() - t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"setting: {a.nights} nightly runs ({2 * a.nights} entries) × {a.secrets:,} secrets, {len(alphas)} Rényi "
          f"orders, {steps} steps a night, 52 distinct σ")
    print(f"ledger on disk: {size / 1e6:.1f} MB ({size / a.nights / 1e6:.2f} MB a night); appends {t_append:.1f} s "
          f"in all ({t_append / a.nights:.2f} s a night)")
    print(f"spending before run {a.nights + 1}: carried-forward summary {t_summary:.2f} s vs raw composition "
          f"{t_raw:.2f} s ({t_raw / t_summary:.1f}×); max relative KL difference {worst:.1e}; "
          f"pair parts per secret {parts_carried} (carried) vs {parts_raw} (raw)")
    print(f"ledger verify (every side file's digest): {t_verify:.2f} s, ok = {v['ok']}; "
          f"verify --deep (summary recomputed): {t_deep:.2f} s, ok = {vd['ok']}")
    if not (v["ok"] and vd["ok"]) or worst > 1e-9 or math.isnan(worst):
        sys.exit(1)


if __name__ == "__main__":
    main()
