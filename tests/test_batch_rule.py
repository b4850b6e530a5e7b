"""The default B and T (issue 26 item 3, issue 28 item 7): one rule from the number of untied
training examples, used by `plan` and `run` alike, overridden by flags and by `[plan]` set in the
config file (even to PlanConfig's default values), and recorded in plan.json `extra.batch_rule`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from repoguard.cli import main
from repoguard.core.config import Config, PlanConfig, load_config
from repoguard.pipeline.context import RunSettings, plan_defaults
from repoguard.planning.batch_rule import batch_rule, choose_batch
from repoguard.planning.plan import load_plan


@pytest.mark.parametrize("n, b, t", [
    (0, 16, 200),          # nothing untied: the smallest B (the plan then says what is wrong)
    (10, 3, 200),          # B ≤ n/3 keeps an untied example's ρ ≤ 1/3
    (50, 16, 200),         # the fixture: 5·50/200 rounds below the smallest B; 50 // 3 = 16
    (1255, 31, 200),       # django-rest-framework: 5·1255/200 = 31.4
    (4000, 100, 200),      # 5 passes in 200 steps
    (100_000, 256, 200),   # B capped: 256·200 example-gradients at most
])
def test_rule_outputs(n, b, t):
    B, T, words = batch_rule(n)
    assert (B, T) == (b, t) and isinstance(T, int)
    assert f"n = {n} " in words and f"T = {t}" in words and words.endswith(f"B = {b}")


def test_choice_sources_flag_config_file_and_default(tmp_path):
    plain = Config(path=None)
    rec = choose_batch(plain, 1255)
    assert (rec["batch_size"], rec["steps"], rec["source"]) == (*batch_rule(1255)[:2], "default rule")
    assert rec["rule"] == batch_rule(1255)[2] and rec["n_untied"] == 1255
    # a flag wins; the other value still follows the rule
    rec = choose_batch(plain, 1255, batch_size=8)
    assert (rec["batch_size"], rec["steps"]) == (8, batch_rule(1255)[1])
    assert rec["source"] == "given" and rec["sources"] == {"batch_size": "given", "steps": "default rule"}
    # [plan] in the file, at PlanConfig's own default values: still "set", not the rule
    cfg = tmp_path / "repoguard.toml"
    cfg.write_text(f"[plan]\nbatch_size = {PlanConfig().batch_size}\nsteps = {PlanConfig().steps}\n")
    rec = choose_batch(load_config(cfg), 1255)
    assert (rec["batch_size"], rec["steps"], rec["source"]) == (PlanConfig().batch_size, PlanConfig().steps, "config")
    assert str(cfg) in rec["rule"]
    # a programmatic config with other values counts as set too; flags beat it
    prog = Config(path=None, plan=PlanConfig(batch_size=24, steps=33))
    assert (choose_batch(prog, 1255)["batch_size"], choose_batch(prog, 1255)["steps"]) == (24, 33)
    assert plan_defaults(prog, RunSettings(batch_size=8, steps=5), 1255) == (8, 5)
    assert plan_defaults(plain, RunSettings(), 1255) == batch_rule(1255)[:2]


def _run_plan_stage(repo: Path, out: Path, settings: RunSettings) -> dict:
    """`repoguard run`'s analyze and plan stages (no training), as the runner calls them."""
    from repoguard.pipeline import registry
    from repoguard.core.config import default_config_path
    from repoguard.source.gitrepo import open_repo
    from repoguard.pipeline.context import Context, load_state

    cfg_path = default_config_path(repo)
    config = load_config(cfg_path)
    ctx = Context(open_repo(repo), config, cfg_path.read_bytes(), str(cfg_path), out, settings,
                  load_state(out), lambda s: None)
    for name in ("analyze", "plan"):
        ctx.infos[name] = registry.get(name).execute(ctx)
    return ctx.infos["plan"], registry.get("plan").describe(ctx.infos["plan"])


@pytest.mark.slow
def test_plan_and_run_pick_the_same_default_on_the_fixture(fixture_repo, tmp_path, capsys):
    run_out, plan_out = tmp_path / "run", tmp_path / "plan"
    info, line = _run_plan_stage(fixture_repo, run_out, RunSettings(show_progress=False, c=1.0))
    run_plan = load_plan(run_out)
    assert main(["analyze", str(fixture_repo), "--out", str(plan_out), "-q"]) == 0
    assert main(["plan", str(fixture_repo), "--out", str(plan_out), "--c", "1"]) == 0
    text = capsys.readouterr().out
    plan_plan = load_plan(plan_out)
    rec = plan_plan.extra["batch_rule"]
    n = info["batch_rule"]["n_untied"]
    assert n == rec["n_untied"] and n > 0
    assert (run_plan.batch_size, run_plan.steps) == (plan_plan.batch_size, plan_plan.steps) == batch_rule(n)[:2]
    assert rec["source"] == run_plan.extra["batch_rule"]["source"] == "default rule"
    assert rec == run_plan.extra["batch_rule"] == info["batch_rule"]
    # the one line, in `plan`'s output and in `run`'s plan-stage line
    assert rec["rule"] in text and rec["rule"] in line
    # plan.json on disk holds it (what the report and later tools read)
    doc = json.loads((plan_out / "plan" / "plan.json").read_text())
    assert doc["extra"]["batch_rule"]["rule"] == rec["rule"]


@pytest.mark.slow
def test_plan_cli_flags_and_config_override_the_rule(tmp_path, capsys):
    """On a synthetic incidence (no training): flags, then `[plan]` in the file, then the rule."""
    import numpy as np

    from repoguard.analyzers.incidence import Evidence, Secret, build_incidence, save_incidence

    files = {f"src/f{i}.py": [2 * i, 2 * i + 1] for i in range(100)}
    ids = [f"ex{i}" for i in range(200)]
    secrets = [Secret("sec", "declared", 1e-10, 1e-3)]
    ev = [Evidence(f"src/f{i}.py", "sec", "declared", "test") for i in np.arange(10)]
    out = tmp_path / "out"
    save_incidence(build_incidence(ids, files, secrets, ev), out)

    def plan(*extra):
        assert main(["plan", str(tmp_path), "--out", str(out), "--c", "1", "--json", *extra]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["batch_rule"] == load_plan(out).extra["batch_rule"]
        return doc

    doc = plan()
    rec = doc["batch_rule"]
    assert rec["source"] == "default rule" and 0 < rec["n_untied"] < 180      # 20 tied, some held out
    assert (doc["batch_size"], doc["steps"]) == batch_rule(rec["n_untied"])[:2]
    doc = plan("--batch-size", "8", "--steps", "30")
    assert (doc["batch_size"], doc["steps"], doc["batch_rule"]["source"]) == (8, 30, "given")
    (tmp_path / "repoguard.toml").write_text("[plan]\nbatch_size = 64\nsteps = 200\n")     # = PlanConfig's defaults
    doc = plan()
    assert (doc["batch_size"], doc["steps"], doc["batch_rule"]["source"]) == (64, 200, "config")
    doc = plan("--steps", "40")
    assert (doc["batch_size"], doc["steps"]) == (64, 40)
    assert doc["batch_rule"]["sources"] == {"batch_size": "config", "steps": "given"}
