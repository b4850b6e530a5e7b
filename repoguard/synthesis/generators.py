"""Generator backends [SecPE Alg. 3]: random samples and variations of a candidate, from a model
that never sees private text (it sees only prompts built from earlier *synthetic* candidates).

Two backends behind one interface (`Generator`):

* `LocalLM` — a local causal LM (the embedded base or any `--model` directory), sampled with
  `transformers`' `generate`: random samples from BOS (then `prompt`, a public text such as
  "```python", when given), variations by continue-from-prefix (keep the first
  `prefix_fraction` of a candidate's tokens, sample the rest);
* `HTTPGenerator` — an OpenAI-compatible server (`--generator-url`): POST `/v1/completions` with
  {"model", "prompt", "max_tokens", "temperature", "n", "seed"}; random samples from `prompt`
  (default: empty), variations from a candidate's character prefix.

The seed a call takes drives the generator's sampling only (public: the generator holds no
private state); nothing about it is published.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Protocol, Sequence

from repoguard.core.errors import InputError


class Generator(Protocol):
    """`sample(n, seed)` → n texts; `vary(texts, per_text, seed)` → for each text, `per_text`
    variations of it. `describe()` → a JSON-able description without secrets or state."""

    def sample(self, n: int, *, seed: int) -> list[str]:
        """`n` random samples; `seed` drives the sampling only (public)."""
        ...

    def vary(self, texts: Sequence[str], per_text: int, *, seed: int) -> list[list[str]]:
        """For each of `texts`, `per_text` variations of it (a list per text, in order)."""
        ...

    def describe(self) -> dict:
        """A JSON-able description of the backend and its settings, without secrets or state."""
        ...


class LocalLM:
    """A local causal LM (`model`, `tokenizer`) sampled at `temperature` with top-k `top_k`,
    `max_new_tokens` new tokens per call, `batch` prompts per forward pass. Every sample and
    variation starts from BOS and then `prompt` (public text, default none); the prompt is not
    part of the returned texts.

    Why a prompt: an instruction-tuned base such as SmolLM2-135M-Instruct has BOS
    `<|im_start|>` (a chat turn), and from BOS alone it writes chat prose, not code (measured on
    scrapy, issue 44); a public "```python" start makes it write Python. The prompt is a
    setting chosen by the operator, like the model: it must not be built from private text."""

    def __init__(self, model, tokenizer, *, max_new_tokens: int = 96, temperature: float = 1.0, top_k: int = 50,
                 prefix_fraction: float = 0.5, batch: int = 16, name: str = "local", prompt: str = "") -> None:
        if not 0 < prefix_fraction < 1:
            raise InputError(f"prefix fraction must be in (0, 1), not {prefix_fraction}")
        self.model, self.tok = model.eval(), tokenizer
        self.max_new_tokens, self.temperature, self.top_k = int(max_new_tokens), float(temperature), int(top_k)
        self.prefix_fraction, self.batch, self.name = float(prefix_fraction), int(batch), name
        self.prompt = prompt
        self._head = [self._start()] + (tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else [])

    def describe(self) -> dict:
        """{"backend": "local", model name, max_new_tokens, temperature, top_k, prefix_fraction, prompt}."""
        return {"backend": "local", "model": self.name, "max_new_tokens": self.max_new_tokens,
                "temperature": self.temperature, "top_k": self.top_k, "prefix_fraction": self.prefix_fraction,
                "prompt": self.prompt}

    def _start(self) -> int:
        t = self.tok.bos_token_id if self.tok.bos_token_id is not None else self.tok.eos_token_id
        if t is None:
            raise InputError("generator: the tokenizer has neither a BOS nor an EOS token to start from")
        return int(t)

    def _generate(self, prompts: list[list[int]], *, seed: int) -> list[str]:
        """Continue each of `prompts` (token ids after `self._head`, which every prompt gets in
        front); returns each prompt's tokens and its continuation, decoded, without the head."""
        import torch

        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        head = self._head
        out: list[str] = []
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
            for lo in range(0, len(prompts), self.batch):
                chunk = [head + p for p in prompts[lo:lo + self.batch]]
                width = max(len(p) for p in chunk)
                ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk])   # left padding
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
                gen = self.model.generate(input_ids=ids.to(self.model.device),
                                          attention_mask=mask.to(self.model.device), do_sample=True,
                                          temperature=self.temperature, top_k=self.top_k,
                                          max_new_tokens=self.max_new_tokens, pad_token_id=pad)
                for row, p in zip(gen.tolist(), chunk):
                    out.append(self.tok.decode(p[len(head):] + row[width:], skip_special_tokens=True))
        return out

    def sample(self, n: int, *, seed: int) -> list[str]:
        """`n` texts sampled from the BOS (else EOS) token and the public `prompt` (not returned),
        torch's generator seeded with `seed` inside a fork (the caller's random state is left as it was)."""
        return self._generate([[]] * int(n), seed=seed)

    def vary(self, texts: Sequence[str], per_text: int, *, seed: int) -> list[list[str]]:
        """`per_text` continuations of each text's first `prefix_fraction` of tokens (at least one),
        the kept prefix included in each variation."""
        prompts = []
        for t in texts:
            ids = self.tok(t, add_special_tokens=False)["input_ids"]
            keep = max(1, int(len(ids) * self.prefix_fraction)) if ids else 0
            prompts.extend([ids[:keep]] * int(per_text))
        flat = self._generate(prompts, seed=seed) if prompts else []
        return [flat[i * per_text:(i + 1) * per_text] for i in range(len(texts))]


