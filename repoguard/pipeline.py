"""The stage runner behind `repoguard run`: scan → analyze → plan → train → audit → report.

Each stage's inputs are reduced to a content digest (SHA-256 of canonical JSON of: tracked blob
SHAs and hashes of dirty working files, HEAD, the config file's bytes, the digests of the upstream
artefacts the stage reads, and its flags) and recorded with the digest of what it wrote in
`OUT/run_state.json` (format version 1):

    {"format_version": 1, "stages": {name: {"inputs": sha256, "outputs": sha256, "seconds": s,
      "max_rss_mb": peak RSS of the process so far, "info": {...}, "finished": UTC ISO}}}

A stage is skipped when its input digest matches the recorded one and its artefacts still hash
to the recorded output digest; a stage that re-runs and writes byte-identical artefacts leaves
its downstream stages skipped too. `--from STAGE` forces that stage and every later one.

The ledger is special: the plan depends on what *other* runs spent, so its input is the last
ledger entry not written by this output directory's own training runs; when training must run
against a plan made before the ledger moved, the plan is re-made first (the trainer would
refuse it otherwise, training/guard.py).
"""
from __future__ import annotations

import hashlib
import json
import logging
import resource
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from repoguard import __version__
from repoguard.artefacts import FORMAT_VERSION, atomic_write_json
from repoguard.config import Config, PlanConfig
from repoguard.errors import InputError, PolicyError
from repoguard.provenance import tree_digest  # noqa: F401  (re-exported: stage digests)

log = logging.getLogger("repoguard")

STAGES = ("scan", "analyze", "plan", "train", "audit", "report")
STATE_FILE = "run_state.json"
# The default B and T when neither a flag nor `[plan]` in the config sets them (issue 26 item 3):
# `batch_rule`, chosen from the B × T sweep at the undetected-secret floor in the README ("Choosing
# B and T"). One rule for `plan` and `run`, whatever the model.
RULE_STEPS = 200                 # T: at a fixed B·T, T = 200 beat T ≤ 100 and tied with T = 400
RULE_EPOCHS = 5                  # B = E·n/T: E passes over the n untied examples in T steps
RULE_B_MIN, RULE_B_MAX = 16, 256 # B_max·T = 51 200 example-gradients: the compute cap
RULE_RHO_MAX = 3                 # B ≤ n/3: an untied example's ρ = B/Σw ≤ 1/3 (σ_floor grows as ρ → 1)
AUDIT_STEPS = 20


@dataclass(frozen=True)
class RunSettings:
    """What `repoguard run` adds to the config; None keeps the config's (or run's) default."""

    batch_size: float | None = None
    steps: int | None = None
    clip_norm: float | None = None
    c: float | None = None
    sweep: bool = False
    cap: str | None = None
    accountant: str | None = None
    adjacency: str | None = None
    model: str | None = None
    max_length: int | None = None
    lora_r: int | None = None
    lr: float | None = None
    micro_batch_size: int | None = None
    seed: int | None = None
    device: str = "auto"
    no_dp: bool = False
    insecure_reproducible: bool = False  # tests only: the private run's batches and noise from `seed`
    keep_checkpoint: bool = False
    undetected: str | None = None       # --undetected: the floor for this run (None = [defaults])
    budget_fraction: float = 1.0        # share of each secret's remaining headroom this run may spend
    audit: bool = False
    audit_steps: int | None = None
    from_stage: str | None = None
    fail_on_findings: bool = False
    show_progress: bool = True
    ledger_path: Path | None = None      # default OUT/ledger.jsonl; scheduled runs share one
    phases: int | None = None            # two-phase fine-tuning (`training.phases`): [training] overrides
    phase1: str | None = None
    phase1_steps: int | None = None
    phase1_lr: float | None = None


