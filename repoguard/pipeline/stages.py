"""The six stages `repoguard run` strings together (`runner.run_pipeline`), each an object with a
`name` and four functions (the `registry.Stage` protocol; `registry` lists them in order):

    inputs(ctx) -> JSON-able dict   what the stage's result depends on (hashed by the runner)
    execute(ctx) -> info dict       run it by calling the stage function, write its artefacts
    outputs(ctx) -> sha256          digest of the artefacts it wrote (what downstream reads)
    describe(info) -> str           the tail of its "done" line

The stage functions are the commands' own: `credentials.job.run_scan` (called with the scan
command's options as a constructed namespace), `analyzers.analyze.run_analyze`,
`planning.make.make_plan` (as `repoguard plan`), `train_stage.run_training`, `audit.extraction.run_extract_audit`,
`report.build_report`.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
from pathlib import Path

from repoguard import __version__
from repoguard.core.provenance import tree_digest
from repoguard.pipeline.context import AUDIT_STEPS, Context, ledger_heads, source_digest
from repoguard.planning.batch_rule import batch_rule_line, choose_batch, untied_count
from repoguard.planning.make import NO_SECRETS

log = logging.getLogger("repoguard")


@functools.lru_cache(maxsize=1)
def _code() -> str:
    """repoguard's version and a digest of its own source: a changed stage implementation
    invalidates recorded results as a changed input does."""
    pkg = Path(__file__).resolve().parent.parent     # the whole repoguard package
    return f"{__version__}:{tree_digest(*sorted(pkg.rglob('*.py')))}"


def _rules(ctx) -> list[str]:
    """Digests of the rule files the scan and the credentials analyzer load."""
    from repoguard.credentials.rules import default_rule_files

    sc = ctx.config.scan
    files = [Path(f) for f in ctx.config.scan_rule_files(ctx.repo.root)]
    if sc.use_default_rules or not sc.rules:
        files += default_rule_files()
    return [tree_digest(f) for f in files]


def _own_runs(ctx: Context) -> set[str]:
    return set(ctx.state.get("own_runs", []))


def _out(ctx: Context, name: str) -> str:
    return ctx.recorded(name).get("outputs", "")


def _read(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# -- scan -----------------------------------------------------------------------------------------
class scan:
    """Working tree → OUT/scan/ (credential findings, redacted) through `credentials.job.run_scan`."""

    name = "scan"

    @staticmethod
    def inputs(ctx):
        """What the scan's result depends on: the working tree's digest, the config's bytes, the
        rule files and the code version."""
        return {"source": source_digest(ctx.repo), "config": _config_digest(ctx), "rules": _rules(ctx),
                "version": _code()}

    @staticmethod
    def execute(ctx):
        """Scan the working tree (`credentials.job.run_scan`) into OUT/scan/; returns {findings:
        count, rules: rule ids found, files: files read, report: report.json path}. Findings are
        expected here (exit 1 of `scan` is not an error): they are redacted from training and
        become secrets."""
        from repoguard.credentials.job import run_scan

        report = ctx.out / "scan" / "report.json"
        ns = argparse.Namespace(
            targets=[str(ctx.repo.root)], history=False, staged=False, since=None, all_refs=False,
            no_git=False, format="json", json=True, output=str(report), rules=[], baseline=None,
            update_baseline=False, jobs=None, max_file_bytes=None, config=ctx.config_path,
            out=str(ctx.out), quiet=True, verbose=0)
        root = str(ctx.repo.root)
        # exit 1 = findings: expected here (redacted from training, become secrets)
        run_scan(ns, ctx.repo, ctx.config, ctx.out, targets=[root], explicit=False, base=root)
        doc = _read(ctx.out / "scan" / "findings.json") or {}
        found = doc.get("findings", [])
        return {"findings": len(found), "rules": sorted({f.get("rule_id") for f in found}),
                "files": doc.get("stats", {}).get("files"), "report": str(report)}

    @staticmethod
    def after(ctx, info) -> None:
        """`--fail-on-findings`: stop the run after the scan (PolicyError, exit 1) when it found
        credentials in the working tree."""
        if ctx.settings.fail_on_findings and info.get("findings"):
            from repoguard.core.errors import PolicyError

            raise PolicyError(f"{info['findings']} credential finding(s) in the working tree "
                              f"(--fail-on-findings); see {ctx.out / 'scan' / 'findings.json'}")

    @staticmethod
    def outputs(ctx):
        """SHA-256 (hex) of OUT/scan/findings.json, what analyze reads."""
        return tree_digest(ctx.out / "scan" / "findings.json")

    @staticmethod
    def describe(info):
        """The tail of the scan's done line: findings (redacted) and files read."""
        return f": {info.get('findings', 0)} credential finding(s) in {info.get('files')} files (redacted)"


