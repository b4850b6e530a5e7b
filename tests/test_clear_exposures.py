"""What a public phase trained in the clear is remembered (issue 13, item 2): the ledger stores the
ids (content-addressed Parquet, digest in the chain), a later analysis that ties one of them to a
secret makes `plan` and `run` report the exposure by name and refuse until it is acknowledged,
the trainer's guard refuses too, `ledger show` lists it and `ledger verify` catches tampering.
Real components: the fixture monorepo, the analyzers, the LP and the accountant."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repoguard.accounting.ledger import read_entries, record_run, side_dir, verify
from repoguard.core.errors import InputError, PolicyError
from conftest import run_cli as _cli  # noqa: E402

FAST_PLAN = ["--steps", "20", "--batch-size", "8", "--c", "1"]
NEW_SECRET = """

[[secret]]
id = "weekly-digest"
description = "declared after a two-phase run trained on its files in the clear"
paths = ["reports/weekly_digest.py", "docs/onboarding.md"]

[secret.propagate]
imports = 0
owners = false
codenames = false
"""




def _plan(capsys, repo: Path, *extra) -> tuple[int, dict | None, str]:
    rc, out, err = _cli(capsys, "plan", str(repo), "--json", *FAST_PLAN, *extra)
    return rc, (json.loads(out) if rc == 0 else None), err


def _public_ids(out: Path) -> list[str]:
    """Training examples tied to no secret (what a public phase may train on)."""
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan

    inc, plan = load_incidence(out), load_plan(out)
    tied = inc.matrix.getnnz(axis=1) > 0
    row = {e: i for i, e in enumerate(plan.example_ids)}
    return [e for i, e in enumerate(inc.example_ids) if not tied[i] and not plan.test_mask[row[e]]]


@pytest.fixture
def trained_in_clear(fixture_repo_copy, capsys):
    """The fixture analysed and planned, and a run recorded (started, completed) whose public
    phase trained in the clear on every public example — among them the two files the test then
    declares secret."""
    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    assert _cli(capsys, "analyze", str(repo), "-q")[0] == 0
    rc, doc, err = _plan(capsys, repo)
    assert rc == 0, err
    assert doc["exposures"] == []
    from repoguard.planning.plan import load_plan

    plan = load_plan(out)
    ids = _public_ids(out)
    assert any(e.startswith("reports/weekly_digest.py#") for e in ids)
    assert any(e.startswith("docs/onboarding.md#") for e in ids)
    ledger = out / "ledger.jsonl"
    record_run(ledger, plan, run_id="two-phase-1", steps_completed=0, status="started", clear_example_ids=ids)
    record_run(ledger, plan, run_id="two-phase-1", steps_completed=plan.steps, status="completed",
               clear_example_ids=ids)
    return repo, out, ids


def _declare(repo: Path, text: str) -> None:
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text() + text)


@pytest.mark.slow
def test_declaring_a_secret_over_clear_trained_examples_is_reported_and_refused(trained_in_clear, capsys):
    repo, out, ids = trained_in_clear
    ledger = out / "ledger.jsonl"
    entries = read_entries(ledger)
    # one side file for both entries of the run, its digest in the hashed entries
    assert entries[0]["clear"] == entries[1]["clear"] and entries[0]["v"] == 3
    assert entries[0]["clear"]["n"] == len(set(ids))
    assert [f.name for f in side_dir(ledger).glob("clear-*.parquet")] == [entries[0]["clear"]["file"]]
    assert verify(ledger)["ok"]

    _declare(repo, NEW_SECRET)
    assert _cli(capsys, "analyze", str(repo), "-q")[0] == 0
    plan_json = out / "plan" / "plan.json"
    before = plan_json.read_bytes()
    rc, _doc, err = _plan(capsys, repo)
    assert rc == 1                                           # a policy refusal, like a spent budget
    line = err.strip().splitlines()[-1]
    assert "weekly-digest" in line and "two-phase-1" in line and "bound of each is 1" in line
    assert "reports/weekly_digest.py#0@" in line and "docs/onboarding.md#0@" in line
    assert "2 of its example(s)" in line and "acknowledged_exposures" in line
    assert plan_json.read_bytes() == before                  # nothing written

    # ledger show lists the exposure (not acknowledged) and the clear run
    rc, shown, _ = _cli(capsys, "ledger", "show", str(repo), "--json")
    doc = json.loads(shown)
    assert rc == 0 and [r["run_id"] for r in doc["clear_runs"]] == ["two-phase-1"]
    assert doc["clear_runs"][0]["n_examples"] == len(set(ids))
    (x,) = doc["exposures"]
    assert (x["secret"], x["run_id"], x["n_examples"], x["acknowledged"]) == ("weekly-digest", "two-phase-1", 2, False)
    assert x["time"] == entries[0]["time"]
    rc, text, _ = _cli(capsys, "ledger", "show", str(repo))
    assert "weekly-digest" in text and "two-phase-1" in text and "exposed secrets" in text

    # acknowledging another run's exposure does not count
    _declare(repo, '\n[ledger]\nacknowledged_exposures = ["weekly-digest@another-run"]\n')
    assert _plan(capsys, repo)[0] == 1
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text().replace("weekly-digest@another-run", "weekly-digest@two-phase-1"))
    rc, doc, err = _plan(capsys, repo)
    assert rc == 0, err
    (x,) = doc["exposures"]
    assert x["secret"] == "weekly-digest" and x["acknowledged"] and x["bound"] == 1.0
    assert sorted(x["examples"])[0].startswith("docs/onboarding.md#0@")
    sec = {s["id"]: s for s in doc["secrets"]}
    assert sec["weekly-digest"]["achieved_bound"] == 1.0 and sec["weekly-digest"]["binding"] == "exposed"
    assert sec["weekly-digest"]["dp_bound"] <= sec["weekly-digest"]["r"]   # σ still meets r for this run
    assert all(s["achieved_bound"] <= s["r"] * (1 + 1e-6) for k, s in sec.items() if k != "weekly-digest")
    assert doc["binding_secret"] != "weekly-digest"
    from repoguard.planning.plan import load_plan

    plan = load_plan(out)
    assert plan.extra["exposures"][0]["acknowledged"] and plan.extra["clear_runs"] == ["two-phase-1"]
    rc, text, _ = _cli(capsys, "plan", str(repo), *FAST_PLAN)
    assert rc == 0 and "EXPOSED: secret weekly-digest" in text and "(acknowledged)" in text

    # the report shows the bound as 1
    from repoguard.report import build_report

    rep = json.loads(Path(build_report(out, repo_name="m")["json"]).read_text())
    row = next(r for r in rep["secrets"]["rows"] if r["id"] == "weekly-digest")
    assert row["achieved_bound"] == 1.0 and row["binding"] == "exposed"
    assert rep["plan"]["exposures"][0]["secret"] == "weekly-digest"

    # the trainer's guard accepts the acknowledged plan, refuses once the record says otherwise
    from repoguard.training.guard import LedgerGuard

    guard = LedgerGuard(out / "ledger.jsonl")
    guard.check(plan)
    plan.extra["exposures"][0]["acknowledged"] = False
    with pytest.raises(PolicyError, match="weekly-digest.*not acknowledged"):
        guard.check(plan)
    plan.extra["exposures"] = []
    plan.extra.pop("clear_runs")             # a plan made without the exposure check
    with pytest.raises(PolicyError, match="two-phase-1 trained in the clear"):
        guard.check(plan)
    guard.check(plan, own_run="two-phase-1")  # resuming that run itself


@pytest.mark.slow
def test_run_refuses_an_unacknowledged_exposure(trained_in_clear, capsys):
    repo, out, _ = trained_in_clear
    _declare(repo, NEW_SECRET)
    rc, _, err = _cli(capsys, "run", str(repo), "--json", "--steps", "5", "--batch-size", "8")
    assert rc == 1
    assert "weekly-digest" in err and "two-phase-1" in err and "acknowledged_exposures" in err
    assert not (out / "train" / "adapter").exists()
    state = json.loads((out / "run_state.json").read_text())["stages"]
    assert "analyze" in state and "plan" not in state


def test_ledger_verify_catches_an_edited_or_removed_clear_file(trained_in_clear, capsys):
    repo, out, ids = trained_in_clear
    ledger = out / "ledger.jsonl"
    f = side_dir(ledger) / read_entries(ledger)[0]["clear"]["file"]
    good = f.read_bytes()
    from repoguard.accounting.clear_ids import write_ids

    write_ids(f, sorted(ids)[1:])                 # a valid Parquet file with one id fewer
    rc, _, err = _cli(capsys, "ledger", "verify", str(repo))
    assert rc == 1 and "clear-phase ids" in err and "does not match its digest" in err
    with pytest.raises(PolicyError, match="clear-phase ids"):
        _refuse_plan(out)
    from repoguard.planning.plan import load_plan

    files = sorted(side_dir(ledger).iterdir())
    with pytest.raises(PolicyError, match="edited or swapped"):   # never extended past tampering
        record_run(ledger, load_plan(out), run_id="later", steps_completed=0, status="started",
                   clear_example_ids=ids)
    assert sorted(side_dir(ledger).iterdir()) == files and len(read_entries(ledger)) == 2
    f.unlink()
    rc, _, err = _cli(capsys, "ledger", "verify", str(repo))
    assert rc == 1 and "missing" in err
    assert _plan(capsys, repo)[0] == 1                       # an exposure could hide: refuse
    f.write_bytes(good)
    assert _cli(capsys, "ledger", "verify", str(repo), "--deep")[0] == 0


def _refuse_plan(out: Path) -> None:
    from repoguard.accounting.clear_exposures import plan_exposures
    from repoguard.analyzers.incidence import load_incidence

    plan_exposures(out / "ledger.jsonl", load_incidence(out), ())


def test_deep_verify_checks_the_content_address(tmp_path):
    from repoguard.accounting.clear_ids import check_content, content_name, write_ids

    ids = ["a.py#0@000000000000", "b.py#0@111111111111"]
    good = tmp_path / content_name(ids)
    write_ids(good, ids)
    assert check_content(good) is None
    moved = tmp_path / content_name(ids[:1])
    shutil.copy(good, moved)
    assert "do not hash to its name" in check_content(moved)


def test_clear_ids_must_be_training_examples_of_the_plan(trained_in_clear):
    _repo, out, ids = trained_in_clear
    from repoguard.planning.plan import load_plan

    plan = load_plan(out)
    ledger = out / "ledger.jsonl"
    with pytest.raises(InputError, match="not examples of the plan"):
        record_run(ledger, plan, run_id="x", steps_completed=0, status="started", clear_example_ids=["nope#0@0"])
    held = [e for e, t in zip(plan.example_ids, plan.test_mask) if t]
    with pytest.raises(InputError, match="held-out"):
        record_run(ledger, plan, run_id="x", steps_completed=0, status="started", clear_example_ids=held[:1])
    n = len(read_entries(ledger))
    # another id set gets its own file; the same set again reuses the first
    record_run(ledger, plan, run_id="y", steps_completed=0, status="started", clear_example_ids=ids[:3])
    record_run(ledger, plan, run_id="z", steps_completed=0, status="started", clear_example_ids=list(reversed(ids)))
    entries = read_entries(ledger)
    assert len(entries) == n + 2 and entries[-1]["clear"] == entries[0]["clear"]
    assert len(list(side_dir(ledger).glob("clear-*.parquet"))) == 2
    assert verify(ledger, deep=True)["ok"]


@pytest.mark.slow
def test_a_ledger_from_before_this_change_verifies_and_plans(fixture_repo_copy, capsys):
    """Entries without the field are exactly the format-2 entries written before it existed."""
    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    assert _cli(capsys, "analyze", str(repo), "-q")[0] == 0
    assert _plan(capsys, repo)[0] == 0
    from repoguard.planning.plan import load_plan

    plan = load_plan(out)
    ledger = out / "ledger.jsonl"
    record_run(ledger, plan, run_id="old", steps_completed=plan.steps, status="completed")
    (e,) = read_entries(ledger)
    assert e["v"] == 2 and "clear" not in e
    assert _cli(capsys, "ledger", "verify", str(repo), "--deep")[0] == 0
    _declare(repo, NEW_SECRET)
    assert _cli(capsys, "analyze", str(repo), "-q")[0] == 0
    rc, doc, err = _plan(capsys, repo)
    assert rc == 0, err
    assert doc["exposures"] == [] and all(s["binding"] != "exposed" for s in doc["secrets"])
    rc, shown, _ = _cli(capsys, "ledger", "show", str(repo), "--json")
    assert json.loads(shown)["clear_runs"] == [] and json.loads(shown)["exposures"] == []
    # a plan written before the exposure check (no "clear_runs") trains against such a ledger
    from repoguard.training.guard import LedgerGuard

    plan = load_plan(out)
    plan.extra.pop("clear_runs")
    LedgerGuard(ledger).check(plan)


@pytest.mark.parametrize("text, problem", [
    ('[ledger]\nacknowledged_exposures = ["ok", "two words"]\n', "acknowledged_exposures[1]"),
    ('[ledger]\nacknowledged_exposures = "x@"\n', "acknowledged_exposures[0]"),
    ('[ledger]\nacknowledge = ["x"]\n', "ledger.acknowledge: unknown key"),
    ('[ledger]\nacknowledged_exposures = [1]\n', "must be a list of strings"),
])
def test_acknowledgements_are_validated(tmp_path, text, problem):
    from repoguard.core.config import load_config

    p = tmp_path / "repoguard.toml"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_config(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:2: ") and problem in msg and "\n" not in msg


def test_valid_acknowledgements_parse(tmp_path):
    from repoguard.core.config import load_config

    p = tmp_path / "repoguard.toml"
    p.write_text('[ledger]\nacknowledged_exposures = ["alpha", "credential:jwt:3b27efa9d28e@train-20261123T1-ab"]\n')
    assert load_config(p).ledger.acknowledged_exposures == ("alpha", "credential:jwt:3b27efa9d28e@train-20261123T1-ab")


@pytest.mark.slow
def test_run_after_acknowledging_trains_and_reports_bound_one(trained_in_clear, capsys):
    """`repoguard run` plans with the acknowledged exposure, the trainer's guard accepts it, and
    the summary, privacy report and report all give the secret bound 1."""
    repo, out, _ = trained_in_clear
    _declare(repo, NEW_SECRET + '\n[ledger]\nacknowledged_exposures = ["weekly-digest"]\n')
    rc, text, err = _cli(capsys, "run", str(repo), "--json", "--steps", "2", "--batch-size", "8",
                         "--max-length", "64", "--seed", "0")
    assert rc == 0, err
    s = json.loads(text)
    assert [(x["secret"], x["run_id"], x["acknowledged"]) for x in s["exposures"]] == [
        ("weekly-digest", "two-phase-1", True)]
    report = json.loads((out / "train" / "privacy_report.json").read_text())
    row = next(x for x in report["secrets"] if x["id"] == "weekly-digest")
    assert row["achieved_bound"] == 1.0 and row["binding"] == "exposed"
    runs = {e["run_id"]: e["status"] for e in read_entries(out / "ledger.jsonl")}
    assert runs.pop("two-phase-1") == "completed" and list(runs.values()) == ["completed"]
    html = Path(s["report"]).read_text()
    assert "exposed by a clear phase" in html and "weekly-digest" in html
