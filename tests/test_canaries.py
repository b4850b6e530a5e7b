"""The canary audit on the fixture monorepo: a real tiny Llama, real LoRA, real DP-SGD, real
accountant. Without DP the planted canary is exposed; with the calibrated σ its exposure is one
the secret's bound allows."""
from __future__ import annotations

import json

import numpy as np
import pytest

from audit_helpers import SECRET, canary_pair, prepare_out
from repoguard.audit.canaries import CanaryFormat, choose_examples, insert_canary
from repoguard.audit.canary_exposure import exposure_at_level, exposure_tail_bound
from repoguard.core.errors import InputError


@pytest.fixture(scope="module")
def pair(fixture_repo, tmp_path_factory):
    return canary_pair(fixture_repo, tmp_path_factory.mktemp("canary"))


@pytest.mark.slow
def test_no_dp_exposes_the_canary_and_dp_stays_within_its_bound(pair):
    out, doc, _ = pair
    dp, nodp = doc["runs"]["dp"], doc["runs"]["no-dp"]
    kl, ren = doc["kl_spent"], _renyi(out)
    # The exposure the DP guarantee allows with probability at most 1e-3:
    # P[exposure ≥ e] ≤ r(2^-e) [Hush Lemma 3.2], and r(2^-e*) = 1e-3.
    e_star = exposure_at_level(1e-3, kl=kl, renyi=ren, max_exposure=doc["log2_space_size"])
    assert 5 < e_star < doc["log2_space_size"]
    # --no-dp: the canary beats every reference, and its extrapolated exposure is one that the DP
    # guarantee would give probability ≤ 1e-3 (the test could tell the two apart).
    assert nodp["rank_in_sample"] == 1
    assert nodp["exposure_sampled"] == pytest.approx(np.log2(doc["n_references"] + 1))
    assert nodp["exposure_skewnorm"] >= e_star
    # DP at the calibrated σ: the observed exposure is not implausible under the bound (the
    # probability of an exposure at least this large is allowed to be ≥ 5%) ...
    assert dp["tail_bound_sampled"] >= 0.05 and dp["tail_bound_skewnorm"] >= 0.05
    assert exposure_tail_bound(dp["exposure_skewnorm"], kl=kl, renyi=ren) == dp["tail_bound_skewnorm"]
    # ... and is far below the non-private one.
    assert dp["exposure_skewnorm"] <= nodp["exposure_skewnorm"] - 10
    assert dp["exposure_skewnorm"] < e_star


@pytest.mark.slow
def test_canary_document_and_redaction(pair):
    out, doc, runs = pair
    on_disk = json.loads((out / "audit" / "canaries.json").read_text())
    assert on_disk == json.loads(json.dumps(doc))
    assert doc["space_size"] == 16.0 ** 10 and doc["log2_space_size"] == 40.0
    assert doc["n_inserted"] == len(doc["inserted_examples"]) == 22
    assert doc["expected_canary_occurrences"] == pytest.approx(doc["steps"] * sum(doc["rho_inserted"]))
    assert len(doc["canary_redacted"]) == 5 and doc["canary_redacted"].endswith("…")
    assert set(runs.models) == {"dp", "no-dp"}
    for label in ("dp", "no-dp"):       # the loss curves the report plots
        assert (out / "audit" / "canaries" / label / "train_log.jsonl").is_file()
        assert not (out / "audit" / "canaries" / label / "checkpoints").exists()


def test_insert_and_choose(fixture_repo, tmp_path):
    plan, inc = prepare_out(fixture_repo, tmp_path / "out", steps=2)
    rng = np.random.default_rng(0)
    rows = choose_examples(plan, inc, SECRET, 5, rng)
    assert len(set(rows.tolist())) == 5 and set(rows) <= set(inc.examples_of(SECRET).tolist())
    fmt = CanaryFormat()
    secrets = fmt.draw(rng, 1000)
    assert all(len(s) == 10 and set(s) <= set("0123456789abcdef") for s in secrets)
    assert fmt.render("0123456789") == 'ALPHA_SIGNAL_KEY = "0123456789"'
    texts = insert_canary(["a", "b", "c"], [1], fmt.render("0" * 10))
    assert texts == ["a", 'ALPHA_SIGNAL_KEY = "0000000000"\nb', "c"]
    with pytest.raises(InputError, match="--insert"):
        choose_examples(plan, inc, SECRET, 1000, rng)
    with pytest.raises(InputError, match="not in the incidence"):
        choose_examples(plan, inc, "nope", 1, rng)
    # default --insert: every example of the secret with ρ > 0; refused only when there is none
    live = inc.examples_of(SECRET)[plan.rho[inc.examples_of(SECRET)] > 0]
    assert choose_examples(plan, inc, SECRET, None, rng).tolist() == sorted(live.tolist())
    plan.rho[live[1:]] = 0.0
    assert choose_examples(plan, inc, SECRET, None, rng).tolist() == [int(live[0])]
    plan.rho[live[0]] = 0.0
    with pytest.raises(InputError, match="none of its"):
        choose_examples(plan, inc, SECRET, None, rng)


def _renyi(out):
    from repoguard.planning.plan import load_plan

    plan = load_plan(out)
    return next(s for s in plan.secrets if s.id == SECRET).renyi_spent


@pytest.mark.slow
def test_audit_commands_end_to_end(fixture_repo, tmp_path, capsys):
    """`repoguard audit canaries|extract --json` on a plan of the fixture (2 steps: the plumbing)."""
    from audit_helpers import one_thread
    from repoguard.cli import main

    out = tmp_path / "out"
    prepare_out(fixture_repo, out, steps=2)
    capsys.readouterr()
    base = [str(fixture_repo), "--out", str(out), "--max-length", "32", "-q", "--json"]
    with one_thread():
        assert main(["audit", "canaries", *base, "--secret", SECRET, "--insert", "3", "--references", "200"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["n_inserted"] == 3 and doc["steps"] == 2 and doc["n_references"] == 200
        assert set(doc["runs"]) == {"dp", "no-dp"} and 0 <= doc["runs"]["dp"]["exposure_sampled"] <= np.log2(201)
        assert (out / "audit" / "canaries.json").is_file()
        assert main(["audit", "extract", *base, "--per-secret", "3"]) == 0
        ext = json.loads(capsys.readouterr().out)
        assert (ext["k"], ext["m"]) == (16, 16) and ext["groups"][SECRET]["n_sampled"] == 3
    assert main(["audit", "canaries", *base, "--secret", "nope"]) == 2
    assert "not in the incidence" in capsys.readouterr().err
    assert main(["audit", "canaries", *base, "--secret", SECRET, "--references", "5"]) == 2
    assert main(["audit", "extract", *base, "-k", "0"]) == 2
    assert main(["audit", "canaries", str(tmp_path), "--out", str(tmp_path / "none"), "--secret", SECRET]) == 2
