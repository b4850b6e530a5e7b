"""Issue 19: secret batches and noise by default, the test-only reproducible flag, checkpoints as
secret material, and the refused grouped "replace" adjacency — real repo, real tiny model."""
from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from repoguard.core.errors import InputError
from repoguard.training import randomness
from repoguard.training.data import tokenize
from repoguard.training.dp_step import flat_params
from repoguard.training.sampler import PoissonSampler
from repoguard.training.trainer import TrainSettings, latest_checkpoint, train

from test_train import TEXTS, lora_params, make_plan, tiny


@pytest.fixture
def drawn(monkeypatch):
    """Spy on the OS randomness the trainer draws (the real `secrets.randbits`, recorded)."""
    seen: list[int] = []
    real = randomness.secrets.randbits

    def spy(k):
        v = real(k)
        seen.append(v)
        return v
    monkeypatch.setattr(randomness, "secrets", SimpleNamespace(randbits=spy))   # this module's draws only
    return seen


def _needles(seeds: list[int], rho: np.ndarray, steps: int) -> list[bytes]:
    """Byte strings that betray a generator: each seed (decimal, little-endian) and every PCG64
    state the sampler of each seed goes through (decimal, as JSON would write it)."""
    out = []
    for s in seeds:
        out += [str(s).encode(), s.to_bytes(16 if s >= 2 ** 64 else 8, "little")]
        if s >= 2 ** 64:                                 # a sampler seed: replay its stream
            smp = PoissonSampler(rho, seed=s)
            for _ in range(steps + 1):
                st = smp.state_dict()["bit_generator"]["state"]
                out += [str(st["state"]).encode(), str(st["inc"]).encode()]
                smp.sample()
    return out


def _holders(root: Path, needles: list[bytes], skip: Path | None = None) -> list[str]:
    found = []
    for f in sorted(root.rglob("*")):
        if f.is_file() and not (skip is not None and skip in f.parents):
            data = f.read_bytes()
            if any(n in data for n in needles):
                found.append(str(f.relative_to(root)))
    return found


def test_crash_resume_is_bit_identical_with_secret_randomness_and_checkpoints_are_owner_only(tmp_path, drawn):
    plan = make_plan()
    model, tok = tiny()
    seqs = tokenize(TEXTS, tok, max_length=32)
    settings = TrainSettings(lr=5e-3, micro_batch_size=2, checkpoint_every=2)     # the default: OS entropy

    def crash(step):
        if step == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(model=model, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / "a",
              settings=settings, ledger=None, publish=False, on_step=crash, show_progress=False)
    assert len(drawn) == 2                              # sampler (128 bits) and noise (63 bits)
    ck_dir = tmp_path / "a" / "checkpoints"
    assert stat.S_IMODE(ck_dir.stat().st_mode) == 0o700
    files = [f for f in ck_dir.rglob("*") if f.is_file()]
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert all(stat.S_IMODE(d.stat().st_mode) == 0o700 for d in ck_dir.rglob("*") if d.is_dir())
    needles = _needles(drawn, plan.rho, plan.steps)
    # The check can fail: the interrupted run's checkpoint does hold the generator states.
    assert _holders(tmp_path / "a", needles) and all(h.startswith("checkpoints/") for h in _holders(tmp_path / "a", needles))

    shutil.copytree(tmp_path / "a", tmp_path / "b")
    finals = []
    for d in ("a", "b"):                                # two resumes of one checkpoint: fresh OS seeds
        m, _ = tiny()                                   # are drawn, but the checkpoint's states win
        report = train(model=m, seqs=seqs, pad_id=tok.pad_token_id, plan=plan, train_dir=tmp_path / d,
                       settings=settings, ledger=None, resume=True, publish=False, show_progress=False)
        assert report["resumed_from"] == 2 and report["randomness"] == "os-entropy"
        finals.append(flat_params(lora_params(m)))
    assert torch.equal(finals[0], finals[1])
    def rows(d):
        return [{k: v for k, v in json.loads(x).items() if k != "seconds"}
                for x in (tmp_path / d / "train_log.jsonl").read_text().splitlines()]
    assert rows("a") == rows("b") and len(rows("a")) == 6          # same batches after the resume
    for d in ("a", "b"):                                # completed: no generator state left anywhere
        assert not (tmp_path / d / "checkpoints").exists()
        assert _holders(tmp_path / d, _needles(drawn, plan.rho, plan.steps)) == []


