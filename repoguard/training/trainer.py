"""The training loop: weighted Poisson batches → DP step → AdamW, with logs, checkpoints and resume.

Outputs under `train_dir` (`OUT/train/`):
    train_log.jsonl       one line per step: step, lr — plus, for runs with no guarantee to keep
                          (--no-dp, or unpublished measuring runs), batch_size (realised), loss,
                          tokens, seconds; written as train_log.jsonl.running and renamed into
                          place when the run completes (a killed run leaves the last one whole)
    internal/steps.jsonl  published private runs: the per-step batch statistics (batch_size, loss,
                          tokens, seconds), owner-only (0700/0600); for the operator, never publish
    checkpoints/step-N/   lora.safetensors, optimizer.pt, rng.pt, state.json (atomic, last 2 kept;
                          owner-only; deleted when the run completes unless `keep_final_checkpoint`)
    adapter/              PEFT adapter, written only after the run is recorded in the ledger
    privacy_report.json   σ, B, T, C, steps completed, randomness, per-secret achieved bound
    eval.json             with an evaluator: held-out metrics of the base model (step 0), every
                          N steps and at the end (`repoguard.evaluation.periodic`); the same
                          results ride on those steps' log lines ("eval", "eval_base"); written
                          as eval.json.running and renamed into place with the logs when the run
                          completes, so the published adapter, privacy report and eval.json
                          always describe one run (a run without an evaluator removes it then)

Why the per-step batch statistics stay out of what is published: the realised batch size
N_t = Σ_i 1[i ∈ batch_t] is not covered by the accountant. It is independent of the secret's
*content*, but conditioning on it moves each example's inclusion probability away from ρ_i (a
large N_t makes inclusion likelier), and the one-step divergence of the mixture is convex in that
probability, so (sizes, noisy gradients) together can leak more than the noisy gradients alone;
the batch loss and token count are un-noised functions of the batch (a one-example batch's loss
names the example), and per-step time tracks the batch size.

Randomness (`training.randomness`): a private run's sampler and noise are seeded from the OS
CSPRNG per run; `seed` seeds them only for --no-dp runs or with `insecure_reproducible` (tests).
Resume restores the LoRA parameters, AdamW state, sampler state, torch RNG and the noise
generator from the checkpoint, so a resumed run ends with bit-identical parameters to an
uninterrupted one (on CPU), whatever the seeds were.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from repoguard.core.artefacts import atomic_dir, atomic_write_json, atomic_write_text
from repoguard.core.errors import InputError
from repoguard.training.data import collate
from repoguard.training.ddp import Dist
from repoguard.training.dp_step import DPStep, PrivacyInvariantError
from repoguard.training.guard import LedgerGuard
from repoguard.training.randomness import (INSECURE, INSECURE_WARNING, KEEP_WARNING, SECURE, draw,
                                           secure_dir, secure_tree)
from repoguard.training.sampler import PoissonSampler, micro_batches, shard

log = logging.getLogger("repoguard")
INTERNAL = "internal"        # OUT/train/internal/: owner-only operator diagnostics, never published
NO_PRIVACY = ("NO PRIVACY: --no-dp run (no clipping, no noise); the plan's per-secret bounds do not apply "
              "to this adapter")


@dataclass(frozen=True)
class TrainSettings:
    """Run settings. `steps` None = the plan's T (fewer is allowed: it spends less).

    `seed` seeds the sampler of a --no-dp run; a private run's sampler and noise come from the OS
    CSPRNG unless `insecure_reproducible` (tests and audits only: the sampler then uses `seed`,
    the noise `noise_seed`, default seed + 0x5EED, and the run has no guarantee against whoever
    knows the seed). `keep_final_checkpoint`: keep the final checkpoint (it holds the generator states)
    when the run completes; by default every checkpoint is deleted then. `phase`: 0 for a
    single-phase run, 1 or 2 for the phases of a two-phase run (`training.phases`); checkpoints
    record it and a resume refuses a checkpoint of another phase. `base_model`: the digest of the
    embedded base the run trains (`base_model.write_manifest`); checkpoints record it and a resume
    refuses one made from another base."""

    lr: float = 1e-3
    micro_batch_size: int = 8
    checkpoint_every: int = 50
    steps: int | None = None
    private: bool = True
    seed: int = 0
    noise_seed: int | None = None
    keep_checkpoints: int = 2
    insecure_reproducible: bool = False
    keep_final_checkpoint: bool = False
    precision: str = "fp32"              # "fp32" | "bf16" (training.precision; resolved, not "auto")
    per_example: str = "auto"            # "auto" | "opacus" | "hooks" (dp_step.resolve_per_example)
    phase: int = 0
    base_model: str | None = None        # the embedded base copy's manifest digest (base_model.py)


def plan_fingerprint(plan) -> str:
    """SHA-256 over the plan's scalars and ρ: a checkpoint only resumes the plan it was made for."""
    h = hashlib.sha256()
    h.update(json.dumps([plan.sigma, plan.batch_size, plan.steps, plan.clip_norm]).encode())
    h.update(np.ascontiguousarray(plan.rho, dtype=np.float64).tobytes())
    return h.hexdigest()


