"""`repoguard plan` and `repoguard ledger` end to end on a synthetic incidence."""
from __future__ import annotations

import json

import numpy as np
import pytest

from repoguard.accounting.bounds import reconstruction_bound
from repoguard.accounting.ledger import record_run
from repoguard.cli import main
from repoguard.analyzers.incidence import Evidence, Secret, build_incidence, save_incidence
from repoguard.planning.plan import load_plan


@pytest.fixture
def project(tmp_path):
    """200 examples in 100 files; 6 secrets over the first 60 files (overlapping)."""
    rng = np.random.default_rng(0)
    files = {f"src/f{i}.py": [2 * i, 2 * i + 1] for i in range(100)}
    ids = [f"ex{i}" for i in range(200)]
    secrets = [Secret(f"sec-{j}", "declared", 1e-10 if j % 2 else 1e-6, float(r))
               for j, r in enumerate(np.linspace(3e-4, 1e-3, 6))]
    ev = [Evidence(f"src/f{i}.py", s.id, "declared", "test") for s in secrets
          for i in rng.choice(60, 6, replace=False)]
    out = tmp_path / "out"
    save_incidence(build_incidence(ids, files, secrets, ev), out)
    return tmp_path, out


def _plan(capsys, root, out, *extra):
    code = main(["plan", str(root), "--out", str(out), "--batch-size", "16", "--steps", "300", "--json", *extra])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


@pytest.mark.slow
def test_plan_writes_a_consistent_plan(project, capsys):
    root, out = project
    code, doc, _ = _plan(capsys, root, out, "--c", "1")
    assert code == 0
    plan = load_plan(out)
    assert plan.sigma == doc["sigma"] and plan.c == 1.0 and plan.steps == 300
    assert plan.rho == pytest.approx(16 * plan.w / plan.w.sum())
    assert plan.rho.max() <= 1
    assert plan.w[120:].min() == 1.0                       # examples tied to no secret keep w = 1
    assert doc["sigma_paper_kl"] > plan.sigma and doc["sigma_ratio_kl_over_this"] > 1
    assert doc["lp"]["solver"] == "GLOP"
    ids = {e: i for i, e in enumerate(plan.example_ids)}
    from repoguard.analyzers.incidence import load_incidence
    inc = load_incidence(out)
    for s in plan.secrets:
        assert s.achieved_bound <= s.r
        rows = inc.examples_of(s.id)
        assert s.n_examples == len(rows)
        indep = reconstruction_bound(plan.rho[rows], plan.sigma, plan.steps, s.p, "best")
        assert s.achieved_bound >= indep * (1 - 1e-9)           # never tighter than the best bound
        if s.binding.startswith("pld"):
            # certified on a coarser loss grid or for a batch's envelope: valid, a little looser
            assert s.achieved_bound <= indep * 1.05
        else:
            # the Neyman–Pearson bound is computed only where the divergence bounds miss r
            fdiv = min(reconstruction_bound(plan.rho[rows], plan.sigma, plan.steps, s.p, m) for m in ("kl", "renyi"))
            assert s.achieved_bound == pytest.approx(fdiv, rel=1e-6)
    assert ids


def test_sweep_picks_max_signal_to_noise(project, capsys):
    root, out = project
    code, doc, _ = _plan(capsys, root, out, "--sweep", "--accountant", "kl", "--cap", "gdp", "--undetected", "off")
    assert code == 0
    rows = doc["sweep"]
    assert [r["c"] for r in rows] == [2.0 ** k for k in range(-6, 5)]
    best = max(rows, key=lambda r: r["score"] or 0)
    assert doc["c"] == best["c"]
    assert all(r["score"] == pytest.approx(r["sum_w"] / r["sigma"]) for r in rows if r["sigma"])
    assert doc["undetected_floor"]["enabled"] is False and "floor_bought" not in (doc.get("floor_bought") or {})