# -- analyze --------------------------------------------------------------------------------------
class analyze:
    """Checkout + config → OUT/corpus/ and OUT/incidence/ through `analyzers.analyze.run_analyze`."""

    name = "analyze"

    @staticmethod
    def inputs(ctx):
        """What the analysis depends on: the working tree's digest, the config's bytes, the rule
        files and the code version."""
        return {"source": source_digest(ctx.repo), "config": _config_digest(ctx), "rules": _rules(ctx),
                "version": _code()}

    @staticmethod
    def execute(ctx):
        """Build the corpus and the incidence (`analyzers.analyze.run_analyze`) into OUT/corpus/ and
        OUT/incidence/; returns the counts {files, examples, secrets, incidences}, the batch
        rule's n (`public_examples`: training examples tied to no secret), per-secret counts and
        the seconds taken."""
        from repoguard.analyzers.analyze import run_analyze

        s = run_analyze(ctx.repo, ctx.config, ctx.out).summary
        untied = None
        inc = _incidence(ctx)
        if inc is not None:     # tied to no secret and not held out: the batch rule's n (choose_batch)
            untied = untied_count(inc, ctx.config.plan)
        return {"files": s["files"], "examples": s["examples"], "secrets": s["secrets"],
                "incidences": s["incidences"], "public_examples": untied,
                "per_secret": s["per_secret"], "seconds": s["total_seconds"]}

    @staticmethod
    def outputs(ctx):
        """SHA-256 (hex) of OUT/corpus/ and OUT/incidence/, what plan reads."""
        return tree_digest(ctx.out / "corpus", ctx.out / "incidence")

    @staticmethod
    def describe(info):
        """The tail of analyze's done line: files, examples, secrets and incidences."""
        return (f": {info['files']} files, {info['examples']} examples, {info['secrets']} secrets, "
                f"{info['incidences']} incidences")


def _incidence(ctx):
    from repoguard.analyzers.incidence import load_incidence

    try:
        return load_incidence(ctx.out)
    except Exception:  # noqa: BLE001 - absent or unreadable: the plan stage reports it properly
        return None


# -- plan -----------------------------------------------------------------------------------------
def _plan_settings(ctx):
    """The plan's resolved settings (`planning.make.plan_settings`): the ones `repoguard run`
    resolved from its flags and the config, else (a RunSettings built in code) from its fields."""
    s = ctx.settings
    if s.plan_settings is not None:
        return s.plan_settings
    from repoguard.planning.make import plan_settings

    return plan_settings(ctx.config, batch_size=s.batch_size, steps=s.steps, clip_norm=s.clip_norm, c=s.c,
                         sweep=s.sweep, cap=s.cap, accountant=s.accountant, adjacency=s.adjacency,
                         undetected=s.undetected, budget_fraction=s.budget_fraction)


def _batch_choice(ctx) -> dict:
    """B and T of this run's plan and why (`choose_batch`; plan.json `extra["batch_rule"]`)."""
    public = _public(ctx)
    s = _plan_settings(ctx)
    given = {k: s[k] if s.source(k) == "flag" else None for k in ("batch_size", "steps")}
    return choose_batch(ctx.config, public, **given)


def _public(ctx) -> int:
    """n of the batch rule: the analyze stage's count, else counted from OUT/incidence (0 when absent)."""
    public = ctx.infos.get("analyze", {}).get("public_examples")
    if public is None:
        inc = _incidence(ctx)
        public = untied_count(inc, ctx.config.plan) if inc is not None else 0
    return public


def _plan_params(ctx) -> dict:
    """B, T, C, c, cap, accountant and adjacency of this run's plan (the plan stage's inputs)."""
    s = _plan_settings(ctx)
    choice = _batch_choice(ctx)
    return {"batch_size": choice["batch_size"], "steps": choice["steps"],
            **{k: s[k] for k in ("clip_norm", "c", "cap", "accountant", "adjacency")}}


