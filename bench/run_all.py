"""Run every `bench/*.py` with small settings suited to a 2-core machine and print ONE table:
bench, figure, value, and the baseline each figure is measured against (in the same run).

    .venv/bin/python bench/run_all.py [--only NAME,…] [--timeout 900]

Each bench's own size flags are passed (see SPECS); its stdout is captured, its figures parsed
(JSON where the bench offers it, its printed lines otherwise). The table goes to stdout and to
`bench/out/latest.md` (git-ignored) with each bench's raw output below it. A bench without a
SPECS entry runs with no arguments and its output lines that name a baseline or ratio become rows,
so a new bench shows up without editing this file. Exit 1 when some bench failed.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable


def _fixture(tmp: Path) -> str:
    dest = tmp / "acme-monorepo"
    if not dest.exists():
        subprocess.run([PY, str(ROOT / "fixtures" / "build_monorepo.py"), str(dest)], check=True,
                       capture_output=True)
    return str(dest)


def _corpus_tree() -> str:
    """pip's installed package (~10 MB of real Python: sizeable, and present in every venv)."""
    import sysconfig

    pip = Path(sysconfig.get_paths()["purelib"]) / "pip"
    return str(pip if pip.is_dir() else ROOT / "repoguard")


def _num(x, fmt=".3g"):
    return format(x, fmt) if isinstance(x, (int, float)) else str(x)


# -- figure extractors: stdout (and the JSON side file, if any) → [(figure, value, baseline)] -------
def _accounting(out: str, side: Path | None):
    d = json.loads(out[out.index("{"):])
    return [
        ("LP solve", f"{d['lp_s']:.2f} s", "—"),
        ("σ calibration (best), all secrets", f"{d['calibrate_best_s']:.2f} s",
         f"naive bisection per secret {d['baseline_naive_extrapolated_s']:.1f} s "
         f"(speed-up {d['speedup_vs_naive']:.1f}×)"),
        ("σ(kl) / σ(best)", f"{d['sigma_kl_over_best']:.2f}", "paper's KL accountant (target ≥ 20)"),
        ("all targets met", str(d["all_targets_met"]), "—"),
    ]


def _analyze(out: str, side: Path | None):
    d = json.loads(side.read_text())
    rows = [("analyze, cold (corpus + analyzers)", f"{d['analyze_seconds']:.2f} s, peak RSS {d['peak_rss_mb']} MB",
             f"git log -z --name-status {d['baseline_git_log_seconds']:.2f} s; "
             f"ast.parse of the .py files {d['baseline_ast_parse_seconds']:.2f} s"),
            ("analyzers, warm re-run", f"{d['warm_seconds']:.2f} s", f"cold {d['analyzers_seconds']:.2f} s")]
    if "hook_seconds" in d:
        rows.append(("pre-commit hook (tag)", f"{d['hook_seconds']:.2f} s", "—"))
    return rows


def _corpus(out: str, side: Path | None):
    rows = []
    for line in out.splitlines():
        m = re.match(r"(repoguard corpus, \d+ process\(es\))\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            rows.append((m.group(1), f"{m.group(4)} MB/s, {m.group(5)}× the floor's speed",
                         "read + UTF-8 decode of the same files"))
    return rows


def _plan(out: str, side: Path | None):
    d = json.loads(out[out.index("{"):])
    return [("plan, night 1 (c sweep, floor, baselines)", f"{d['night1_cpu_s']:.1f} s CPU ({d['night1_wall_s']:.1f} s wall)",
             f"the LP alone {d['lp_cpu_s']:.2f} s CPU ({d['night1_over_lp_cpu']:.0f}×)"),
            ("plan, night 2 (ledger: night 1)", f"{d['night2_cpu_s']:.1f} s CPU ({d['night2_wall_s']:.1f} s wall)",
             f"night 1 ({d['night2_over_night1_cpu']:.2f}×); cold re-run identical: {d['cold_rerun_identical']}")]