def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step (atomic_dir never leaves partial ones)."""
    found = sorted(p for p in ckpt_dir.glob("step-*") if (p / "state.json").is_file())
    return found[-1] if found else None


def _save_checkpoint(ckpt_dir: Path, *, step: int, dp: DPStep, optimizer, sampler, gen, state: dict,
                     keep: int) -> None:
    from safetensors.torch import save_file

    secure_dir(ckpt_dir)        # secret material: owner-only before anything is written in it
    with atomic_dir(ckpt_dir / f"step-{step:08d}") as tmp:
        save_file({n: p.detach().cpu().contiguous() for n, p in zip(dp.names, dp.params)},
                  str(tmp / "lora.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        # A CUDA generator's state (Philox seed + offset) is saved like a CPU one; the device type is
        # kept so a resume on another kind of device fails instead of continuing another stream.
        rng = {"torch": torch.get_rng_state(), "noise": gen.get_state() if gen is not None else None,
               "noise_device": gen.device.type if gen is not None else None}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        torch.save(rng, tmp / "rng.pt")
        atomic_write_json(tmp / "state.json", {**state, "step": step, "sampler": sampler.state_dict()})
        secure_tree(tmp)
    for old in sorted(ckpt_dir.glob("step-*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _load_checkpoint(path: Path, *, dp: DPStep, optimizer, sampler, gen) -> dict:
    from safetensors.torch import load_file

    state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    tensors = load_file(str(path / "lora.safetensors"))
    with torch.no_grad():
        for n, p in zip(dp.names, dp.params):
            if n not in tensors:
                raise InputError(f"{path}: checkpoint lacks parameter {n} (different LoRA settings?)")
            p.copy_(tensors[n].to(p.device, p.dtype))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=dp.params[0].device))
    rng = torch.load(path / "rng.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    if gen is not None and rng["noise"] is not None:
        saved = rng.get("noise_device", "cpu")
        if saved != gen.device.type:
            raise InputError(f"{path}: the checkpoint's noise generator ran on {saved}, this run's on "
                             f"{gen.device.type}; resume on the same kind of device")
        gen.set_state(rng["noise"])
    sampler.load_state_dict(state["sampler"])
    return state


def _progress(total: int, start: int, enabled: bool):
    """A rich bar with steps/s, loss and ETA (rank 0, INFO logging, a terminal); else None."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from repoguard.core import progress as rg_progress

    if not enabled or not rg_progress.enabled():
        return None
    p = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                 TextColumn("{task.fields[rate]} steps/s"),
                 TextColumn("loss {task.fields[loss]}"), TextColumn("eval {task.fields[eval]}"),
                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    p.start()
    p.add_task("train", total=total, completed=start, rate="-", loss="-", eval="-")
    return p


