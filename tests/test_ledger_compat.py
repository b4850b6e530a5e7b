"""A ledger written by an earlier release still loads, verifies, composes and takes new entries,
and the typed spending records (`accounting.spending`) write exactly what it holds.

`tests/data/ledger-8882464/` was written by repoguard 8882464's `ledger.record_run` (before the
spending records were typed) for `_plan()` below: run r1 interrupted at 50 of 100 steps, then
completed; run r2 running at 40 steps with a two-phase record. Its timestamps and hashes are
whatever that run wrote; nothing here rewrites them.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from repoguard.accounting.divergences import mixture
from repoguard.accounting.ledger import (entry_run, read_entries, read_spent, record_run, run_events, runs_without,
                                         spending, verify)
from repoguard.accounting.pld import pair_record
from repoguard.accounting.spending import Spent, SpendingEvent
from repoguard.planning.plan import Plan, SecretPlan

GOLDEN = Path(__file__).parent / "data" / "ledger-8882464"
FLOOR = "@undetected:k=1"


def _plan() -> Plan:
    pair_a = pair_record(mixture(np.full(3, 0.1)), 1 / 1.5, 100)
    pair_f = pair_record(mixture(np.full(1, 0.5)), 1 / 1.5, 100)
    secrets = [SecretPlan("alpha", 1e-10, 1e-3, 9e-4, "renyi:4", 0.02, {"2": 0.04, "4": 0.08}, 3, 0.1, pair=pair_a),
               SecretPlan("beta", 1e-10, 5e-4, 4e-4, "kl", 0.01, {"2": 0.02, "8": float("inf")}, 2, 0.05)]
    floor = {"enabled": True, "k": 1, "p": 1e-10, "r": 1e-3, "achieved_bound": 5e-4,
             "account": {"id": FLOOR, "kl": 0.03, "renyi": {"2": 0.05}, "pair": pair_f}}
    return Plan(sigma=1.5, batch_size=8.0, steps=100, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=["a", "b", "c", "d"], w=np.ones(4), rho=np.full(4, 0.5),
                secrets=secrets, extra={"undetected_floor": floor})


@pytest.fixture
def old_ledger(tmp_path) -> Path:
    shutil.copytree(GOLDEN, tmp_path / "old")
    return tmp_path / "old" / "ledger.jsonl"


def test_an_old_ledger_verifies_and_reads(old_ledger):
    check = verify(old_ledger)
    assert check["ok"] and check["entries"] == 3 and not check["problems"]
    spent = read_spent(old_ledger, floor_account=FLOOR)
    assert isinstance(spent, Spent) and spent.legacy == ()        # every run recorded the floor's account
    # r1 completed (100 of 100 steps) + r2 open at 40: the last entry of each run counts
    assert spent.divergences["alpha"][0] == pytest.approx(0.02 + 0.008)
    assert spent.divergences["alpha"][1] == pytest.approx({"2": 0.056, "4": 0.112})
    assert spent.divergences["beta"][1] == pytest.approx({"2": 0.028})     # the +inf order was never written
    assert spent.divergences[FLOOR][0] == pytest.approx(0.042)
    # the pairs of the same mixture at the same a merge into one of 140 steps; beta was never sampled
    assert [d["steps"] for d in spent.pairs["alpha"]] == [140] and spent.pairs["beta"] == []
    assert (spent.divergences, spent.pairs) == spending(old_ledger)
    # every run spent on the floor's account, so none counts at ρ = 1; another account sees both
    assert runs_without(old_ledger, FLOOR) == []
    assert sorted(runs_without(old_ledger, "@undetected:k=3")) == [(1.5, 40), (1.5, 100)]


def test_typed_events_write_what_the_old_ledger_holds(old_ledger):
    """`run_events` (what `record_run` now writes) gives, entry for entry, the per-secret records
    8882464 wrote: same secrets in the same order, same divergences, same pairs."""
    plan = _plan()
    for e in read_entries(old_ledger):
        events = run_events(plan, e["steps_completed"], phase=2 if e.get("phases") else None)
        assert all(isinstance(x, SpendingEvent) and x.sigma == 1.5 and x.steps == e["steps_completed"]
                   for x in events)
        assert [x.secret for x in events] == ["alpha", "beta", FLOOR]
        assert {x.secret: x.record() for x in events} == entry_run(old_ledger, e).to_dict()


def test_new_runs_append_to_an_old_ledger(old_ledger):
    before = read_spent(old_ledger)
    record_run(old_ledger, _plan(), run_id="r3", steps_completed=100, status="completed")
    check = verify(old_ledger)
    assert check["ok"] and check["entries"] == 4
    after = read_spent(old_ledger)
    assert after.divergences["alpha"][0] == pytest.approx(before.divergences["alpha"][0] + 0.02)
    assert after.divergences[FLOOR][0] == pytest.approx(before.divergences[FLOOR][0] + 0.03)
    assert sum(d["steps"] for d in after.pairs["alpha"]) == 240
