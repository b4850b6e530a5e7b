"""Two-phase fine-tuning [JFT §3] on the fixture monorepo with a real tiny Llama + LoRA: phase 1
samples only public, non-held-out examples; phase 2's accounting is the single-phase plan's; the
noised phase's σ₁ meets the undetected-floor target; resume inside either phase is bit-identical."""
from __future__ import annotations

import dataclasses
import json
import os
import stat

import numpy as np
import pytest
import torch

from repoguard.cli import main
from repoguard.core.config import Undetected
from repoguard.core.errors import InputError
from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model
from repoguard.training.trainer import TrainSettings

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  max_position=64)
B, T, T1 = 6, 4, 4
# Tests need the same batches and noise in every run: the test-only flag (both phases).
SETTINGS = TrainSettings(lr=5e-3, micro_batch_size=4, checkpoint_every=2, seed=1, insecure_reproducible=True)


@pytest.fixture(scope="module")
def planned(tmp_path_factory, monorepo_module):
    repo = tmp_path_factory.mktemp("twophase") / "monorepo"
    monorepo_module.build(repo)
    assert main(["analyze", "-q", str(repo)]) == 0
    # these tests are about the phases' mechanics: the floor is opted out (a clear phase 1 breaks it);
    # `test_two_phase_noised_meets_the_floor_over_both_phases` plans with it
    assert main(["plan", "-q", "--batch-size", str(B), "--steps", str(T), "--c", "1", "--undetected", "off",
                 str(repo)]) == 0
    from repoguard.source.corpus import load_corpus
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts

    out = repo / ".repoguard"
    plan, inc = load_plan(out), load_incidence(out)
    texts = example_texts(load_corpus(out, repo), plan.example_ids, redactor=default_redactor())
    return out, plan, inc, texts


def _model(texts):
    from repoguard.training.data import tokenize

    base, tok = build_tiny_model(texts[:20], seed=3, size=TINY)
    return apply_lora(base, r=4, alpha=8, dropout=0.0, seed=3), tok, tokenize(texts, tok, max_length=32)


def _setup(planned, mode="clear"):
    from repoguard.training.phases import PhaseOne, prepare

    _out, plan, inc, _texts = planned
    return prepare(plan, inc, PhaseOne(mode=mode, steps=T1, p=1e-4, r=0.05), lr=SETTINGS.lr)


def _run(planned, tmp, *, mode="clear", resume=False, on_step=None, ledger=None, publish=False):
    from repoguard.training.phases import run_two_phase

    _out, plan, _inc, texts = planned
    model, tok, seqs = _model(texts)
    report = run_two_phase(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, setup=_setup(planned, mode),
                           train_dir=tmp, settings=SETTINGS, ledger_path=ledger, resume=resume, show_progress=False,
                           publish=publish, on_step=on_step)
    return report, torch.cat([p.detach().flatten() for p in model.parameters() if p.requires_grad])


@pytest.mark.slow
def test_phase_one_samples_only_public_examples(planned, tmp_path, monkeypatch):
    """A spy on the trainer's (real) Poisson sampler records every batch of both phases."""
    import repoguard.training.trainer as trainer

    _out, plan, inc, _texts = planned
    drawn: list[np.ndarray] = []

    class Spy(trainer.PoissonSampler):
        def sample(self):
            batch = super().sample()
            drawn.append(batch)
            return batch
    monkeypatch.setattr(trainer, "PoissonSampler", Spy)
    setup = _setup(planned)
    tied = inc.matrix.getnnz(axis=1) > 0
    assert list(inc.example_ids) == list(plan.example_ids)
    public = ~tied & ~plan.test_mask
    assert np.array_equal(setup.public, public) and public.sum() > B and (tied & ~plan.test_mask).any()
    assert setup.clear_ids == tuple(e for e, p in zip(plan.example_ids, public) if p)
    _run(planned, tmp_path)
    phase1, phase2 = drawn[:T1], drawn[T1:]
    assert len(phase1) == T1 and len(phase2) == T
    seen1 = np.concatenate(phase1)
    assert seen1.size > 0 and public[seen1].all()                  # never tied, never held out
    assert not plan.test_mask[np.concatenate(phase2)].any()
    # Phase 1's batch statistics are owner-only; nothing of phase 1 in the published log.
    p1 = tmp_path / "internal" / "phase1"
    assert stat.S_IMODE(os.stat(tmp_path / "internal").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p1).st_mode) == 0o700
    rows = [json.loads(x) for x in (p1 / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, T1 + 1)) and all("batch_size" in r for r in rows)
    assert not (p1 / "result").exists() and not (p1 / "checkpoints").exists()


