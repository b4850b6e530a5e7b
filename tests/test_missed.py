"""`audit canaries --missed` against the plan's undetected-secret floor (issue 26 item 6): on the
fixture monorepo with the embedded pretrained base, a canary in one untied example stays under
the floor's predicted exposure ceiling in the DP run (`hush`), while `no-dp` and `drop` (which
train on it in the clear) have no bound."""
from __future__ import annotations

import dataclasses
import json
import logging
import math

import numpy as np
import pytest

from repoguard.cli import main
from repoguard.core.errors import InputError

B, T = 6, 4


@pytest.fixture(scope="module")
def planned(tmp_path_factory, monorepo_module):
    repo = tmp_path_factory.mktemp("missed") / "monorepo"
    monorepo_module.build(repo)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", str(B), "--steps", str(T), "--c", "1", str(repo)]) == 0
    from repoguard.planning.plan import load_plan

    return repo, load_plan(repo / ".repoguard")


@pytest.mark.slow
def test_missed_canary_under_the_floors_ceiling(planned, embedded_base_dir, caplog):
    from repoguard.audit.missed import predicted_exposure
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.training.phases import public_mask

    repo, plan = planned
    out = repo / ".repoguard"
    floor = plan.extra["undetected_floor"]
    assert floor["enabled"] and floor["k"] == 1 and "phase1" not in floor      # the default floor, one phase
    with caplog.at_level(logging.INFO, logger="repoguard"):
        assert main(["audit", "canaries", str(repo), "--missed", "--references", "100", "--max-length", "32",
                     "--lr", "0.02"]) == 0
    printed = [r.getMessage() for r in caplog.records]
    doc = json.loads((out / "audit" / "missed-canaries.json").read_text())
    assert doc["run_order"] == ["hush", "no-dp", "drop"] and set(doc["runs"]) == set(doc["run_order"])
    assert doc["model"] == "embedded tiny model" and doc["n_inserted"] == 1 and not doc["floor_off"]
    public = {e for e, p in zip(plan.example_ids, public_mask(plan, load_incidence(out))) if p}
    assert set(doc["inserted_examples"]) <= public
    # the floor target and what it achieved are the plan's
    assert doc["floor_target"] == {k: floor[k] for k in ("k", "p", "r", "enabled")}
    assert doc["undetected_floor"]["achieved_bound"] == floor["achieved_bound"] <= floor["r"] * (1 + 1e-9)
    assert doc["floor_status"].startswith("undetected floor:")
    # k = 1 untied example at ρ_u, the plan's σ and T: hush's ceiling is the floor's prediction
    hush = doc["runs"]["hush"]
    assert hush["private"] and hush["rho_inserted"] == pytest.approx([floor["rho"]])
    assert doc["undetected_floor"]["prediction_is_floors"]
    assert doc["undetected_floor"]["floor_point"]["tail_bound_hush"] <= floor["r"] * (1 + 1e-6)
    ceiling = hush["predicted_exposure_95"]
    assert ceiling is not None and math.log2(1 / 0.05) <= ceiling < doc["log2_space_size"]
    assert ceiling == pytest.approx(predicted_exposure([(np.array([floor["rho"]]), plan.sigma, T)], plan.adjacency,
                                                       max_exposure=doc["log2_space_size"]), abs=2e-3)
    slack = 0.25
    assert hush["exposure_sampled"] <= ceiling + slack and hush["exposure_skewnorm"] <= ceiling + slack
    assert hush["under_ceiling"]["sampled"] is (hush["exposure_sampled"] <= ceiling)
    assert 0 < hush["tail_bound_sampled"] <= 1
    # the references: no bound; drop samples the canary's untied example in the clear
    for name in ("no-dp", "drop"):
        r = doc["runs"][name]
        assert not r["private"] and r["sigma"] == 0 and r["rho_inserted"][0] > 0
        assert r["predicted_exposure_95"] is None and r["tail_bound_sampled"] is None
        assert r["under_ceiling"] == {"sampled": None, "skewnorm": None} and r["ceiling"].startswith("no bound")
    assert doc["runs"]["no-dp"]["rho_inserted"] == hush["rho_inserted"]          # no-dp: the plan's ρ
    lines = [ln for ln in printed if ln.startswith(("hush ", "no-dp ", "drop "))]
    assert len(lines) == 3 and "no bound" in lines[1] and f"{ceiling:.2f}" in lines[0]
    text = (out / "audit" / "missed-canaries.json").read_text()
    assert doc["canary_redacted"].endswith("…") and len(doc["canary_sha256"]) == 64 and '"canary":' not in text


@pytest.mark.slow
def test_predicted_ceiling_falls_as_noise_grows():
    from repoguard.audit.missed import _tail, predicted_exposure

    rho = np.array([0.12])
    low, high = (predicted_exposure([(rho, s, T)], "zero-out", max_exposure=40.0) for s in (0.35, 1.0))
    assert low is not None and high is not None and high < low - 0.5
    assert high >= math.log2(1 / 0.05)                 # the bound is never below the prior 2^-e
    assert _tail([(rho, 1.0, T)], high, "zero-out") <= 0.05 < _tail([(rho, 1.0, T)], high - 0.01, "zero-out")
    assert predicted_exposure([(rho, 1.0, T)], "zero-out", level=0.01, max_exposure=40.0) > high
    # a noised phase 1 composed with the plan spends more: a higher ceiling
    both = predicted_exposure([(rho, 1.0, 2), (rho, 1.0, T)], "zero-out", max_exposure=40.0)
    assert both > high
    assert predicted_exposure([(rho, 0.0, T)], "zero-out", max_exposure=40.0) is None      # clear: no bound
    assert predicted_exposure([(rho, 0.05, T)], "zero-out", max_exposure=8.0) is None      # vacuous in the space


@pytest.mark.slow
def test_default_runs_follow_the_plans_floor(planned):
    from repoguard.audit.missed import check_runs, default_runs

    _repo, plan = planned
    floor = plan.extra["undetected_floor"]
    assert default_runs(plan) == ("hush", "no-dp", "drop")
    reserved = dataclasses.replace(plan, extra={**plan.extra, "undetected_floor": {
        **floor, "phase1": {"rho": 0.1, "steps": 2, "sigma": 0.5, "r": 5e-4}}})
    assert default_runs(reserved) == ("hush", "no-dp", "drop", "two-phase-noised")
    with pytest.raises(InputError, match="breaks the plan's undetected-secret floor"):
        check_runs(plan, ("hush", "two-phase-clear"))
    off = dataclasses.replace(plan, extra={**plan.extra, "undetected_floor": {**floor, "enabled": False}})
    assert check_runs(off, ("hush", "two-phase-clear")) == ("hush", "two-phase-clear")
    with pytest.raises(InputError, match="--runs"):
        check_runs(plan, ("hush", "uniform"))
