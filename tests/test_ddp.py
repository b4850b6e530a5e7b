"""DP-SGD under torchrun: 2 CPU processes (gloo) reproduce the single-process run.

Run directly by torchrun (`__main__` below) as the worker; pytest launches it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from repoguard.planning.plan import Plan
from repoguard.training.data import tokenize
from repoguard.training.ddp import Dist, init_from_env, shutdown, sync_parameters
from repoguard.training.dp_step import flat_params
from repoguard.training.model import TinyConfig, apply_lora, build_tiny_model
from repoguard.training.trainer import TrainSettings, train

TINY = TinyConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                  max_position=64)
TEXTS = [f"class Job{i}:\n    def run(self):\n        return {i} ** 2\n" for i in range(12)]
# B = 1.5 over 12 examples: many logical batches have 0 or 1 example, so one rank is often empty.
# Comparing with a single process needs the same batches and noise: the test-only flag.
SETTINGS = TrainSettings(lr=1e-2, micro_batch_size=2, checkpoint_every=3, seed=4, noise_seed=9,
                         insecure_reproducible=True)


def _plan() -> Plan:
    w = np.linspace(0.5, 1.0, len(TEXTS))
    b = 1.5
    return Plan(sigma=0.7, batch_size=b, steps=8, clip_norm=0.3, c=1.0, cap="kl", accountant="best",
                adjacency="add-remove", example_ids=[f"e{i}" for i in range(len(TEXTS))], w=w,
                rho=b * w / w.sum())


def run_once(train_dir: Path, dist: Dist, settings: TrainSettings = SETTINGS) -> torch.Tensor:
    model, tok = build_tiny_model(TEXTS, seed=2, size=TINY)
    model = apply_lora(model, r=4, alpha=8, dropout=0.0, seed=2)
    params = [p for p in model.parameters() if p.requires_grad]
    sync_parameters(params, dist)
    train(model=model, seqs=tokenize(TEXTS, tok, max_length=32), pad_id=tok.pad_token_id, plan=_plan(),
          train_dir=train_dir, settings=settings, ledger=None, publish=False, dist=dist,
          show_progress=False)
    return flat_params(params)


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for attempt in range(2):
        run_dir = tmp_path / f"launch{attempt}"      # a fresh directory (ledger, checkpoints) per launch
        run_dir.mkdir()
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
             __file__, str(run_dir)], env=env, capture_output=True, text=True, timeout=1800)
        # gloo's worker threads sometimes abort a rank ("terminate called without an active
        # exception", SIGABRT) when the process group is torn down, after every output is written
        # (seen at load 3–10; the fresh-clone CI run of session 9 hit it on both launches): that is
        # the transport's teardown, not repoguard. A launch counts when both ranks finished their
        # work (each writes `rank{r}_done` last, before the teardown); every assertion below runs
        # on that launch's output.
        finished = all((run_dir / f"rank{r}_done").exists() for r in (0, 1))
        teardown_abort = "terminate called without an active exception" in proc.stderr
        if proc.returncode == 0 or (finished and teardown_abort):
            break
    assert proc.returncode == 0 or (finished and teardown_abort), proc.stderr[-3000:]
    r0, r1 = torch.load(run_dir / "rank0.pt"), torch.load(run_dir / "rank1.pt")
    assert torch.equal(r0, r1)                                # ranks never diverge
    single = run_once(tmp_path / "single", Dist())
    torch.testing.assert_close(r0, single, rtol=1e-4, atol=1e-6)   # same noise, same batches
    log = (run_dir / "ddp" / "train_log.jsonl").read_text().splitlines()
    sizes = [int(x.split('"batch_size": ')[1].split(",")[0]) for x in log]
    assert len(sizes) == 8 and min(sizes) <= 1               # empty / one-example batches occurred
    assert not (run_dir / "ddp" / "adapter").exists()       # dry run: nothing published
    # The default (OS-entropy) randomness: rank 0's sampler seed is broadcast, ranks still agree.
    s0, s1 = torch.load(run_dir / "rank0_secure.pt"), torch.load(run_dir / "rank1_secure.pt")
    assert torch.equal(s0, s1) and not torch.equal(s0, r0)
    seeds = [(run_dir / f"rank{r}_seeds.txt").read_text().split() for r in (0, 1)]
    assert seeds[0][0] == seeds[1][0]                        # one sampler seed for every rank …
    assert seeds[0][1] != seeds[1][1]                        # … drawn afresh, noise seeds are per rank


if __name__ == "__main__":
    torch.set_num_threads(1)
    d = init_from_env(backend="gloo")
    out = Path(sys.argv[1])
    final = run_once(out / "ddp", d)
    torch.save(final, out / f"rank{d.rank}.pt")
    secure = TrainSettings(lr=1e-2, micro_batch_size=2, checkpoint_every=3, seed=4)
    torch.save(run_once(out / "ddp_secure", d, secure), out / f"rank{d.rank}_secure.pt")
    from repoguard.training.randomness import draw

    r = draw(private=True, insecure_reproducible=False, seed=4, dist=d)
    (out / f"rank{d.rank}_seeds.txt").write_text(f"{r.sampler_seed} {r.noise_seed}")
    (out / f"rank{d.rank}_done").write_text("ok")
    shutdown(d)
    sys.stdout.flush()
    os._exit(0)     # skip interpreter teardown: gloo's threads may abort in static destructors
