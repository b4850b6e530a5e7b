"""What the ledger says about published runs, for the plan, the report and `ledger show`.

* `insecure_history`: the secrets an insecure-reproducible run spent on. Such a run drew its
  batches and noise from a seed (tests only): against whoever knows the seed it has no
  guarantee, and that does not heal when later runs use OS entropy. Every later plan, report and
  `ledger show --json` marks those secrets (issue 32, hole H).
* `check_published`: a published privacy report (`OUT/train/privacy_report.json`, and those of
  scheduled runs under `OUT/runs/*/train/`) of a private run must name a run, and a ledger head,
  that the ledger holds. A deleted or replaced ledger would otherwise restart every secret's
  budget at zero while the released adapters remain (issue 32, hole J). The check is only as
  strong as the unkeyed chain (docs/scheduled.md: what the hash chain does and does not protect against).
"""
from __future__ import annotations

import json
from pathlib import Path

from repoguard.core.errors import PolicyError

INSECURE = "insecure-reproducible"     # ledger "randomness" of a seeded test run (training.randomness)


def insecure_history(ledger_path: str | Path) -> dict[str, list[str]]:
    """{secret id: [run ids]}: the insecure-reproducible runs (ledger "randomness") whose last
    entry spent on the secret (KL > 0, at least one step), in ledger order. Empty when the ledger
    does not exist. Raises PolicyError when a spending file is unreadable."""
    from repoguard.accounting.ledger_io import entry_run, read_entries, shared_lock

    path = Path(ledger_path)
    if not path.exists():
        return {}
    out: dict[str, list[str]] = {}
    with shared_lock(path):
        last: dict[str, dict] = {}
        insecure: set[str] = set()
        for e in read_entries(path):
            last[str(e.get("run_id"))] = e
            if e.get("randomness") == INSECURE:
                insecure.add(str(e.get("run_id")))
        for rid, e in sorted(last.items(), key=lambda kv: kv[1].get("seq", 0)):
            if rid not in insecure or int(e.get("steps_completed") or 0) <= 0:
                continue
            run = entry_run(path, e)
            for sid, kl in zip(run.ids, run.kl):
                if kl > 0:
                    out.setdefault(str(sid), []).append(rid)
    return out


def mark_insecure(plan, ledger_path: str | Path) -> dict[str, list[str]]:
    """Record in `plan.extra["insecure_runs"]` the plan's secrets with an insecure-reproducible run
    in their history ({secret: [run ids]}; `insecure_history`); returns it. The undetected floor's
    account gets the same mark in `plan.extra["undetected_floor"]["insecure_runs"]`."""
    hist = insecure_history(ledger_path)
    ids = {s.id for s in plan.secrets}
    plan.extra["insecure_runs"] = {k: v for k, v in sorted(hist.items()) if k in ids}
    floor = plan.extra.get("undetected_floor") or {}
    acct = (floor.get("account") or {}).get("id")
    if acct and hist.get(acct):          # the floor's own account (`undetected.py`): no guarantee either
        floor["insecure_runs"] = hist[acct]
    return plan.extra["insecure_runs"]


def insecure_lines(insecure: dict[str, list[str]]) -> list[str]:
    """Human lines for `insecure_runs` (empty when none)."""
    if not insecure:
        return []
    runs = sorted({r for v in insecure.values() for r in v})
    shown = ", ".join(sorted(insecure)[:5]) + (f" and {len(insecure) - 5} more" if len(insecure) > 5 else "")
    return [f"INSECURE: {len(insecure)} secret(s) ({shown}) were trained by insecure-reproducible run(s) "
            f"{', '.join(runs[:3])}{' …' if len(runs) > 3 else ''}: batches and noise derived from a seed, so "
            "their bounds do not hold against whoever knows it"]


def published_reports(out: Path, ledger_path: Path) -> list[Path]:
    """The privacy reports of runs published from `out` (`out/train`, and `out/synth`'s summary of
    a synthetic corpus) and, for a ledger shared by
    scheduled runs, from `<ledger dir>/runs/*/train`."""
    found = [Path(out) / "train" / "privacy_report.json", Path(out) / "synth" / "summary.json"]
    found += sorted(Path(ledger_path).resolve().parent.glob("runs/*/train/privacy_report.json"))
    seen, unique = set(), []
    for f in found:
        key = str(f.resolve()) if f.exists() else str(f)
        if f.is_file() and key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def check_published(out: Path, ledger_path: Path) -> None:
    """Refuse to plan (PolicyError) when a published private run's privacy report names a run id
    or a ledger head that the ledger at `ledger_path` lacks (the ledger was deleted, truncated or
    replaced, and planning against it would spend the secrets' budgets again), or when
    `out/train/adapter` exists without a privacy report and the ledger is empty."""
    from repoguard.accounting.ledger_io import read_entries

    ledger_path = Path(ledger_path)
    reports = published_reports(out, ledger_path)
    adapter = Path(out) / "train" / "adapter"
    if not reports and not adapter.is_dir():
        return
    entries = read_entries(ledger_path) if ledger_path.exists() else []
    if not entries and adapter.is_dir() and not (adapter.parent / "privacy_report.json").is_file():
        raise PolicyError(f"{adapter}: a published adapter without its privacy report, and the ledger "
                          f"{ledger_path} is empty or missing (deleted?); refusing to plan, the secrets' budgets "
                          f"would start again from zero. Restore the ledger, or remove {adapter.parent} if that "
                          "adapter was never released")
    runs = {str(e.get("run_id")) for e in entries}
    hashes = {e.get("hash") for e in entries}
    for f in reports:
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or not doc.get("private"):
            continue                        # a --no-dp run is never recorded (and promises nothing)
        rid, head = str(doc.get("run_id")), doc.get("ledger_head")
        if rid not in runs or (head is not None and head not in hashes):
            what = "is missing" if not ledger_path.exists() else "does not hold that run"
            raise PolicyError(f"{f}: published run {rid} is not in the ledger ({ledger_path} {what}: deleted, "
                              "truncated or replaced?); refusing to plan, the secrets' budgets would start "
                              f"again from zero. Restore the ledger with its .head and .d/, or remove {f.parent} "
                              "if that adapter was never released")
