"""Held-out metrics on a real tiny transformer: loss/accuracy agree with an independent
computation, lines are cut as documented, and the trainer writes eval.json and log keys."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from repoguard.evaluation.metrics import build_eval_set, evaluate, _cut
from repoguard.training.data import collate, tokenize
from repoguard.training.model import TinyConfig, build_tiny_model

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, max_position=128)
TEXTS = [f"def f{i}(x):\n    return x * {i} + compute_value(x, {i})\n\nresult_{i} = f{i}(3)\n" for i in range(12)]


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny_model(TEXTS, seed=1, size=TINY)
    seqs = tokenize(TEXTS, tok, max_length=64)
    return model, tok, seqs


def test_cut_gives_the_first_half_as_prompt_and_the_rest_as_target():
    text = "a = 1\n    return compute(x)  \nz"
    prompt, target = _cut(text, 6)
    assert prompt == "a = 1\n    return c" and target == "ompute(x)"   # 17 stripped chars: 8 shown


def test_loss_and_accuracy_match_an_independent_computation(tiny):
    model, tok, seqs = tiny
    slices = {"public": np.array([0, 1, 2, 3]), "secret-tied": np.array([4, 5])}
    es = build_eval_set(slices, TEXTS, seqs, tok, max_length=64, max_lines=3)
    res = evaluate(model, es, pad_id=tok.pad_token_id, tokenizer=tok)
    with torch.no_grad():
        b = collate([seqs[i] for i in range(4)], pad_id=tok.pad_token_id)
        lg = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1]
        tgt = b["labels"][:, 1:]
        ce = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1), ignore_index=-100,
                                               reduction="sum")
        n = int((tgt != -100).sum())
        acc = float(((lg.argmax(-1) == tgt) & (tgt != -100)).sum()) / n
    pub = res["public"]
    assert pub["loss"] == pytest.approx(float(ce) / n, rel=1e-5) and pub["tokens"] == n
    assert pub["perplexity"] == pytest.approx(math.exp(pub["loss"]))
    assert pub["accuracy"] == pytest.approx(acc)
    assert pub["lines"] == 3 and 0 <= pub["exact_match"] <= 1
    assert evaluate(model, es, pad_id=tok.pad_token_id, tokenizer=tok) == res       # deterministic
    # A random model's loss is near ln|V|; it completes no line exactly.
    assert abs(pub["loss"] - math.log(len(tok))) < 1.0 and pub["exact_match"] == 0.0


def test_trainer_writes_eval_json_and_log_keys(tiny, tmp_path):
    from repoguard.evaluation.metrics import Evaluator
    from repoguard.evaluation.periodic import PeriodicEval
    from repoguard.plan import Plan
    from repoguard.training.model import apply_lora
    from repoguard.training.trainer import TrainSettings, train

    base, tok, seqs = tiny
    model = apply_lora(base, r=4, alpha=8, dropout=0.0, targets=("q_proj", "v_proj", "lm_head"))
    test = np.zeros(len(seqs), dtype=bool)
    test[-3:] = True
    rho = np.where(test, 0.0, 4.0 / (~test).sum())
    plan = Plan(sigma=1.0, batch_size=4.0, steps=4, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=[f"e{i}" for i in range(len(seqs))], w=(~test) * 1.0, rho=rho,
                test=test)
    es = build_eval_set({"public": np.flatnonzero(test), "secret-tied": np.array([], dtype=np.int64)},
                        TEXTS, seqs, tok, max_length=64, max_lines=2)
    ev = PeriodicEval(Evaluator(model, es, tokenizer=tok, pad_id=tok.pad_token_id), every=2)
    train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path,
          settings=TrainSettings(lr=1e-2, micro_batch_size=4, private=False, seed=0), ledger=None,
          publish=False, show_progress=False, evaluator=ev)
    doc = json.loads((tmp_path / "eval.json").read_text())
    assert [h["step"] for h in doc["history"]] == [0, 2, 4]
    assert doc["sets"]["public"] == {"examples": 3, "lines": 2}
    log = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert "eval_base" in log[0] and "eval" in log[1] and "eval" in log[3] and "eval" not in log[2]
    assert doc["final"] == log[3]["eval"]
