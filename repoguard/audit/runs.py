"""A DP run and a --no-dp run with identical settings, for auditing (Hush §5.2 compares the two).

Built only from the training stage's public functions (`embedded_base`/`load_model`,
`apply_lora`, `tokenize`, `trainer.train` with `publish=False`): same base weights, same LoRA
initialisation, same Poisson sampler seed and ρ, same learning rate and steps; the DP run clips to
C and adds N(0, σ²C²) per step, the other does neither. Both are seeded (the trainer's
`insecure_reproducible`): an audit must be reproducible, and these models are never released. The models stay in memory: they are
measuring instruments, not releases, so no adapter is written and nothing enters the ledger.
The numbers they yield (exposure, extraction rates of secret examples) come partly from a model
with no DP guarantee: treat `OUT/audit/` and the report as internal to the security team.
Their `train_log.jsonl` files go to `OUT/audit/<name>/<label>/` for the report's loss plot.
"""
from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

LABELS = ("dp", "no-dp")


@dataclass
class AuditRuns:
    """`models[label]` for label in LABELS (peft models, eval-ready), their tokenizer, the token
    sequences they were trained on (plan order) and each run's privacy report."""

    tokenizer: object
    models: dict
    seqs: list
    reports: dict


def public_texts(out: Path, example_ids: Sequence[str], texts: Sequence[str]) -> list[str]:
    """Texts of examples tied to no secret (incidence rows without a nonzero): the only text the
    embedded tokenizer may be trained on (its merges ship with the model, outside DP)."""
    from repoguard.analyzers.incidence import load_incidence

    inc = load_incidence(out)
    tied = {inc.example_ids[i] for i in inc.matrix.getnnz(axis=1).nonzero()[0].tolist()}
    return [t for eid, t in zip(example_ids, texts) if eid not in tied]


def train_pair(*, plan, texts: Sequence[str], public: Sequence[str], cfg, log_dir: Path,
               steps: int | None = None, seed: int = 0, noise_seed: int = 0, device: str = "auto",
               show_progress: bool = False, tiny_size=None) -> AuditRuns:
    """Train the DP and the --no-dp model on `texts` (one per plan example, plan order).

    Args:
        plan: `repoguard.planning.plan.Plan` (ρ, σ, B, T, C). texts: training texts, credentials already
            redacted (canaries inserted where wanted). public: the tokenizer texts of `tiny_size`.
        cfg: `repoguard.core.config.TrainingConfig` (model, max_length, LoRA, lr, micro-batch size);
            no `cfg.model` → the embedded pretrained base (`training.base_model`).
        log_dir: `OUT/audit/<name>`; each run logs to `log_dir/<label>/train_log.jsonl`.
        steps: ≤ the plan's T (None = T). seed: base weights, LoRA init and sampler.
        noise_seed: the DP noise (fixed here: an audit must be reproducible).
        tiny_size: tests only — a *random* tiny model of this `training.model.TinyConfig` with its
            tokenizer fitted on `public` instead of the embedded pretrained base.

    Raises InputError (bad model dir, steps > T) like `repoguard train`."""
    from repoguard.training.data import tokenize
    from repoguard.training.base_model import embedded_base
    from repoguard.training.model import apply_lora, build_tiny_model, limit_cpu_threads, load_model, pick_device
    from repoguard.training.trainer import TrainSettings, train

    dev = pick_device(device)
    limit_cpu_threads(dev)
    if cfg.model:
        base, tok = load_model(cfg.model, device=dev)
    elif tiny_size is not None:
        base, tok = build_tiny_model(list(public), seed=seed, size=tiny_size)
        base = base.to(dev)
    else:
        base, tok = embedded_base(max_length=cfg.max_length, device=dev, show_progress=show_progress)
    seqs = tokenize(list(texts), tok, max_length=cfg.max_length)
    total = plan.steps if steps is None else int(steps)
    models, reports = {}, {}
    for label in LABELS:
        model = apply_lora(copy.deepcopy(base), r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                           targets=cfg.lora_targets, seed=seed)
        settings = TrainSettings(lr=cfg.learning_rate, micro_batch_size=cfg.micro_batch_size,
                                 checkpoint_every=total, steps=total, private=label == "dp", seed=seed,
                                 noise_seed=noise_seed if label == "dp" else None,
                                 insecure_reproducible=True)     # an instrument, never released
        run_dir = Path(log_dir) / label
        run_dir.mkdir(parents=True, exist_ok=True)
        reports[label] = train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=run_dir,
                               settings=settings, ledger=None, publish=False, show_progress=show_progress)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)   # not a release: keep no weights
        models[label] = model.eval()
    return AuditRuns(tokenizer=tok, models=models, seqs=seqs, reports=reports)