def _floor_summary(rec: dict | None) -> dict | None:
    """The run summary's view of plan.json's "undetected_floor"."""
    if not rec:
        return None
    return {k: rec.get(k) for k in ("k", "p", "r", "enabled", "achieved_bound", "sigma_floor", "meets_r", "binds")}


class plan:
    """Incidence + ledger → OUT/plan/ through `planning.make.make_plan`, as `repoguard plan`."""

    name = "plan"

    @staticmethod
    def inputs(ctx):
        """What the plan depends on: the incidence's digest, the plan settings, the ledger head of
        other runs, the undetected floor (flag and config), the phase-1 settings, the budget
        fraction and the acknowledged exposures."""
        _, foreign = ledger_heads(ctx.ledger, _own_runs(ctx))
        return {"incidence": _out(ctx, "analyze"), "params": _plan_params(ctx), "ledger": foreign,
                "undetected": ctx.settings.undetected, "defaults_undetected": ctx.config.undetected.record(),
                "phase1": [getattr(_train_cfg(ctx), k) for k in ("phases", "phase1", "phase1_batch_size", "phase1_steps")],
                "budget_fraction": ctx.settings.budget_fraction,
                "acknowledged_exposures": sorted(ctx.config.ledger.acknowledged_exposures)}

    @staticmethod
    def execute(ctx):
        """Build, certify and write OUT/plan/ through `planning.make.make_plan` (the one plan path
        `repoguard plan` uses too); returns the run summary's plan figures: σ, B, T, c, Σw,
        retained share, least-retained secrets, the worst and best achieved/target bound ratios
        (against the configured r, before any budget fraction), the binding secret, the ledger
        head, the floor and the batch rule's choice. Raises InputError / PolicyError as
        `make_plan` does."""
        from repoguard.planning.make import make_plan

        # analyze warned about unmatched paths already when it ran in this run
        made = make_plan(ctx.config, ctx.out, _plan_settings(ctx), ledger=ctx.ledger, training=_train_cfg(ctx),
                         warn_unmatched="analyze" not in ctx.ran, show_progress=ctx.settings.show_progress,
                         n_untied=_public(ctx))
        p, s = made.plan, made.summary
        ratios = [x.achieved_bound / made.configured_r[x.id] for x in p.secrets]   # against the configured r
        n = len(p.example_ids)
        return {"sigma": p.sigma, "batch_size": p.batch_size, "steps": p.steps, "c": p.c,
                "sum_w": s["sum_w"], "retained_fraction": (s.get("retention") or {}).get("retained"),
                "least_retained": s["least_retained"],
                "positive_fraction": float((p.w > 0).mean()) if n else None,
                "bound_ratio_min": min(ratios, default=None), "bound_ratio_max": max(ratios, default=None),
                "binding_secret": s["binding_secret"], "ledger_head": made.head,
                "sigma_paper_kl": s.get("sigma_paper_kl"), "plan_dir": str(made.target),
                "exposures": s["exposures"], "insecure_runs": s["insecure_runs"],
                "undetected_floor": _floor_summary(p.extra.get("undetected_floor")),
                "batch_rule": p.extra["batch_rule"]}

    @staticmethod
    def outputs(ctx):
        """SHA-256 (hex) of OUT/plan/, what train reads."""
        return tree_digest(ctx.out / "plan")

    @staticmethod
    def describe(info):
        """The tail of the plan's done line: σ, B, T, retained Σw/n, the worst secret's
        achieved/target bound, the floor and any acknowledged exposures."""
        bounds = (f"achieved/target bound of the worst secret {info['bound_ratio_max']:.3g}"
                  if info.get("bound_ratio_max") is not None else NO_SECRETS)
        return (f": σ = {info['sigma']:.4g}, B = {info['batch_size']:g}, T = {info['steps']}, "
                f"retained Σw/n = {info['retained_fraction']:.3f}, {bounds}"
                + (f"; {_floor_line(info.get('undetected_floor'))}" if info.get("undetected_floor") else "")
                + (f"; {len(info['exposures'])} acknowledged exposure(s) by a clear phase (bound 1): "
                   + ", ".join(sorted({x['secret'] for x in info['exposures']})) if info.get("exposures") else "")
                + (f"\n       {batch_rule_line(info['batch_rule'])}" if info.get("batch_rule") else ""))


