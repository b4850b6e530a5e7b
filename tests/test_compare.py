"""`repoguard compare` on the fixture monorepo with the embedded tiny model: the arms' plans keep
the held-out split out of every batch, `uniform`'s σ meets every secret's target, every arm is
scored on exactly the same held-out examples, the `hush` arm learns (held-out public loss below
the base model's), results resume, and nothing is published or recorded."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from repoguard.cli import main

# ---- the one place randomness is fixed in this file --------------------------------------------
# Sampler and noise seed of every compare arm, and the model/LoRA init seed ([training] seed).
# Fixed so the learning assertion is reproducible; `repoguard compare` itself draws fresh ones.
SEED = 7
# -------------------------------------------------------------------------------------------------
B, T = 8, 10


@pytest.fixture(scope="module")
def planned(tmp_path_factory, monorepo_module):
    """The fixture monorepo, analysed and planned (B = 8, T = 10, c = 1)."""
    repo = tmp_path_factory.mktemp("cmp") / "monorepo"
    monorepo_module.build(repo)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", str(B), "--steps", str(T), "--c", "1", str(repo)]) == 0
    return repo, repo / ".repoguard"


def test_a_fresh_adapter_scores_exactly_as_the_base(planned):
    """Why compare may score the base once for every arm: LoRA's B starts at 0, so the adapted
    model's logits are the base's, bit for bit, on the shared evaluation set."""
    import copy

    from repoguard.config import load_config
    from repoguard.corpus import load_corpus
    from repoguard.evaluation.metrics import Evaluator, plan_evaluator
    from repoguard.incidence import load_incidence
    from repoguard.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts, tokenize
    from repoguard.training.model import TINY_LORA_TARGETS, apply_lora, build_tiny_model

    repo, out = planned
    cfg = load_config(repo / "repoguard.toml", required=False).training
    plan, inc = load_plan(out), load_incidence(out)
    texts = example_texts(load_corpus(out, repo), plan.example_ids, redactor=default_redactor())
    base, tok = build_tiny_model(texts[:50], seed=SEED)
    seqs = tokenize(texts, tok, max_length=48)
    ev0 = plan_evaluator(base, tok, plan=plan, incidence=inc, texts=texts, seqs=seqs, max_length=48,
                         max_examples=6, max_lines=2)
    lora = apply_lora(copy.deepcopy(base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                      targets=TINY_LORA_TARGETS, seed=SEED)
    assert Evaluator(lora, ev0.es, tokenizer=tok, pad_id=tok.pad_token_id)() == ev0()


def test_no_arm_can_sample_a_held_out_example_and_uniform_meets_every_target(planned):
    from repoguard.accounting.bounds import reconstruction_bound
    from repoguard.evaluation.compare import ARMS, arm_plan
    from repoguard.incidence import load_incidence
    from repoguard.plan import load_plan
    from repoguard.training.sampler import PoissonSampler

    _repo, out = planned
    base, inc = load_plan(out), load_incidence(out)
    test = base.test_mask
    assert test.any() and (~test).sum() > B
    tied = inc.matrix.tocsr().getnnz(axis=1) > 0
    csc = inc.matrix.tocsc()
    for name in ARMS:
        plan, private = arm_plan(name, base, inc)
        assert np.array_equal(plan.test_mask, test), name               # the same split in every arm
        assert np.all(plan.rho[test] == 0) and np.all(plan.rho <= 1), name
        assert plan.rho.sum() == pytest.approx(B), name
        assert plan.batch_size == B and plan.steps == T and plan.clip_norm == base.clip_norm, name
        sampler = PoissonSampler(plan.rho, seed=SEED)
        for _ in range(T):                                              # the batches the trainer would draw
            assert not test[sampler.sample()].any(), name
        if name == "drop":
            assert not private and np.all(plan.rho[tied] == 0) and np.all(plan.rho[~tied & ~test] > 0)
        if name in ("uniform", "no-dp"):
            assert np.allclose(plan.rho[~test], B / (~test).sum())
        assert private == (name not in ("drop", "no-dp")), name
    uniform, _ = arm_plan("uniform", base, inc)
    assert uniform.sigma > base.sigma                                   # the noise Hush saves
    for j, s in enumerate(base.secrets):
        rows = csc.indices[csc.indptr[j]:csc.indptr[j + 1]]
        bound = reconstruction_bound(uniform.rho[rows], uniform.sigma, T, s.p, base.accountant,
                                     adjacency=base.adjacency)
        assert bound <= s.r * (1 + 1e-6), s.id


def test_compare_scores_every_arm_on_the_same_examples_and_hush_learns(planned, capsys):
    from repoguard.config import load_config
    from repoguard.evaluation.compare import run_compare

    repo, out = planned
    cfg = dataclasses.replace(load_config(repo / "repoguard.toml", required=False).training,
                              max_length=64, learning_rate=2e-2, seed=SEED, eval_max_examples=16,
                              eval_max_lines=4, micro_batch_size=8)
    arms = ("hush", "uniform", "drop", "no-dp")
    doc = run_compare(root=repo, out=out, cfg=cfg, arms=arms, seed=SEED, show_progress=False)
    got = doc["arms"]
    assert list(got) == list(arms)
    rows = [got[a]["eval_rows"] for a in arms]
    assert all(r == rows[0] for r in rows) and rows[0]["public"] and rows[0]["secret-tied"]
    from repoguard.evaluation.split import slices
    from repoguard.incidence import load_incidence
    from repoguard.plan import load_plan
    sl = slices(load_incidence(out), load_plan(out).test_mask)
    for name, idx in rows[0].items():
        assert set(idx) <= set(int(i) for i in sl[name])                # held-out rows only
    base_loss = doc["base"]["public"]["loss"]
    assert got["hush"]["slices"]["public"]["loss"] < base_loss          # it learned
    assert got["no-dp"]["slices"]["public"]["loss"] < base_loss
    assert got["hush"]["private"] and got["uniform"]["private"] and not got["drop"]["private"]
    assert got["uniform"]["sigma"] > got["hush"]["sigma"] > 0
    assert got["drop"]["sum_w_over_n"] < got["no-dp"]["sum_w_over_n"] == pytest.approx(1.0)
    for a in arms:
        assert (out / "compare" / f"{a}.json").is_file()
    # Measurement runs: nothing recorded in the ledger, no checkpoint left behind; adapters only of
    # hush and no-dp (for the risk comparison), in owner-only directories.
    assert not (out / "ledger.jsonl").exists() or (out / "ledger.jsonl").read_text() == ""
    assert not list(out.glob("compare/**/step-*"))
    assert sorted(p.parent.name for p in out.glob("compare/*/adapter")) == ["hush", "no-dp"]
    for d in (out / "compare", out / "compare" / "hush", out / "compare" / "no-dp", out / "compare" / "drop"):
        assert d.stat().st_mode & 0o777 == 0o700, d
    # The base is scored once and reused as every arm's step 0 (a fresh adapter is the base).
    for a in arms:
        assert got[a]["curve"][0]["step"] == 0 and got[a]["curve"][0]["loss"] == base_loss
    # How DP moves the at-risk examples: both arms ranked on the same windows.
    risk = doc["risk"]
    assert risk and (out / "compare" / "risk.json").is_file()
    assert (out / "audit" / "risk-compare-hush.json").is_file() and (out / "audit" / "risk-compare-no-dp.json").is_file()
    assert risk["top"] and all(r["no-dp"]["rank"] <= len(risk["top"]) for r in risk["top"])
    assert {r["hush"]["rank"] for r in risk["top"]} <= set(range(1, risk["n_windows"] + 1))
    # The report: a compare section with the curves, one bar chart per slice and the risk table.
    import re

    from repoguard.report import build_report
    res = build_report(out)
    page = open(res["html"], encoding="utf-8").read()
    assert "compare" in res["sections"] and 'id="compare"' in page
    sec = page[page.index('id="compare"'):]
    sec = sec[:sec.index("<h2", 10)] if "<h2" in sec[10:] else sec
    n_slices = min(len(doc["base"]), 8)
    assert len(re.findall(r'<img class="plot" alt="final metrics per arm', sec)) == n_slices
    assert 'alt="held-out loss against step per arm" src="data:image/png;base64,' in sec
    assert "How DP moves the at-risk examples" in sec and all(a in sec for a in arms)
    assert 'alt="at-risk scatter risk-compare-hush"' in page and 'alt="at-risk scatter risk-compare-no-dp"' in page
    # An interrupted compare resumes: saved arms are not retrained (same wall time reported).
    again = run_compare(root=repo, out=out, cfg=cfg, arms=arms[:2], seed=SEED, show_progress=False)
    assert all(again["arms"][a]["seconds"] == got[a]["seconds"] for a in arms[:2])
    # The command: unknown arm → one line, exit 2.
    capsys.readouterr()
    assert main(["compare", "--arms", "hush,bogus", str(repo)]) == 2
    err = capsys.readouterr().err
    assert "bogus" in err and "Traceback" not in err
    # More steps than the plan's T would spend past the reported bounds: refused, one line.
    assert main(["compare", "--steps", str(T + 1), str(repo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"1..{T}" in err[0]