@pytest.mark.slow
def test_sweep_with_the_floor_raises_c_within_its_sigma(project, capsys):
    """With the floor on, the rule's c is raised to the largest c whose σ(c) stays within σ(c*)
    (issue 26): more tied weight at the same noise."""
    root, out = project
    code, doc, _ = _plan(capsys, root, out, "--sweep", "--batch-size", "8", "--steps", "20")
    assert code == 0
    rows = doc["sweep"]
    best = max(rows, key=lambda r: r["score"] or 0)
    fl = doc["undetected_floor"]
    assert fl["enabled"] and fl["meets_r"] and fl["achieved_bound"] <= fl["r"] * (1 + 1e-9)
    assert doc["sigma"] >= fl["sigma_floor"] * (1 - 1e-9)
    assert doc["c"] >= best["c"] and doc["sigma"] <= best["sigma"] * (1 + 1e-5)
    assert all(r["sigma"] >= (r["sigma_secrets"] or 0) * (1 - 1e-9) for r in rows)
    bought = doc["floor_bought"]
    assert bought["tied_sum_w"] >= bought["tied_sum_w_without_floor"] - 1e-9


def test_batch_too_large_is_an_input_error(project, capsys):
    root, out = project
    code = main(["plan", str(root), "--out", str(out), "--batch-size", "5000", "--c", "1", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "batch size ≤" in err
    assert not (out / "plan").exists()


def test_missing_incidence(tmp_path, capsys):
    assert main(["plan", str(tmp_path), "--out", str(tmp_path / "nothing"), "-q"]) == 2


@pytest.mark.slow
def test_the_floor_composes_across_runs_like_a_secret(project, capsys):
    """The floor has a ledger account: a run that spent it leaves the next plan less room, and a
    plan that cannot keep it within r is refused naming the floor (issue 26)."""
    root, out = project
    code, first, _ = _plan(capsys, root, out, "--c", "1", "--undetected", "k=1,r=1e-3")
    assert code == 0
    plan = load_plan(out)
    entry = record_run(out / "ledger.jsonl", plan, run_id="run-1", steps_completed=plan.steps, status="completed")
    assert entry["floor"]["account"] == "@undetected:k=1" and entry["floor"]["enabled"] is True
    assert "@undetected:k=1" in entry["secrets"]
    # a looser floor still fits on top of run 1, with more noise than run 1 alone needed
    code, second, err = _plan(capsys, root, out, "--c", "1", "--undetected", "k=1,r=1e-2")
    assert code == 0, err
    assert second["undetected_floor"]["sigma_floor"] > 0
    # run 1's floor spending alone is near r = 1e-3: the same floor once more cannot be met
    record_run(out / "ledger.jsonl", plan, run_id="run-2", steps_completed=plan.steps, status="completed")
    code, _, err = _plan(capsys, root, out, "--c", "1", "--undetected", "k=1,r=1e-3")
    assert code == 1 and "undetected floor" in err and "budget" in err


@pytest.mark.slow
def test_ledger_makes_bounds_cumulative_and_refuses_when_spent(project, capsys):
    root, out = project
    code, first, _ = _plan(capsys, root, out, "--c", "1", "--undetected", "off")
    plan = load_plan(out)
    record_run(out / "ledger.jsonl", plan, run_id="run-1", steps_completed=plan.steps, status="completed")
    code, second, _ = _plan(capsys, root, out, "--c", "1", "--undetected", "off")
    assert code == 0 and second["sigma"] > first["sigma"] * 1.05
    assert all(s["achieved_bound"] <= s["r"] for s in second["secrets"])
    # the first plan run once more: its spending twice exceeds the binding secrets' budgets
    record_run(out / "ledger.jsonl", plan, run_id="run-2", steps_completed=plan.steps, status="completed")
    code, _, err = _plan(capsys, root, out, "--c", "1", "--undetected", "off")
    assert code == 1
    assert "sec-" in err and "spent" in err and first["binding_secret"] in err

    assert main(["ledger", "verify", str(root), "--out", str(out), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["ok"] and v["entries"] == 2
    assert main(["ledger", "show", str(root), "--out", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["spent"]["sec-0"]["kl"] > 0 and len(shown["runs"]) == v["entries"]

    lines = (out / "ledger.jsonl").read_text().splitlines()
    (out / "ledger.jsonl").write_text("\n".join(lines[1:]) + "\n")          # drop the first run
    assert main(["ledger", "verify", str(root), "--out", str(out), "-q"]) == 1
    assert main(["plan", str(root), "--out", str(out), "--c", "1", "-q"]) == 1  # refuses a broken ledger


@pytest.mark.slow
def test_table_output(project, capsys):
    root, out = project
    # Grouped secrets under "replace" adjacency: refused, one line, exit 2 (issue 19).
    assert main(["plan", str(root), "--out", str(out), "--c", "2", "--adjacency", "replace"]) == 2
    err = capsys.readouterr().err
    assert "--adjacency replace" in err and "examples" in err and "Traceback" not in err
    assert main(["plan", str(root), "--out", str(out), "--c", "2"]) == 0
    text = capsys.readouterr().out
    assert "per-secret bounds" in text and "paper's KL accountant" in text


@pytest.mark.slow
def test_runs_recorded_before_the_floor_count_at_their_worst_case(project, capsys):
    """A ledger entry with no floor account (recorded before issue 26, or for another k) is counted
    for the floor at ρ = 1 with its σ and steps: the next plan needs more noise, or is refused
    with a line that says why."""
    from repoguard.core.config import Undetected
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import build_plan
    from repoguard.planning.undetected import FloorPlan, legacy_runs

    root, out = project
    inc = load_incidence(out)
    old = build_plan(inc, batch_size=16, steps=300, c=1.0, floor=None)       # no floor record
    assert "undetected_floor" not in old.extra
    record_run(out / "ledger.jsonl", old, run_id="old-1", steps_completed=1, status="interrupted")
    und = Undetected(1, 1e-10, 1e-3)
    assert legacy_runs(out / "ledger.jsonl", und) == [(old.sigma, 1)]
    assert legacy_runs(out / "ledger.jsonl", Undetected(3, 1e-10, 1e-3)) == [(old.sigma, 1)]
    with_old = build_plan(inc, batch_size=16, steps=300, c=1.0,
                          floor=FloorPlan(und, legacy=tuple(legacy_runs(out / "ledger.jsonl", und))))
    without = build_plan(inc, batch_size=16, steps=300, c=1.0, floor=und)
    assert with_old.extra["undetected_floor"]["sigma_floor"] > without.extra["undetected_floor"]["sigma_floor"]
    assert with_old.extra["undetected_floor"]["meets_r"]
    # 300 steps at the old σ with ρ = 1 spend more than the whole budget: refused, saying why
    from repoguard.core.errors import PolicyError

    with pytest.raises(PolicyError, match=r"1 earlier run\(s\) recorded no floor account .*ρ = 1"):
        build_plan(inc, batch_size=16, steps=300, c=1.0, floor=FloorPlan(und, legacy=((old.sigma, 300),)))


@pytest.mark.slow
def test_plan_says_in_words_when_a_declared_secret_is_not_trained_on(tmp_path, capsys):
    """Issue 44 item 5: a declared secret tying most of the corpus keeps almost none of its weight
    at the floor's σ; `plan` says so in words, and `--json` carries the same rows."""
    files = {f"src/f{i}.py": [2 * i, 2 * i + 1] for i in range(100)}
    ids = [f"src/f{i // 2}.py#{i % 2}@{i:04x}" for i in range(200)]
    secrets = [Secret("wide", "declared", 1e-10, 1e-3), Secret("narrow", "declared", 1e-10, 1e-3)]
    ev = [Evidence(f"src/f{i}.py", "wide", "declared", "test") for i in range(90)]
    ev += [Evidence("src/f95.py", "narrow", "declared", "test")]
    out = tmp_path / "out"
    save_incidence(build_incidence(ids, files, secrets, ev), out)
    args = ["plan", str(tmp_path), "--out", str(out), "--batch-size", "16", "--steps", "20", "--c", "1"]
    assert main(args) == 0
    text = capsys.readouterr().out
    doc = json.loads((out / "plan" / "plan.json").read_text())
    wide = next(r for r in doc["extra"]["retention"]["per_secret"] if r["secret"] == "wide")
    assert wide["retained"] < 0.01, wide                       # the premise: the LP drops it
    assert f"wide: {100 * wide['retained']:.1f} % of {wide['examples']} examples kept — not trained on" in text
    assert main(args + ["--json"]) == 0
    assert "wide" in json.loads(capsys.readouterr().out)["least_retained"]["dropped"]
