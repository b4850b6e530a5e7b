"""DP LoRA training on the code-model families users fine-tune (issue #16, CPU part).

Each family is a tiny randomly initialised model built from its transformers config (nothing
downloads). For each: LoRA targets are detected, the clipped per-example gradients from Opacus hooks
equal a per-example loop, a few DP steps lower the batch loss, and the saved adapter reloads with
`PeftModel.from_pretrained` onto a fresh base and generates.
"""
from __future__ import annotations

import pytest
import torch

from repoguard.core.errors import InputError
from repoguard.training.data import collate, per_example_loss
from repoguard.training.dp_step import DPStep
from repoguard.training.model import apply_lora, detect_lora_targets

V = 96   # vocabulary size of every tiny model
CLIP = 0.5


def _config(family: str):
    import transformers as tf

    small = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                 pad_token_id=0)
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                             bos_token_id=1, eos_token_id=2)
    if family == "gpt_bigcode":    # StarCoder
        return tf.GPTBigCodeConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                   multi_query=True, bos_token_id=1, eos_token_id=2)
    if family == "codegen":
        return tf.CodeGenConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                rotary_dim=4, bos_token_id=1, eos_token_id=2)
    if family == "gpt_neox":
        return tf.GPTNeoXConfig(**small)
    kv = dict(num_key_value_heads=2)
    return {"starcoder2": tf.Starcoder2Config, "llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config,
            "phi3": tf.Phi3Config}[family](**small, **kv)


FAMILIES = ["gpt2", "gpt_bigcode", "starcoder2", "llama", "qwen2", "phi3", "gpt_neox", "codegen"]
EXPECTED_TARGETS = {"gpt2": ["c_attn"], "gpt_bigcode": ["c_attn"], "starcoder2": ["q_proj", "v_proj"],
                    "llama": ["q_proj", "v_proj"], "qwen2": ["q_proj", "v_proj"], "phi3": ["qkv_proj"],
                    "gpt_neox": ["query_key_value"], "codegen": ["qkv_proj"]}


def _base(family: str, seed: int = 0):
    from transformers import AutoModelForCausalLM

    cfg = _config(family)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    # eval(): dropout off, so the batched and the looped gradients see the same function.
    return AutoModelForCausalLM.from_config(cfg).eval()


def _seqs(seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, V, (n,), generator=g).tolist() for n in (9, 14, 6, 11)]


def _lora(family: str):
    model = apply_lora(_base(family), r=4, alpha=8, dropout=0.0, seed=0)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():    # LoRA B starts at 0, which would zero every gradient of A
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_lora_targets_are_detected(family):
    assert detect_lora_targets(_base(family)) == EXPECTED_TARGETS[family]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_per_example_gradients_equal_a_per_example_loop(family):
    model = _lora(family)
    params = [p for p in model.parameters() if p.requires_grad]
    seqs = _seqs()
    expected = []
    for s in seqs:   # one example at a time: no padding, no hooks
        b = collate([s], pad_id=0)
        out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False)
        g = torch.autograd.grad(per_example_loss(out.logits, b["labels"])[0], params)
        flat = torch.cat([x.reshape(-1) for x in g])
        expected.append(flat * min(1.0, CLIP / (flat.norm().item() + 1e-6)))
    dp = DPStep(model, clip_norm=CLIP, noise_multiplier=1.0, batch_size=4.0,
                noise_generator=torch.Generator().manual_seed(0))
    _, clipped = dp.clipped_per_example(collate(seqs, pad_id=0))
    dp.close()
    got = torch.cat([c.reshape(len(seqs), -1) for c in clipped], dim=1)
    for i, e in enumerate(expected):
        rel = ((got[i] - e).norm() / e.norm()).item()
        assert rel <= 1e-4, f"{family}, example {i}: relative error {rel:.2e}"


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_dp_steps_train_and_the_adapter_reloads_and_generates(family, tmp_path):
    from peft import PeftModel

    model = apply_lora(_base(family), r=4, alpha=8, dropout=0.0, seed=0)
    seqs = _seqs(1)
    batch = collate(seqs, pad_id=0)

    def batch_loss() -> float:
        with torch.no_grad():
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        use_cache=False)
            return per_example_loss(out.logits, batch["labels"]).mean().item()

    before = batch_loss()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    dp = DPStep(model, clip_norm=1.0, noise_multiplier=0.05, batch_size=4.0,
                noise_generator=torch.Generator().manual_seed(0))
    for _ in range(8):
        dp.begin()
        dp.accumulate(batch)
        dp.finish()
        dp.apply(opt, public_batch_size=4.0)
    dp.close()
    after = batch_loss()
    assert after < before - 0.05, f"{family}: loss {before:.3f} → {after:.3f}"

    model.save_pretrained(tmp_path / "adapter")
    reloaded = PeftModel.from_pretrained(_base(family), tmp_path / "adapter").eval()
    with torch.no_grad():
        out = reloaded(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       use_cache=False)
    assert per_example_loss(out.logits, batch["labels"]).mean().item() == pytest.approx(after, rel=1e-4)
    prompt = torch.tensor([seqs[0][:4]])
    gen = reloaded.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                            max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert gen.shape == (1, 9) and gen[0, :4].tolist() == seqs[0][:4]


