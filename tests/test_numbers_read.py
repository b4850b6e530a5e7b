"""Issue 41 items 12 and 17: the numbers a user reads. compare certifies a secret an arm never
samples by the accountant the run used and labels an arm as meeting the targets only when it
does; where B and T came from; `explain` counts what `analyze` counts; the report says why some
secrets have no retained share; `ledger show` gives each secret's bound against its target."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from repoguard.cli import main

N = 16


def _incidence(secrets=(("alpha", range(4)),), p=1e-4, r=5e-2):
    from repoguard.analyzers.incidence import Incidence, Secret

    m = np.zeros((N, len(secrets)), dtype=bool)
    for j, (_, rows) in enumerate(secrets):
        m[list(rows), j] = True
    return Incidence(example_ids=[f"ex{i}" for i in range(N)],
                     secrets=[Secret(sid, "declared", p, r) for sid, _ in secrets], matrix=sp.csr_matrix(m))


# -- item 12: compare's arms, certified like the run ------------------------------------------------
def test_a_secret_an_arm_never_samples_keeps_the_runs_certified_bound(tmp_path):
    """The run certifies "alpha" by the Neyman–Pearson bound at r (its KL bound is above r). The
    drop-dp arm never samples alpha: its bound is where the ledger left it, 0.05, not the KL
    bound 0.124 that made compare print bound/r 2.5 beside "meets floor"."""
    from repoguard.accounting.ledger import record_run
    from repoguard.core.config import Undetected
    from repoguard.evaluation.protection import arm_plan, snapshot
    from repoguard.planning.plan import build_plan

    inc = _incidence()
    floor = Undetected(1, 1e-4, 0.5)
    run = build_plan(inc, batch_size=4.0, steps=6, clip_norm=0.5, c=1.0, accountant="best", floor=floor)
    assert run.secrets[0].binding.startswith("pld")          # the KL and Rényi bounds alone miss r
    ledger = tmp_path / "ledger.jsonl"
    record_run(ledger, run, run_id="night-1", steps_completed=run.steps, status="completed")

    ap = arm_plan("drop-dp", run, inc, floor=floor, snap=snapshot(ledger, floor))
    alpha = ap.plan.secrets[0]
    assert not np.any(ap.plan.rho[:4] > 0)                   # drop-dp never samples alpha's examples
    assert alpha.achieved_bound <= alpha.r * (1 + 1e-9), alpha
    assert alpha.achieved_bound == pytest.approx(run.secrets[0].achieved_bound, rel=1e-6)
    assert alpha.binding.startswith("pld")
    assert ap.meets_targets is True and ap.meets_floor is True


def test_an_arm_above_a_declared_target_is_not_labelled_as_meeting_it():
    from repoguard.evaluation.compare_text import format_table, protection_label

    assert protection_label({"protection": "floor", "meets_floor": True, "meets_targets": False}) == "FAILS targets"
    assert protection_label({"protection": "floor", "meets_floor": True, "meets_targets": True}) == "meets floor"
    assert protection_label({"protection": "floor", "meets_floor": False, "meets_targets": False}) == "FAILS floor"
    # the table shows the worst secret's bound/r, not a range starting at a never-sampled secret's p/r
    arm = {"sigma": 0.5, "sum_w_over_n": 0.9, "slices": {}, "bound_ratio_min": 1e-7, "bound_ratio_max": 4.8,
           "floor": {"bound": 1e-3}, "protection": "floor", "meets_floor": True, "meets_targets": False,
           "seconds": 1.0}
    text = format_table({"base": {}, "arms": {"drop-dp": arm}, "floor": {"k": 1, "p": 1e-10, "r": 1e-3,
                                                                          "enabled": True}})
    row = next(line for line in text.splitlines() if line.strip().startswith("drop-dp"))
    assert "4.8" in row and "1e-07" not in row and "FAILS targets" in row and "meets" not in row


# -- item 17: where B and T came from -----------------------------------------------------------------
def test_a_batch_size_from_the_rule_is_not_called_given():
    from repoguard.core.config import Config
    from repoguard.planning.batch_rule import batch_rule_line, choose_batch

    line = batch_rule_line(choose_batch(Config(path=None), 10_000, steps=20))
    assert line.startswith("B = 250 (default rule), T = 20 (given):"), line
    line = batch_rule_line(choose_batch(Config(path=None), 10_000, steps=20, batch_size=64))
    assert line.startswith("B = 64, T = 20 (given):"), line


# -- item 17: explain counts what analyze counts ------------------------------------------------------
def test_explain_lists_every_example_analyze_ties_to_a_secret(make_repo, capsys):
    """Two files with the same text: the example is stored once, under the first file's path;
    the secret's evidence is on the second file only (its declared path)."""
    body = "".join(f"def pricing_rule_{i}(x):\n    return x * {i} + 7\n\n" for i in range(5))
    repo = make_repo({
        "a/pricing.py": body, "b/pricing.py": body, "b/extra.py": "RATE = 3\n",
        "repoguard.toml": '[[secret]]\nid = "pricing"\ndescription = "pricing rules"\npaths = ["b/**"]\n',
        **{f"lib/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(6)},
    })
    assert main(["analyze", "-q", str(repo)]) == 0
    summary = json.loads((repo / ".repoguard" / "incidence" / "summary.json").read_text())
    tied = summary["per_secret"]["pricing"]
    capsys.readouterr()
    assert main(["explain", "--json", "--secret", "pricing", str(repo)]) == 0
    answer = json.loads(capsys.readouterr().out)
    ids = [e for x in answer["examples"] for e in x["example_ids"]]
    assert len(ids) == len(set(ids)) == tied >= 2
    assert any(x["path"] == "a/pricing.py" and x.get("via") for x in answer["examples"])
    assert main(["explain", "--secret", "pricing", str(repo)]) == 0
    assert f"{tied} example(s)" in capsys.readouterr().out.splitlines()[0]


# -- item 17: the report's "least retained of N" ------------------------------------------------------
def test_the_report_says_which_secrets_have_no_training_example():
    from repoguard.planning.plan import Plan
    from repoguard.report.collect import _left_out
    from repoguard.report.html import _left_out as html_left_out

    inc = _incidence((("alpha", range(4)), ("beta", range(12, 14))))
    test = np.zeros(N, dtype=bool)
    test[12:] = True                               # every example of beta is held out
    w = np.where(test, 0.0, 1.0)
    w[:4] = 0.5
    plan = Plan(sigma=1.0, batch_size=4.0, steps=5, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=[f"ex{i}" for i in range(N)], w=w, rho=4 * w / w.sum(), test=test)
    lo = _left_out(plan, inc, None)
    assert lo["n_secrets"] == 1 and lo["n_secrets_all"] == 2
    html = html_left_out(lo)
    assert "least retained of 1 secrets with training examples; 1 more has none" in html


# -- item 17: ledger show, each secret's bound against its target -------------------------------------
def test_ledger_show_gives_each_secrets_bound_against_its_target(make_repo, capsys):
    from repoguard.accounting.ledger import record_run
    from repoguard.planning.plan import load_plan

    repo = make_repo({
        "core/pricing.py": "def price(x):\n    return x * 3\n",
        "repoguard.toml": '[[secret]]\nid = "pricing"\ndescription = "pricing"\npaths = ["core/pricing.py"]\n'
                          'p = 1e-6\nr = 1e-2\n',
        **{f"lib/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(12)},
    })
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "2", "--steps", "3", "--c", "1", str(repo)]) == 0
    out = repo / ".repoguard"
    plan = load_plan(out)
    record_run(out / "ledger.jsonl", plan, run_id="night-1", steps_completed=plan.steps, status="completed")
    want = {s.id: s.achieved_bound for s in plan.secrets}["pricing"]
    capsys.readouterr()
    assert main(["ledger", "show", "--json", str(repo)]) == 0
    spent = json.loads(capsys.readouterr().out)["spent"]
    assert spent["pricing"]["r"] == 1e-2 and spent["pricing"]["p"] == 1e-6
    assert spent["pricing"]["bound"] == pytest.approx(want, rel=1e-3) and spent["pricing"]["within"] is True
    floor = next(k for k in spent if k.startswith("@undetected"))
    assert spent[floor]["r"] == 1e-3 and spent[floor]["within"] is True
    assert main(["ledger", "show", str(repo)]) == 0
    text = capsys.readouterr().out
    assert "target r" in text and "within target" in text
    row = next(line for line in text.splitlines() if "pricing" in line)
    assert f"{want:.3g}" in row and "0.01" in row and "yes" in row