def _scan(out: str, side: Path | None):
    rows = []
    m = re.search(r"repoguard scan --no-git: .*?([\d.]+) MB/s wall.*?([\d.]+) MB per CPU-second", out)
    if m:
        rows.append(("scan throughput", f"{m.group(1)} MB/s wall, {m.group(2)} MB/CPU-s", "—"))
    m = re.search(r"ratio repoguard / detect-secrets: ([\d.]+)x wall, ([\d.]+)x per CPU-second", out)
    if m:
        rows.append(("scan speed ratio", f"{m.group(1)}× wall, {m.group(2)}× per CPU-s",
                     "detect-secrets scan --all-files, same files"))
    return rows


def _train(out: str, side: Path | None):
    d = json.loads(out[out.index("{"):])
    return [("DP-SGD tokens/s", _num(d["dp_tokens_per_s"], ".0f"), f"--no-dp {_num(d['no_dp_tokens_per_s'], '.0f')} tokens/s"),
            ("DP / no-DP throughput", f"{d['ratio_dp_over_no_dp']:.3f} (CPU time {d['ratio_cpu_time']:.3f})",
             f"--no-dp, same batches (target ≥ {d['target_ratio']})")]


def _generic(out: str, side: Path | None):
    keep = re.compile(r"baseline|ratio|floor|×|\bvs\b", re.I)
    return [(line.strip()[:60], "(see line)", "named in the line") for line in out.splitlines() if keep.search(line)][:6]


# name: (argv builder (tmp dir → args), extractor, uses a JSON side file)
SPECS = {
    "accounting": (lambda tmp: ["--scale", "0.005", "--baseline-sample", "20", "--json"], _accounting, False),
    "analyze": (lambda tmp: [_fixture(tmp), "--hook-files", "2", "--json", str(tmp / "analyze.json")], _analyze, True),
    "analyze_plan": (lambda tmp: [_fixture(tmp)], _generic, False),
    "corpus": (lambda tmp: [_corpus_tree()], _corpus, False),
    "plan": (lambda tmp: ["--examples", "3000", "--steps", "50", "--json"], _plan, False),
    "scan": (lambda tmp: ["--mb", "5", "--jobs", "2", "--detect-secrets-mb", "1"], _scan, False),
    "train": (lambda tmp: ["--examples", "64", "--batch-size", "16", "--micro-batch-size", "8",
                           "--max-length", "64", "--steps", "2", "--rounds", "3"], _train, False),
}


def run_bench(name: str, tmp: Path, timeout: float) -> dict:
    build, extract, side = SPECS.get(name, (lambda t: [], _generic, False))
    argv = [PY, str(HERE / f"{name}.py"), *build(tmp)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -1, exc.stdout or "", f"timed out after {timeout:.0f} s"
        out = out.decode() if isinstance(out, bytes) else out
    secs = time.perf_counter() - t0
    rows, problem = [], None
    if rc == 0:
        try:
            rows = extract(out, tmp / "analyze.json" if side else None)
        except (ValueError, KeyError, OSError) as exc:
            problem = f"could not read its figures ({exc})"
    else:
        problem = f"exit {rc}: {(err or '').strip().splitlines()[-1:] or ['']}"
    if problem:
        rows = [("FAILED", problem[:120], "—")]
    return {"bench": name, "argv": argv[2:], "seconds": secs, "rows": rows, "stdout": out, "ok": problem is None}


def table(results: list[dict]) -> str:
    lines = ["| bench | figure | value | baseline (same run) |", "|---|---|---|---|"]
    for r in results:
        for fig, val, base in r["rows"]:
            lines.append(f"| {r['bench']} | {fig} | {val} | {base} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated bench names")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per bench")
    a = ap.parse_args()
    names = sorted(p.stem for p in HERE.glob("*.py") if p.stem != "run_all" and not p.stem.startswith("_"))
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="rg-bench-") as td:
        for name in names:
            print(f"running bench/{name}.py …", file=sys.stderr, flush=True)
            results.append(run_bench(name, Path(td), a.timeout))
    md = table(results)
    print(md)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc = [f"# bench/run_all.py — {stamp}", "", md, ""]
    for r in results:
        doc += [f"## {r['bench']} ({r['seconds']:.0f} s): `{' '.join(r['argv'])}`", "", "```",
                r["stdout"].rstrip(), "```", ""]
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "latest.md").write_text("\n".join(doc))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