def _small_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "src" / "alpha").mkdir(parents=True)
    (repo / "src" / "web").mkdir(parents=True)
    for i in range(14):
        (repo / "src" / "web" / f"m{i}.py").write_text(f"import os\n\ndef web_{i}(x):\n    return x + {i}\n")
    (repo / "src" / "alpha" / "signals.py").write_text("def signal(p):\n    return p * 0.42\n")
    (repo / "repoguard.toml").write_text('[[secret]]\nid = "alpha"\npaths = ["src/alpha/**"]\np = 1e-4\nr = 0.05\n')
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    return repo


@pytest.mark.slow
def test_default_runs_differ_the_test_flag_reproduces_and_is_recorded(tmp_path, drawn, caplog):
    from repoguard.accounting.ledger import read_entries
    from repoguard.cli import main
    from repoguard.planning.plan import load_plan

    repo = _small_repo(tmp_path)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "3", "--steps", "6", "--c", "1", str(repo)]) == 0
    plan = load_plan(repo / ".repoguard")

    def run(name, *flags):
        out = tmp_path / name
        shutil.copytree(repo / ".repoguard", out)       # same plan, its own ledger
        before = len(drawn)
        assert main(["train", "-q", "--out", str(out), "--max-length", "48", "--checkpoint-every", "2",
                     "--seed", "7", *flags, str(repo)]) == 0
        t = out / "train"
        sizes = [json.loads(x)["batch_size"] for x in (t / "internal" / "steps.jsonl").read_text().splitlines()]
        return t, sizes, drawn[before:]

    (a, sa, da), (b, sb, db) = run("a"), run("b")
    assert sa != sb                                     # same plan, same --seed: different batches
    for t, d in ((a, da), (b, db)):
        assert len(d) == 2
        report = json.loads((t / "privacy_report.json").read_text())
        assert report["randomness"] == "os-entropy" and report["insecure_reproducible"] is False
        assert {e["randomness"] for e in read_entries(t.parent / "ledger.jsonl")} == {"os-entropy"}
        # Published log: no batch statistics; the owner-only internal log has them.
        # Held-out evaluations keep only their public slice (secret-tied slices stay internal).
        for x in (t / "train_log.jsonl").read_text().splitlines():
            row = json.loads(x)
            assert {"step", "lr"} <= set(row) <= {"step", "lr", "eval", "eval_base"}
            assert all(set(row[k]) == {"public"} for k in ("eval", "eval_base") if k in row)
        assert stat.S_IMODE((t / "internal").stat().st_mode) == 0o700
        assert stat.S_IMODE((t / "internal" / "steps.jsonl").stat().st_mode) == 0o600
        pub = json.loads((t / "eval.json").read_text())
        full = json.loads((t / "internal" / "eval.json").read_text())
        assert all(set(h["slices"]) == {"public"} for h in pub["history"]) and set(pub["sets"]) == {"public"}
        assert [h["slices"]["public"] for h in full["history"]] == [h["slices"]["public"] for h in pub["history"]]
        assert stat.S_IMODE((t / "internal" / "eval.json").stat().st_mode) == 0o600
        # Nothing under the output directory holds generator state once the run completed.
        assert not (t / "checkpoints").exists()
        assert _holders(t.parent, _needles(d, plan.rho, plan.steps)) == []

    caplog.clear()
    (c, sc, dc), (d_, sd, dd) = run("c", "--insecure-reproducible"), run("d", "--insecure-reproducible")
    assert dc == dd == [] and sc == sd                  # no OS draw; identical batches and adapter
    assert (c / "adapter" / "adapter_model.safetensors").read_bytes() == \
        (d_ / "adapter" / "adapter_model.safetensors").read_bytes()
    assert "NO privacy guarantee" in caplog.text
    report = json.loads((c / "privacy_report.json").read_text())
    assert report["insecure_reproducible"] is True and "none against anyone" in report["guarantee"]
    assert {e["randomness"] for e in read_entries(c.parent / "ledger.jsonl")} == {"insecure-reproducible"}
    from repoguard.report import build_report

    build_report(c.parent, repo_name="repo")
    assert "INSECURE" in (c.parent / "report" / "report.html").read_text()

    # --keep-checkpoint keeps the final one (owner-only, with a warning), outside adapter/.
    caplog.clear()
    e, _, _ = run("e", "--keep-checkpoint")
    kept = latest_checkpoint(e / "checkpoints")
    assert kept is not None and "--keep-checkpoint" in caplog.text and not (e / "adapter" / "checkpoints").exists()
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in kept.iterdir())


