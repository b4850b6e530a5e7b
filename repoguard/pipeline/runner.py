"""The stage runner behind `repoguard run`: scan → analyze → plan → train → audit → report.

Each stage's inputs are reduced to a content digest (SHA-256 of canonical JSON of: tracked blob
SHAs and hashes of dirty working files, HEAD, the config file's bytes, the digests of the upstream
artefacts the stage reads, and its flags) and recorded with the digest of what it wrote in
`OUT/run_state.json` (format version 1):

    {"format_version": 1, "stages": {name: {"inputs": sha256, "outputs": sha256, "seconds": s,
      "cpu_seconds": user + system CPU seconds (this process and its children),
      "max_rss_mb": peak RSS of the process so far, "info": {...}, "finished": UTC ISO}}}

A stage is skipped when its input digest matches the recorded one and its artefacts still hash
to the recorded output digest; a stage that re-runs and writes byte-identical artefacts leaves
its downstream stages skipped too. `--from STAGE` forces that stage and every later one.

The ledger is special: the plan depends on what *other* runs spent, so its input is the last
ledger entry not written by this output directory's own training runs; when training must run
against a plan made before the ledger moved, the plan is re-made first (the train stage's
`before`; the trainer would refuse it otherwise, training/guard.py).
"""
from __future__ import annotations

import logging
import resource
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from repoguard.core.config import Config
from repoguard.core.errors import InputError
from repoguard.pipeline import registry
from repoguard.pipeline.context import Context, RunSettings, digest, load_state, save_state

log = logging.getLogger("repoguard")


def run_pipeline(repo, config: Config, *, config_path: str | None, out: Path, settings: RunSettings,
                 say: Callable[[str], None] = lambda s: None, seed_state: dict | None = None) -> dict:
    """Run the stages in order, skipping those whose inputs and artefacts are unchanged; returns
    the summary (`summarize`). Raises InputError/PolicyError from the stages (the state of every
    finished stage is saved first) and PolicyError for findings under `fail_on_findings`."""
    stages = registry.names()
    if settings.from_stage is not None and settings.from_stage not in stages:
        raise InputError(f"--from: unknown stage {settings.from_stage!r} (stages: {', '.join(stages)})")
    out.mkdir(parents=True, exist_ok=True)
    config_bytes = Path(config_path).read_bytes() if config_path else b""
    state = seed_state if seed_state is not None else load_state(out)
    ctx = Context(repo, config, config_bytes, config_path, out, settings, state, say)
    forced_from = stages.index(settings.from_stage) if settings.from_stage else len(stages)
    order = [s for s in stages if registry.enabled(registry.get(s), settings)]
    for n, name in enumerate(order, 1):
        stage = registry.get(name)
        inputs = stage.inputs(ctx)
        key = digest(inputs)
        rec = ctx.recorded(name)
        fresh = (stages.index(name) < forced_from and rec.get("inputs") == key
                 and rec.get("outputs") == stage.outputs(ctx))
        if fresh:
            ctx.skipped.append(name)
            ctx.infos[name] = rec.get("info", {})
            say(f"[{n}/{len(order)}] {name}: unchanged, skipped")
            continue
        before = getattr(stage, "before", None)
        if before is not None and before(ctx, lambda other: _rerun(ctx, other)):
            key = digest(stage.inputs(ctx))         # it re-ran a stage its inputs depend on
        say(f"[{n}/{len(order)}] {name} …")
        t0, c0 = time.perf_counter(), _cpu()
        info = stage.execute(ctx)
        secs = time.perf_counter() - t0
        _record(ctx, name, stage, key=key, inputs=inputs, info=info, seconds=secs, cpu=_cpu() - c0)
        say(f"[{n}/{len(order)}] {name}: done in {secs:.1f} s{stage.describe(info)}")
        after = getattr(stage, "after", None)
        if after is not None:
            after(ctx, info)                        # may stop the run (PolicyError)
    return summarize(ctx)


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its waited-for children so far."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _record(ctx: Context, name: str, stage, *, key: str, inputs: dict, info: dict, seconds: float,
            cpu: float | None = None) -> None:
    """Note stage `name` as run in this run and save its state record (after every stage, so a
    failure keeps what finished)."""
    ctx.infos[name] = info
    if name in ctx.skipped:
        ctx.skipped.remove(name)
    if name not in ctx.ran:
        ctx.ran.append(name)
    ctx.state.setdefault("stages", {})[name] = {
        "inputs": key, "outputs": stage.outputs(ctx), "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3) if cpu is not None else None,
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "info": info, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs_detail": inputs,
    }
    save_state(ctx)


def _rerun(ctx: Context, name: str) -> tuple[dict, float]:
    """Run stage `name` again now (a later stage's `before` asked for it), recorded as run
    (summary, state, seconds); returns (its info, wall seconds)."""
    stage = registry.get(name)
    t0, c0 = time.perf_counter(), _cpu()
    info = stage.execute(ctx)
    secs = time.perf_counter() - t0
    inputs = stage.inputs(ctx)
    _record(ctx, name, stage, key=digest(inputs), inputs=inputs, info=info, seconds=secs, cpu=_cpu() - c0)
    return info, secs


def summarize(ctx: Context) -> dict:
    """The final summary `repoguard run --json` prints: counts, σ, B, T, the retained fraction
    Σw/n, min/max over secrets of achieved bound / configured r, paths, seconds per stage.

    `seconds` holds the seconds of the stages that ran in *this* run and "skipped" for those
    skipped; run_state.json keeps the seconds a skipped stage took when it last ran, and they are
    not this run's (issue 28 item 1: night 2 reported night 1's analyze time)."""
    i = ctx.infos
    plan, train = i.get("plan", {}), i.get("train", {})
    return {
        "out": str(ctx.out), "ran": ctx.ran, "skipped": ctx.skipped,
        "credentials_found": i.get("scan", {}).get("findings"),
        "files": i.get("analyze", {}).get("files"),
        "examples": i.get("analyze", {}).get("examples"),
        "secrets": i.get("analyze", {}).get("secrets"),
        "incidences": i.get("analyze", {}).get("incidences"),
        "retained_fraction": plan.get("retained_fraction"),
        "least_retained": plan.get("least_retained"),
        "sigma": plan.get("sigma"), "batch_size": plan.get("batch_size"), "steps": plan.get("steps"),
        "bound_ratio_min": plan.get("bound_ratio_min"), "bound_ratio_max": plan.get("bound_ratio_max"),
        "binding_secret": plan.get("binding_secret"), "undetected_floor": plan.get("undetected_floor"),
        "batch_rule": plan.get("batch_rule"),
        "exposures": plan.get("exposures", []), "insecure_runs": plan.get("insecure_runs") or {},
        "adapter": train.get("adapter"), "run_id": train.get("run_id"),
        "audit": i.get("audit"), "report": i.get("report", {}).get("html"),
        "ledger": str(ctx.ledger),
        "seconds": _seconds(ctx), "cpu_seconds": _seconds(ctx, "cpu_seconds"),
    }


def _seconds(ctx: Context, field: str = "seconds") -> dict:
    """Per stage in pipeline order: the (wall or CPU) seconds it took in this run, or "skipped"."""
    out = {}
    for s in registry.names():
        if s in ctx.ran:
            out[s] = ctx.recorded(s).get(field)
        elif s in ctx.skipped:
            out[s] = "skipped"
    return out
