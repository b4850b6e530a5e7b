"""Peak tensor memory of one DP step on the CPU: per-example-gradient modes × gradient checkpointing.

    python bench/activation_memory.py --length 2048 --micro-batch 2

No GPU needed: a TorchDispatchMode counts the bytes of every tensor storage created during the
step and still alive (weakref finalisers on the storages), and reports the peak — the quantity
`torch.cuda.max_memory_allocated` reports on a GPU, less allocator rounding and fragmentation,
with the model's own weights excluded. Model: a small Llama (hidden 128, 4 layers, vocabulary
1,024, LoRA r = 8 on q/v), fp32, random tokens. Rows: Opacus hooks, `lora_grads` tensor hooks,
tensor hooks with gradient checkpointing, and the `--no-dp` step without/with checkpointing.
"""
from __future__ import annotations

import argparse
import time
import warnings
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from repoguard.training.data import collate
from repoguard.training.dp_step import DPStep
from repoguard.training.memory import enable_gradient_checkpointing
from repoguard.training.model import apply_lora


class LiveBytes(TorchDispatchMode):
    """Peak bytes of the tensor storages created inside the mode and still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                st = t.untyped_storage()
                key, nb = st.data_ptr(), st.nbytes()
                if nb == 0 or key in self.seen:
                    continue
                self.seen.add(key)
                self.live += nb
                self.peak = max(self.peak, self.live)
                weakref.finalize(st, self._free, key, nb)
        return out

    def _free(self, key: int, nb: int) -> None:
        self.seen.discard(key)
        self.live -= nb


def main() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=2)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=args.length)
    cfg._attn_implementation = "sdpa"
    g = torch.Generator().manual_seed(0)
    batch = collate([torch.randint(0, 1024, (args.length,), generator=g).numpy() for _ in range(args.micro_batch)],
                    pad_id=0)
    base = None
    for mode, ckpt in [("opacus", False), ("hooks", False), ("hooks", True), ("no-dp", False), ("no-dp", True)]:
        torch.manual_seed(0)
        model = apply_lora(LlamaForCausalLM(cfg).eval(), r=8, alpha=16, dropout=0.0)
        if ckpt:
            enable_gradient_checkpointing(model)
        private = mode != "no-dp"
        dp = DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=4.0, private=private,
                    noise_generator=torch.Generator().manual_seed(0), per_example=mode if private else "auto")
        opt = torch.optim.SGD(dp.params, lr=0.0)

        def step():
            dp.begin()
            dp.accumulate(batch)
            dp.finish()
            dp.apply(opt, public_batch_size=4.0)
        step()                                           # warm-up
        t = time.perf_counter()
        with LiveBytes() as lb:
            step()
        dt = time.perf_counter() - t
        dp.close()
        base = base or lb.peak
        print(f"L={args.length} n={args.micro_batch} {mode:7s} checkpointing={'on ' if ckpt else 'off'} "
              f"peak {lb.peak / 2**20:7.1f} MiB ({lb.peak / base:.2f}× Opacus)  {dt:.2f} s", flush=True)


if __name__ == "__main__":
    main()
