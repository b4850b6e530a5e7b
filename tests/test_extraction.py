"""k-extractable memorisation [Carlini et al. 2023; Hush §5.2] on the canary pair of the fixture:
the --no-dp model reproduces the planted examples' continuations, the DP model does not."""
from __future__ import annotations

import numpy as np
import pytest

from audit_helpers import SECRET, canary_pair, one_thread
from repoguard.audit.extraction import PUBLIC, clamp_lengths, extractable, measure, reference_note
from repoguard.core.errors import InputError


@pytest.fixture(scope="module")
def pair(fixture_repo, tmp_path_factory):
    return canary_pair(fixture_repo, tmp_path_factory.mktemp("canary"))


def test_clamp_lengths():
    assert clamp_lengths(50, 50, 256) == (50, 50, "")
    k, m, note = clamp_lengths(50, 50, 32)
    assert (k, m) == (16, 16) and "clamped to k=16, m=16" in note
    k, m, _ = clamp_lengths(10, 30, 20)
    assert (k, m) == (5, 15) and k + m == 20
    assert clamp_lengths(1, 1, 2) == (1, 1, "")
    with pytest.raises(InputError):
        clamp_lengths(0, 5, 10)
    with pytest.raises(InputError):
        clamp_lengths(5, 5, 1)


@pytest.mark.slow
def test_no_dp_extracts_the_planted_examples_dp_does_not(pair):
    out, doc, runs = pair
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan

    plan, inc = load_plan(out), load_incidence(out)
    # The first 8 tokens (BOS + the start of the canary line) as prompt, the next 12 (the rest of
    # the name and the first random hex digits) to reproduce: inside the canary, which the 22
    # planted examples share.
    with one_thread():
        res = measure(runs, plan, inc, k=8, m=12, max_length=32, per_secret=22, seed=0)
    g = res["groups"][SECRET]
    assert g["n_sampled"] == 22 and res["k"] == 8 and res["m"] == 12 and res["note"] == ""
    # Stated comparison: ≥ 90 % of the planted examples are 8-prefix/12-suffix extractable from the
    # --no-dp model, none from the DP model; examples tied to no secret (no canary; some start with
    # shared boilerplate) are extractable from the --no-dp model far less often.
    assert g["no-dp"] >= 0.9
    assert g["dp"] == 0.0
    pub = res["groups"][PUBLIC]
    assert pub["n_sampled"] == 22 and pub["no-dp"] <= g["no-dp"] - 0.5 and pub["dp"] <= 0.1
    # The comparison rests on a margin, not on an argmax that float rounding decides (issue 25:
    # a reference at p ≈ 0.3 per token extracted 22/22 with AVX-512 kernels and 0/22 with AVX2).
    assert g["p_target_no-dp"] >= 0.6 and g["p_target_dp"] <= 0.1
    assert res["reference"] == ""


def test_reference_note_flags_a_reference_that_memorised_nothing():
    groups = {"alpha": {"dp": 0.0, "no-dp": 0.05}, "beta": {"dp": 0.0, "no-dp": None}, PUBLIC: {"dp": 0.0, "no-dp": 0.9}}
    note = reference_note(groups)
    assert "memorised too little" in note and "5 %" in note
    assert reference_note({**groups, "gamma": {"dp": 0.0, "no-dp": 0.5}}) == ""
    assert reference_note({PUBLIC: {"no-dp": 0.0}}) == ""        # no secret sampled: nothing to say


@pytest.mark.slow
def test_extractable_matches_a_greedy_loop(pair):
    """The batched check agrees with a token-by-token argmax loop on the raw model."""
    import torch

    _, _, runs = pair
    model = runs.models["no-dp"]
    seqs = [s for s in runs.seqs if len(s) >= 20][:6]
    with one_thread():
        got = extractable(model, seqs, k=8, m=12, pad_id=runs.tokenizer.pad_token_id)
        want = []
        with torch.no_grad():
            for s in seqs:
                x = torch.tensor(s[:8])[None]
                for _ in range(12):
                    nxt = model(input_ids=x).logits[0, -1].argmax()
                    x = torch.cat([x, nxt.view(1, 1)], dim=1)
                want.append(bool(np.array_equal(x[0, 8:].numpy(), s[8:20])))
    assert got.tolist() == want
