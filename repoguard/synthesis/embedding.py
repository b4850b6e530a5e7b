"""Embedding backends: text → one vector per text, for anchors and votes [SecPE Alg. 2–3].

The default embeds with the generator's local model: the mean over non-padding positions of its
last hidden layer. `--embedder DIR` loads any local Hugging Face encoder or decoder (a
sentence-embedding checkpoint) the same way (`local_files_only`: nothing downloads).
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np


class Embedder(Protocol):
    """An embedding backend: one vector per text."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), d) array: one embedding per text, in order."""
        ...


def _trunk(model):
    """The transformer under a causal LM's head (`get_decoder()`: LlamaModel under
    LlamaForCausalLM), so embedding never computes logits; `model` itself when it has no head.

    Why: the head is the costly part at a real vocabulary. SmolLM2-135M's 49,152 × 576 head is a
    fifth of its weights, and a batch of 16 texts × 256 tokens of fp32 logits is 805 MB that
    mean pooling throws away."""
    get = getattr(model, "get_decoder", None)
    try:
        trunk = get() if callable(get) else None
    except (AttributeError, NotImplementedError):      # an encoder without a decoder part
        trunk = None
    return trunk if trunk is not None and trunk is not model else model


class MeanPooled:
    """Mean-pooled last hidden states (after the final norm) of `model` — a causal LM, whose
    head is skipped (`_trunk`), or a bare encoder/decoder — for texts truncated to `max_length`
    tokens, `batch` texts per forward pass. Returns float64 (n, hidden)."""

    def __init__(self, model, tokenizer, *, max_length: int = 256, batch: int = 16) -> None:
        self.model, self.tok, self.max_length, self.batch = model.eval(), tokenizer, int(max_length), int(batch)
        self.trunk = _trunk(self.model)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float64 (len(texts), hidden): the mean of the last hidden layer over each text's non-padding
        tokens (an empty text embedded as " "); (0, hidden) for no text."""
        import torch

        chunks = []
        side = getattr(self.tok, "padding_side", "right")
        self.tok.padding_side = "right"
        try:
            with torch.no_grad():
                for lo in range(0, len(texts), self.batch):
                    part = [t if t else " " for t in texts[lo:lo + self.batch]]
                    enc = self.tok(part, padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt")
                    enc = {k: v.to(self.model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
                    h = self.trunk(**enc).last_hidden_state
                    m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
                    chunks.append(((h * m).sum(1) / m.sum(1).clamp(min=1)).float().cpu().numpy())
        finally:
            self.tok.padding_side = side
        if not chunks:
            return np.zeros((0, int(self.model.config.hidden_size)))
        return np.concatenate(chunks).astype(np.float64)


def load_embedder(path: str, *, max_length: int) -> MeanPooled:
    """A `MeanPooled` over the local checkpoint at `path` (AutoModel). Raises InputError when it
    cannot be loaded."""
    from pathlib import Path

    from repoguard.core.errors import InputError

    d = Path(path)
    if not (d / "config.json").is_file():
        raise InputError(f"--embedder {d}: not a Hugging Face model directory (no config.json)")
    try:
        from transformers import AutoModel, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(d, local_files_only=True)
        model = AutoModel.from_pretrained(d, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"--embedder {d}: cannot load ({str(exc).splitlines()[0]})") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    return MeanPooled(model, tok, max_length=max_length)


class Memoised:
    """`embedder` with a per-text memo: a text embedded once is not embedded again (the same
    vector comes back). For `compare`'s repeats, which embed the same counted examples every
    repeat: on scrapy with SmolLM2-135M that is ~1,600 texts, minutes of CPU each time. The memo
    lives in memory only, as long as this object."""

    def __init__(self, embedder) -> None:
        self.embedder, self._memo = embedder, {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), d): the wrapped embedder's vectors, each distinct text embedded once per
        process (held in memory only, never written)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            for t, v in zip(todo, self.embedder.embed(todo)):
                self._memo[t] = v
        if not texts:
            return self.embedder.embed([])
        return np.stack([self._memo[t] for t in texts])
