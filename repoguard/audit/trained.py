"""A published training run, loaded for measurement: base model + LoRA adapter (+ privacy report).

A run directory is what `repoguard train` writes (`OUT/train/`, or `OUT/runs/<id>/train/` of a
scheduled run, or an arm of `repoguard compare`): `adapter/` (PEFT, LoRA only),
`privacy_report.json`, and for the embedded default `base_model/`. The base is found, in order:
`model_dir` given by the caller (`--model`), `run_dir/base_model/`, the adapter's
`base_model_name_or_path`. Loading uses the training stage's own `load_model` (offline).

The same object serves as the *calibration model* θ₀ of the at-risk ranking: with the adapter
disabled (`peft`'s `disable_adapter()`), the model is exactly the base the run started from,
which no step of the run ever updated (LoRA freezes it) — so it never saw the run's examples.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from repoguard.core.errors import InputError


@dataclass
class TrainedRun:
    """`model`: the peft model (eval mode; `disable_adapter()` gives the base); `tokenizer`;
    `base`: where the base weights came from; `private`: True (DP), False (--no-dp), None
    (no privacy report); `report`: the privacy report or {}."""

    model: object
    tokenizer: object
    base: str
    private: bool | None
    report: dict
    run_dir: Path


def base_dir_of(run_dir: Path, model_dir: str | None = None) -> Path:
    """The base model directory of a run (see module docstring). Raises InputError when none is found."""
    if model_dir:
        return Path(model_dir)
    local = run_dir / "base_model"
    if (local / "config.json").is_file():
        return local
    cfg = run_dir / "adapter" / "adapter_config.json"
    try:
        name = json.loads(cfg.read_text(encoding="utf-8")).get("base_model_name_or_path") or ""
    except (OSError, ValueError):
        name = ""
    if name and (Path(name) / "config.json").is_file():
        return Path(name)
    raise InputError(f"{run_dir}: no base model found (no base_model/, adapter names {name or 'none'}); pass --model DIR")


def load_trained_run(run_dir: str | Path, *, device, model_dir: str | None = None) -> TrainedRun:
    """Load `run_dir/adapter` on its base, fp32, eval mode, on `device` (a torch.device).

    Raises InputError for a missing/corrupt adapter or base model."""
    import warnings

    from peft import PeftModel

    from repoguard.training.model import load_model

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    run_dir = Path(run_dir)
    adapter = run_dir / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        raise InputError(f"{adapter}: no trained adapter here (run `repoguard train` first)")
    base = base_dir_of(run_dir, model_dir)
    model, tok = load_model(base, device=device, bf16=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peft_model = PeftModel.from_pretrained(model, str(adapter), is_trainable=False)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise InputError(f"{adapter}: cannot load the adapter on {base} ({str(exc).splitlines()[0]})") from None
    report = {}
    rp = run_dir / "privacy_report.json"
    if rp.is_file():
        try:
            report = json.loads(rp.read_text(encoding="utf-8"))
        except ValueError:
            raise InputError(f"{rp}: corrupt privacy report") from None
    return TrainedRun(model=peft_model.to(device).eval(), tokenizer=tok, base=str(base),
                      private=report.get("private"), report=report, run_dir=run_dir)
