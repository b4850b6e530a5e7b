"""Issue 41 items 3, 4, 7, 8, 9, 10, 11 on the fixture monorepo and the real trainer: a stray RANK
takes the run lock and a failed or refused run leaves no checkpoint; a floor tightened after `plan`
is refused; `run` checks every flag before any stage; a corrupt corpus table or an old ledger side
file is caught by `plan`; out-of-range B, T, C are named; a killed run never replaces eval.json."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from repoguard.cli import main

from conftest import SMALL_PLAN as PLAN, run_cli as _cli  # noqa: E402
TRAIN = ["--steps", "3", "--max-length", "64"]




def _snapshot(d: Path) -> dict:
    """Every file under `d` with its bytes' hash and mtime: what a refused command must not touch."""
    import hashlib

    return {str(p.relative_to(d)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != "run.lock"}


@pytest.fixture
def repo(planned_repo_copy) -> Path:
    """The fixture monorepo analysed and planned with PLAN (conftest's SMALL_PLAN), a private copy."""
    return planned_repo_copy


# -- item 3: RANK without torchrun; checkpoints of failed and refused runs ---------------------------
def test_a_stray_rank_is_no_distributed_launch(monkeypatch):
    from repoguard.training.ddp import launched_rank

    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RANK", "1")
    assert launched_rank() is None
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launched_rank() is None                       # no LOCAL_RANK / MASTER_ADDR: not torchrun
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    assert launched_rank() == 1


def test_train_with_a_stray_rank_waits_for_the_run_lock(repo, capsys, monkeypatch):
    from repoguard.pipeline.scheduled import EXIT_LOCKED, run_lock

    for k in ("WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RANK", "1")
    out = repo / ".repoguard"
    with run_lock(out):
        rc, _, err = _cli(capsys, "train", *TRAIN, str(repo))
    assert rc == EXIT_LOCKED and "lock" in err, err
    assert not (out / "train" / "checkpoints").exists() and not (out / "ledger.jsonl").exists()


TEXTS = [f"def handler_{i}(req):\n    total = {i} * req.size\n    return total + {i % 5}\n" for i in range(16)]


def _tiny_setup(tmp_path):
    """A tiny model, its token sequences, a real plan (secret "alpha" on examples 0..3) made against
    an empty ledger, and that ledger's path."""
    import scipy.sparse as sp

    from repoguard.accounting.ledger import read_spent, verify
    from repoguard.analyzers.incidence import Incidence, Secret
    from repoguard.planning.plan import build_plan
    from repoguard.training.data import tokenize
    from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model

    ledger = tmp_path / "ledger.jsonl"
    m = np.zeros((len(TEXTS), 1), dtype=bool)
    m[:4, 0] = True
    inc = Incidence(example_ids=[f"ex{i}" for i in range(len(TEXTS))], secrets=[Secret("alpha", "declared", 1e-4, 5e-2)],
                    matrix=sp.csr_matrix(m))
    plan = build_plan(inc, batch_size=4.0, steps=6, clip_norm=0.5, c=1.0, spent=read_spent(ledger))
    plan.extra["ledger_head"] = verify(ledger)["last_hash"]
    size = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, max_position=64)
    model, tok = build_tiny_model(TEXTS, seed=3, size=size)
    return apply_lora(model, r=4, alpha=8, dropout=0.0, seed=3), tok, tokenize(TEXTS, tok, max_length=32), plan, ledger


SETTINGS = dict(lr=5e-3, micro_batch_size=2, checkpoint_every=2, seed=1, noise_seed=42, insecure_reproducible=True)


def test_a_failed_run_and_a_refused_run_leave_no_checkpoint_an_interrupted_one_keeps_them(tmp_path):
    from repoguard.accounting.ledger import read_entries, record_run
    from repoguard.core.errors import PolicyError
    from repoguard.training.guard import LedgerGuard
    from repoguard.training.trainer import TrainSettings, train

    model, tok, seqs, plan, _ = _tiny_setup(tmp_path)
    settings = TrainSettings(**SETTINGS)

    def run(name, on_step):          # each run against a ledger of its own, empty as the plan's
        train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / name,
              settings=settings, ledger=LedgerGuard(tmp_path / f"{name}.jsonl"), on_step=on_step,
              show_progress=False)

    def crash(step):
        if step == 3:                 # after the step-2 checkpoint
            raise RuntimeError("out of memory")
    with pytest.raises(RuntimeError):
        run("failed", crash)
    assert read_entries(tmp_path / "failed.jsonl")[-1]["status"] == "failed"
    assert not list((tmp_path / "failed" / "checkpoints").glob("step-*"))

    def interrupt(step):
        if step == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run("interrupted", interrupt)
    assert [p.name for p in (tmp_path / "interrupted" / "checkpoints").glob("step-*")] == ["step-00000002"]

    # Another run spends while this one trains: the ledger refuses the completed record.
    def foreign(step):
        if step == plan.steps:
            record_run(tmp_path / "refused.jsonl", plan, run_id="someone-else", steps_completed=1,
                       status="interrupted")
    with pytest.raises(PolicyError):
        run("refused", foreign)
    assert not list((tmp_path / "refused" / "checkpoints").glob("step-*"))
    assert not (tmp_path / "refused" / "adapter").exists()