def test_a_layer_without_per_example_gradients_is_refused_by_name():
    model = apply_lora(_base("llama"), r=4, alpha=8, dropout=0.0, targets=("embed_tokens", "q_proj"))
    with pytest.raises(InputError, match=r"embed_tokens.*ParameterDict.*drop 'embed_tokens' from --lora-targets"):
        DPStep(model, clip_norm=1.0, noise_multiplier=1.0, batch_size=2.0,
               noise_generator=torch.Generator().manual_seed(0))


@pytest.mark.slow
def test_dp_training_through_the_cli_with_a_local_starcoder_checkpoint(make_repo, tmp_path, capsys):
    """`repoguard train --model DIR` (private, the default) on a GPT-BigCode checkpoint: targets
    detected, the plan's steps run, the adapter reloads and generates; a target without
    per-example gradients is one line, exit 2."""
    import json

    from peft import AutoPeftModelForCausalLM

    from repoguard.cli import main
    from repoguard.training.model import train_tokenizer

    files = {f"pkg/mod{i}.py": f"def f{i}(x):\n    return x * {i} + {i * i}\n" * 3 for i in range(12)}
    files["alpha/signals.py"] = "def signal(p):\n    return p * 0.42\n"
    files["repoguard.toml"] = '[[secret]]\nid = "alpha"\npaths = ["alpha/**"]\np = 1e-4\nr = 0.05\n'
    repo = make_repo(files)
    tok = train_tokenizer([v for k, v in files.items() if k.startswith("pkg/")], vocab_size=300)
    cfg = _config("gpt_bigcode")
    cfg.vocab_size, cfg.bos_token_id, cfg.eos_token_id = len(tok), tok.bos_token_id, tok.eos_token_id
    from transformers import AutoModelForCausalLM

    model_dir = tmp_path / "starcoder-tiny"
    AutoModelForCausalLM.from_config(cfg).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)

    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "4", "--steps", "3", "--c", "1", str(repo)]) == 0
    capsys.readouterr()
    assert main(["train", "--json", "-q", "--model", str(model_dir), "--max-length", "32", str(repo)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["private"] and report["steps_completed"] == 3
    adapter = repo / ".repoguard" / "train" / "adapter"
    assert json.loads((adapter / "adapter_config.json").read_text())["target_modules"] == ["c_attn"]
    reloaded = AutoPeftModelForCausalLM.from_pretrained(adapter, local_files_only=True)
    ids = torch.tensor([tok("def f1(x):")["input_ids"]])
    assert reloaded.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=3,
                             do_sample=False, pad_token_id=tok.pad_token_id).shape[1] == ids.shape[1] + 3

    assert main(["train", "-q", "--model", str(model_dir), "--lora-targets", "wte,c_attn", str(repo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'wte'" in err[0] and "per-example gradient" in err[0]
