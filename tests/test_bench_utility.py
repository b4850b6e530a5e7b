"""bench/utility.py plans as a user's `repoguard plan` does: without `--c` the plan's own c rule
(swept, raised while σ stays within the floor's) picks c, and the hush arm keeps that plan's tied
weight; a given c is passed through. The retained share it prints is Σw over the tied training
examples / their number, read from the plan and incidence it made."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_utility", ROOT / "bench" / "utility.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_default_plan_uses_the_c_rule_and_keeps_more_tied_weight_than_c_1(fixture_repo, tmp_path):
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.cli import main as cli
    from repoguard.planning.plan import load_plan

    u = _bench()
    s = u.SETTINGS["cpu-tiny"]
    assert "--c" not in u.plan_flags(s, None)
    assert u.plan_flags(s, 1.0)[-2:] == ["--c", "1"]
    kept = {}
    for name, c in (("rule", None), ("c1", 1.0)):
        out = tmp_path / name
        conf = u._config_file(fixture_repo, out, 0.25)
        common = ["-q", "--out", str(out), "--config", str(conf)]
        assert cli(["analyze", *common, str(fixture_repo)]) == 0
        assert cli(["plan", *common, *u.plan_flags(s, c), str(fixture_repo)]) == 0
        kept[name] = u.tied_retention(out)
        plan, inc = load_plan(out), load_incidence(out)
        tied = np.asarray(inc.matrix.getnnz(axis=1) > 0) & ~plan.test_mask
        assert kept[name]["tied_examples"] == int(tied.sum()) > 0
        assert kept[name]["tied_sum_w"] == float(plan.w[tied].sum())
        assert kept[name]["retained"] == kept[name]["tied_sum_w"] / kept[name]["tied_examples"]
        assert (plan.extra.get("c_rule") or "given") == ("given" if c is not None else plan.extra["c_rule"])
    assert kept["c1"]["c"] == 1.0 and kept["rule"]["c"] != 1.0
    # At the floor's σ the rule raises c until the secrets would need more noise: it never keeps
    # less tied weight than c = 1, and here keeps more, at no more noise than c = 1 needs.
    assert kept["rule"]["tied_sum_w"] > kept["c1"]["tied_sum_w"]
    assert kept["rule"]["sigma"] <= kept["c1"]["sigma"] * (1 + 1e-6)
