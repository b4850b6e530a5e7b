"""Held-out metrics on a real tiny Llama: loss/accuracy against the model's own loss, line
completion against its own greedy decoding, and the periodic evaluation hook of the trainer."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from repoguard.evaluation.metrics import Evaluator, LineTask, _complete, _cut, build_eval_set, evaluate
from repoguard.evaluation.periodic import PeriodicEval
from repoguard.planning.plan import Plan
from repoguard.training.data import collate, tokenize
from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model
from repoguard.training.trainer import TrainSettings, train

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  max_position=96)
TEXTS = [f"def handler_{i}(req):\n    total = {i} * req.size\n    return total + {i % 5}\n" for i in range(16)]


def _tiny():
    model, tok = build_tiny_model(TEXTS, seed=3, size=TINY)
    return apply_lora(model, r=4, alpha=8, dropout=0.0, seed=3), tok


def test_loss_and_accuracy_match_the_models_own_token_mean():
    model, tok = _tiny()
    seqs = tokenize(TEXTS, tok, max_length=48)
    es = build_eval_set({"public": np.arange(0, 8), "secret-tied": np.arange(8, 16)}, TEXTS, seqs, tok,
                        max_length=48, max_lines=4)
    res = evaluate(model, es, pad_id=tok.pad_token_id, tokenizer=tok, micro_batch_size=3)
    batch = collate([seqs[i] for i in range(8)], pad_id=tok.pad_token_id)
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
        pred = out.logits[:, :-1].argmax(-1)
    tgt = batch["labels"][:, 1:]
    valid = tgt != -100
    assert res["public"]["loss"] == pytest.approx(float(out.loss), rel=1e-5)   # HF's token mean
    assert res["public"]["perplexity"] == pytest.approx(math.exp(float(out.loss)), rel=1e-5)
    assert res["public"]["accuracy"] == pytest.approx(float(((pred == tgt) & valid).sum() / valid.sum()))
    assert res["public"]["tokens"] == int(valid.sum()) and res["public"]["examples"] == 8
    assert res["public"]["lines"] == 4 and 0 <= res["public"]["exact_match"] <= 1
    assert model.training                                      # mode restored


def test_exact_match_scores_the_greedy_completion_of_the_lines_second_half():
    text = "import os\n    value = compute(alpha, beta)\nreturn value\n"
    start = text.index("    value")
    prompt, target = _cut(text, start)
    assert prompt.endswith("\n    value = comput") and target == "e(alpha, beta)"   # half of 28
    model, tok = _tiny()
    ids = np.asarray([tok.bos_token_id] + tok(prompt, add_special_tokens=False)["input_ids"])
    model.eval()
    with torch.no_grad():
        own = _complete(model, LineTask(row=0, prompt=ids, target=""), tok, 12)
    seqs = tokenize([text], tok, max_length=48)
    for want, expected in ((own, 1.0), (own + "x", 0.0)):
        es = build_eval_set({"public": np.array([0])}, [text], seqs, tok, max_length=48)
        es.tasks[:] = [LineTask(row=0, prompt=ids, target=want)]
        es.lines["public"] = [0]
        assert evaluate(model, es, pad_id=tok.pad_token_id, tokenizer=tok,
                        max_new_tokens=12)["public"]["exact_match"] == expected


def test_the_trainer_evaluates_the_base_every_n_steps_and_the_end(tmp_path):
    model, tok = _tiny()
    seqs = tokenize(TEXTS, tok, max_length=48)
    test = np.zeros(16, dtype=bool)
    test[12:] = True
    w = np.where(test, 0.0, 1.0)
    plan = Plan(sigma=0.5, batch_size=4.0, steps=5, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=[f"ex{i}" for i in range(16)], w=w, rho=4 * w / w.sum(),
                test=test)
    es = build_eval_set({"public": np.arange(12, 16), "secret-tied": np.array([], dtype=np.int64)}, TEXTS,
                        seqs, tok, max_length=48, max_lines=3)
    hook = PeriodicEval(Evaluator(model, es, tokenizer=tok, pad_id=tok.pad_token_id), every=2)
    settings = TrainSettings(lr=2e-2, micro_batch_size=4, checkpoint_every=10, seed=1, noise_seed=5, private=False)
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path, settings=settings,
          ledger=None, publish=False, show_progress=False, evaluator=hook)
    doc = json.loads((tmp_path / "eval.json").read_text())
    assert [h["step"] for h in doc["history"]] == [0, 2, 4, 5]
    assert doc["sets"]["public"] == {"examples": 4, "lines": 3}
    assert doc["final"]["public"]["loss"] < doc["base"]["public"]["loss"]        # it learned
    assert doc["base"]["secret-tied"]["loss"] is None                            # empty slice
    lines = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert lines[0]["eval_base"] == doc["base"] and "eval" not in lines[0]
    assert [x["step"] for x in lines if "eval" in x] == [2, 4, 5]
    assert lines[-1]["eval"] == doc["final"] and hook.latest == doc["final"]["public"]["loss"]
