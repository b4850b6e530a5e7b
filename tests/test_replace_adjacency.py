"""Issue 19 item 4: `--adjacency replace` through the real CLI on a small git repo — refused for
secrets carried by several examples, and for a single-example secret still sound against a
dp_accounting oracle of the true replace pair ((1−ρ)N(0) + ρN(1), (1−ρ)N(0) + ρN(−1))."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from repoguard.accounting.bounds import reconstruction_bound
from repoguard.cli import main


def true_replace_lower(rho: float, sigma: float, steps: int, p: float) -> float:
    """A lower bound on min_ε e^ε p + δ_T(ε) of the true one-example replace pair, shifts ±1 (C = 1)
    under N(0, σ²): dp_accounting's optimistic PLD of the output binned on a fine grid (binning is
    post-processing, so it only lowers the divergence), composed T times by its own FFT."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    x = np.linspace(-12 * sigma, 12 * sigma, 2001)
    edges = np.concatenate([[-np.inf], (x[1:] + x[:-1]) / 2, [np.inf]])
    mass = [(1 - rho) * np.diff(norm.cdf(edges, 0, sigma)) + rho * np.diff(norm.cdf(edges, s, sigma))
            for s in (1, -1)]
    with np.errstate(divide="ignore"):
        pld = pldm.from_two_probability_mass_functions(
            dict(enumerate(np.log(mass[0]))), dict(enumerate(np.log(mass[1]))),
            pessimistic_estimate=False, value_discretization_interval=1e-3)
    if steps > 1:
        pld = pld.self_compose(steps)
    eps = np.arange(0, 12, 1e-3)
    return float(np.min(np.exp(eps) * p + np.asarray(pld.get_delta_for_epsilon(eps))))


@pytest.mark.parametrize("rho,sigma,steps,p", [(0.3, 3.0, 1, 0.2), (0.9, 2.0, 3, 0.05), (0.02, 1.0, 5, 1e-3)])
def test_single_example_replace_bound_is_sound(rho, sigma, steps, p):
    reported = reconstruction_bound([rho], sigma, steps, p, "best", adjacency="replace")
    truth = true_replace_lower(rho, sigma, steps, p)
    assert reported >= truth
    # …and not the zero-out bound in disguise: replace costs more than add/remove here.
    assert reported > reconstruction_bound([rho], sigma, steps, p, "best", adjacency="zero-out")


def test_rho_one_replace_is_tight():
    """ρ = 1: the true pair is N(1) vs N(−1), the accountant's N(2) vs N(0) — the same pair."""
    assert reconstruction_bound([1.0], 1.5, 1, 0.1, "best", adjacency="replace") == \
        pytest.approx(true_replace_lower(1.0, 1.5, 1, 0.1), rel=2e-3)


def _repo(root: Path, secrets: dict[str, int]) -> Path:
    """A git repo with 12 public files and, per secret, that many files under src/<secret>/."""
    repo = root / "repo"
    (repo / "src" / "web").mkdir(parents=True)
    for i in range(12):
        (repo / "src" / "web" / f"m{i}.py").write_text(f"import os\n\ndef web_{i}(x):\n    return x + {i}\n")
    toml = []
    for name, n in secrets.items():
        (repo / "src" / name).mkdir()
        for i in range(n):
            (repo / "src" / name / f"s{i}.py").write_text(f"def {name}_{i}(p):\n    return p * 0.{i + 1}\n")
        toml.append(f'[[secret]]\nid = "{name}"\npaths = ["src/{name}/**"]\np = 1e-3\nr = 0.05\n')
    (repo / "repoguard.toml").write_text("\n".join(toml))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    assert main(["analyze", "-q", str(repo)]) == 0
    return repo


@pytest.mark.slow
def test_plan_cli_refuses_grouped_replace_naming_the_secrets(tmp_path, capsys):
    repo = _repo(tmp_path, {"alpha": 1, "beta": 2, "gamma": 3})
    capsys.readouterr()
    args = ["plan", "-q", "--batch-size", "3", "--steps", "4", "--c", "1", str(repo)]
    assert main([*args, "--adjacency", "replace"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "'beta' is carried by 2 examples" in err[0] and "'gamma' is carried by 3 examples" in err[0]
    assert "'alpha'" not in err[0] and "--adjacency zero-out" in err[0]
    assert not (repo / ".repoguard" / "plan").exists()         # nothing half-written
    assert main(args) == 0                                       # zero-out plans the same repo


@pytest.mark.slow
def test_plan_cli_single_example_replace_is_sound(tmp_path):
    from repoguard.planning.plan import load_plan

    repo = _repo(tmp_path, {"alpha": 1, "delta": 1})
    assert main(["plan", "-q", "--batch-size", "3", "--steps", "4", "--c", "1", "--adjacency", "replace",
                 str(repo)]) == 0
    plan = load_plan(repo / ".repoguard")
    assert plan.adjacency == "replace"
    for s in plan.secrets:
        (i,) = [k for k, e in enumerate(plan.example_ids) if f"src/{s.id}/" in e]
        truth = true_replace_lower(float(plan.rho[i]), plan.sigma, plan.steps, s.p)
        assert s.n_examples == 1 and truth <= s.achieved_bound <= s.r * (1 + 1e-6)


def test_train_refuses_a_stale_grouped_replace_plan(tmp_path, capsys):
    """A plan.json written before the refusal existed (here: edited to say "replace") never trains."""
    import json

    repo = _repo(tmp_path, {"beta": 2})
    assert main(["plan", "-q", "--batch-size", "3", "--steps", "4", "--c", "1", str(repo)]) == 0
    doc_path = repo / ".repoguard" / "plan" / "plan.json"
    doc = json.loads(doc_path.read_text())
    doc["adjacency"] = "replace"
    del doc["digest"]              # such a plan carries no digest (a hand edit of one is refused as such)
    doc_path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["train", "-q", "--max-length", "32", str(repo)]) == 2
    err = capsys.readouterr().err
    assert "unsound" in err and "beta" in err and "Traceback" not in err
    assert not (repo / ".repoguard" / "train" / "adapter").exists()
