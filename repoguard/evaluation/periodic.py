"""Held-out evaluation during a training run: the base model (step 0), every N steps and the end.

`PeriodicEval` is the trainer's evaluation hook (`training.trainer.train(evaluator=…)`): the
trainer calls `begin` before its first step and `after` once per finished step; the results go to
`OUT/train/eval.json.running` (rewritten atomically after each evaluation; the trainer renames it
to `eval.json` when it publishes the adapter and privacy report, so a killed run never leaves a
published eval.json of another run than the adapter's, issue 41 item 11) and, as "eval" /
"eval_base" keys, onto those steps' lines of `train_log.jsonl`. A resumed run continues the
history up to its checkpoint's step.

For a published private run (`public_only`), the secret-tied held-out slices are functions of
secret text that the accountant does not count: the full history goes to the owner-only
`train/internal/eval.json`, and `train/eval.json` keeps the `public` slice alone.
"""
from __future__ import annotations

import json
from pathlib import Path

from repoguard.core.artefacts import atomic_write_json
from repoguard.evaluation.metrics import Evaluator, headline

RUNNING = "eval.json.running"   # the run's eval.json until the trainer publishes it


class PeriodicEval:
    """Calls `evaluator` (no arguments → slice name → metrics) when due and keeps the history.

    Args:
        evaluator: `metrics.Evaluator` (its `info()` describes the scored set for eval.json).
        every: also evaluate every `every` steps (0: only the base model and the end).
        base: the step-0 result when the caller already scored the same model on the same
            `EvalSet` (`compare` scores the base once: a fresh LoRA adapter adds exact zeros, so
            every arm's step-0 model *is* the base); None = evaluate it here."""

    def __init__(self, evaluator: Evaluator, *, every: int = 0, base: dict | None = None) -> None:
        self.evaluator, self.every = evaluator, max(0, int(every))
        self.base = base
        self.history: list[dict] = []
        self.path: Path | None = None
        self._pending_base: dict | None = None

    def begin(self, train_dir: str | Path, *, start: int, resume: bool, public_only: bool = False) -> None:
        """Load the history a resumed run continues, else evaluate the model as it is (the base
        model for a fresh run, logged as "eval_base") and write eval.json."""
        published = Path(train_dir) / RUNNING
        self.public_path = published if public_only else None
        if public_only:
            from repoguard.training.randomness import secure_dir

            self.path = secure_dir(Path(train_dir) / "internal") / "eval.json"
        else:
            self.path = published
        self.history, self._pending_base = [], None
        # the killed run's history: eval.json holds the last *completed* run's, not this one's
        if resume and self.path.is_file():
            try:
                old = json.loads(self.path.read_text(encoding="utf-8")).get("history", [])
            except (OSError, ValueError):
                old = []
            self.history = [h for h in old if h.get("step", 1 << 62) <= start]
        if not self.history:
            res = self.base if self.base is not None and start == 0 else self.evaluator()
            self.history.append({"step": start, "slices": res})
            if start == 0:            # a resumed run without history scores its current model
                self._pending_base = res
            self._write()

    def curve(self, *, shift: int = 0, skip: int = 0) -> list[dict]:
        """The history as the report's curve: step (+ `shift`), public loss (`metrics.headline`)
        and per slice {loss, accuracy, exact_match}; the first `skip` entries left out."""
        keep = ("loss", "accuracy", "exact_match")
        return [{"step": h["step"] + shift, "loss": headline(h["slices"]),
                 "slices": {k: {m: v.get(m) for m in keep} for k, v in h["slices"].items()}}
                for h in self.history[skip:]]

    @property
    def latest(self) -> float | None:
        """The latest evaluation's headline loss (`metrics.headline`), or None."""
        return headline(self.history[-1]["slices"]) if self.history else None

    def after(self, step: int, *, last: bool) -> dict:
        """Evaluate after `step` when due (every N steps, or `last`); returns the keys to add to
        that step's log line ({} when nothing is due)."""
        extra = {}
        if self._pending_base is not None:
            extra["eval_base"], self._pending_base = self._pending_base, None
        if last or (self.every > 0 and step % self.every == 0):
            res = self.evaluator()
            self.history.append({"step": step, "slices": res})
            self._write()
            extra["eval"] = res
        return extra

    def _write(self) -> None:
        atomic_write_json(self.path, _doc(self.history, self.evaluator.info()))
        if self.public_path is not None:
            pub = [{"step": h["step"], "slices": _public(h["slices"])} for h in self.history]
            atomic_write_json(self.public_path, _doc(pub, _public(self.evaluator.info())))


def _public(by_slice: dict) -> dict:
    return {k: v for k, v in by_slice.items() if k == "public"}


def _doc(history: list[dict], sets: dict) -> dict:
    return {"version": 1, "history": history, "base": history[0]["slices"],
            "final": history[-1]["slices"], "final_step": history[-1]["step"], "sets": sets}
