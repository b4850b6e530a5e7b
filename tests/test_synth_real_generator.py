"""SecPE with a real generator (issue 44 item 7): what `repoguard synth --model smollm2-135m`
needed on a CPU — one intra-op thread, embeddings without the LM head, a public start prompt for
an instruction-tuned base, one embedding of the counted examples across `compare`'s repeats.

The fast tests use the embedded tiny base; the slow one uses the fetched SmolLM2-135M and skips,
saying how to fetch it, when it is not in the test cache."""
from __future__ import annotations

import json

import numpy as np
import pytest

from repoguard.cli import main

# Public generator seed (tests only).
SEED = 5


@pytest.fixture(scope="module")
def tiny(embedded_base_dir):
    """(model, tokenizer): the embedded tiny base on the CPU."""
    from repoguard.training.base_model import embedded_base

    return embedded_base(max_length=128, show_progress=False)


TEXTS = ["def add(a, b):\n    return a + b\n", "import os\nprint(os.getcwd())\n", "x = [i * i for i in range(9)]\n"]


def _count_calls(module):
    calls = []
    handle = module.register_forward_hook(lambda m, i, o: calls.append(1))
    return calls, handle


def test_embedding_skips_the_lm_head_and_keeps_the_final_hidden_states(tiny):
    """The default embedder never runs the LM head (SmolLM2's is a fifth of its weights and its
    fp32 logits 805 MB per batch of 16 × 256) and still returns the mean over non-padding
    positions of the final (normed) hidden states, as the full forward pass gives them."""
    import torch

    from repoguard.synthesis.embedding import MeanPooled

    model, tok = tiny
    emb = MeanPooled(model, tok, max_length=32, batch=2)
    calls, handle = _count_calls(model.get_output_embeddings())
    try:
        got = emb.embed(TEXTS)
    finally:
        handle.remove()
    assert calls == [] and got.shape == (3, model.config.hidden_size) and got.dtype == np.float64
    want = []
    with torch.no_grad():
        for t in TEXTS:                   # one text at a time: no padding, plain mean
            enc = tok([t], truncation=True, max_length=32, return_tensors="pt")
            h = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                      output_hidden_states=True).hidden_states[-1]
            want.append(h[0].mean(0).double().numpy())
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-5)


def test_memoised_embedder_embeds_each_text_once_with_the_same_vectors(tiny):
    """`compare --repeats` embeds the same counted examples every repeat: the memo runs the model
    once per distinct text and hands back exactly what the embedder gives."""
    from repoguard.evaluation.synth_arm import _embedder
    from repoguard.synthesis.embedding import MeanPooled, Memoised

    model, tok = tiny
    plain = MeanPooled(model, tok, max_length=32).embed(TEXTS)
    memo = Memoised(MeanPooled(model, tok, max_length=32))
    calls, handle = _count_calls(model.get_decoder())
    try:
        first = memo.embed(TEXTS + TEXTS[:1])
        n_first = len(calls)
        again = memo.embed(TEXTS[::-1])
    finally:
        handle.remove()
    assert n_first == 1 and len(calls) == 1              # 3 distinct texts, one batch; then none
    np.testing.assert_array_equal(first[:3], plain)
    np.testing.assert_array_equal(first[3], plain[0])
    np.testing.assert_array_equal(again, plain[::-1])
    assert memo.embed([]).shape == (0, model.config.hidden_size)
    # compare's synth arm keeps one per base model and length, across repeats
    assert _embedder(model, tok, 32) is _embedder(model, tok, 32)
    assert _embedder(model, tok, 32) is not _embedder(model, tok, 16)


