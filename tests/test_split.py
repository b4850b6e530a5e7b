"""The held-out split: by file, deterministic, never sampled (ρ = 0, and refused by the trainer)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from repoguard.cli import main
from repoguard.core.errors import InputError
from repoguard.source.split import example_path, holdout_split, slices
from repoguard.analyzers.incidence import Evidence, Secret, build_incidence, save_incidence
from repoguard.planning.plan import load_plan

IDS = [f"pkg/m{i}.py#{k}@{i:012x}" for i in range(60) for k in range(3)]


def test_split_is_by_file_deterministic_and_sized():
    s = holdout_split(IDS, fraction=0.05, min_files=8)
    assert len(s.files) == 8                                   # ⌈0.05·60⌉ = 3 < the minimum 8
    assert s.n_test == 24                                       # every chunk of a held-out file
    held = {example_path(e) for e, t in zip(IDS, s.test) if t}
    assert held == set(s.files)
    assert all(t == (example_path(e) in held) for e, t in zip(IDS, s.test))
    again = holdout_split(list(IDS), fraction=0.05, min_files=8)
    assert again.digest == s.digest and np.array_equal(again.test, s.test)
    other = holdout_split(IDS, fraction=0.05, min_files=8, salt="another")
    assert other.digest != s.digest and set(other.files) != set(s.files)
    assert len(holdout_split(IDS, fraction=0.5, min_files=0).files) == 15   # capped at a quarter
    assert holdout_split(IDS, fraction=0.0).n_test == 0
    with pytest.raises(InputError):
        holdout_split(IDS, fraction=0.9)


def test_example_path_parses_corpus_ids():
    assert example_path("a/b#c.py#3@0123456789ab") == "a/b#c.py"
    assert example_path("ex7") == "ex7"


def _project(tmp_path):
    files = {f"src/f{i}.py": [2 * i, 2 * i + 1] for i in range(100)}
    ids = [f"src/f{i // 2}.py#{i % 2}@{i:012x}" for i in range(200)]
    secrets = [Secret("sec-a", "declared", 1e-10, 1e-3), Secret("sec-b", "declared", 1e-6, 1e-2)]
    ev = [Evidence(f"src/f{i}.py", "sec-a", "declared", "t") for i in range(0, 30)]
    ev += [Evidence(f"src/f{i}.py", "sec-b", "declared", "t") for i in range(20, 50)]
    out = tmp_path / "out"
    save_incidence(build_incidence(ids, files, secrets, ev), out)
    return out


@pytest.mark.slow
def test_plan_holds_out_files_with_rho_zero_and_records_the_digest(tmp_path, capsys):
    out = _project(tmp_path)
    code = main(["plan", str(tmp_path), "--out", str(out), "--batch-size", "8", "--steps", "50",
                 "--c", "1", "--json"])
    assert code == 0
    capsys.readouterr()
    plan = load_plan(out)
    split = holdout_split(plan.example_ids)
    assert np.array_equal(plan.test_mask, split.test) and split.n_test == 16   # 8 files × 2 chunks
    assert np.all(plan.rho[plan.test_mask] == 0) and np.all(plan.w[plan.test_mask] == 0)
    assert plan.rho.sum() == pytest.approx(8)
    doc = json.loads((out / "plan" / "plan.json").read_text())
    assert doc["extra"]["holdout"]["digest"] == split.digest
    # The untied training examples keep w = 1: the LP ran on the training rows only.
    from repoguard.analyzers.incidence import load_incidence
    inc = load_incidence(out)
    untied = inc.matrix.getnnz(axis=1) == 0
    assert np.all(plan.w[untied & ~plan.test_mask] == 1.0)
    sl = slices(inc, plan.test_mask)
    assert set(sl["public"]) | set(sl["secret-tied"]) == set(np.flatnonzero(plan.test_mask))
    for key, rows in sl.items():
        if key.startswith("secret:"):
            j = inc.secret_index()[key.split(":", 1)[1]]
            assert all(inc.matrix[r, j] for r in rows)


def test_trainer_refuses_a_plan_that_would_sample_a_held_out_example(tmp_path):
    from repoguard.planning.plan import Plan
    from repoguard.training.dp_step import PrivacyInvariantError
    from repoguard.training.trainer import TrainSettings, train

    test = np.array([True, False, False, False])
    plan = Plan(sigma=1.0, batch_size=2.0, steps=2, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=list("abcd"), w=np.ones(4), rho=np.full(4, 0.5), test=test)
    with pytest.raises(PrivacyInvariantError, match="held-out"):
        train(model=_TinyLora(), seqs=[np.arange(5)] * 4, pad_id=0, plan=plan, train_dir=tmp_path,
              settings=TrainSettings(), ledger=None, publish=False, show_progress=False)


class _TinyLora:
    """Just enough of a model for the trainer's argument checks (it fails before training)."""

    def parameters(self):
        import torch
        yield torch.nn.Parameter(torch.zeros(1))


@pytest.mark.slow
def test_plan_records_sigma_uniform_that_meets_every_target(tmp_path, capsys):
    from repoguard.accounting.bounds import reconstruction_bound
    from repoguard.analyzers.incidence import load_incidence

    out = _project(tmp_path)
    assert main(["plan", str(tmp_path), "--out", str(out), "--batch-size", "8", "--steps", "50",
                 "--c", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plan = load_plan(out)
    su = doc["sigma_uniform"]
    assert su == plan.extra["sigma_uniform"] and doc["noise_reduction"] == pytest.approx(su / plan.sigma)
    assert doc["noise_reduction"] > 1                     # the LP's weights need less noise
    train = ~plan.test_mask
    rho_u = np.where(train, 8 / train.sum(), 0.0)
    inc = load_incidence(out)
    for s in inc.secrets:
        rows = inc.examples_of(s.id)
        assert reconstruction_bound(rho_u[rows], su, 50, s.p, "best") <= s.r * (1 + 1e-6)
        # …and it is the smallest such σ (2 % less noise misses some target)
    assert any(reconstruction_bound(rho_u[inc.examples_of(s.id)], su * 0.98, 50, s.p, "best") > s.r
               for s in inc.secrets)


def test_plan_reports_the_undetected_secret_floor(tmp_path, capsys):
    from repoguard.accounting.bounds import reconstruction_bound

    out = _project(tmp_path)
    assert main(["plan", str(tmp_path), "--out", str(out), "--batch-size", "8", "--steps", "50",
                 "--c", "1", "--json"]) == 0
    fl = json.loads(capsys.readouterr().out)["undetected_floor"]
    plan = load_plan(out)
    from repoguard.analyzers.incidence import load_incidence
    untied = (load_incidence(out).matrix.getnnz(axis=1) == 0) & ~plan.test_mask
    assert fl["rho"] == pytest.approx(plan.rho[untied].max()) and fl["p"] == 1e-10
    one = reconstruction_bound(np.full(1, fl["rho"]), plan.sigma, 50, 1e-10, "best")
    assert fl["bounds"]["1"] == pytest.approx(one) and fl["bounds"]["10"] > fl["bounds"]["1"] > 1e-10
