"""Benchmark: CPU seconds the credential engine spends on hostile inputs, as a ratio against a
benign input of the same size measured in the same run.

The tests assert that this work is linear by counting it (bytes read, values judged) or by the
ratio of two sizes; the seconds themselves live here, because a time limit in a test fails on a
loaded 2-core machine. Each hostile input (2–3 MB) is built to provoke backtracking, overlapping
windows, a hit per line or a repeated vendor name; the baseline is real Python source (this
repository's own `repoguard/` package, repeated) cut to the same length.

    .venv/bin/python bench/hostile.py [--scale 1.0] [--json]

Prints one line per input: bytes, CPU seconds, MB per CPU-second, and `ratio` = its CPU seconds
over the baseline's. A ratio far above ~5 is a regression worth profiling.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from repoguard.credentials.engine import Engine
from repoguard.credentials.rules import load_rules

ROOT = Path(__file__).resolve().parent.parent

HOSTILE = {
    "quote run after password=": lambda k: b"password=" + b"'" * (2_000_000 * k),
    "private-key header + 3 MB": lambda k: b"-----BEGIN PRIVATE KEY-----" + b"A" * (3_000_000 * k),
    "api_key = 149 chars, x20k": lambda k: (b"api_key = " + b"a" * 149 + b" ") * (20_000 * k),
    "binary \\x00\\xff": lambda k: b"\x00\xff" * (1_000_000 * k),
    "'ey' x1.5M (JWT prefix)": lambda k: b"ey" * (1_500_000 * k),
    "postgres://u:@@@… x10k": lambda k: (b"postgres://u:" + b"@" * 200) * (10_000 * k),
    "keyword windows + digit run": lambda k: (b"key=" + b"a1" * 20 + b" ") * (20_000 * k)
    + b"token: " + b"9" * (200_000 * k),
    "'datadog ' x250k": lambda k: b"datadog " * (250_000 * k),
    "'twilio key=a1…' x50k": lambda k: (b"twilio key=" + b"a1" * 16 + b" ") * (50_000 * k),
}


def _source(n: int) -> bytes:
    """`n` bytes of real Python: this repository's own package, repeated."""
    text = b"".join(p.read_bytes() for p in sorted((ROOT / "repoguard").rglob("*.py")))
    return (text * (n // len(text) + 1))[:n]


def _cpu(engine: Engine, data: bytes) -> float:
    t0 = time.process_time()
    engine.scan(data, "a.txt")
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=1, help="input size multiplier (default 1)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead")
    a = ap.parse_args()
    engine = Engine.build(load_rules())
    engine.scan(b"warm-up", "a.txt")
    rows = []
    for name, make in HOSTILE.items():
        data = make(a.scale)
        base = _cpu(engine, _source(len(data)))
        cpu = _cpu(engine, data)
        rows.append({"input": name, "bytes": len(data), "cpu_s": round(cpu, 3), "baseline_cpu_s": round(base, 3),
                     "mb_per_cpu_s": round(len(data) / 1e6 / max(cpu, 1e-9), 1),
                     "ratio": round(cpu / max(base, 1e-9), 2)})
    load = os.getloadavg()[0]
    if a.json:
        print(json.dumps({"load": load, "rows": rows}))
        return 0
    print(f"hostile inputs vs real source of the same size (baseline), load {load:.1f}")
    for r in rows:
        print(f"{r['input']:<30} {r['bytes']:>9} B  {r['cpu_s']:7.3f} s CPU  "
              f"baseline {r['baseline_cpu_s']:7.3f} s  ratio {r['ratio']:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
