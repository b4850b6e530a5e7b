"""The model to fine-tune: a local Hugging Face causal LM, or the embedded tiny default, plus LoRA.

Nothing downloads: `--model DIR` is loaded with `local_files_only=True`. Without it the embedded
default is a tiny Llama-style model pretrained on the running interpreter's standard-library
source (`training.base_model`, built once and cached). Its byte-level BPE tokenizer is fitted on
that public corpus only, never on the repository: a tokenizer's merges ship with the model outside
the DP guarantee, and a tokenizer that never saw the repository cannot reveal its strings.
`build_tiny_model` (random weights, a tokenizer fitted on the texts given) stays for tests of the
architecture and the DP step, which need a small model and no cache.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from repoguard.core.errors import InputError

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>")

# Code models peft's own table misses; peft's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
# covers the rest.
_EXTRA_TARGETS = {
    "starcoder2": ["q_proj", "v_proj"],
    "codegen": ["qkv_proj"],
    "phi3": ["qkv_proj"],
}


# LoRA targets of the embedded tiny model when none are configured (see pipeline.run_training).
# lm_head was adapted while the base was random (a frozen random head capped learning); the
# pretrained head needs no adapter, and one only adds noised dimensions: on the fixture (B = 8,
# T = 40, lr 0.02, max length 64, --insecure-reproducible, seeds 0–3) the held-out public loss
# after DP training was 3.98 with q, v against 4.13 with q, v, lm_head (base 4.24).
TINY_LORA_TARGETS = ("q_proj", "v_proj")


@dataclass(frozen=True)
class TinyConfig:
    """Size of the embedded default model (Llama architecture)."""

    vocab_size: int = 512
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    max_position: int = 512


def pick_device(spec: str = "auto"):
    """`auto` → cuda:LOCAL_RANK when CUDA is available, else cpu; otherwise `torch.device(spec)`.

    Raises InputError for an unknown or unavailable device."""
    import os

    import torch

    if spec in ("", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    try:
        dev = torch.device(spec)
    except RuntimeError as exc:
        raise InputError(f"--device: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device: {spec} requested but CUDA is not available")
    return dev


def limit_cpu_threads(device) -> None:
    """One intra-op thread on the CPU unless OMP_NUM_THREADS says otherwise. The embedded model's
    ops are tiny (64-wide): with torch's default of one thread per core every op paid a thread
    hand-off, and on a shared 2-core machine (load 8) the spinning threads made 100 DP steps
    take 186 s of CPU (issue 15; profile: every op 10–100× its single-thread cost)."""
    import os

    import torch

    if str(device).startswith("cpu") and not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int):
    """Byte-level BPE (`tokenizers`) trained on `texts`, wrapped as a PreTrainedTokenizerFast with
    BOS `<s>`, EOS `</s>` and PAD `<pad>`. Deterministic for the same texts."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(list(texts), vocab_size=vocab_size, min_frequency=2,
                            special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")


def build_tiny_model(texts: Sequence[str], *, seed: int, size: TinyConfig = TinyConfig()):
    """A *randomly initialised* tiny model: (model, tokenizer), the tokenizer fitted on `texts`
    and the weights N(0, 0.02) seeded by `seed` (CPU, fp32). Tests and the pretraining only; the
    embedded default is `training.base_model.embedded_base`."""
    return tiny_llama(train_tokenizer(texts, vocab_size=size.vocab_size), seed=seed, size=size)


def tiny_llama(tok, *, seed: int, size: TinyConfig = TinyConfig()):
    """(model, tok): a Llama of `size` for tokenizer `tok`, weights N(0, 0.02) seeded by `seed`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=size.hidden_size, intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_layers, num_attention_heads=size.num_heads,
        num_key_value_heads=size.num_heads, max_position_embeddings=size.max_position,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = "eager"   # deterministic and hook-friendly on CPU
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    return model, tok


def load_model(model_dir: str | Path, *, device, bf16: bool | None = None):
    """Load a local HF causal LM and its tokenizer (`local_files_only=True`). `model_dir` is a
    checkpoint directory or the name of a fetched model (`training.pretrained.resolve`, e.g.
    "smollm2-135m"): the one place `--model` is resolved, for every command.

    bf16 by default on CUDA, fp32 on CPU. A tokenizer without a pad token gets EOS as pad.
    Raises InputError when the directory is missing or not a loadable checkpoint, or the named
    model was not fetched (the message gives the fetch command)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from repoguard.training.pretrained import resolve

    hf_logging.disable_progress_bar()   # "Loading weights" bars would fill CI logs and break -q
    d = resolve(str(model_dir))
    if not (d / "config.json").is_file():
        raise InputError(f"{d}: not a Hugging Face model directory (no config.json)")
    if bf16 is None:
        bf16 = device.type == "cuda"
    dtype = torch.bfloat16 if bf16 else torch.float32
    try:
        tok = AutoTokenizer.from_pretrained(d, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(d, local_files_only=True, dtype=dtype)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{d}: cannot load model ({str(exc).splitlines()[0]})") from None
    if tok.pad_token_id is None:
        if tok.eos_token is None:
            raise InputError(f"{d}: tokenizer has neither a pad nor an EOS token")
        tok.pad_token = tok.eos_token
    return model.to(device), tok


def detect_lora_targets(model) -> list[str]:
    """LoRA target module names for `model`'s architecture: peft's per-architecture table (plus a
    few code models), else every Linear leaf except the output head. Raises InputError when the
    model has no Linear layer to adapt."""
    import torch.nn as nn
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as TABLE

    mtype = getattr(model.config, "model_type", "")
    if mtype in _EXTRA_TARGETS:
        return list(_EXTRA_TARGETS[mtype])
    if mtype in TABLE:
        return list(TABLE[mtype])
    names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules()
             if isinstance(m, nn.Linear) and not n.endswith("lm_head")}
    if not names:
        raise InputError(f"model type {mtype!r}: no Linear layers for LoRA; pass --lora-targets")
    return sorted(names)


def apply_lora(model, *, r: int, alpha: int, dropout: float, targets: Sequence[str] = (), seed: int = 0):
    """Wrap `model` with peft LoRA (base frozen, adapters fp32). `targets` empty → detected.

    Raises InputError when a target matches no module."""
    import torch
    from peft import LoraConfig, get_peft_model

    targets = list(targets) or detect_lora_targets(model)
    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets,
                     task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # transformers deprecations inside peft
        torch.manual_seed(seed)
        try:
            peft_model = get_peft_model(model, cfg)
        except ValueError as exc:
            raise InputError(f"--lora-targets {','.join(targets)}: {str(exc).splitlines()[0]}") from None
    return peft_model


def save_base_model(model, tokenizer, dest: Path) -> None:
    """config + safetensors weights + tokenizer into `dest` (reloads offline)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(dest, safe_serialization=True)
    tokenizer.save_pretrained(dest)
