"""What limits hush's gain over drop-dp on tied code, and what would lift it (issue 44 items 3, 6).

    nice -n 10 python bench/hush_limits.py --repo DIR --package scrapy --granularity module \\
        --repeats 6 --c-mult 1,8,64 --json out.json

For one checkout and one secret granularity, on the embedded tiny base (cheap, so B can be large
enough that the noise does not swamp the comparison):

- the secrets: `module` declares one secret per Python module of `--package` (`__init__.py`
  left out), `directory` one per directory of it holding modules, each with the default targets,
  default floor and `propagate.imports` = 1 — written into a config in a temporary OUT, the
  checkout is never written to;
- `analyze`, then `plan` by the default c rule (c swept, raised while σ stays within the floor's);
- `compare` arms hush, drop-dp, drop, no-dp, `--repeats` times; the held-out `tied-code` slice is
  also split in two halves by file (`tied-code-val`, `tied-code-test`, a salted hash of the path):
  the c sweep below chooses on the first and is judged on the second;
- (a) the drop-dp → no-dp headroom on tied-code split into its noise part (drop-dp → drop: the
  same examples, no noise) and its data part (drop → no-dp: the tied examples added), and hush's
  retained share of the tied weight (Σw over tied training examples / their number);
- (c) with `--c-mult m1,m2,…`: hush again at c = m × the rule's c (σ above the floor's when the
  secrets then bind: the accountant certifies every arm at the same targets and floor), each
  with its retained share, σ, and tied-code-val / tied-code-test / public-code loss against
  drop-dp.

Prints mean ± standard error over the repeats per arm and slice, and the figures above, with B,
T, L, lr, wall and CPU seconds and the load before and after.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

SLICES = ("public-code", "tied-code", "tied-code-val", "tied-code-test", "uses-internal", "public")


def module_secrets(repo: Path, package: str, granularity: str) -> list[dict]:
    """[{"id", "paths"}]: one secret per module (`module`) or per directory of modules
    (`directory`) of `repo/package`; `__init__.py` files are left out (every importer of a
    subpackage would be tied through them)."""
    files = sorted(p.relative_to(repo).as_posix() for p in (repo / package).rglob("*.py") if p.name != "__init__.py")
    if granularity == "module":
        groups = {f: [f] for f in files}
    elif granularity == "directory":
        groups: dict[str, list[str]] = {}
        for f in files:
            d = f.rsplit("/", 1)[0]
            groups.setdefault(d, []).append(f"{d}/*.py")
        groups = {d: sorted(set(v)) for d, v in groups.items()}
    else:
        raise SystemExit(f"--granularity: {granularity!r} is not module or directory")
    out, seen = [], set()
    for key, paths in groups.items():
        sid = re.sub(r"[^a-z0-9]+", "-", key.removesuffix(".py").lower()).strip("-")
        assert sid not in seen, sid
        seen.add(sid)
        out.append({"id": sid, "paths": paths})
    return out


def write_config(out: Path, secrets: list[dict], holdout: float, r: float | None = None) -> Path:
    """The secrets as `[[secret]]` tables (imports depth 1; the default targets, or p 1e-10 and
    bound `r` when given) with `[plan] holdout_fraction`, written into OUT."""
    import tomli_w

    out.mkdir(parents=True, exist_ok=True)
    targets = {} if r is None else {"p": 1e-10, "r": r}
    doc = {"secret": [{**s, **targets, "propagate": {"imports": 1}} for s in secrets],
           "plan": {"holdout_fraction": holdout}}
    dest = out / "limits-repoguard.toml"
    dest.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return dest


def _half(path: str) -> bool:
    return hashlib.sha256(b"hush-limits\0" + path.encode()).digest()[0] < 128


def install_val_split() -> None:
    """Make `compare` also score the held-out tied-code examples in two halves by file."""
    import numpy as np

    from repoguard.evaluation import slices as sl
    from repoguard.source.split import example_path

    orig = sl.code_slices

    def code_slices(incidence, test, *, importers=frozenset()):
        out = orig(incidence, test, importers=importers)
        tc = out.get("tied-code")
        if tc is not None and tc.size:
            first = np.fromiter((_half(example_path(incidence.example_ids[i])) for i in tc), dtype=bool,
                                count=tc.size)
            out["tied-code-val"], out["tied-code-test"] = tc[first], tc[~first]
        return out

    sl.code_slices = code_slices


def losses(runs: list[dict], s: str) -> list[float]:
    vals = [((r.get("slices") or {}).get(s) or {}).get("loss") for r in runs]
    return [float(v) for v in vals if v is not None]


def mean_se(vals: list[float]) -> tuple[float, float | None]:
    n = len(vals)
    m = sum(vals) / n
    if n < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1) / n)


def diff(a: list[float], b: list[float]) -> tuple[float, float | None]:
    """mean(a) − mean(b) and its standard error (independent repeats)."""
    (ma, sa), (mb, sb) = mean_se(a), mean_se(b)
    return ma - mb, (math.sqrt(sa ** 2 + sb ** 2) if sa is not None and sb is not None else None)


def retention(out: Path) -> dict:
    """The plan in OUT: c, σ, tied training examples, their Σw and the retained share."""
    import numpy as np

    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan

    plan, inc = load_plan(out), load_incidence(out)
    tied = np.asarray(inc.matrix.getnnz(axis=1) > 0) & ~plan.test_mask
    n = int(tied.sum())
    sw = float(plan.w[tied].sum())
    return {"c": float(plan.c), "sigma": float(plan.sigma), "tied_examples": n, "tied_sum_w": sw,
            "retained": sw / n if n else None, "secrets": len(inc.secrets),
            "tied_share": float(np.asarray(inc.matrix.getnnz(axis=1) > 0).mean())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--package", required=True, help="the package directory whose modules are the secrets")
    ap.add_argument("--granularity", default="module", help="module or directory")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--batch-size", type=float, default=32)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--eval-examples", type=int, default=96)
    ap.add_argument("--holdout", type=float, default=0.25)
    ap.add_argument("--c-mult", default="", help="also train hush at these multiples of the rule's c")
    ap.add_argument("--init-seed", type=int, default=1)
    ap.add_argument("--r", type=float, default=None, help="every declared secret's bound r (p 1e-10; "
                    "default: the default targets); the floor is unchanged")
    ap.add_argument("--arms", default="hush,drop-dp,drop,no-dp", help="arms at the rule's c")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import dataclasses

    from repoguard.cli import main as cli
    from repoguard.core.config import load_config
    from repoguard.evaluation.compare import run_compare
    from repoguard.planning.undetected import resolve

    install_val_split()
    load_before = [round(x, 2) for x in os.getloadavg()]
    t0, c0 = time.perf_counter(), time.process_time()
    res: dict = {"granularity": args.granularity, "arms": {}, "c_sweep": []}
    with tempfile.TemporaryDirectory(prefix="rg-limits-") as tmp:
        repo = args.repo.resolve()
        out = Path(tmp) / "out"
        secrets = module_secrets(repo, args.package, args.granularity)
        conf = write_config(out, secrets, args.holdout, args.r)
        common = ["-q", "--out", str(out), "--config", str(conf)]
        bt = ["--batch-size", f"{args.batch_size:g}", "--steps", str(args.steps)]
        if cli(["analyze", *common, str(repo)]) != 0 or cli(["plan", *common, *bt, str(repo)]) != 0:
            return 1
        rule = retention(out)
        res["plan"] = rule
        config = load_config(conf, required=True)
        cfg = dataclasses.replace(config.training, learning_rate=args.lr, max_length=args.max_length,
                                  eval_max_examples=args.eval_examples, eval_max_lines=0, eval_every=0,
                                  model="", seed=args.init_seed)
        floor = resolve(config, None)
        mults = [float(x) for x in args.c_mult.split(",") if x.strip()]
        for m in [1.0, *[x for x in mults if x != 1.0]]:
            # c given explicitly: the hush arm keeps it (no sweep per repeat); m = 1 is the rule's plan.
            if cli(["plan", *common, *bt, "--c", repr(rule["c"] * m), str(repo)]) != 0:
                return 1
            kept = retention(out)
            arms = tuple(a for a in args.arms.split(",") if a) if m == 1.0 else ("hush",)
            doc = run_compare(root=repo, out=out, cfg=cfg, arms=arms, show_progress=False, floor=floor,
                              risk=False, repeats=args.repeats, resume=False)
            runs = {}
            for arm in arms:
                rep = (doc.get("repeats") or {}).get(arm)
                runs[arm] = [doc["arms"][arm]] if rep is None else None
            # per-repeat slice losses: the compare document keeps repeat 0's result and the others'
            # summaries; read every repeat's saved result instead.
            for arm in arms:
                rs = []
                for i in range(args.repeats):
                    p = out / "compare" / (f"{arm}.json" if i == 0 else f"{arm}.r{i}.json")
                    rs.append(json.loads(p.read_text(encoding="utf-8"))["result"])
                runs[arm] = rs
            if m == 1.0:
                res["base"] = {s: (doc["base"].get(s) or {}).get("loss") for s in SLICES}
                res["sizes"] = {s: (doc["base"].get(s) or {}).get("examples") for s in SLICES}
                res["arms"] = {a: {s: losses(rs, s) for s in SLICES} for a, rs in runs.items()}
                res["sigma"] = {a: rs[0]["sigma"] for a, rs in runs.items()}
            else:
                res["c_sweep"].append({"mult": m, "plan": kept,
                                       "hush": {s: losses(runs["hush"], s) for s in SLICES}})
            if args.json:       # after each c: an interrupted run keeps what it measured
                args.json.write_text(json.dumps(res, indent=2), encoding="utf-8")
    res["meta"] = {"repo": str(args.repo), "package": args.package, "r": args.r, "B": args.batch_size, "T": args.steps,
                   "L": args.max_length, "lr": args.lr, "repeats": args.repeats,
                   "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                   "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.json:
        args.json.write_text(json.dumps(res, indent=2), encoding="utf-8")
    report(res)
    return 0


def fmt(m: float, se: float | None) -> str:
    return f"{m:+.4f} ± {se:.4f}" if se is not None else f"{m:+.4f}"


def report(res: dict) -> None:
    p, meta, arms = res["plan"], res["meta"], res["arms"]
    if not all(a in arms for a in ("hush", "drop-dp", "drop", "no-dp")):
        print(json.dumps({"plan": p, "sigma": res["sigma"],
                          "slices": {a: {s: mean_se(v) for s, v in per.items() if v} for a, per in arms.items()}}))
        return
    print(f"{res['granularity']}: {p['secrets']} secrets, tied share {p['tied_share']:.3f}; rule c {p['c']:.4g}, "
          f"σ {p['sigma']:.4f}; hush keeps Σw {p['tied_sum_w']:.2f} of {p['tied_examples']} tied training "
          f"examples (retained {p['retained']:.4f})")
    print("held-out examples per slice: " + ", ".join(f"{s} {n}" for s, n in res["sizes"].items() if n))
    print("σ per arm: " + ", ".join(f"{a} {s:.4f}" for a, s in res["sigma"].items()))
    for s in SLICES:
        if not arms["drop-dp"][s]:
            continue
        cells = ", ".join(f"{a} {mean_se(v[s])[0]:.4f} ± {mean_se(v[s])[1] or 0:.4f}" for a, v in arms.items())
        print(f"  {s}: base {res['base'][s]:.4f}; {cells}")
    tc = "tied-code"
    head, hse = diff(arms["drop-dp"][tc], arms["no-dp"][tc])
    noise, nse = diff(arms["drop-dp"][tc], arms["drop"][tc])
    data, dse = diff(arms["drop"][tc], arms["no-dp"][tc])
    hd, hdse = diff(arms["hush"][tc], arms["drop-dp"][tc])
    print(f"(a) tied-code headroom drop-dp − no-dp {fmt(head, hse)} = noise (drop-dp − drop) {fmt(noise, nse)} "
          f"+ data (drop − no-dp) {fmt(data, dse)}")
    print(f"    hush − drop-dp {fmt(hd, hdse)}: recovers {-hd / head:.1%} of the headroom"
          if head > 0 else f"    hush − drop-dp {fmt(hd, hdse)}")
    pc, pcse = diff(arms["hush"]["public-code"], arms["drop-dp"]["public-code"])
    print(f"    public-code hush − drop-dp {fmt(pc, pcse)}")
    for row in res["c_sweep"]:
        k = row["plan"]
        h = row["hush"]
        cells = []
        for s in ("tied-code-val", "tied-code-test", "tied-code", "public-code"):
            if h[s] and arms["drop-dp"][s]:
                cells.append(f"{s} {fmt(*diff(h[s], arms['drop-dp'][s]))}")
        print(f"(c) c × {row['mult']:g} = {k['c']:.4g}: σ {k['sigma']:.4f}, retained {k['retained']:.4f}; "
              f"hush − drop-dp: {', '.join(cells)}")
    for s in ("tied-code-val", "tied-code-test"):
        if arms["hush"][s] and arms["drop-dp"][s]:
            print(f"(c) c × 1: hush − drop-dp {s} {fmt(*diff(arms['hush'][s], arms['drop-dp'][s]))}")
    print(f"tiny base, B {meta['B']:g}, T {meta['T']}, L {meta['L']}, lr {meta['lr']:g}, {meta['repeats']} repeats; "
          f"wall {meta['wall_s']:.0f} s, CPU {meta['cpu_s']:.0f} s, load {meta['load_before']} → "
          f"{meta['load_after']}, {meta['date']}")


if __name__ == "__main__":
    sys.exit(main())