def test_a_fixed_noise_seed_needs_the_test_flag(tmp_path):
    model, tok = tiny()
    with pytest.raises(InputError, match="predictable"):
        train(model=model, seqs=tokenize(TEXTS, tok, max_length=32), pad_id=tok.pad_token_id, plan=make_plan(),
              train_dir=tmp_path, settings=TrainSettings(noise_seed=3), ledger=None, publish=False,
              show_progress=False)


@pytest.mark.slow
def test_grouped_replace_adjacency_is_refused_and_why(tmp_path):
    """The example of issue 19: 10 examples, ρ = 0.3, σ = 3, T = 1, p = 0.2. The replace pair
    (Σπ N(2m), N(0)) reports less than a *lower* bound on the true pair (Σπ N(m), Σπ N(−m))
    from dp_accounting (optimistic PLD of a discretised output: post-processing only lowers it);
    so such plans are refused, while single-example secrets still plan."""
    import scipy.sparse as sp
    from dp_accounting.pld import privacy_loss_distribution as pldm
    from scipy.stats import binom, norm

    from repoguard.accounting.bounds import reconstruction_bound
    from repoguard.analyzers.incidence import Incidence, Secret
    from repoguard.planning.plan import build_plan

    n, rho, sigma, p = 10, 0.3, 3.0, 0.2
    reported = reconstruction_bound([rho] * n, sigma, 1, p, "best", adjacency="replace")
    assert reported == pytest.approx(0.8023, abs=2e-3)
    pi = binom.pmf(np.arange(n + 1), n, rho)
    x = np.linspace(-30, 40, 2001)
    edges = np.concatenate([[-np.inf], (x[1:] + x[:-1]) / 2, [np.inf]])
    mass = [sum(pi[m] * np.diff(norm.cdf(edges, loc=sgn * m, scale=sigma)) for m in range(n + 1)) for sgn in (1, -1)]
    with np.errstate(divide="ignore"):
        pld = pldm.from_two_probability_mass_functions(dict(enumerate(np.log(mass[1]))), dict(enumerate(np.log(mass[0]))),
                                                       pessimistic_estimate=False, value_discretization_interval=1e-3)
    eps = np.arange(0, 4, 2e-3)
    truth_lower = np.min(np.exp(eps) * p + np.array([pld._pmf_remove.get_delta_for_epsilon(e) for e in eps]))
    assert truth_lower > reported + 0.02

    ids = [f"ex{i}" for i in range(20)]
    m = np.zeros((20, 2), dtype=bool)
    m[:10, 0] = True                                    # "grouped": 10 examples
    m[10, 1] = True                                     # "single": one example
    inc = Incidence(example_ids=ids, secrets=[Secret("grouped", "declared", 1e-4, 0.05),
                                              Secret("single", "declared", 1e-4, 0.05)], matrix=sp.csr_matrix(m))
    with pytest.raises(InputError, match="secret 'grouped' is carried by 10 examples"):
        build_plan(inc, batch_size=3.0, steps=5, c=1.0, adjacency="replace")
    single = Incidence(example_ids=ids, secrets=[inc.secrets[1]], matrix=sp.csr_matrix(m[:, 1:]))
    assert build_plan(single, batch_size=3.0, steps=5, c=1.0, adjacency="replace").adjacency == "replace"