def test_phase_two_accounting_equals_the_single_phase_plan(planned, tmp_path):
    from repoguard.accounting.ledger import read_entries, spending
    from repoguard.training.guard import LedgerGuard
    from repoguard.training.trainer import train

    _out, plan, _inc, texts = planned
    two, _ = _run(planned, tmp_path / "two", ledger=tmp_path / "two.jsonl", publish=True)
    model, tok, seqs = _model(texts)
    one = train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "one",
                settings=SETTINGS, ledger=LedgerGuard(tmp_path / "one.jsonl"), show_progress=False)
    assert two["secrets"] == one["secrets"] and two["sigma"] == one["sigma"] and len(one["secrets"]) == len(plan.secrets)
    s2, p2 = spending(tmp_path / "two.jsonl")
    s1, p1 = spending(tmp_path / "one.jsonl")
    # the floor's account is spent too (recorded even with the floor off, so later runs compose it)
    assert s2 == s1 and p2 == p1 and set(s1) == {s.id for s in plan.secrets} | {"@undetected:k=1"}
    entries = read_entries(tmp_path / "two.jsonl")
    n_public = int(_setup(planned).public.sum())
    assert entries and all(e["clear"]["n"] == n_public for e in entries)      # ids side file (exposures)
    assert all(e["phases"]["phase1"]["mode"] == "clear" for e in entries)
    assert two["phases"]["undetected_floor"]["both"]["1"] == 1.0           # clear: no bound for a missed secret
    published = [json.loads(x) for x in (tmp_path / "two" / "train_log.jsonl").read_text().splitlines()]
    assert all(set(r) <= {"step", "lr", "eval", "eval_base"} for r in published) and len(published) == T


def test_noised_sigma1_meets_the_floor_target_and_the_floor_composes(planned):
    from repoguard.accounting.bounds import reconstruction_bound
    from repoguard.accounting.compose import composed_bound
    from repoguard.planning.undetected import phase1_sigma

    _out, plan, _inc, _texts = planned
    setup = _setup(planned, "noised")
    p1 = setup.record["phase1"]
    rho1, sigma1 = p1["rho"], p1["sigma"]
    assert rho1 == pytest.approx(B / setup.public.sum()) and np.allclose(setup.plan1.rho[setup.public], rho1)
    assert setup.plan1.sigma == sigma1 and setup.clear_ids == ()
    assert reconstruction_bound(np.full(1, rho1), sigma1, T1, 1e-4, "best") <= 0.05 * (1 + 1e-6)
    assert reconstruction_bound(np.full(1, rho1), sigma1 * 0.97, T1, 1e-4, "best") > 0.05   # the smallest
    k3 = phase1_sigma(rho1, T1, k=3, p=1e-4, r=0.05)
    assert k3 > sigma1 and reconstruction_bound(np.full(3, rho1), k3, T1, 1e-4, "best") <= 0.05 * (1 + 1e-6)
    fl = setup.record["undetected_floor"]
    assert fl["phase1"]["1"] <= 0.05 * (1 + 1e-6)
    assert fl["both"]["1"] >= max(fl["phase1"]["1"], fl["phase2"]["1"])
    assert fl["both"]["1"] < min(1.0, fl["phase1"]["1"] + fl["phase2"]["1"] + 0.5)
    # Composition of two identical parts = the same mechanism run for T1 + T2 steps.
    whole = reconstruction_bound(np.full(2, 0.1), 1.5, 7, 1e-4, "best")
    parts = composed_bound([(np.full(2, 0.1), 1.5, 3), (np.full(2, 0.1), 1.5, 4)], 1e-4)
    assert parts == pytest.approx(whole, rel=0.02)
    assert composed_bound([(np.full(1, 0.1), 0.0, 3), (np.full(1, 0.1), 1.5, 4)], 1e-4) == 1.0


