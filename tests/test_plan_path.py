"""One plan path for `plan` and `run`, their shared flags, settings resolved once (with where each
value came from) and the pipeline's stage registry."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from repoguard.analyzers.incidence import Evidence, Secret, build_incidence, save_incidence
from repoguard.cli import build_parser, main
from repoguard.core.config import parse_config
from repoguard.planning.plan import load_plan

import repoguard

PKG = Path(repoguard.__file__).resolve().parent       # the package under test


@pytest.fixture
def project(tmp_path):
    """60 examples in 30 files, 2 secrets over the first 10 files; [plan] clip_norm in the file."""
    files = {f"src/f{i}.py": [2 * i, 2 * i + 1] for i in range(30)}
    ids = [f"ex{i}" for i in range(60)]
    secrets = [Secret("sec-a", "declared", 1e-6, 1e-2), Secret("sec-b", "declared", 1e-6, 5e-3)]
    ev = [Evidence(f"src/f{i}.py", s.id, "declared", "test")
          for s in secrets for i in range(0, 10, 1 + (s.id == "sec-b"))]
    out = tmp_path / "out"
    save_incidence(build_incidence(ids, files, secrets, ev), out)
    # clip_norm equal to the built-in default: still "set in the file"
    (tmp_path / "repoguard.toml").write_text("[plan]\nclip_norm = 1.0\naccountant = \"renyi\"\n")
    return tmp_path, out


def test_plan_records_where_each_setting_came_from(project, capsys):
    root, out = project
    assert main(["plan", str(root), "--out", str(out), "-v", "--steps", "40", "--c", "1", "--json"]) == 0
    captured = capsys.readouterr()
    rec = load_plan(out).extra["settings"]
    assert {k: v["source"] for k, v in rec.items()} == {
        "batch_size": "default", "steps": "flag", "clip_norm": "file", "c": "flag", "cap": "default",
        "accountant": "file", "adjacency": "default", "undetected": "default", "budget_fraction": "default"}
    assert rec["steps"]["value"] == 40 and rec["accountant"]["value"] == "renyi"
    assert rec["undetected"]["value"] == {"k": 1, "p": 1e-10, "r": 1e-3, "enabled": True}
    # B from the batch rule is recorded with the value the plan used
    plan = load_plan(out)
    assert rec["batch_size"]["value"] == plan.batch_size == plan.extra["batch_rule"]["batch_size"]
    assert plan.accountant == "renyi" and plan.steps == 40
    assert "budget_fraction" not in plan.extra          # `plan` alone spends the whole headroom
    assert json.loads(captured.out)["sigma"] == plan.sigma
    assert "steps = 40 (flag)" not in captured.out     # -v goes to stderr, --json stays parseable


def test_plan_verbose_prints_the_resolved_settings(project, capsys):
    root, out = project
    assert main(["plan", str(root), "--out", str(out), "-v", "--undetected", "k=2", "--c", "1",
                 "--budget-fraction", "0.5"]) == 0
    err = capsys.readouterr().err
    assert "clip_norm = 1.0 (file)" in err and "c = 1.0 (flag)" in err
    assert "undetected = {k = 2, p = 1e-10, r = 0.001, enabled = True} (flag)" in err
    plan = load_plan(out)
    assert plan.extra["budget_fraction"] == 0.5 and plan.extra["undetected_floor"]["k"] == 2


def test_config_remembers_the_keys_its_file_set(tmp_path):
    from repoguard.planning.batch_rule import choose_batch

    # the file is gone after parsing: the keys it set are known without reading it again
    cfg = parse_config("[plan]\nsteps = 200\n\n[defaults]\np = 1e-10\nr = 1e-3\n", path=tmp_path / "gone.toml")
    assert {"plan.steps", "defaults.p", "defaults.r"} <= cfg.file_keys
    assert "plan.batch_size" not in cfg.file_keys
    rec = choose_batch(cfg, 1000)
    assert rec["sources"] == {"batch_size": "default rule", "steps": "config"}
    assert "file_keys" not in cfg.to_dict()


def test_plan_and_run_share_one_definition_of_each_plan_flag():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    plan, run = sub.choices["plan"], sub.choices["run"]

    def flags(p):
        return {s: a for a in p._actions for s in a.option_strings}

    pf, rf = flags(plan), flags(run)
    shared = ("--batch-size", "--steps", "--clip-norm", "--c", "--sweep", "--cap", "--accountant", "--adjacency",
              "--undetected", "--budget-fraction")
    for flag in shared:
        a, b = pf[flag], rf[flag]
        assert (a.help, a.type, a.choices, a.default, a.metavar, a.dest) == \
               (b.help, b.type, b.choices, b.default, b.metavar, b.dest), flag
    # the batch rule in the help is the rule the code applies (B = 5·n/T clamped), not "√n"
    assert "√n" not in rf["--batch-size"].help and "5·n/T" in rf["--batch-size"].help


def _calls(path: Path, name: str) -> set[str]:
    """Qualified names of the functions in `path` that call `name`."""
    tree = ast.parse(path.read_text())
    found = set()

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Call):
                f = child.func
                if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                    found.add(scope)
            visit(child, inner)

    visit(tree, "")
    return found


def test_plan_and_run_build_their_plan_through_one_function():
    callers = {f"{p.relative_to(PKG)}:{fn}" for p in PKG.rglob("*.py") for fn in _calls(p, "build_plan")}
    # the command and the pipeline never call the builder themselves
    assert not {c for c in callers if c.startswith(("commands/", "pipeline/"))}
    assert "planning/make.py:make_plan" in callers
    makers = {f"{p.relative_to(PKG)}:{fn}" for p in PKG.rglob("*.py") for fn in _calls(p, "make_plan")}
    assert makers == {"commands/plan.py:_run", "pipeline/stages.py:plan.execute"}


def test_stages_are_registered_objects_in_pipeline_order():
    from repoguard.pipeline import registry

    assert registry.names() == ("scan", "analyze", "plan", "train", "audit", "report")
    for name in registry.names():
        stage = registry.get(name)
        assert isinstance(stage, registry.Stage) and stage.name == name
    assert not registry.enabled(registry.get("audit"), type("S", (), {"audit": False})())
    assert registry.enabled(registry.get("plan"), type("S", (), {"audit": False})())
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(registry.get("plan"))
    with pytest.raises(ValueError, match="not a pipeline stage"):
        registry.register(object())


def test_the_default_protection_is_written_once():
    import re

    lit = re.compile(r"\(\s*1e-10\s*,\s*1e-3\s*\)")
    hits = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if lit.search(p.read_text())]
    assert hits == ["core/config.py"]


def test_run_targets_live_in_accounting():
    from repoguard.accounting.targets import run_targets

    a = Secret("a", "declared", 1e-6, 1e-2)
    assert run_targets([a], {}, 1.0) == [a]
    (half,) = run_targets([a], {}, 0.5)
    assert half.r == pytest.approx(1e-6 + 0.5 * (1e-2 - 1e-6))
    assert not hasattr(__import__("repoguard.pipeline.stages", fromlist=["x"]), "run_targets")


def test_a_floor_is_one_type(project):
    """`build_plan` takes the floor as a `FloorPlan` (or its `Undetected` target): no (p, r)
    tuple, no separate r_run / legacy arguments."""
    import inspect

    from repoguard.analyzers.incidence import load_incidence
    from repoguard.core.config import Undetected
    from repoguard.planning.plan import build_plan
    from repoguard.planning.undetected import FloorPlan

    params = inspect.signature(build_plan).parameters
    assert "floor_r_run" not in params and "floor_legacy" not in params and "phase1" not in params
    _root, out = project
    inc = load_incidence(out)
    und = Undetected(1, 1e-10, 1e-3)
    a = build_plan(inc, batch_size=8, steps=50, c=1.0, floor=und)
    b = build_plan(inc, batch_size=8, steps=50, c=1.0, floor=FloorPlan(und))
    assert a.sigma == b.sigma and np.array_equal(a.w, b.w)
    tight = build_plan(inc, batch_size=8, steps=50, c=1.0, floor=FloorPlan(und, r_run=5e-4))
    assert tight.sigma > a.sigma and tight.extra["undetected_floor"]["r_run"] == 5e-4
    with pytest.raises(TypeError):
        build_plan(inc, batch_size=8, steps=50, c=1.0, floor=(1e-10, 1e-3))


def test_run_resolves_its_settings_once_with_their_sources(tmp_path):
    """`run`'s plan and training settings from its flags and the file, as `-v` prints them and the
    plan stage uses them (the budget fraction's default is 0.5 under --scheduled, else 1)."""
    from repoguard.commands._plan_flags import settings_from_args
    from repoguard.commands.run import SCHEDULED_FRACTION, training_settings
    from repoguard.commands.train import phase_overrides

    cfg = parse_config("[training]\nmax_length = 128\n\n[plan]\nsteps = 50\n", path=tmp_path / "repoguard.toml")
    args = build_parser().parse_args(["run", "--lr", "0.01", "--two-phase", "--scheduled", "--cap", "gdp"])
    plan = settings_from_args(cfg, args, budget_fraction=SCHEDULED_FRACTION)
    assert (plan["budget_fraction"], plan.source("budget_fraction")) == (0.5, "default")
    assert (plan["steps"], plan.source("steps")) == (50, "file")
    assert (plan["cap"], plan.source("cap")) == ("gdp", "flag")
    assert (plan["batch_size"], plan.source("batch_size")) == (None, "default")     # the batch rule's
    train = training_settings(cfg, args, phase_overrides(args))
    assert {k: train.source(k) for k in ("lr", "max_length", "phases", "seed")} == {
        "lr": "flag", "max_length": "file", "phases": "flag", "seed": "default"}
    assert train["phases"] == 2 and train["max_length"] == 128
    given = build_parser().parse_args(["run", "--budget-fraction", "0.3", "--scheduled"])
    s = settings_from_args(cfg, given, budget_fraction=SCHEDULED_FRACTION)
    assert (s["budget_fraction"], s.source("budget_fraction")) == (0.3, "flag")
    assert "budget_fraction = 0.3 (flag)" in s.lines()
