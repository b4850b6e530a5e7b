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
    assert sec["s1"] == {"secret": "s1", "kind": "declared", "examples": 3, "held_out": 0, "sum_w": 0.75, "retained": 0.25}
    assert sec["s2"]["examples"] == 0 and sec["s2"]["held_out"] == 1 and sec["s2"]["retained"] is None
    assert got["per_directory"][0]["directory"] == "docs/"                   # least retained first
    assert got["n_train"] == 4 and got["retained"] == pytest.approx(1.75 / 4)


def _moto_like():
    """moto's shape (issue 44): `sfn-engine` ties 949 training examples and keeps Σw 0.3 of them,
    `dynamo-query` keeps 2 of 1 000, `ok` half of 50, a credential keeps nothing (not declared)."""
    n = 949 + 1000 + 50 + 1 + 100
    ids = [f"src/f{i}.py#0@{i:04x}" for i in range(n)]
    files = {f"src/f{i}.py": [i] for i in range(n)}
    secrets = [Secret("sfn-engine", "declared", 1e-10, 1e-2), Secret("dynamo-query", "declared", 1e-10, 1e-2),
               Secret("ok", "declared", 1e-10, 1e-2), Secret("cred-1", "credential", 1e-10, 1e-2)]
    spans = {"sfn-engine": range(0, 949), "dynamo-query": range(949, 1949), "ok": range(1949, 1999),
             "cred-1": range(1999, 2000)}
    ev = [Evidence(f"src/f{i}.py", sid, "declared", "paths") for sid, r in spans.items() for i in r]
    w = np.ones(n)
    w[0:949] = 0.3 / 949
    w[949:1949] = 2.0 / 1000
    w[1949:1999] = 0.5
    w[1999] = 0.0
    return build_incidence(ids, files, secrets, ev), w


def test_dropped_declared_secret_is_said_in_words():
    """Issue 44 item 5: the summary lines name the least retained declared secrets as "kept Σw of
    n examples (x %)" and say when one is effectively dropped (< 1 % kept)."""
    from repoguard.planning.retention import least_retained, secret_lines

    inc, w = _moto_like()
    least = least_retained(retention(inc, w))
    assert [r["secret"] for r in least["rows"]] == ["sfn-engine", "dynamo-query", "ok"]   # no credential
    assert least["dropped"] == ["sfn-engine", "dynamo-query"] and least["n_declared"] == 3
    lines = secret_lines(least)
    assert lines[0] == "sfn-engine: 0.0 % of 949 examples kept — not trained on (Σw 0.3)"
    assert lines[1] == "dynamo-query: 0.2 % of 1000 examples kept — not trained on (Σw 2)"
    assert lines[2] == "ok: kept 25 of 50 examples (50.0 %)"
    one = secret_lines(least_retained(retention(inc, w), limit=1))
    assert one == [lines[0], "2 of 3 declared secrets are not trained on (< 1 % kept), also: dynamo-query"]


def test_run_summary_and_report_card_say_a_secret_is_dropped():
    """The same lines in `repoguard run`'s summary table and on the report's summary card."""
    from rich.console import Console

    from repoguard.commands.run import _print
    from repoguard.planning.retention import least_retained
    from repoguard.report.html import _summary

    inc, w = _moto_like()
    least = least_retained(retention(inc, w))
    con = Console(record=True, width=200)
    _print({"ran": ["plan"], "skipped": [], "credentials_found": 0, "files": 1, "examples": 1, "secrets": 4,
            "incidences": 1, "retained_fraction": 0.9, "least_retained": least, "sigma": 1.0, "batch_size": 8,
            "steps": 2, "bound_ratio_min": 0.5, "bound_ratio_max": 1.0, "binding_secret": "ok",
            "undetected_floor": None, "adapter": None, "report": None, "ledger": "l"}, con)
    text = con.export_text()
    assert "sfn-engine: 0.0 % of 949 examples kept — not trained on" in text
    html = _summary({"plan": {"sigma": 1.0, "batch_size": 8, "steps": 2, "clip_norm": 1.0, "c": 1.0,
                              "retained": 0.9, "least_retained": least}})
    assert "sfn-engine: 0.0 % of 949 examples kept — not trained on" in html
    assert "ok: kept 25 of 50 examples (50.0 %)" in html


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
