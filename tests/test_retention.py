"""What the weighting keeps per secret and per top-level directory (`repoguard.planning.retention`), as
`plan` records it in plan.json and prints it, and the c-sweep's "retention does not change" rule."""
from __future__ import annotations

import numpy as np
import pytest

from repoguard.cli import main
from repoguard.analyzers.incidence import Evidence, Secret, build_incidence
from repoguard.planning.retention import retention, sweep_retention_flat, top_dir


def _incidence():
    # Paths may hold '#': the directory comes from the path part of the id (split.example_path).
    ids = ["docs/a#b.md#0@aa", "docs/a#b.md#1@aa", "src/x.py#0@bb", "src/y.py#0@cc", "setup.py#0@dd"]
    files = {"docs/a#b.md": [0, 1], "src/x.py": [2], "src/y.py": [3], "setup.py": [4]}
    secrets = [Secret("s1", "declared", 1e-10, 1e-3, ""), Secret("s2", "declared", 1e-10, 1e-3, "")]
    ev = [Evidence("docs/a#b.md", "s1", "declared", "paths"), Evidence("src/x.py", "s1", "declared", "paths"),
          Evidence("src/y.py", "s2", "declared", "paths")]
    return build_incidence(ids, files, secrets, ev)


def test_retention_per_secret_and_directory_counts_held_out_apart():
    inc = _incidence()
    w = np.array([0.25, 0.0, 0.5, 0.0, 1.0])
    test = np.array([False, False, False, True, False])          # src/y.py is held out (w = 0 anyway)
    got = retention(inc, w, test)
    dirs = {d["directory"]: d for d in got["per_directory"]}
    assert set(dirs) == {"docs/", "src/", "(root)"} and top_dir("setup.py") == "(root)"
    assert dirs["docs/"] == {"directory": "docs/", "examples": 2, "held_out": 0, "tied": 2, "sum_w": 0.25,
                             "retained": 0.125}
    assert dirs["src/"]["examples"] == 1 and dirs["src/"]["held_out"] == 1 and dirs["src/"]["retained"] == 0.5
    sec = {r["secret"]: r for r in got["per_secret"]}
    assert sec["s1"] == {"secret": "s1", "examples": 3, "held_out": 0, "sum_w": 0.75, "retained": 0.25}
    assert sec["s2"]["examples"] == 0 and sec["s2"]["held_out"] == 1 and sec["s2"]["retained"] is None
    assert got["per_directory"][0]["directory"] == "docs/"                   # least retained first
    assert got["n_train"] == 4 and got["retained"] == pytest.approx(1.75 / 4)


def test_sweep_flat_only_when_sum_w_does_not_move():
    rows = [{"c": 2.0 ** k, "frac_positive": 0.9, "sum_w": 100.0 + 1e-3 * k, "sigma": 1.0} for k in range(-3, 3)]
    assert sweep_retention_flat(rows)
    rows[-1]["sum_w"] = 110.0
    assert not sweep_retention_flat(rows)
    assert not sweep_retention_flat(rows[:1])


@pytest.mark.slow
def test_plan_records_and_prints_retention(fixture_repo_copy, capsys):
    import json

    repo = fixture_repo_copy
    assert main(["analyze", "-q", str(repo)]) == 0
    capsys.readouterr()
    assert main(["plan", "--batch-size", "8", "--steps", "5", "--c", "1", str(repo)]) == 0
    text = capsys.readouterr().out
    assert "what training keeps per top-level directory" in text and "retained Σw/n" in text
    doc = json.loads((repo / ".repoguard" / "plan" / "plan.json").read_text())
    ret = doc["extra"]["retention"]
    from repoguard.planning.plan import load_plan
    plan = load_plan(repo / ".repoguard")
    train = ~plan.test_mask
    assert ret["n_train"] == int(train.sum()) and ret["sum_w"] == pytest.approx(float(plan.w.sum()))
    assert sum(d["examples"] for d in ret["per_directory"]) == ret["n_train"]
    assert sum(d["held_out"] for d in ret["per_directory"]) == int(plan.test_mask.sum())
    by = {s.id: s for s in plan.secrets}
    for r in ret["per_secret"]:
        assert r["examples"] + r["held_out"] == by[r["secret"]].n_examples
        assert r["sum_w"] == pytest.approx(by[r["secret"]].sum_w)