@pytest.mark.slow
def test_two_phase_noised_meets_the_floor_over_both_phases(planned, tmp_path):
    """With the floor on (issue 26), `plan` reserves σ₁ for a noised phase 1 and calibrates phase 2
    with phase 1 counted as spent: the floor composed over both phases is ≤ r, by repoguard and
    by an independent dp_accounting composition; a clear phase 1 is refused, and so is a
    noised one the plan reserved nothing (or another T₁) for."""
    from floor_oracle import floor_bound

    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.training.phases import PhaseOne, prepare

    out, _plan, _inc, _texts = planned
    repo = out.parent
    cfg = tmp_path / "two-phase.toml"
    cfg.write_text((repo / "repoguard.toml").read_text() + "\n[training]\nphases = 2\nphase1 = \"noised\"\n"
                   f"phase1_steps = {T1}\n")
    other = tmp_path / "out"
    import shutil
    shutil.copytree(out / "incidence", other / "incidence")
    shutil.copytree(out / "corpus", other / "corpus")
    assert main(["plan", "-q", "--config", str(cfg), "--out", str(other), "--batch-size", str(B), "--steps", str(T),
                 "--c", "1", "--undetected", "k=1,p=1e-4,r=0.05", str(repo)]) == 0
    plan, inc = load_plan(other), load_incidence(other)
    fl = plan.extra["undetected_floor"]
    res = fl["phase1"]
    assert res["steps"] == T1 and res["sigma"] > 0 and fl["enabled"] and fl["meets_r"]
    setup = prepare(plan, inc, PhaseOne(mode="noised", steps=T1, p=1e-4, r=0.05), lr=SETTINGS.lr)
    assert setup.record["phase1"]["sigma"] == res["sigma"]
    both = setup.record["undetected_floor"]["both"]["1"]
    assert both <= 0.05 * (1 + 1e-6)
    rho2 = fl["rho"]
    parts = [(res["rho"], res["sigma"], T1), (rho2, plan.sigma, T)]
    oracle = floor_bound(parts, 1e-4)
    assert oracle <= 0.05 * 1.02, (oracle, both)
    # the test can fail: half phase 2's noise breaks the floor by the same oracle
    assert floor_bound([(res["rho"], res["sigma"], T1), (rho2, plan.sigma / 2, T)], 1e-4) > 0.05
    with pytest.raises(InputError, match="breaks the plan's undetected-secret floor"):
        prepare(plan, inc, PhaseOne(mode="clear", steps=T1), lr=SETTINGS.lr)
    with pytest.raises(InputError, match="reserved phase 1 at"):
        prepare(plan, inc, PhaseOne(mode="noised", steps=T1 + 1, p=1e-4, r=0.05), lr=SETTINGS.lr)
    with pytest.raises(InputError, match="reserved no share"):
        single = dataclasses.replace(plan, extra={**plan.extra, "undetected_floor": {**fl, "phase1": None}})
        prepare(single, inc, PhaseOne(mode="noised", steps=T1, p=1e-4, r=0.05), lr=SETTINGS.lr)


@pytest.mark.slow
@pytest.mark.parametrize("phase, mode", [(1, "noised"), (2, "clear")])
def test_resume_inside_each_phase_is_bit_identical(planned, tmp_path, phase, mode):
    _rep, uninterrupted = _run(planned, tmp_path / "a", mode=mode)

    def crash(ph, step):
        if ph == phase and step == 3:                   # after the step-2 checkpoint of that phase
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        _run(planned, tmp_path / "b", mode=mode, on_step=crash)
    ck = tmp_path / "b" / ("internal/phase1/checkpoints" if phase == 1 else "checkpoints")
    state = json.loads(next(ck.glob("step-00000002")).joinpath("state.json").read_text())
    assert state["phase"] == phase
    report, resumed = _run(planned, tmp_path / "b", mode=mode, resume=True)
    assert report["resumed_from"] == (2 if phase == 2 else 0)
    assert torch.equal(resumed, uninterrupted)
    with pytest.raises(InputError, match="no phase-1 checkpoint"):    # completed: nothing left to resume
        _run(planned, tmp_path / "b", mode=mode, resume=True)