def _eval_label(evals) -> str:
    """The progress line's latest held-out loss, or '-'."""
    v = evals.latest if evals is not None else None
    return f"{v:.3f}" if v is not None else "-"


def train(*, model, seqs: Sequence[np.ndarray], pad_id: int, plan, train_dir: str | Path,
          settings: TrainSettings, ledger: LedgerGuard | None, resume: bool = False,
          dist: Dist = Dist(), on_step: Callable[[int], None] | None = None,
          show_progress: bool = True, publish: bool = True, evaluator=None,
          report_extra: dict | None = None) -> dict:
    """Run (or resume) DP-SGD on `model`'s LoRA parameters over the plan's examples.

    Args:
        model: peft model on its device. seqs: token ids per plan example (plan order).
        pad_id: padding token. plan: `repoguard.planning.plan.Plan` (ρ, σ, B, T, C).
        train_dir: `OUT/train`. ledger: None only for tests of the bare loop (nothing published).
        resume: continue from the latest checkpoint. on_step: called after each finished step
            (tests raise from it to simulate a crash). publish: False = a dry run (benchmarks,
            tests of the loop): no ledger check or record, no adapter, no privacy report.
        evaluator: a held-out evaluation hook (`evaluation.periodic.PeriodicEval`), used on rank 0:
            `begin(train_dir, start=, resume=)` before the first step, `after(step, last=)` →
            keys added to that step's log line, `latest` → the loss the progress line shows.
        report_extra: keys added to the privacy report (a two-phase run's "phases").

    Returns the privacy report (also written to `privacy_report.json`).

    Raises:
        InputError: sizes disagree, --steps > T, no checkpoint to resume, checkpoint of another plan
            or randomness mode, a fixed noise seed without `insecure_reproducible`.
        PolicyError: ledger changed since the plan; a DP invariant is violated
            (`PrivacyInvariantError`); the ledger cannot be written.
    """
    train_dir = Path(train_dir)
    ckpt_dir = train_dir / "checkpoints"
    if len(seqs) != len(plan.rho):
        raise InputError(f"plan: {len(plan.rho)} examples but {len(seqs)} token sequences")
    total = plan.steps if settings.steps is None else int(settings.steps)
    if not 0 < total <= plan.steps:
        raise InputError(f"--steps: must be in 1..{plan.steps} (the plan's T), got {total}")
    if settings.checkpoint_every < 1 or settings.micro_batch_size < 0:
        raise InputError("--checkpoint-every must be ≥ 1 and --micro-batch-size ≥ 0 (0 = auto)")
    if abs(float(np.sum(plan.rho)) - plan.batch_size) > 1e-6 * plan.batch_size:
        # Still private (any public divisor is), but not the plan the accountant analysed.
        log.warning("plan: Σρ = %.6g differs from B = %g", float(np.sum(plan.rho)), plan.batch_size)
    # token counts for grouping micro-batches; a `TokenSeqs` tokenises only the rows sampled
    lengths = getattr(seqs, "lengths", None)
    if lengths is None:
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    held_out = plan.test_mask
    if np.any(plan.rho[held_out] != 0):
        raise PrivacyInvariantError("plan: a held-out example has ρ > 0; it would be trained on")
    try:
        rand = draw(private=settings.private, insecure_reproducible=settings.insecure_reproducible,
                    seed=settings.seed, noise_seed=settings.noise_seed, dist=dist)
    except ValueError as exc:
        raise InputError(f"train: {exc}") from None
    if rand.mode == INSECURE and publish and dist.is_main:
        log.warning(INSECURE_WARNING)
    sampler = PoissonSampler(plan.rho, seed=rand.sampler_seed)
    device = next(p for p in model.parameters() if p.requires_grad).device
    gen = None
    if settings.private:
        gen = torch.Generator(device=device)
        gen.manual_seed(rand.noise_seed)
    del rand                     # the seeds live on only inside the generators (and checkpoints)
    mode = _mode(settings)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.lr, weight_decay=0.0)
    dp = DPStep(model, clip_norm=plan.clip_norm, noise_multiplier=plan.sigma, batch_size=plan.batch_size,
                noise_generator=gen, private=settings.private, dist=dist, precision=settings.precision,
                per_example=settings.per_example)
    try:
        micro = _micro_batch_size(settings, dp=dp, seqs=seqs, pad_id=pad_id, device=device, plan=plan)
        start, run_id = _resume_and_check(plan, settings, ledger, ckpt_dir=ckpt_dir, dp=dp, optimizer=optimizer,
                                          sampler=sampler, gen=gen, resume=resume, publish=publish, total=total)
    except BaseException:
        dp.close()
        raise
    fingerprint = plan_fingerprint(plan)
    if dist.is_main:
        _rewrite_log(train_dir / "train_log.jsonl", keep_until=start if resume else 0)
        internal = train_dir / INTERNAL / "steps.jsonl"
        if internal.is_file() or _running(internal).is_file():
            _rewrite_log(internal, keep_until=start if resume else 0)
        if not resume:
            shutil.rmtree(ckpt_dir, ignore_errors=True)
    state = {"plan": fingerprint, "private": settings.private, "run_id": run_id, "randomness": mode,
             "phase": settings.phase, "base_model": settings.base_model}
    recording = publish and settings.private and dist.is_main
    # Steps already recorded for this run (a crash recorded what it computed; a resume recomputes
    # those steps with the same randomness, so they are not spent twice, and never un-spent).
    recorded = ledger.recorded_steps(run_id) if recording and resume else 0

    def record(steps: int, status: str) -> None:
        nonlocal recorded
        recorded = max(recorded, steps)
        ledger.record(plan, run_id=run_id, steps_completed=recorded, status=status, randomness=mode)

    old_term = _sigterm_as_interrupt()
    bar = _progress(total, start, show_progress and dist.is_main)
    steps_done, t0 = start, time.perf_counter()
    split = settings.private and publish        # batch statistics go to the owner-only log
    log_fh = open(_running(train_dir / "train_log.jsonl"), "a", encoding="utf-8") if dist.is_main else None
    internal_fh = None
    if split and dist.is_main:
        secure_dir(train_dir / INTERNAL)
        fd = os.open(_running(train_dir / INTERNAL / "steps.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        internal_fh = os.fdopen(fd, "a", encoding="utf-8")
    evals = evaluator if dist.is_main else None
    if evals is not None:
        evals.begin(train_dir, start=start, resume=resume, public_only=split)
    if bar is not None:
        bar.update(bar.task_ids[0], eval=_eval_label(evals))
    try:
        for step in range(start, total):
            t_step = time.perf_counter()
            batch = sampler.sample()
            if held_out[batch].any():      # ρ = 0 makes this impossible; checked, not assumed
                raise PrivacyInvariantError(f"step {step + 1}: a held-out example was sampled")
            mine = shard(batch, dist.rank, dist.world_size)
            dp.begin()
            for mb in micro_batches(mine, micro, lengths):
                dp.accumulate(collate([seqs[i] for i in mb], pad_id=pad_id))
            stats = dp.finish()
            dp.apply(optimizer, public_batch_size=plan.batch_size)
            steps_done = step + 1
            if log_fh is not None:
                n = stats["n_examples"]
                row = {"step": steps_done, "lr": optimizer.param_groups[0]["lr"]}
                batch = {"batch_size": n, "loss": stats["loss_sum"] / n if n else None,
                         "tokens": stats["n_tokens"], "seconds": round(time.perf_counter() - t_step, 6)}
                if evals is not None:
                    batch.update(evals.after(steps_done, last=steps_done == total))
                if internal_fh is not None:
                    internal_fh.write(json.dumps({**row, **batch}) + "\n")
                    internal_fh.flush()
                    # The published log keeps only the public slice: the secret-tied held-out
                    # slices are functions of secret text that the accountant does not count.
                    row.update({k: {"public": v["public"]} for k, v in batch.items()
                                if k in ("eval", "eval_base") and "public" in v})
                log_fh.write(json.dumps(row if split else {**row, **batch}) + "\n")
                log_fh.flush()
            if steps_done % settings.checkpoint_every == 0 or steps_done == total:
                if recording and steps_done < total:
                    record(steps_done, "running")       # before the checkpoint reaches the disk
                if dist.is_main:
                    _save_checkpoint(ckpt_dir, step=steps_done, dp=dp, optimizer=optimizer, sampler=sampler,
                                     gen=gen, state=state, keep=settings.keep_checkpoints)
                dist.barrier()
            if bar is not None:
                rate = (steps_done - start) / max(time.perf_counter() - t0, 1e-9)
                loss = stats["loss_sum"] / stats["n_examples"] if stats["n_examples"] else float("nan")
                bar.update(bar.task_ids[0], completed=steps_done, rate=f"{rate:.2f}", loss=f"{loss:.3f}",
                           eval=_eval_label(evals))
            if on_step is not None:
                on_step(steps_done)
    except BaseException as exc:
        # An interrupted run (Ctrl-C, SIGTERM) keeps its checkpoints for --resume; a failed run, or
        # one whose record the ledger refuses, never resumes: its checkpoints (sampler and noise
        # generator state of its steps) are deleted (issue 41 item 3).
        resumable = isinstance(exc, KeyboardInterrupt)
        try:
            if recording and steps_done > start:
                # Count everything computed, checkpointed or not.
                record(steps_done, "interrupted" if resumable else "failed")
        except BaseException:
            resumable = False
            raise
        finally:
            if not resumable and dist.is_main:
                _discard_checkpoints(ckpt_dir)
        raise
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        if log_fh is not None:
            log_fh.close()
        if internal_fh is not None:
            internal_fh.close()
        if bar is not None:
            bar.stop()
        dp.close()

    report = _privacy_report(plan, settings, run_id=run_id, steps_completed=total, resumed_from=start,
                             randomness=mode)
    report.update(report_extra or {})
    if publish and dist.is_main:
        if settings.private:   # recorded *before* the adapter exists: no unrecorded release
            try:
                record(total, "completed")
                if ledger.recorded_steps(run_id) != total:
                    raise PrivacyInvariantError(f"{ledger.path}: run {run_id} is not recorded as completed; "
                                                "the adapter is not published")
            except BaseException:
                _discard_checkpoints(ckpt_dir)      # a refused run leaves no generator state behind
                raise
            report["ledger_head"] = ledger.head     # `plan` refuses a ledger that lacks it (issue 32 J)
        elif ledger is not None:
            log.warning("--no-dp: the adapter carries no privacy guarantee; nothing recorded in the ledger")
        with atomic_dir(train_dir / "adapter") as tmp:
            # Base weights live in base_model/ (or the user's --model): the adapter holds LoRA only.
            model.save_pretrained(tmp, save_embedding_layers=False)
        atomic_write_json(train_dir / "privacy_report.json", report)
    if dist.is_main:
        if evals is None:      # an earlier run's held-out metrics would describe another adapter
            for f in (train_dir / "eval.json", _running(train_dir / "eval.json")):
                f.unlink(missing_ok=True)
        # the run is complete: publish its logs and held-out metrics beside its adapter
        for name in ("train_log.jsonl", f"{INTERNAL}/steps.jsonl", "eval.json"):
            if _running(train_dir / name).is_file():
                os.replace(_running(train_dir / name), train_dir / name)
        _retire_checkpoints(ckpt_dir, keep=settings.keep_final_checkpoint)
    dist.barrier()
    return report


def _micro_batch_size(settings: TrainSettings, *, dp: DPStep, seqs, pad_id: int, device, plan) -> int:
    """The configured micro-batch size, or (0 = auto) one probed from free CUDA memory
    (`memory.probe_micro_batch`) with the run's longest sequence; `memory.CPU_DEFAULT` on the CPU.
    An auto size is re-probed on resume: pin it for a bit-identical resume."""
    from repoguard.training.memory import CPU_DEFAULT, batch_cap, probe_micro_batch

    if settings.micro_batch_size > 0:
        return settings.micro_batch_size
    if torch.device(device).type != "cuda" or not seqs:
        return CPU_DEFAULT
    if hasattr(seqs, "fetch"):      # a `TokenSeqs`: every row in one tokenizer call
        seqs.fetch(range(len(seqs)))
    longest = max(seqs, key=len)

    def run_one(n: int) -> None:     # forward + backward + clipping, result discarded
        with torch.random.fork_rng(devices=[device]):
            batch = collate([longest] * n, pad_id=pad_id)
            if dp.private:
                dp.clipped_per_example(batch)
            else:
                dp._forward_backward(batch)
            for p in dp.params:
                p.grad = None

    n = probe_micro_batch(run_one, device=device, cap=batch_cap(plan.batch_size))
    log.info("micro-batch size %d (auto, from free GPU memory at length %d)", n, len(longest))
    return n


def _mode(settings: TrainSettings) -> str:
    """The run's randomness as recorded: SECURE, INSECURE or "seeded" (--no-dp)."""
    if not settings.private:
        return "seeded"
    return INSECURE if settings.insecure_reproducible else SECURE


def _discard_checkpoints(ckpt_dir: Path) -> None:
    """Delete every checkpoint of a run that failed or was refused: they hold the sampler and
    noise generator states of steps no completed run accounts for, and nothing may resume them."""
    for old in sorted(ckpt_dir.glob("step-*")) if ckpt_dir.is_dir() else ():
        shutil.rmtree(old, ignore_errors=True)


def _retire_checkpoints(ckpt_dir: Path, *, keep: bool) -> None:
    """A completed run's checkpoints hold the generator states of released steps: delete them all,
    or (`keep`) all but the final one, with a warning."""
    if not ckpt_dir.exists():
        return
    if not keep:
        shutil.rmtree(ckpt_dir)
        return
    for old in sorted(ckpt_dir.glob("step-*"))[:-1]:
        shutil.rmtree(old, ignore_errors=True)
    log.warning(KEEP_WARNING.format(path=ckpt_dir))


def _resume_and_check(plan, settings: TrainSettings, ledger, *, ckpt_dir: Path, dp: DPStep, optimizer, sampler,
                      gen, resume: bool, publish: bool, total: int) -> tuple[int, str]:
    """(start step, run id): a new run, or the latest checkpoint restored; then the ledger check."""
    fingerprint = plan_fingerprint(plan)
    start, run_id = 0, f"train-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"
    if resume:
        ck = latest_checkpoint(ckpt_dir)
        if ck is None:
            raise InputError(f"{ckpt_dir}: no checkpoint to resume from")
        state = _load_checkpoint(ck, dp=dp, optimizer=optimizer, sampler=sampler, gen=gen)
        if state["plan"] != fingerprint or state["private"] != settings.private:
            raise InputError(f"{ck}: checkpoint belongs to another plan or mode; start afresh "
                             "(delete the checkpoints) or re-plan")
        if state.get("randomness", SECURE if settings.private else "seeded") != _mode(settings):
            raise InputError(f"{ck}: checkpoint was made with randomness {state.get('randomness')!r}, "
                             f"this run asks for {_mode(settings)!r}; resume with the same "
                             "--insecure-reproducible setting or start afresh")
        if int(state.get("phase", 0)) != settings.phase:
            raise InputError(f"{ck}: checkpoint of {_phase_name(int(state.get('phase', 0)))}, this run is "
                             f"{_phase_name(settings.phase)}; resume with the same [training] phases "
                             "or start afresh")
        if state.get("base_model") and state["base_model"] != settings.base_model:
            raise InputError(f"{ck}: checkpoint was trained from another base model than "
                             f"{ckpt_dir.parent / 'base_model'} now holds; start afresh without --resume")
        start, run_id = int(state["step"]), state["run_id"]    # same run: its last ledger entry counts
        if start >= total:
            raise InputError(f"{ck}: already at step {start} of {total}; nothing to resume")
    if publish and settings.private:
        if ledger is None:
            raise InputError("train: a private run needs the privacy ledger to publish an adapter")
        ledger.check(plan, own_run=run_id if resume else None)
    return start, run_id


def _phase_name(phase: int) -> str:
    return "a single-phase run" if phase == 0 else f"phase {phase} of a two-phase run"


def _sigterm_as_interrupt():
    """Schedulers stop jobs with SIGTERM: turn it into KeyboardInterrupt so the run records what
    it spent before exiting. Returns the previous handler (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    return signal.signal(signal.SIGTERM, handler)


def _running(path: Path) -> Path:
    """Where a log is written while its run is under way (`path` + ".running"): the published
    `path` is the last completed run's until this run completes and replaces it in one rename,
    so a run killed early leaves it whole."""
    return path.with_name(path.name + ".running")


def _rewrite_log(path: Path, *, keep_until: int) -> None:
    """Start the running log of `path` (`_running`): the lines of steps ≤ keep_until (the resumed
    checkpoint) of the interrupted run's running log (or, from older versions, of `path`), none
    for a new run. `path` itself is not touched. The owner-only file keeps its 0600:
    atomic_write_text writes through mkstemp."""
    lines = []
    src = _running(path) if _running(path).is_file() else path
    if keep_until and src.is_file():
        lines = [ln for ln in src.read_text(encoding="utf-8").splitlines()
                 if ln.strip() and json.loads(ln)["step"] <= keep_until]
    atomic_write_text(_running(path), "".join(ln + "\n" for ln in lines))


def _privacy_report(plan, settings: TrainSettings, *, run_id: str, steps_completed: int, resumed_from: int,
                    randomness: str) -> dict:
    private = settings.private
    insecure = randomness == INSECURE
    guarantee = ("per-secret bounds of the plan (T steps; fewer steps spend less)" if private
                 else NO_PRIVACY)
    if insecure:
        guarantee = ("none against anyone who knows the seed: --insecure-reproducible derived the "
                     "batches and the noise from it (tests only); " + guarantee)
    return {
        **({} if private else {"warning": NO_PRIVACY}),
        "run_id": run_id, "private": private, "randomness": randomness, "insecure_reproducible": insecure,
        "sigma": plan.sigma if private else 0.0, "batch_size": plan.batch_size, "steps": plan.steps,
        "steps_completed": steps_completed, "resumed_from": resumed_from, "clip_norm": plan.clip_norm,
        "noise_std_per_coordinate": plan.sigma * plan.clip_norm / plan.batch_size if private else 0.0,
        "accountant": plan.accountant, "adjacency": plan.adjacency,
        "guarantee": guarantee,
        "secrets": [{"id": s.id, "p": s.p, "r": s.r,
                     "achieved_bound": s.achieved_bound if private else None,
                     "binding": s.binding if private else "none (--no-dp)"} for s in plan.secrets],
        "undetected_floor": _floor_report(plan, private),
    }


def _floor_report(plan, private: bool) -> dict | None:
    """The undetected-secret floor this run gives (issue 26): the plan's target and achieved
    bound; the opt-out and --no-dp are said in words (`note`)."""
    fl = (getattr(plan, "extra", None) or {}).get("undetected_floor")
    if not fl or (plan.extra or {}).get("phase") == 1:
        return None
    rec = {k: fl.get(k) for k in ("k", "p", "r", "enabled", "achieved_bound", "sigma_floor", "meets_r")}
    if not private:
        rec.update(achieved_bound=1.0, meets_r=False, note="--no-dp: no bound for a secret nobody declared")
    elif not fl.get("enabled", True):
        rec["note"] = ("UNDETECTED FLOOR OFF (opt-out): a secret nobody declared or detected gets "
                       f"bound {fl.get('achieved_bound', 1.0):.3g}, no target")
    return rec