def test_the_prompt_starts_every_sample_and_variation_and_is_left_out_of_the_texts(tiny):
    """`LocalLM(prompt=…)`: every generate call starts BOS + prompt (+ the candidate's prefix
    for a variation); the returned texts hold what follows the prompt (a variation: the prefix
    and its continuation), never the prompt itself."""
    from repoguard.synthesis.generators import LocalLM

    model, tok = tiny
    prompt = "class Widget:"
    head = [tok.bos_token_id] + tok(prompt, add_special_tokens=False)["input_ids"]
    seen = []
    handle = model.register_forward_pre_hook(
        lambda m, a, kw: seen.append(kw["input_ids"].tolist()) if kw.get("input_ids") is not None
        and kw["input_ids"].shape[1] > 1 else None, with_kwargs=True)
    try:
        gen = LocalLM(model, tok, max_new_tokens=6, prompt=prompt, batch=8)
        samples = gen.sample(3, seed=SEED)
        base = "def helper(x):\n    return x\n"
        variations = gen.vary([base], 2, seed=SEED)
    finally:
        handle.remove()
    prefills = [row for batch in seen for row in batch]      # the prompt pass of each generate call
    assert len(prefills) == 3 + 2
    for row in prefills[:3]:
        assert row == head
    keep = max(1, int(len(tok(base, add_special_tokens=False)["input_ids"]) * gen.prefix_fraction))
    for row in prefills[3:]:
        body = [t for t in row if t != tok.pad_token_id]
        assert body[:len(head)] == head and len(body) == len(head) + keep
    assert len(samples) == 3 and all(not s.startswith(prompt) for s in samples)
    assert len(variations) == 1 and len(variations[0]) == 2
    prefix = tok.decode(tok(base, add_special_tokens=False)["input_ids"][:keep])
    assert all(v.startswith(prefix) for v in variations[0])
    assert gen.describe()["prompt"] == prompt


def test_synth_backends_run_torch_on_one_thread(analysed_small, monkeypatch):
    """`synth`'s local model runs on one intra-op thread (as train and compare do): with torch's
    default two threads on 2 shared cores, SmolLM2-135M's sampling took 17× the CPU. An explicit
    OMP_NUM_THREADS is left alone."""
    import torch

    from repoguard.synthesis.synthesize import SynthOptions, backends

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        torch.set_num_threads(2)
        backends(SynthOptions(n=2, rounds=1, variations=0, clusters=2, max_length=32, max_new_tokens=4,
                              show_progress=False))
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        backends(SynthOptions(n=2, rounds=1, variations=0, clusters=2, max_length=32, max_new_tokens=4,
                              show_progress=False))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_synth_prompt_setting_keys_the_arm_and_rejects_non_text(capsys):
    """`--synth-prompt` is one more synth-arm setting: absent by default (saved results key as
    before), kept as given otherwise, and anything but text is a one-line InputError."""
    from repoguard.core.errors import InputError
    from repoguard.evaluation.synth_arm import SYNTH_ARM, synth_settings

    assert "prompt" not in synth_settings({"prompt": None}) and "prompt" not in synth_settings({"prompt": ""})
    assert synth_settings({"prompt": "```python\n", "n": "8"}) == {**SYNTH_ARM, "n": 8, "prompt": "```python\n"}
    with pytest.raises(InputError, match="--synth-prompt"):
        synth_settings({"prompt": 3})


@pytest.fixture(scope="module")
def analysed_small(tmp_path_factory, monorepo_module, embedded_base_dir):
    """The fixture monorepo, analysed."""
    repo = tmp_path_factory.mktemp("synth-real") / "monorepo"
    monorepo_module.build(repo)
    assert main(["analyze", "-q", str(repo)]) == 0
    return repo


@pytest.mark.slow
def test_synth_with_the_fetched_real_base_on_the_fixture(analysed_small, capsys):
    """End to end on a CPU with SmolLM2-135M as generator and embedder: `repoguard synth --model
    smollm2-135m --prompt '```python\\n'` writes a corpus, records the real model, the prompt and
    the 576-wide embeddings, and leaves the floor met."""
    from repoguard.training.pretrained import checkpoint_dir

    ckpt = checkpoint_dir("smollm2-135m", "fp32")
    if not (ckpt / "model.safetensors").is_file():
        pytest.skip(f"SmolLM2-135M is not fetched into the test cache ({ckpt}); run "
                    f"`REPOGUARD_CACHE_DIR={ckpt.parents[1]} repoguard model fetch smollm2-135m` (93 MB download)")
    repo = analysed_small
    capsys.readouterr()
    assert main(["synth", "--json", "-q", "--model", "smollm2-135m", "--n", "2", "--rounds", "1",
                 "--variations", "0", "--clusters", "2", "--max-length", "16", "--max-new-tokens", "12",
                 "--prompt", "```python\n", str(repo)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["generator"]["model"] == "smollm2-135m" and s["generator"]["prompt"] == "```python\n"
    assert s["voting_cost"]["dim"] == 576                   # SmolLM2-135M's hidden size, not the tiny base's
    assert s["examples_written"] == 2 and s["undetected_floor"]["meets_r"]
    rows = [json.loads(x) for x in (repo / ".repoguard" / "synth" / "synthetic.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(not r["text"].startswith("```python") for r in rows)