# -- digests --------------------------------------------------------------------------------------
def digest(obj) -> str:
    """SHA-256 (hex) of the canonical JSON of `obj`."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
                          .encode("utf-8")).hexdigest()


def source_digest(repo) -> dict:
    """What the checkout holds: HEAD, a digest of the index's (path, blob SHA, mode) and the SHA-256
    of every tracked file modified in the working tree (scan and corpus read the working tree)."""
    files = repo.tracked_files()
    dirty = {}
    if getattr(repo, "is_git", False):
        out = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=no"], cwd=repo.root,
                             capture_output=True).stdout.decode("utf-8", "surrogateescape")
        for rec in out.split("\0"):
            if len(rec) > 3 and rec[1] in "MT":
                p = repo.root / rec[3:]
                dirty[rec[3:]] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
    return {"head": getattr(repo, "head", None), "index": digest([(f.path, f.blob_sha, f.mode) for f in files]),
            "dirty": dirty, "files": len(files)}


def ledger_heads(path: Path, own_runs: set[str]) -> tuple[str, str]:
    """(last entry hash, last hash of an entry not written by `own_runs`); genesis when empty.
    Raises PolicyError for a ledger that fails verification."""
    from repoguard.accounting.ledger import GENESIS, read_entries, verify

    check = verify(path)
    if not check["ok"]:
        raise PolicyError(f"{path}: ledger fails verification ({check['problems'][0]}); refusing to run")
    entries = read_entries(path)
    foreign = [e for e in entries if e.get("run_id") not in own_runs]
    return (entries[-1]["hash"] if entries else GENESIS), (foreign[-1]["hash"] if foreign else GENESIS)


# -- the runner -----------------------------------------------------------------------------------
@dataclass
class Context:
    """What every stage function sees: the checkout, its config (and the config file's bytes, for
    the digests), the output directory, the run's settings, the state being recorded, the progress
    printer, and per stage the info dict it returned (or recorded, when skipped)."""

    repo: object
    config: Config
    config_bytes: bytes
    config_path: str | None
    out: Path
    settings: RunSettings
    state: dict
    say: Callable[[str], None]
    infos: dict = field(default_factory=dict)
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    @property
    def ledger(self) -> Path:
        return Path(self.settings.ledger_path) if self.settings.ledger_path else self.out / "ledger.jsonl"

    def recorded(self, stage: str) -> dict:
        return self.state.get("stages", {}).get(stage, {})


def load_state(out: Path) -> dict:
    """OUT/run_state.json, or an empty state when absent, unreadable or of another format."""
    try:
        doc = json.loads((out / STATE_FILE).read_text())
        if doc.get("format_version") == FORMAT_VERSION:
            return doc
    except (OSError, ValueError, AttributeError):
        pass
    return {"format_version": FORMAT_VERSION, "stages": {}}


def run_pipeline(repo, config: Config, *, config_path: str | None, out: Path, settings: RunSettings,
                 say: Callable[[str], None] = lambda s: None, seed_state: dict | None = None) -> dict:
    """Run the stages in order, skipping those whose inputs and artefacts are unchanged; returns
    the summary (`summarize`). Raises InputError/PolicyError from the stages (the state of every
    finished stage is saved first) and PolicyError for findings under `fail_on_findings`."""
    from repoguard import pipeline_stages as st

    if settings.from_stage is not None and settings.from_stage not in STAGES:
        raise InputError(f"--from: unknown stage {settings.from_stage!r} (stages: {', '.join(STAGES)})")
    out.mkdir(parents=True, exist_ok=True)
    config_bytes = Path(config_path).read_bytes() if config_path else b""
    state = seed_state if seed_state is not None else load_state(out)
    ctx = Context(repo, config, config_bytes, config_path, out, settings, state, say)
    forced_from = STAGES.index(settings.from_stage) if settings.from_stage else len(STAGES)
    order = [s for s in STAGES if s != "audit" or settings.audit]
    for n, name in enumerate(order, 1):
        stage = st.STAGE_FUNCS[name]
        inputs = stage.inputs(ctx)
        key = digest(inputs)
        rec = ctx.recorded(name)
        fresh = (STAGES.index(name) < forced_from and rec.get("inputs") == key
                 and rec.get("outputs") == stage.outputs(ctx))
        if fresh:
            ctx.skipped.append(name)
            ctx.infos[name] = rec.get("info", {})
            say(f"[{n}/{len(order)}] {name}: unchanged, skipped")
            continue
        if name == "train":
            key = _replan_if_ledger_moved(ctx, st, key)
        say(f"[{n}/{len(order)}] {name} …")
        t0 = time.perf_counter()
        info = stage.execute(ctx)
        secs = time.perf_counter() - t0
        _record(ctx, name, stage, key=key, inputs=inputs, info=info, seconds=secs)
        say(f"[{n}/{len(order)}] {name}: done in {secs:.1f} s{stage.describe(info)}")
        if name == "scan" and settings.fail_on_findings and info.get("findings"):
            raise PolicyError(f"{info['findings']} credential finding(s) in the working tree "
                              f"(--fail-on-findings); see {out / 'scan' / 'findings.json'}")
    return summarize(ctx)


def _record(ctx: Context, name: str, stage, *, key: str, inputs: dict, info: dict, seconds: float) -> None:
    """Note stage `name` as run in this run and save its state record (after every stage, so a
    failure keeps what finished)."""
    ctx.infos[name] = info
    if name in ctx.skipped:
        ctx.skipped.remove(name)
    if name not in ctx.ran:
        ctx.ran.append(name)
    ctx.state.setdefault("stages", {})[name] = {
        "inputs": key, "outputs": stage.outputs(ctx), "seconds": round(seconds, 3),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "info": info, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs_detail": inputs,
    }
    save_state(ctx)


def _replan_if_ledger_moved(ctx: Context, st, train_key: str) -> str:
    """Training must start from a plan made against the ledger's current head (guard.py).

    The plan's own input is the last entry of *other* runs, so after this directory's training
    appended to the ledger the plan stage reads as unchanged and is skipped, yet the trainer would
    refuse it. It is re-made here, recorded as run (summary, state, seconds) and a line says so:
    the "plan: unchanged, skipped" line printed before no longer describes the plan trained on."""
    from repoguard.accounting.ledger import read_entries
    from repoguard.plan import load_plan

    head, _ = ledger_heads(ctx.ledger, set())
    if load_plan(ctx.out).extra.get("ledger_head", head) == head:
        return train_key
    ctx.say("       plan: the ledger moved since the plan was made; re-planning first")
    stage = st.STAGE_FUNCS["plan"]
    t0 = time.perf_counter()
    info = stage.execute(ctx)
    secs = time.perf_counter() - t0
    inputs = stage.inputs(ctx)
    _record(ctx, "plan", stage, key=digest(inputs), inputs=inputs, info=info, seconds=secs)
    ctx.say(f"       plan: re-planned against the ledger ({len(read_entries(ctx.ledger))} entries) "
            f"in {secs:.1f} s{stage.describe(info)}")
    return digest(st.STAGE_FUNCS["train"].inputs(ctx))


def save_state(ctx: Context) -> None:
    """Write OUT/run_state.json atomically (after every stage, so a failure keeps what finished)."""
    ctx.state["repoguard_version"] = __version__
    atomic_write_json(ctx.out / STATE_FILE, ctx.state)


def untied_count(incidence, plan_config: PlanConfig) -> int:
    """n of the batch rule: training examples tied to no secret and not held out. They keep w = 1,
    so Σw ≥ n and any B ≤ n keeps every ρ = B·w/Σw ≤ 1."""
    from repoguard.evaluation.split import split_from_config

    test = split_from_config(incidence.example_ids, plan_config).test
    return int(((incidence.matrix.getnnz(axis=1) == 0) & ~test).sum())


def batch_rule(n_untied: int) -> tuple[float, int, str]:
    """(B, T, the rule in words) for a corpus with `n_untied` untied training examples: T =
    RULE_STEPS, and B = RULE_EPOCHS·n/T (that many passes over them), clamped to RULE_B_MIN…
    RULE_B_MAX and then to at most n/RULE_RHO_MAX (at least 1), so an untied example is sampled
    with ρ = B/Σw ≤ 1/3. The constants come from the sweep in the README ("Choosing B and T"):
    at a fixed B·T, T = 200 learned more than T ≤ 100 and as much as T = 400; more B·T helped;
    near ρ = 1 the undetected floor's σ grew 4× and the larger B bought nothing."""
    n = max(int(n_untied), 0)
    t = RULE_STEPS
    b = min(max(round(RULE_EPOCHS * n / t), RULE_B_MIN), RULE_B_MAX)
    if n >= 1:
        b = min(b, max(n // RULE_RHO_MAX, 1))
    words = (f"n = {n} untied training examples: T = {t}, B = {RULE_EPOCHS}·n/T = {RULE_EPOCHS * n / t:.1f} "
             f"({RULE_EPOCHS} passes over them) clamped to {RULE_B_MIN}…{RULE_B_MAX} and ≤ n/{RULE_RHO_MAX} "
             f"→ B = {b}")
    return float(b), int(t), words


_SOURCE_ORDER = ("given", "config", "default rule")


def _plan_keys_in_file(config: Config) -> set[str]:
    """The keys the config file's `[plan]` table sets (a value equal to PlanConfig's default is
    still "set in the file")."""
    if config.path is None:
        return set()
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python < 3.11
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(config.path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    plan = data.get("plan")
    return set(plan) if isinstance(plan, dict) else set()


def choose_batch(config: Config, n_untied: int, *, batch_size: float | None = None,
                 steps: int | None = None) -> dict:
    """B and T of the next plan, for `plan` and `run` alike: the flag, else `[plan]` batch_size /
    steps when the config sets it (in the file, or to a value other than PlanConfig's default),
    else `batch_rule(n_untied)`. Returns plan.json's `extra["batch_rule"]`: n_untied,
    batch_size, steps, rule (one line in words), source ("given" | "config" | "default rule", the
    most explicit of the two values') and sources (per value)."""
    pc, default, in_file = config.plan, PlanConfig(), _plan_keys_in_file(config)
    rb, rt, words = batch_rule(n_untied)
    picked = {}
    for key, given, rule_value in (("batch_size", batch_size, rb), ("steps", steps, rt)):
        if given is not None:
            picked[key] = (given, "given")
        elif key in in_file or getattr(pc, key) != getattr(default, key):
            picked[key] = (getattr(pc, key), "config")
        else:
            picked[key] = (rule_value, "default rule")
    sources = {k: v[1] for k, v in picked.items()}
    source = min(sources.values(), key=_SOURCE_ORDER.index)
    if set(sources.values()) == {"default rule"}:
        rule = words
    else:
        how = {"given": "flag", "config": f"[plan] in {config.path}", "default rule": "the default rule"}
        rule = "; ".join(f"{'B' if k == 'batch_size' else 'T'} = {picked[k][0]:g} from {how[sources[k]]}"
                         for k in ("batch_size", "steps"))
        if "default rule" in sources.values():
            rule += f" ({words})"
    return {"n_untied": int(n_untied), "batch_size": float(picked["batch_size"][0]),
            "steps": int(picked["steps"][0]), "rule": rule, "source": source, "sources": sources}


def batch_rule_line(rec: dict | None) -> str:
    """The one line `plan` and `run` print about where B and T came from."""
    if not rec:
        return ""
    return f"B = {rec['batch_size']:g}, T = {rec['steps']} ({rec['source']}): {rec['rule']}"


def plan_defaults(config: Config, settings: RunSettings, n_public: int) -> tuple[float, int]:
    """(B, T) for `run`'s plan: `choose_batch` with the run's flags."""
    rec = choose_batch(config, n_public, batch_size=settings.batch_size, steps=settings.steps)
    return rec["batch_size"], rec["steps"]


def summarize(ctx: Context) -> dict:
    """The final summary `repoguard run --json` prints: counts, σ, B, T, the retained fraction
    Σw/n, min/max over secrets of achieved bound / configured r, paths, seconds per stage."""
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
        "sigma": plan.get("sigma"), "batch_size": plan.get("batch_size"), "steps": plan.get("steps"),
        "bound_ratio_min": plan.get("bound_ratio_min"), "bound_ratio_max": plan.get("bound_ratio_max"),
        "binding_secret": plan.get("binding_secret"), "undetected_floor": plan.get("undetected_floor"),
        "batch_rule": plan.get("batch_rule"),
        "exposures": plan.get("exposures", []), "insecure_runs": plan.get("insecure_runs") or {},
        "adapter": train.get("adapter"), "run_id": train.get("run_id"),
        "audit": i.get("audit"), "report": i.get("report", {}).get("html"),
        "ledger": str(ctx.ledger),
        "seconds": {s: ctx.recorded(s).get("seconds") for s in STAGES if ctx.recorded(s)},
    }