def test_single_phase_checkpoint_does_not_resume_as_phase_two(planned, tmp_path):
    from repoguard.training.trainer import train

    _out, plan, _inc, texts = planned
    model, tok, seqs = _model(texts)
    kept = dataclasses.replace(SETTINGS, keep_final_checkpoint=True, steps=2)
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path, settings=kept,
          ledger=None, publish=False, show_progress=False)
    with pytest.raises(InputError, match="single-phase run"):
        train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path,
              settings=dataclasses.replace(SETTINGS, phase=2), ledger=None, resume=True, publish=False,
              show_progress=False)


def test_phase_settings_are_validated(tmp_path, planned):
    from repoguard.core.config import load_config
    from repoguard.training.phases import PhaseOne, prepare

    cfg = tmp_path / "repoguard.toml"
    cfg.write_text('[training]\nphases = 3\n')
    with pytest.raises(InputError, match=r"repoguard.toml:2: training.phases: must be one of 1, 2"):
        load_config(cfg)
    cfg.write_text('[training]\nphase1 = "loud"\n')
    with pytest.raises(InputError, match="training.phase1"):
        load_config(cfg)
    _out, plan, inc, _texts = planned
    with pytest.raises(InputError, match="exceeds the .* public examples"):
        prepare(plan, inc, PhaseOne(batch_size=10_000), lr=1e-3)


@pytest.mark.slow
def test_compare_two_phase_arms(planned):
    """The two-phase arms train phase 1 then a hush plan, on the same eval rows as `hush`: the
    noised arm's phase 2 is the hush plan's weights with σ re-certified after the phase-1 σ₁ it
    reserved (the floor holds over both phases), the clear arm's the hush plan made with the floor
    off (a reference: a clear phase 1 cannot meet it)."""
    from repoguard.core.config import TrainingConfig
    from repoguard.evaluation.compare import run_compare
    from repoguard.evaluation.compare_text import format_table

    out, plan, _inc, _texts = planned
    cfg = TrainingConfig(max_length=32, learning_rate=2e-2, seed=7, eval_max_examples=4, eval_max_lines=2,
                         micro_batch_size=8, eval_every=0)
    arms = ("hush", "two-phase", "two-phase-noised")
    doc = run_compare(root=out.parent, out=out, cfg=cfg, arms=arms, seed=7, show_progress=False,
                      floor=Undetected(1, 1e-4, 0.05), phase1_steps=2)
    got = doc["arms"]
    assert got["two-phase"]["eval_rows"] == got["hush"]["eval_rows"] == got["two-phase-noised"]["eval_rows"]
    for name, mode in (("two-phase", "clear"), ("two-phase-noised", "noised")):
        r = got[name]
        assert r["phase1"]["mode"] == mode
        assert r["phase1"]["steps"] == 2 and [c["step"] for c in r["curve"]] == [-2, 0, T]
    assert got["two-phase"]["sigma"] <= got["hush"]["sigma"] <= got["two-phase-noised"]["sigma"]
    assert got["two-phase"]["undetected_floor"]["1"] == 1.0 and got["two-phase"]["phase1"]["sigma"] == 0.0
    assert got["two-phase"]["meets_floor"] is False and got["two-phase"]["protection"] == "reference"
    noised = got["two-phase-noised"]
    assert noised["phase1"]["sigma"] > 0 and noised["undetected_floor"]["1"] <= 0.05 * (1 + 1e-6)
    assert noised["meets_floor"] is True and noised["floor"]["bound"] <= 0.05 * (1 + 1e-9)
    assert noised["floor"]["phase1"]["sigma"] == noised["phase1"]["sigma"]
    assert "two-phase (+2 public)" in format_table(doc)
    assert not (out / "ledger.jsonl").exists()
