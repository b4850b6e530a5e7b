"""Where a training run's randomness comes from, and how the material that holds it is kept.

The accountant's bound assumes two things an adversary must not know [Hush §4; Abadi et al. 2016
§3.1]: which examples each Poisson batch holds (amplification by subsampling, the mixture over
M_j in the dominating pair) and the Gaussian noise added to each clipped sum. Both come from
pseudo-random generators, so both generators' seeds and states are secret material:

* a private run seeds the sampler's PCG64 stream (128 bits) and the noise generator (63 bits)
  from the operating system's CSPRNG (`secrets.randbits`), afresh for every run. `[training]
  seed` / `--seed` seed the model and LoRA initialisation (public: the base model and the
  adapter are released anyway) and `--no-dp` runs, never a private run's sampler or noise;
* under torchrun rank 0 draws the sampler seed and broadcasts it (every rank must draw the same
  logical batches); only rank 0 draws noise, from its own secret seed;
* a reproducible private run exists only for tests and audits (`insecure_reproducible`,
  `--insecure-reproducible`): sampler and noise then derive from `seed`, which voids the
  guarantee against anyone who knows or guesses that seed. It logs a warning and is recorded as
  such in `privacy_report.json`, the ledger entry and the report;
* checkpoints hold both generators' states (a resume must continue them bit for bit): they are
  written owner-only (directories 0700, files 0600), never inside `adapter/`, and deleted when
  the run completes unless explicitly kept (`keep_final_checkpoint`, with a warning).
"""
from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("repoguard")

SECURE = "os-entropy"                   # a private run's default
INSECURE = "insecure-reproducible"      # tests and audits only: no guarantee against the seed's holder
SEEDED = "seeded"                       # --no-dp: nothing to protect
NOISE_OFFSET = 0x5EED                   # insecure runs: noise seed = seed + this (sampler: seed)

INSECURE_WARNING = ("--insecure-reproducible: the Poisson batches and the DP noise derive from the "
                    "seed; anyone who knows or guesses it can reproduce the batches and subtract the "
                    "noise, so this run carries NO privacy guarantee. For tests only; never publish "
                    "its adapter")
KEEP_WARNING = ("--keep-checkpoint: {path} holds the sampler's and the noise generator's state; "
                "whoever reads it can recompute every batch and subtract the noise. Keep it "
                "owner-only and never publish it; delete it when it is no longer needed")


@dataclass(frozen=True)
class RunRandomness:
    """The seeds of one run. `mode`: SECURE, INSECURE or SEEDED. `sampler_seed`: PCG64 seed of
    the Poisson sampler (up to 128 bits). `noise_seed`: torch.Generator seed of the DP noise
    (None for --no-dp). Never written anywhere but a checkpoint (as generator states)."""

    mode: str
    sampler_seed: int
    noise_seed: int | None


def draw(*, private: bool, insecure_reproducible: bool, seed: int, noise_seed: int | None = None,
         dist=None) -> RunRandomness:
    """This run's seeds.

    Args:
        private: a DP run (else --no-dp: `seed` seeds the sampler, no noise).
        insecure_reproducible: derive a private run's sampler from `seed` and its noise from
            `noise_seed` (default `seed + NOISE_OFFSET`) — tests and audits only.
        seed: `[training] seed` / `--seed`. noise_seed: see above; refused without the flag.
        dist: `training.ddp.Dist`; rank 0's secure sampler seed is broadcast to every rank.

    Raises:
        ValueError: `noise_seed` given for a private run without `insecure_reproducible` (a fixed
            noise seed would make the noise predictable).
    """
    if not private:
        return RunRandomness(SEEDED, int(seed), None)
    if insecure_reproducible:
        return RunRandomness(INSECURE, int(seed), int(seed) + NOISE_OFFSET if noise_seed is None else int(noise_seed))
    if noise_seed is not None:
        raise ValueError("a fixed noise seed makes the DP noise predictable; it is accepted only "
                         "with insecure_reproducible (tests)")
    sampler_seed = secrets.randbits(128)
    if dist is not None and dist.world_size > 1:
        sampler_seed = int(dist.broadcast_object(sampler_seed))
    return RunRandomness(SECURE, sampler_seed, secrets.randbits(63))


def secure_dir(path: str | os.PathLike) -> Path:
    """Create `path` (and parents) and make it owner-only (0700); returns it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def secure_tree(path: str | os.PathLike) -> None:
    """Make every directory under `path` (itself included) 0700 and every file 0600."""
    path = Path(path)
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700)
        for f in files:
            os.chmod(os.path.join(root, f), 0o600)
