"""Examples → redacted text → token ids → padded micro-batches.

The privacy unit is the example (one corpus chunk): each example becomes one token sequence of at
most `max_length` tokens and contributes one per-sequence loss, so its whole gradient is clipped
together (never per token). Credentials are replaced by `<REDACTED:rule-id>` before tokenisation
(`repoguard.credentials.redact`, on the whole file, with the scan's rule set), so no credential
ever reaches the model or the tokenizer.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from repoguard.core.errors import InputError, PolicyError

Redactor = Callable[[str, str], tuple[str, list]]


def default_redactor(out=None, root=None) -> Redactor:
    """The credential redactor (`repoguard.credentials.redact.redactor_for`): the scan's rule set
    as `analyze` recorded it in `out` (default + `[scan] rules`), else `root`'s config, else the
    default rules. Imported lazily.

    Raises:
        PolicyError: the credentials module is not installed (training on unredacted text would
            put credentials into the model).
        InputError: a recorded rule file is missing or invalid.
    """
    try:
        from repoguard.credentials.redact import redactor_for
    except ImportError as exc:
        raise PolicyError(f"credential redaction is unavailable ({exc}); refusing to train on "
                          "unredacted text") from None
    return redactor_for(out, root)


class ExampleRedactor:
    """Redacts examples on their whole file: `redactor` runs once per file (the last `files`
    files are memoised; plan order keeps a file's chunks together) and each finding's byte span
    is mapped onto the chunks it overlaps, so a credential cut by a chunk boundary (a PEM key's
    base64 body in the next chunk) is redacted in every chunk that holds part of it."""

    def __init__(self, corpus, redactor: Redactor, *, files: int = 64) -> None:
        self.corpus, self.redactor, self.files = corpus, redactor, files
        self._memo: dict[tuple[str, str], tuple[bytes, list]] = {}

    def __call__(self, ex) -> tuple[str, str, list]:
        """(raw text, redacted text, findings) of example `ex`; finding offsets are UTF-8 byte
        offsets into the raw text, clipped to it. Raises InputError when the file changed since
        the corpus was built."""
        from repoguard.credentials.redact import redact_range

        key = (ex.path, ex.blob_sha)
        hit = self._memo.get(key)
        if hit is None:
            data = self.corpus.file_data(ex)
            _, findings = self.redactor(data.decode("utf-8"), ex.path)
            if len(self._memo) >= self.files:
                self._memo.pop(next(iter(self._memo)))
            hit = self._memo[key] = (data, findings)
        data, findings = hit
        red, local = redact_range(data, findings, ex.start_byte, ex.end_byte)
        return data[ex.start_byte:ex.end_byte].decode("utf-8"), red, local


def example_texts(corpus, example_ids: Sequence[str], *, redactor: Redactor | None) -> list[str]:
    """Texts of the plan's examples, in plan order, credentials redacted on the whole file
    (`ExampleRedactor`).

    Args:
        corpus: a `repoguard.source.corpus.Corpus` (`.examples`, `.text(example)`, `.file_data(example)`).
        example_ids: the plan's example ids (rows of ρ).
        redactor: `(text, path) -> (redacted, findings)` applied to whole files (finding offsets:
            UTF-8 bytes of the file); None only for already-clean texts.

    Raises:
        InputError: a plan example is not in the corpus (plan and corpus are out of date).
    """
    by_id = {ex.id: ex for ex in corpus.examples}
    red = ExampleRedactor(corpus, redactor) if redactor is not None else None
    texts = []
    for eid in example_ids:
        ex = by_id.get(eid)
        if ex is None:
            raise InputError(f"plan: example {eid!r} is not in the corpus; re-run `repoguard plan`")
        texts.append(red(ex)[1] if red is not None else corpus.text(ex))
    return texts


def tokenize(texts: Sequence[str], tokenizer, *, max_length: int) -> list[np.ndarray]:
    """Token ids per text (int64 arrays), BOS prepended when the tokenizer has one, truncated to
    `max_length` tokens. An example shorter than 2 tokens has no next-token loss and contributes a
    zero gradient (it is still sampled, which only costs privacy budget, never leaks). Raises
    InputError when `max_length` < 2."""
    if max_length < 2:
        raise InputError(f"max_length: must be ≥ 2, got {max_length}")
    bos = tokenizer.bos_token_id
    room = max_length - (bos is not None)
    out = []
    for k in range(0, len(texts), 1024):          # bounded memory for large corpora
        enc = tokenizer(list(texts[k:k + 1024]), add_special_tokens=False, truncation=True,
                        max_length=room)["input_ids"]
        for ids in enc:
            ids = ([bos] if bos is not None else []) + list(ids)
            out.append(np.asarray(ids[:max_length], dtype=np.int64))
    return out


class TokenSeqs(Sequence):
    """`tokenize(texts, …)` as a sequence tokenised on first use: a run of T steps reads only the
    examples it samples (and the held-out ones it evaluates), so tokenising every example up
    front cost more than a short run's steps (issue 28 item 6: 9,171 wagtail examples, 10 steps
    read ~1,700). Each text is tokenised on its own terms (no padding), so `self[i]` equals
    `tokenize(texts, …)[i]`; `fetch` tokenises many rows in one tokenizer call; `lengths[rows]`
    gives token counts (int64), tokenising those rows."""

    def __init__(self, texts: Sequence[str], tokenizer, *, max_length: int) -> None:
        if max_length < 2:
            raise InputError(f"max_length: must be ≥ 2, got {max_length}")
        self._texts, self._tok, self._max = texts, tokenizer, max_length
        self._ids: dict[int, np.ndarray] = {}
        self.lengths = _Lengths(self)

    def __len__(self) -> int:
        return len(self._texts)

    def _row(self, i) -> int:
        i = int(i)
        n = len(self._texts)
        if not -n <= i < n:
            raise IndexError(f"row {i} out of range for {n} examples")
        return i % n

    def fetch(self, rows) -> None:
        """Tokenise the rows not yet tokenised, in one batched call."""
        todo = sorted({self._row(i) for i in rows} - self._ids.keys())
        if todo:
            for r, ids in zip(todo, tokenize([self._texts[r] for r in todo], self._tok, max_length=self._max)):
                self._ids[r] = ids

    def __getitem__(self, i):
        if isinstance(i, slice):
            rows = range(*i.indices(len(self)))
            self.fetch(rows)
            return [self._ids[r] for r in rows]
        r = self._row(i)
        if r not in self._ids:
            self.fetch([r])
        return self._ids[r]


class _Lengths:
    """`TokenSeqs.lengths`: token counts of the rows asked for, `lengths[rows]`."""

    def __init__(self, seqs: TokenSeqs) -> None:
        self._seqs = seqs

    def __getitem__(self, rows) -> np.ndarray:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        self._seqs.fetch(rows.tolist())
        return np.array([len(self._seqs[r]) for r in rows], dtype=np.int64)


def collate(seqs: Sequence[np.ndarray], *, pad_id: int):
    """Right-pad sequences into tensors.

    Returns a dict with `input_ids` and `attention_mask` of shape (n, L) and `labels` (n, L) with
    -100 on padding, L = longest sequence. Right padding keeps a causal model's outputs on real
    tokens independent of the padding, so per-example gradients are exactly those of the
    unpadded example.
    """
    import torch

    n = len(seqs)
    length = max((len(s) for s in seqs), default=1)
    ids = np.full((n, length), pad_id, dtype=np.int64)
    mask = np.zeros((n, length), dtype=np.int64)
    for k, s in enumerate(seqs):
        ids[k, :len(s)] = s
        mask[k, :len(s)] = 1
    ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
    labels = ids_t.masked_fill(mask_t == 0, -100)
    return {"input_ids": ids_t, "attention_mask": mask_t, "labels": labels}


def token_nll(logits, labels):
    """Per-token teacher-forced cross-entropy with padding masked.

    Args:
        logits: (n, L, V) tensor, any float dtype (computed in float32); position t predicts t + 1.
        labels: (n, L) int64, -100 where there is no token (padding), as `collate` makes them.
    Returns:
        (nll, valid): nll (n, L-1) float32 in nats, nll[i, t] = −log softmax(logits[i, t])[labels[i, t+1]],
        exactly 0 where labels[i, t+1] == -100; valid (n, L-1) bool, True where there is a target.
        Differentiable in `logits`.
    """
    import torch.nn.functional as F

    n, length, vocab = logits.shape
    tgt = labels[:, 1:]
    nll = F.cross_entropy(logits[:, :-1].float().reshape(-1, vocab), tgt.reshape(-1),
                          reduction="none", ignore_index=-100).view(n, length - 1)
    return nll, tgt != -100


def per_example_loss(logits, labels):
    """Mean next-token cross-entropy of each sequence: shape (n,), in nats per token (the mean of
    `token_nll` over each sequence's targets). Shapes as `token_nll`. A sequence without targets
    (fewer than 2 tokens) gets loss 0, and so a zero gradient."""
    nll, valid = token_nll(logits, labels)
    return nll.sum(dim=1) / valid.sum(dim=1).clamp(min=1)
