"""Held-out metrics of a causal code model: token cross-entropy, perplexity, top-1 next-token
accuracy and line-completion exact match, per evaluation slice.

- **Loss** — mean next-token cross-entropy over every target token of the slice's examples
  (nats/token; a token-weighted mean, so long examples count per token). **Perplexity** = e^loss.
- **Accuracy** — share of target tokens whose argmax prediction is the target.
- **Exact match** — for sampled lines of the slice's examples (stripped length 8–120 characters),
  the model sees the example's text up to the line's first half and completes it greedily (at
  most `max_new_tokens`, stopping at a newline); a hit when the completion equals the rest of
  the line (trailing whitespace ignored). This is the code-completion use the model is trained
  for; the cut is in characters, so it may fall inside a token, as in an editor.

An `EvalSet` is built once (capped, deterministic choice of examples and lines) and every
evaluation — the base model, every N steps, the end, every `compare` arm — scores exactly it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

DEFAULT_MAX_EXAMPLES = 48       # per slice
DEFAULT_MAX_LINES = 16          # per slice
DEFAULT_MAX_NEW_TOKENS = 24


@dataclass(frozen=True)
class LineTask:
    """One completion: `prompt` token ids (BOS + text up to the line's first half, left-truncated
    to the context), `target` the rest of the line (str), `row` the example's plan row."""

    row: int
    prompt: np.ndarray
    target: str


@dataclass
class EvalSet:
    """What every evaluation scores. `slices`: name → plan rows (capped); `seqs`: row → token ids;
    `lines`: name → indices into `tasks`."""

    slices: dict[str, np.ndarray]
    seqs: dict[int, np.ndarray]
    tasks: list[LineTask] = field(default_factory=list)
    lines: dict[str, list[int]] = field(default_factory=dict)

    @property
    def rows(self) -> list[int]:
        """The plan rows that have token ids (`seqs`), sorted."""
        return sorted(self.seqs)

    def slice_rows(self) -> dict[str, list[int]]:
        """slice → the plan rows it scores (JSON-able): `compare` checks every arm scores the same."""
        return {k: [int(x) for x in v] for k, v in self.slices.items()}

    def describe(self) -> dict:
        """Sizes per slice (examples, lines), for eval.json."""
        return {k: {"examples": int(v.size), "lines": len(self.lines.get(k, []))} for k, v in self.slices.items()}


def build_eval_set(slices: dict[str, np.ndarray], texts: dict[int, str] | Sequence[str],
                   seqs: dict[int, np.ndarray] | Sequence[np.ndarray], tokenizer, *, max_length: int,
                   max_examples: int = DEFAULT_MAX_EXAMPLES, max_lines: int = DEFAULT_MAX_LINES,
                   max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, seed: int = 0) -> EvalSet:
    """Choose at most `max_examples` examples and `max_lines` lines per slice, deterministically
    (`seed`; not a privacy seed: it only picks which held-out lines are scored).

    Args:
        slices: name → plan rows (from `split.slices`). texts / seqs: indexable by plan row
            (redacted text, token ids as the trainer sees them).
        tokenizer: the model's tokenizer (prompts are tokenised like training text, BOS first).
        max_length: the model's context for prompts (prompt + completion ≤ max_length)."""
    rng = np.random.default_rng(seed)
    chosen: dict[str, np.ndarray] = {}
    for name, rows in slices.items():
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size > max_examples:
            rows = np.sort(rng.choice(rows, max_examples, replace=False))
        chosen[name] = rows
    keep = sorted({int(r) for rows in chosen.values() for r in rows})
    es = EvalSet(slices=chosen, seqs={r: np.asarray(seqs[r]) for r in keep})
    bos = tokenizer.bos_token_id
    room = max(2, max_length - max_new_tokens - (bos is not None))
    made: dict[tuple[int, int], int] = {}
    for name, rows in chosen.items():
        if name.startswith("secret:"):     # per-secret rows reuse the secret-tied slice's lines
            mine = {int(r) for r in rows}
            es.lines[name] = [i for i in es.lines.get("secret-tied", []) if es.tasks[i].row in mine]
            continue
        cands = [(int(r), k) for r in rows for k in _candidate_lines(texts[int(r)])]
        if len(cands) > max_lines:
            cands = [cands[i] for i in np.sort(rng.choice(len(cands), max_lines, replace=False))]
        idx = []
        for key in cands:
            if key not in made:
                prompt, target = _cut(texts[key[0]], key[1])
                ids = tokenizer(prompt, add_special_tokens=False)["input_ids"][-room:]
                made[key] = len(es.tasks)
                es.tasks.append(LineTask(row=key[0], prompt=np.asarray(([bos] if bos is not None else []) + ids,
                                                                       dtype=np.int64), target=target))
            idx.append(made[key])
        es.lines[name] = idx
    return es


def _candidate_lines(text: str) -> list[int]:
    """Character offsets of lines worth completing: 8–120 characters once stripped."""
    out, off = [], 0
    for line in text.split("\n"):
        if 8 <= len(line.strip()) <= 120:
            out.append(off)
        off += len(line) + 1
    return out


def _cut(text: str, start: int) -> tuple[str, str]:
    """(prompt, target): the text up to the line's indentation + half its stripped content, and
    the rest of the line without trailing whitespace."""
    end = text.find("\n", start)
    line = text[start:] if end < 0 else text[start:end]
    indent = len(line) - len(line.lstrip())
    cut = start + indent + len(line.strip()) // 2
    return text[:cut], text[cut:start + len(line)].rstrip()