# -- item 13: what a run leaves the next one, in words -------------------------------------------------
def test_the_run_summary_says_when_the_next_run_has_no_budget_left():
    from repoguard.commands.run import budget_left

    spent_floor = {"bound_ratio_max": 0.97, "binding_secret": "alpha-strategy",
                   "undetected_floor": {"enabled": True, "k": 1, "p": 1e-10, "r": 1e-3, "achieved_bound": 0.00099999}}
    got = budget_left(spent_floor)
    assert got["tightest"] == "the undetected-secret floor (k = 1)" and got["spent"] == pytest.approx(1.0, abs=1e-4)
    assert "must add far more noise, or is refused" in got["line"] and "--budget-fraction 0.5" in got["line"]
    half = {"bound_ratio_max": 0.498, "binding_secret": "alpha-strategy",
            "undetected_floor": {"enabled": True, "k": 1, "p": 1e-10, "r": 1e-3, "achieved_bound": 0.0005}}
    line = budget_left(half)["line"]
    assert line.startswith("50% of the tightest target (the undetected-secret floor (k = 1)") and "refused" not in line
    off = {"bound_ratio_max": 0.3, "binding_secret": "s", "undetected_floor": {"enabled": False, "k": 1,
                                                                              "achieved_bound": 0.9, "r": 1e-3}}
    assert budget_left(off)["tightest"] == "secret s"
    assert budget_left({"bound_ratio_max": None, "undetected_floor": None}) is None