def _floor_line(fl: dict) -> str:
    if not fl.get("enabled", True):
        return f"UNDETECTED FLOOR OFF (opt-out; k = {fl['k']} bound {fl['achieved_bound']:.3g})"
    return (f"undetected floor k = {fl['k']}: {fl['achieved_bound']:.3g} ≤ r = {fl['r']:g}"
            + (" (sets σ)" if fl.get("binds") else ""))


# -- train ----------------------------------------------------------------------------------------
def _train_cfg(ctx):
    from repoguard.pipeline.train_stage import merge_config

    s = ctx.settings
    return merge_config(ctx.config.training, model=s.model, max_length=s.max_length, lora_r=s.lora_r,
                        learning_rate=s.lr, micro_batch_size=s.micro_batch_size, seed=s.seed, phases=s.phases,
                        phase1=s.phase1, phase1_steps=s.phase1_steps, phase1_lr=s.phase1_lr)


class train:
    """Plan + corpus → OUT/train/ (adapter, privacy report) through `train_stage.run_training`."""

    name = "train"

    @staticmethod
    def inputs(ctx):
        """What training depends on: the plan's and corpus's digests, the training config, DP
        on/off, --insecure-reproducible and the device."""
        s = ctx.settings
        return {"plan": _out(ctx, "plan"), "corpus": _out(ctx, "analyze"),
                "training": dataclasses.asdict(_train_cfg(ctx)), "private": not s.no_dp,
                "insecure_reproducible": s.insecure_reproducible, "device": s.device, "version": __version__}

    @staticmethod
    def execute(ctx):
        """Train the LoRA adapter by weighted-Poisson DP-SGD on the plan
        (`train_stage.run_training`), append the run to the ledger before publishing the adapter;
        returns {run_id, adapter path, base_model, steps_completed, private, sigma, final_loss}."""
        from repoguard.pipeline.train_stage import RunOptions, run_training

        s = ctx.settings
        from repoguard.core.provenance import analysis_config_digest, floor_digest

        opts = RunOptions(private=not s.no_dp, device=s.device, show_progress=s.show_progress,
                          insecure_reproducible=s.insecure_reproducible, keep_checkpoint=s.keep_checkpoint,
                          floor=ctx.config.defaults,
                          config_digest=analysis_config_digest(ctx.config), floor_digest=floor_digest(ctx.config))
        rep = run_training(root=ctx.repo.root, out=ctx.out, cfg=_train_cfg(ctx), opts=opts, ledger_path=ctx.ledger)
        ctx.state["own_runs"] = sorted(_own_runs(ctx) | {rep["run_id"]})
        return {"run_id": rep["run_id"], "adapter": rep["adapter"], "base_model": rep["base_model"],
                "steps_completed": rep["steps_completed"], "private": rep["private"], "sigma": rep["sigma"],
                "final_loss": _final_loss(ctx.out / "train" / "train_log.jsonl")}

    @staticmethod
    def before(ctx, rerun) -> bool:
        """Training must start from a plan made against the ledger's current head (guard.py).

        The plan's own input is the last entry of *other* runs, so after this directory's training
        appended to the ledger the plan stage reads as unchanged and is skipped, yet the trainer
        would refuse it. It is re-made here through `rerun("plan")` (recorded as run: summary,
        state, seconds) and a line says so: the "plan: unchanged, skipped" line printed before no
        longer describes the plan trained on. Returns True when it re-planned."""
        from repoguard.accounting.ledger import read_entries
        from repoguard.planning.plan import load_plan

        head, _ = ledger_heads(ctx.ledger, set())
        if load_plan(ctx.out).extra.get("ledger_head", head) == head:
            return False
        ctx.say("       plan: the ledger moved since the plan was made; re-planning first")
        info, secs = rerun("plan")
        ctx.say(f"       plan: re-planned against the ledger ({len(read_entries(ctx.ledger))} entries) "
                f"in {secs:.1f} s{plan.describe(info)}")
        return True

    @staticmethod
    def outputs(ctx):
        """SHA-256 (hex) of OUT/train/adapter/ and OUT/train/privacy_report.json."""
        return tree_digest(ctx.out / "train" / "adapter", ctx.out / "train" / "privacy_report.json")

    @staticmethod
    def describe(info):
        """The tail of train's done line: steps completed (NO DP when off), the last loss and the
        adapter's path."""
        loss = info.get("final_loss")
        return (f": {info['steps_completed']} steps{'' if info['private'] else ' (NO DP)'}"
                f"{f', last loss {loss:.3f}' if loss is not None else ''} → {info['adapter']}")


