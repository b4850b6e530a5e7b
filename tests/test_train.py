"""The training loop on a real tiny Llama + LoRA: exact resume, adapter reload, ledger refusal."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from repoguard.core.errors import InputError, PolicyError
from repoguard.planning.plan import Plan, SecretPlan
from repoguard.training.data import tokenize
from repoguard.training.dp_step import flat_params
from repoguard.training.guard import LedgerGuard
from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model, save_base_model
from repoguard.training.trainer import TrainSettings, latest_checkpoint, train

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  max_position=64)
TEXTS = [f"def handler_{i}(req):\n    total = {i} * req.size\n    return total + {i % 5}\n" for i in range(16)]


def make_plan(n: int = len(TEXTS), *, steps: int = 6, b: float = 4.0, head="absent") -> Plan:
    w = np.linspace(0.3, 1.0, n)
    extra = {} if head == "absent" else {"ledger_head": head}
    return Plan(sigma=0.8, batch_size=b, steps=steps, clip_norm=0.5, c=1.0, cap="kl", accountant="best",
                adjacency="add-remove", example_ids=[f"ex{i}" for i in range(n)], w=w, rho=b * w / w.sum(),
                secrets=[SecretPlan(id="alpha", p=1e-4, r=1e-2, achieved_bound=8e-3, binding="renyi:8",
                                    kl_spent=0.01, renyi_spent={"8": 0.02}, n_examples=4, sum_w=2.0)],
                extra=extra)


def tiny():
    model, tok = build_tiny_model(TEXTS, seed=3, size=TINY)
    return apply_lora(model, r=4, alpha=8, dropout=0.0, seed=3), tok


def lora_params(model):
    return [p for p in model.parameters() if p.requires_grad]


# Resume and ledger tests need the same batches and noise in every run: the test-only flag.
SETTINGS = TrainSettings(lr=5e-3, micro_batch_size=2, checkpoint_every=2, seed=1, noise_seed=42,
                         insecure_reproducible=True)


def test_resume_after_interruption_is_bit_identical(tmp_path):
    plan = make_plan()
    model, tok = tiny()
    seqs = tokenize(TEXTS, tok, max_length=32)
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "a",
          settings=SETTINGS, ledger=None, publish=False, show_progress=False)
    uninterrupted = flat_params(lora_params(model))

    model_b, _ = tiny()
    def crash(step):
        if step == 3:                                  # after the step-2 checkpoint; step 3 is lost
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(model=model_b, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "b",
              settings=SETTINGS, ledger=None, publish=False, on_step=crash, show_progress=False)
    assert latest_checkpoint(tmp_path / "b" / "checkpoints").name == "step-00000002"

    model_c, _ = tiny()                                # a fresh process: new model, same seeds
    assert not torch.equal(flat_params(lora_params(model_c)), uninterrupted)
    report = train(model=model_c, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "b",
                   settings=SETTINGS, ledger=None, resume=True, publish=False, show_progress=False)
    assert report["resumed_from"] == 2
    assert torch.equal(flat_params(lora_params(model_c)), uninterrupted)

    def log(d):
        rows = [json.loads(x) for x in (tmp_path / d / "train_log.jsonl").read_text().splitlines()]
        return [(r["step"], r["batch_size"], r["loss"], r["tokens"]) for r in rows]
    assert log("a") == log("b") and [r[0] for r in log("a")] == [1, 2, 3, 4, 5, 6]


def test_resume_refuses_a_checkpoint_of_another_plan_or_randomness(tmp_path):
    import dataclasses

    model, tok = tiny()
    seqs = tokenize(TEXTS, tok, max_length=32)
    kept = dataclasses.replace(SETTINGS, keep_final_checkpoint=True, steps=2)   # else deleted at completion
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=make_plan(steps=4), train_dir=tmp_path,
          settings=kept, ledger=None, publish=False, show_progress=False)
    with pytest.raises(InputError, match="another plan"):
        train(model=tiny()[0], seqs=seqs, pad_id=tok.pad_token_id, plan=make_plan(steps=4, b=3.0),
              train_dir=tmp_path, settings=SETTINGS, ledger=None, resume=True, publish=False,
              show_progress=False)
    # A checkpoint of a reproducible test run never continues as a (secure) default run.
    with pytest.raises(InputError, match="insecure-reproducible"):
        train(model=tiny()[0], seqs=seqs, pad_id=tok.pad_token_id, plan=make_plan(steps=4),
              train_dir=tmp_path, settings=TrainSettings(lr=5e-3, micro_batch_size=2), ledger=None,
              resume=True, publish=False, show_progress=False)


def test_steps_beyond_the_plan_are_refused(tmp_path):
    model, tok = tiny()
    seqs = tokenize(TEXTS, tok, max_length=32)
    with pytest.raises(InputError, match="--steps"):
        train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=make_plan(steps=3), train_dir=tmp_path,
              settings=TrainSettings(steps=4), ledger=None, publish=False, show_progress=False)


def test_no_dp_adapter_reloads_and_generates(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_model, tok = build_tiny_model(TEXTS, seed=3, size=TINY)
    save_base_model(base_model, tok, tmp_path / "base_model")    # before LoRA is injected
    model = apply_lora(base_model, r=4, alpha=8, dropout=0.0, seed=3)
    seqs = tokenize(TEXTS, tok, max_length=32)
    settings = TrainSettings(lr=5e-2, micro_batch_size=4, checkpoint_every=10, seed=0, private=False)
    report = train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=make_plan(), train_dir=tmp_path,
                   settings=settings, ledger=LedgerGuard(tmp_path / "ledger.jsonl"), show_progress=False)
    assert report["private"] is False and report["secrets"][0]["achieved_bound"] is None
    assert not (tmp_path / "ledger.jsonl").exists()          # a --no-dp run spends nothing it can bound
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base_model", local_files_only=True)
    reloaded = PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    tok2 = AutoTokenizer.from_pretrained(tmp_path / "base_model", local_files_only=True)
    ids = torch.tensor([[tok2.bos_token_id] + tok2("def handler_", add_special_tokens=False)["input_ids"]])
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=ids).logits, model(input_ids=ids).logits)
        out = reloaded.generate(input_ids=ids, max_new_tokens=6, do_sample=False,
                                pad_token_id=tok2.pad_token_id)
    assert out.shape[1] == ids.shape[1] + 6
    assert isinstance(tok2.decode(out[0]), str)
    log = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert set(log[0]) >= {"step", "batch_size", "loss", "lr", "seconds"} and len(log) == 6
    assert log[-1]["loss"] < log[0]["loss"]                  # non-private training does learn


def test_private_run_without_a_ledger_module_or_path_is_not_published(tmp_path):
    model, tok = tiny()
    seqs = tokenize(TEXTS, tok, max_length=32)
    with pytest.raises(InputError, match="ledger"):
        train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=make_plan(), train_dir=tmp_path,
              settings=SETTINGS, ledger=None, show_progress=False)
    assert not (tmp_path / "adapter").exists()


# -- the ledger (real repoguard.accounting) ---------------------------------------------------

def _incidence(p=1e-4, r=5e-2):
    import scipy.sparse as sp

    from repoguard.analyzers.incidence import Incidence, Secret

    n = len(TEXTS)
    m = np.zeros((n, 1), dtype=bool)
    m[:4, 0] = True                                    # examples 0..3 carry secret "alpha"
    return Incidence(example_ids=[f"ex{i}" for i in range(n)], secrets=[Secret("alpha", "declared", p, r)],
                     matrix=sp.csr_matrix(m))


def _real_plan(ledger_path, *, head: bool, accountant: str = "best"):
    from repoguard.accounting.ledger import verify
    from repoguard.accounting.ledger import read_spent
    from repoguard.planning.plan import build_plan

    plan = build_plan(_incidence(), batch_size=4.0, steps=6, clip_norm=0.5, c=1.0, accountant=accountant,
                      spent=read_spent(ledger_path))
    if head:
        plan.extra["ledger_head"] = verify(ledger_path)["last_hash"]
    return plan


def _entries(path):
    from repoguard.accounting.ledger import read_entries, verify

    assert verify(path)["ok"]
    return read_entries(path)


@pytest.mark.slow
def test_a_run_that_would_exceed_the_ledger_is_refused(tmp_path):
    pytest.importorskip("repoguard.accounting.ledger")
    ledger_path = tmp_path / "ledger.jsonl"
    guard = LedgerGuard(ledger_path)
    plan = _real_plan(ledger_path, head=True)
    model, tok = tiny()
    seqs = tokenize(TEXTS, tok, max_length=32)
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "t1",
          settings=SETTINGS, ledger=guard, show_progress=False)
    entries = _entries(ledger_path)
    assert [(e["status"], e["steps_completed"]) for e in entries] == [
        ("running", 2), ("running", 4), ("completed", 6)]
    assert (tmp_path / "t1" / "adapter" / "adapter_config.json").is_file()

    # The same plan again: the ledger moved past its head, and the cumulative bound exceeds r.
    for stale in (plan, _without_head(plan)):
        with pytest.raises(PolicyError, match="ledger|exceed"):
            train(model=tiny()[0], seqs=seqs, pad_id=tok.pad_token_id, plan=stale, train_dir=tmp_path / "t2",
                  settings=SETTINGS, ledger=guard, show_progress=False)
    assert not (tmp_path / "t2" / "adapter").exists() and len(_entries(ledger_path)) == 3

    # A plan made against the current ledger: the first run, certified by the Neyman–Pearson
    # bound exactly at r, left the binding secret nothing, so planning refuses it by name.
    with pytest.raises(PolicyError, match="alpha"):
        _real_plan(ledger_path, head=True)


def _without_head(plan):
    import dataclasses

    return dataclasses.replace(plan, extra={k: v for k, v in plan.extra.items() if k != "ledger_head"})


def test_interrupted_run_records_its_steps_and_resume_completes_the_same_run(tmp_path):
    pytest.importorskip("repoguard.accounting.ledger")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ledger_path = tmp_path / "ledger.jsonl"
    plan = _real_plan(ledger_path, head=True)
    base, tok = build_tiny_model(TEXTS, seed=3, size=TINY)
    save_base_model(base, tok, tmp_path / "base_model")
    seqs = tokenize(TEXTS, tok, max_length=32)

    def crash(step):
        if step == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(model=apply_lora(base, r=4, alpha=8, dropout=0.0, seed=3), seqs=seqs, pad_id=tok.pad_token_id,
              plan=plan, train_dir=tmp_path, settings=SETTINGS, ledger=LedgerGuard(ledger_path),
              on_step=crash, show_progress=False)
    first = _entries(ledger_path)
    assert [(e["status"], e["steps_completed"]) for e in first] == [("running", 2), ("interrupted", 3)]
    assert not (tmp_path / "adapter").exists()

    model, _ = tiny()
    report = train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path,
                   settings=SETTINGS, ledger=LedgerGuard(ledger_path), resume=True, show_progress=False)
    entries = _entries(ledger_path)
    assert {e["run_id"] for e in entries} == {report["run_id"]}      # one run, last entry counts
    assert (entries[-1]["status"], entries[-1]["steps_completed"]) == ("completed", 6)
    # The adapter of the private run reloads on the saved base model and generates.
    reloaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tmp_path / "base_model", local_files_only=True),
        tmp_path / "adapter").eval()
    torch.testing.assert_close(flat_params([p for n, p in reloaded.named_parameters() if "lora_" in n]),
                               flat_params(lora_params(model)))
    ids = torch.tensor([[tok.bos_token_id, 5, 6]])
    assert reloaded.generate(input_ids=ids, max_new_tokens=4, do_sample=False,
                             pad_token_id=tok.pad_token_id).shape == (1, 7)
    report_file = json.loads((tmp_path / "privacy_report.json").read_text())
    assert report_file["sigma"] == plan.sigma and report_file["batch_size"] == 4.0
    assert report_file["secrets"][0]["achieved_bound"] == plan.secrets[0].achieved_bound


# -- the command ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_train_command_end_to_end(tmp_path, capsys):
    pytest.importorskip("repoguard.accounting.ledger")
    import subprocess

    from repoguard.cli import main

    repo = tmp_path / "repo"
    (repo / "src" / "alpha").mkdir(parents=True)
    (repo / "src" / "web").mkdir(parents=True)
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for i in range(12):
        (repo / "src" / "web" / f"m{i}.py").write_text(f"import os\n\ndef web_{i}(x):\n    return x + {i}\n")
    (repo / "src" / "web" / "settings.py").write_text(f'TOKEN = "{key}"\n')
    (repo / "src" / "alpha" / "signals.py").write_text("def signal(p):\n    return p * 0.42\n")
    (repo / "repoguard.toml").write_text('[[secret]]\nid = "alpha"\npaths = ["src/alpha/**"]\np = 1e-4\nr = 0.05\n')
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "2", "--steps", "4", "--c", "1", str(repo)]) == 0
    capsys.readouterr()
    assert main(["train", "--json", "-q", "--max-length", "48", "--checkpoint-every", "2", "--seed", "1",
                 str(repo)]) == 0
    report = json.loads(capsys.readouterr().out)
    out = repo / ".repoguard" / "train"
    assert report["private"] and report["steps_completed"] == 4
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert (out / "base_model" / "tokenizer.json").is_file()
    assert len((out / "train_log.jsonl").read_text().splitlines()) == 4
    # The base tokenizer was trained on public examples with credentials redacted.
    vocab = json.loads((out / "base_model" / "tokenizer.json").read_text())["model"]["vocab"]
    assert not any(key[:12] in t or "0.42" in t for t in vocab)
    # Every training text is redacted before tokenisation.
    from repoguard.source.corpus import load_corpus
    from repoguard.planning.plan import load_plan
    from repoguard.training.data import default_redactor, example_texts

    texts = example_texts(load_corpus(repo / ".repoguard", repo), load_plan(repo / ".repoguard").example_ids,
                          redactor=default_redactor())
    assert sum("<REDACTED:github-pat>" in t for t in texts) == 1 and not any(key in t for t in texts)
    # A second run of the same plan would overspend: refused with exit 1, nothing replaced.
    before = (out / "adapter" / "adapter_model.safetensors").read_bytes()
    assert main(["train", "-q", str(repo)]) == 1
    assert (out / "adapter" / "adapter_model.safetensors").read_bytes() == before
    # --model DIR: a local HF checkpoint (here the saved base), LoRA targets detected, --no-dp.
    from peft import AutoPeftModelForCausalLM

    base_copy = tmp_path / "hf_model"
    shutil.copytree(out / "base_model", base_copy)
    assert main(["train", "-q", "--no-dp", "--model", str(base_copy), "--steps", "2", "--lora-r", "2",
                 str(repo)]) == 0
    cfg = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert sorted(cfg["target_modules"]) == ["q_proj", "v_proj"] and cfg["r"] == 2
    assert AutoPeftModelForCausalLM.from_pretrained(out / "adapter", local_files_only=True) is not None
    assert main(["train", "-q", "--model", str(tmp_path / "nowhere"), str(repo)]) == 2
    # Bad flags: one line, exit 2.
    assert main(["train", "-q", "--steps", "99", str(repo)]) == 2


@pytest.mark.slow
def test_sigterm_records_the_spent_steps_and_resume_finishes(tmp_path, embedded_base_dir):
    """A scheduler's SIGTERM mid-run: exit 130, the ledger holds the run as interrupted with the
    steps it computed; `--resume` completes the same run id to T steps."""
    pytest.importorskip("repoguard.accounting.ledger")
    import os
    import signal
    import subprocess
    import sys
    import time

    from repoguard.cli import main

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    for i, t in enumerate(TEXTS):
        (repo / "src" / f"m{i}.py").write_text(t)
    (repo / "repoguard.toml").write_text('[[secret]]\nid = "alpha"\npaths = ["src/m1.py"]\np = 1e-4\nr = 0.05\n')
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "2", "--steps", "30", "--c", "1", str(repo)]) == 0
    ledger = repo / ".repoguard" / "ledger.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "repoguard.cli", "train", "-q", "--max-length", "32",
                             "--checkpoint-every", "2", str(repo)], stderr=subprocess.PIPE, text=True)
    # Wait for a complete checkpoint, not just the ledger entry: the run records its steps
    # *before* the checkpoint reaches the disk, so a signal in between leaves nothing to resume.
    ckpts = repo / ".repoguard" / "train" / "checkpoints"
    deadline = time.time() + 1800  # a hang guard only: a loaded machine may take minutes
    while time.time() < deadline and proc.poll() is None and not (ckpts.is_dir() and latest_checkpoint(ckpts)):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=1800)
    assert proc.returncode == 130, err[-2000:]
    last = _entries(ledger)[-1]
    assert last["status"] == "interrupted" and 2 <= last["steps_completed"] < 30
    assert not (repo / ".repoguard" / "train" / "adapter").exists()
    assert main(["train", "-q", "--resume", "--max-length", "32", "--checkpoint-every", "100",
                 str(repo)]) == 0
    entries = _entries(ledger)
    assert {e["run_id"] for e in entries} == {last["run_id"]}
    assert (entries[-1]["status"], entries[-1]["steps_completed"]) == ("completed", 30)