def test_the_run_summary_shows_the_worst_secrets_ratio_not_a_never_sampled_secrets_prior():
    from rich.console import Console

    from repoguard.commands.run import _print, budget_left

    s = {"ran": ["plan"], "skipped": [], "credentials_found": 3, "files": 10, "examples": 40, "secrets": 36,
         "incidences": 72, "retained_fraction": 0.58, "sigma": 1.47, "batch_size": 16.0, "steps": 200,
         "bound_ratio_min": 1e-7, "bound_ratio_max": 0.976, "binding_secret": "alpha-strategy",
         "undetected_floor": {"enabled": True, "k": 1, "p": 1e-10, "r": 1e-3, "achieved_bound": 0.000999},
         "adapter": None, "report": None, "ledger": "ledger.jsonl"}
    s["budget_left"] = budget_left(s)
    con = Console(record=True, width=400)
    _print(s, con)
    text = con.export_text()
    assert "1e-07" not in text and "0.976 (tightest: alpha-strategy)" in text
    assert "privacy budget left for the next run" in text and "must add far more noise" in text


def test_the_piped_run_summary_is_one_line_per_row_not_a_table_as_wide_as_its_longest_cell():
    """Piped (a CI log, `| tee`), the summary's rows are "what: value" lines: a table there took the
    width of its longest cell (the budget line, ~300 columns) for every row."""
    import io

    from rich.console import Console

    from repoguard.commands.run import _print, budget_left

    s = {"ran": ["plan"], "skipped": [], "credentials_found": 0, "files": 10, "examples": 40, "secrets": 2,
         "incidences": 4, "retained_fraction": 0.5, "sigma": 1.2, "batch_size": 16.0, "steps": 100,
         "bound_ratio_max": 0.999, "binding_secret": "alpha", "least_retained": None,
         "undetected_floor": {"enabled": True, "k": 1, "p": 1e-10, "r": 1e-3, "achieved_bound": 0.000999},
         "adapter": None, "report": None, "ledger": "ledger.jsonl"}
    s["budget_left"] = budget_left(s)
    buf = io.StringIO()
    _print(s, Console(file=buf, width=100_000, soft_wrap=True))      # as make_console builds it when piped
    lines = buf.getvalue().splitlines()
    assert lines[0] == "repoguard run"
    assert not any(ch in buf.getvalue() for ch in "│┃┏┗━")
    budget = [x for x in lines if x.startswith("  privacy budget left for the next run: none: this run brings")]
    assert len(budget) == 1
    sigma = [x for x in lines if x.startswith("  noise multiplier σ: ")]
    assert sigma == ["  noise multiplier σ: 1.2 (B = 16, T = 100)"]     # short rows stay short