def _final_loss(path: Path):
    try:
        lines = path.read_text().strip().splitlines()
        return float(json.loads(lines[-1])["loss"]) if lines else None
    except (OSError, ValueError, KeyError):
        return None


# -- audit ----------------------------------------------------------------------------------------
class audit:
    """`run --audit` only: OUT/audit/extraction.json through `audit.extraction.run_extract_audit`."""

    name = "audit"

    @staticmethod
    def enabled(settings) -> bool:
        """Whether this run audits (`RunSettings.audit`, `run --audit`)."""
        return bool(settings.audit)

    @staticmethod
    def inputs(ctx):
        """What the audit depends on: the plan's digest, the training config, its step count and its
        seed."""
        return {"plan": _out(ctx, "plan"), "train": train.inputs(ctx)["training"],
                "steps": _audit_steps(ctx), "seed": ctx.settings.seed or 0, "version": __version__}

    @staticmethod
    def execute(ctx):
        """Run the extraction audit (`audit.extraction.run_extract_audit`: a DP and a no-DP model
        trained for the audit's steps, prompted with k tokens of secret-tied examples); returns
        {extraction: path, k, groups: per group the DP and no-DP extraction rates}."""
        from repoguard.audit.extraction import run_extract_audit

        seed = ctx.settings.seed or 0
        cfg = _train_cfg(ctx)
        k = min(32, cfg.max_length // 2)
        doc = run_extract_audit(out=ctx.out, root=ctx.repo.root, cfg=cfg, k=k, m=k, per_secret=5,
                                max_secrets=10, steps=_audit_steps(ctx), seed=seed, noise_seed=seed + 0x5EED,
                                device=ctx.settings.device, show_progress=ctx.settings.show_progress)
        groups = {g: {"dp": v.get("dp"), "no-dp": v.get("no-dp")} for g, v in doc.get("groups", {}).items()}
        return {"extraction": str(ctx.out / "audit" / "extraction.json"), "k": k, "groups": groups}

    @staticmethod
    def outputs(ctx):
        """SHA-256 (hex) of OUT/audit/extraction.json."""
        return tree_digest(ctx.out / "audit" / "extraction.json")

    @staticmethod
    def describe(info):
        """The tail of the audit's done line: k = m and the extraction report's path."""
        return f": extraction (k = m = {info['k']}) → {info['extraction']}"


def _audit_steps(ctx) -> int:
    steps = _plan_params(ctx)["steps"]
    return min(steps, ctx.settings.audit_steps or AUDIT_STEPS)


# -- report ---------------------------------------------------------------------------------------
class report:
    """Every artefact → OUT/report/ (HTML and JSON) through `report.build_report`."""

    name = "report"

    @staticmethod
    def inputs(ctx):
        """What the report depends on: every earlier stage's output digest, the ledger head and the
        code version."""
        head, _ = ledger_heads(ctx.ledger, set())
        return {s: _out(ctx, s) for s in ("scan", "analyze", "plan", "train", "audit")} | {
            "ledger": head, "version": _code()}

    @staticmethod
    def execute(ctx):
        """Build OUT/report/ (HTML and JSON, `report.build_report`) from every artefact; returns
        {html, json, html_bytes}."""
        from repoguard.report import build_report

        r = build_report(ctx.out, repo_name=ctx.repo.root.name)
        return {"html": r["html"], "json": r["json"], "html_bytes": r["html_bytes"]}

    @staticmethod
    def outputs(ctx):
        """SHA-256 (hex) of OUT/report/report.json."""
        return tree_digest(ctx.out / "report" / "report.json")

    @staticmethod
    def describe(info):
        """The tail of the report's done line: its size and the HTML path."""
        return f": {info['html_bytes'] // 1024} KiB → {info['html']}"


def _config_digest(ctx) -> str:
    import hashlib

    return hashlib.sha256(ctx.config_bytes).hexdigest()