# -- item 11: a killed run never replaces eval.json --------------------------------------------------
def test_a_killed_run_leaves_the_published_eval_json_of_the_last_completed_run(tmp_path):
    from repoguard.evaluation.metrics import Evaluator, build_eval_set
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.planning.plan import Plan
    from repoguard.training.data import tokenize
    from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model
    from repoguard.training.trainer import TrainSettings, train

    size = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, max_position=96)
    test = np.zeros(16, dtype=bool)
    test[12:] = True
    w = np.where(test, 0.0, 1.0)
    plan = Plan(sigma=0.5, batch_size=4.0, steps=5, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=[f"ex{i}" for i in range(16)], w=w, rho=4 * w / w.sum(), test=test)
    settings = TrainSettings(lr=2e-2, micro_batch_size=4, checkpoint_every=2, seed=1, noise_seed=5, private=False)

    def run(on_step=None):
        model, tok = build_tiny_model(TEXTS, seed=3, size=size)
        model = apply_lora(model, r=4, alpha=8, dropout=0.0, seed=3)
        seqs = tokenize(TEXTS, tok, max_length=48)
        es = build_eval_set({"public": np.arange(12, 16), "secret-tied": np.array([], dtype=np.int64)}, TEXTS,
                            seqs, tok, max_length=48, max_lines=3)
        hook = PeriodicEval(Evaluator(model, es, tokenizer=tok, pad_id=tok.pad_token_id), every=2)
        train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path, settings=settings,
              ledger=None, publish=False, show_progress=False, evaluator=hook, on_step=on_step)

    run()
    published = (tmp_path / "eval.json").read_bytes()
    assert json.loads(published)["final_step"] == 5

    def kill(step):
        if step == 3:                 # after the step-2 evaluation
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run(kill)
    assert (tmp_path / "eval.json").read_bytes() == published          # still the completed run's
    # the killed run's history waits beside it, for a --resume to continue and publish
    model_steps = json.loads((tmp_path / "eval.json.running").read_text())["history"]
    assert [h["step"] for h in model_steps] == [0, 2]


# -- item 4: the floor belongs to the plan's config digest -------------------------------------------
def test_tightening_the_undetected_floor_after_plan_makes_train_refuse(repo, capsys):
    cfg = repo / "repoguard.toml"
    text = cfg.read_text()
    assert "[defaults]" in text
    cfg.write_text(text.replace("[defaults]", "[defaults]\nundetected = { k = 3, r = 1e-5 }", 1))
    rc, _, err = _cli(capsys, "train", *TRAIN, str(repo))
    assert rc == 2 and "undetected" in err and "re-run `repoguard plan`" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    out = repo / ".repoguard"
    assert not (out / "ledger.jsonl").exists() and not (out / "train" / "adapter").exists()


# -- item 7: `run` checks every flag before any stage ------------------------------------------------
@pytest.mark.parametrize("flags,named", [
    (["--budget-fraction", "1.5"], "--budget-fraction"),
    (["--steps", "99999999999999999999"], "--steps"),
    (["--undetected", "k=0"], "--undetected"),
    (["--model", "no/such/model"], "--model"),
    (["--clip-norm", "inf"], "--clip-norm"),
])
def test_run_refuses_a_bad_flag_before_any_stage_and_changes_nothing(repo, capsys, flags, named):
    out = repo / ".repoguard"
    before = _snapshot(out)
    rc, _, err = _cli(capsys, "run", *flags, str(repo))
    assert rc == 2 and named in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert _snapshot(out) == before                    # no stage ran: the good plan is untouched


# -- item 8: a corrupt corpus table is named by `plan` -----------------------------------------------
def test_plan_names_a_corrupt_examples_parquet(repo, capsys):
    f = repo / ".repoguard" / "corpus" / "examples.parquet"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01                       # one flipped bit in the middle of the table
    f.write_bytes(bytes(data))
    before = (repo / ".repoguard" / "plan" / "plan.json").read_bytes()
    rc, _, err = _cli(capsys, "plan", *PLAN, str(repo))
    assert rc == 2 and "examples.parquet" in err and "re-run `repoguard analyze`" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (repo / ".repoguard" / "plan" / "plan.json").read_bytes() == before


# -- item 9: `plan` verifies the ledger as `ledger verify` does --------------------------------------
def test_plan_refuses_a_ledger_whose_oldest_side_file_is_corrupt(repo, capsys):
    from repoguard.accounting.ledger import read_entries, record_run
    from repoguard.accounting.ledger_io import side_dir
    from repoguard.planning.plan import load_plan

    out = repo / ".repoguard"
    ledger = out / "ledger.jsonl"
    plan = load_plan(out)
    for run_id in ("run-a", "run-b"):                  # one step each: budget left for a next plan
        record_run(ledger, plan, run_id=run_id, steps_completed=1, status="interrupted")
    side = side_dir(ledger) / read_entries(ledger)[0]["spending"]["file"]
    data = bytearray(side.read_bytes())
    data[len(data) // 2] ^= 0x01
    side.write_bytes(bytes(data))
    assert main(["ledger", "verify", "-q", str(repo)]) == 1
    rc, _, err = _cli(capsys, "plan", *PLAN, str(repo))
    assert rc == 1 and "ledger fails verification" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


# -- item 10: B, T and C are bounded, naming the flag ------------------------------------------------
@pytest.mark.parametrize("flag,value", [("--steps", "99999999999999999999"), ("--steps", "1000001"),
                                        ("--batch-size", "1e300"), ("--clip-norm", "nan"),
                                        ("--clip-norm", "1e9")])
def test_plan_says_which_flag_is_out_of_range(repo, capsys, flag, value):
    args = [a for a in PLAN]
    if flag in args:
        i = args.index(flag)
        del args[i:i + 2]
    rc, _, err = _cli(capsys, "plan", *args, flag, value, str(repo))
    assert rc == 2 and f"error: {flag}:" in err and "budget" not in err, err
    assert len(err.strip().splitlines()) == 1