def evaluate(model, es: EvalSet, *, pad_id: int, tokenizer, micro_batch_size: int = 16,
             max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> dict[str, dict]:
    """Score `model` on `es`. Returns name → {loss (nats/token), perplexity, accuracy,
    exact_match (None without lines), examples, tokens, lines}. The model is put in eval mode
    and restored; no gradient is computed (and Opacus hooks, which need grad mode, stay idle)."""
    from repoguard.training.scoring import evaluating

    with evaluating(model):
        per_row = _token_stats(model, es, pad_id=pad_id, micro_batch_size=micro_batch_size)
        hits = [_complete(model, t, tokenizer, max_new_tokens) == t.target for t in es.tasks]
    out = {}
    for name, rows in es.slices.items():
        ce = sum(per_row[int(r)][0] for r in rows)
        n = sum(per_row[int(r)][1] for r in rows)
        ok = sum(per_row[int(r)][2] for r in rows)
        lines = es.lines.get(name, [])
        loss = ce / n if n else None
        out[name] = {"loss": loss, "perplexity": math.exp(loss) if loss is not None else None,
                     "accuracy": ok / n if n else None,
                     "exact_match": sum(hits[i] for i in lines) / len(lines) if lines else None,
                     "examples": int(rows.size), "tokens": int(n), "lines": len(lines)}
    return out


def _token_stats(model, es: EvalSet, *, pad_id: int, micro_batch_size: int) -> dict[int, tuple[float, int, int]]:
    """row → (summed cross-entropy in nats, target tokens, correct top-1 predictions)."""
    from repoguard.training.scoring import teacher_forced

    rows = sorted(es.seqs)
    out = {}
    for b in teacher_forced(model, [es.seqs[r] for r in rows], pad_id=pad_id, batch_size=micro_batch_size):
        correct = (b.logits.argmax(-1) == b.targets) & b.valid
        for i, k in enumerate(b.rows):
            out[rows[k]] = (float(b.nll[i].sum()), int(b.valid[i].sum()), int(correct[i].sum()))
    return out


def _complete(model, task: LineTask, tokenizer, max_new_tokens: int) -> str:
    """Greedy continuation of `task.prompt` up to the first newline (at most `max_new_tokens`
    tokens, stopping at EOS), trailing whitespace stripped.

    Decoding goes through `model.generate`, which owns the KV cache: a hand-kept
    `past_key_values` loop broke with the cache API's rename in transformers 5.x (deprecated
    argument; once it is dropped each step would see only its own token)."""
    import torch

    device = next(model.parameters()).device
    ids = torch.as_tensor(task.prompt, device=device).unsqueeze(0)
    gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         do_sample=False, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, stop_strings=["\n"], tokenizer=tokenizer)
    text = tokenizer.decode(gen[0, ids.shape[1]:].tolist(), skip_special_tokens=True)
    return text.split("\n", 1)[0].rstrip()


def headline(result: dict[str, dict]) -> float | None:
    """The loss the progress line shows: the `public` slice's, else the first slice with one."""
    for name in ("public", *result):
        v = result.get(name, {}).get("loss")
        if v is not None:
            return v
    return None


class Evaluator:
    """`evaluate` bound to one model and one EvalSet: what the trainer calls (no arguments).
    `info()` describes the set (slice sizes) for eval.json."""

    def __init__(self, model, es: EvalSet, *, tokenizer, pad_id: int, micro_batch_size: int = 16) -> None:
        self.model, self.es, self.tokenizer, self.pad_id = model, es, tokenizer, pad_id
        self.micro_batch_size = micro_batch_size

    def __call__(self) -> dict[str, dict]:
        return evaluate(self.model, self.es, pad_id=self.pad_id, tokenizer=self.tokenizer,
                        micro_batch_size=self.micro_batch_size)

    def info(self) -> dict:
        """The set's slice sizes (`EvalSet.describe`) for eval.json."""
        return self.es.describe()


def plan_evaluator(model, tokenizer, *, plan, incidence, texts: Sequence[str], seqs: Sequence[np.ndarray],
                   max_length: int, max_examples: int = DEFAULT_MAX_EXAMPLES, max_lines: int = DEFAULT_MAX_LINES,
                   micro_batch_size: int = 16, extra_slices: dict | None = None) -> Evaluator | None:
    """The evaluator of a plan's held-out examples (None when the plan holds none out).
    `texts`/`seqs` are in plan order; `incidence` gives the slices (`split.slices`);
    `extra_slices` (name → held-out plan rows, e.g. `evaluation.slices.code_slices`) are scored too."""
    from repoguard.source.split import slices

    test = plan.test_mask
    if not test.any():
        return None
    if list(incidence.example_ids) != list(plan.example_ids):
        from repoguard.core.errors import InputError
        raise InputError("plan and incidence list different examples; re-run `repoguard plan`")
    es = build_eval_set({**slices(incidence, test), **(extra_slices or {})}, texts, seqs, tokenizer,
                        max_length=max_length,
                        max_examples=max_examples, max_lines=max_lines)
    return Evaluator(model, es, tokenizer=tokenizer, pad_id=tokenizer.pad_token_id,
                     micro_batch_size=micro_batch_size)