class HTTPGenerator:
    """An OpenAI-compatible completions endpoint at `url` (a base URL such as
    http://host:8000, or the full …/v1/completions). `model` is sent as given."""

    def __init__(self, url: str, *, model: str = "default", max_tokens: int = 96, temperature: float = 1.0,
                 prefix_fraction: float = 0.5, prompt: str = "", timeout_s: float = 120.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise InputError(f"--generator-url: {url!r} is not an http(s) URL")
        base = url.rstrip("/")
        self.url = base if base.endswith("/v1/completions") else base + "/v1/completions"
        self.model, self.max_tokens, self.temperature = model, int(max_tokens), float(temperature)
        self.prefix_fraction, self.prompt, self.timeout_s = float(prefix_fraction), prompt, float(timeout_s)

    def describe(self) -> dict:
        """{"backend": "http", url, model, max_tokens, temperature, prefix_fraction}."""
        return {"backend": "http", "url": self.url, "model": self.model, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "prefix_fraction": self.prefix_fraction}

    def _complete(self, prompt: str, n: int, seed: int) -> list[str]:
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": self.max_tokens,
                           "temperature": self.temperature, "n": int(n), "seed": int(seed) % (1 << 31)}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                doc = json.loads(resp.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InputError(f"--generator-url {self.url}: request failed ({exc})") from None
        choices = doc.get("choices") if isinstance(doc, dict) else None
        if not isinstance(choices, list) or len(choices) != n or not all(
                isinstance(c, dict) and isinstance(c.get("text"), str) for c in choices):
            raise InputError(f"--generator-url {self.url}: expected {n} choices with a text each")
        order = sorted(range(n), key=lambda i: choices[i].get("index", i))
        return [prompt + choices[i]["text"] for i in order]

    def sample(self, n: int, *, seed: int) -> list[str]:
        """`n` completions of `prompt` (prompt included); raises InputError when the request fails or the
        answer does not hold `n` texts."""
        return self._complete(self.prompt, int(n), seed) if n else []

    def vary(self, texts: Sequence[str], per_text: int, *, seed: int) -> list[list[str]]:
        """`per_text` completions of each text's first `prefix_fraction` of characters (at least one),
        with seed `seed + i` for the i-th text; errors as `sample`."""
        return [self._complete(t[: max(1, int(len(t) * self.prefix_fraction))], int(per_text), seed + i)
                for i, t in enumerate(texts)]
