"""What a new user hit on a real repository (issue 15, items 1–6): every case used to give a silent
wrong answer. Each runs the real `repoguard` command in a subprocess on the fixture monorepo."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--steps", "10", "--batch-size", "8", "--seed", "0", "--max-length", "128"]
TYPO_SECRET = """
[[secret]]
id = "typo-secret"
paths = ["tradng/alpha/**"]
owners = ["@acme/nobody"]
codenames = ["Zyzzyvaq"]
"""


def rg(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "repoguard.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True)


# -- item 1: --config on every subcommand, and the named file is the one validated -----------------
def test_config_validate_validates_the_named_file(fixture_repo, tmp_path):
    typo = tmp_path / "typo.toml"
    for argv in (["config", "validate", "--config", str(typo), str(fixture_repo)],
                 ["--config", str(typo), "config", "validate", str(fixture_repo)]):
        r = rg(*argv)
        assert r.returncode == 2 and "typo.toml: config file not found" in r.stderr, argv
    bad = tmp_path / "bad.toml"
    bad.write_text('[defaults]\np = 0.5\nr = 0.1\n')
    for argv in (["config", "validate", "--config", str(bad), str(fixture_repo)],
                 ["--config", str(bad), "config", "validate", str(fixture_repo)]):
        r = rg(*argv)   # the repository's own (valid) repoguard.toml must not be what is checked
        assert r.returncode == 2 and "bad.toml" in r.stderr and "valid" not in r.stdout, argv
    good = tmp_path / "good.toml"
    good.write_text('[defaults]\np = 1e-9\nr = 1e-3\n')
    r = rg("config", "validate", "--config", str(good), str(fixture_repo))
    assert r.returncode == 0 and r.stdout.startswith(f"{good}: valid") and "0 secret(s)" in r.stdout
    r = rg("config", "validate", "--config", str(good), str(fixture_repo / "repoguard.toml"))
    assert r.returncode == 2 and "not both" in r.stderr
    # --config after every subcommand parses (docs/commands/index.md: "every subcommand").
    for sub in (["scan"], ["analyze"], ["explain", "x.py"], ["suggest"], ["plan"], ["ledger", "verify"],
                ["train"], ["report"], ["run"], ["tag"], ["audit", "extract"]):
        r = rg(*sub, "--config", str(typo), "--help")
        assert r.returncode == 0, (sub, r.stderr)


# -- items 2, 3: explain of a file outside the corpus; a secret matching nothing ------------------
@pytest.fixture(scope="module")
def analyzed(tmp_path_factory, fixture_repo):
    import shutil

    repo = tmp_path_factory.mktemp("newuser") / "monorepo"
    shutil.copytree(fixture_repo, repo, symlinks=True)
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text() + TYPO_SECRET)
    r = rg("analyze", str(repo))
    assert r.returncode == 0, r.stderr
    return repo, r


@pytest.mark.slow
def test_explain_says_why_a_file_is_not_in_the_corpus(analyzed):
    repo, _ = analyzed
    cases = {
        "no/such/file.py": "no such file",
        "poetry.lock": "left out as lockfile",
        "data/legacy/broker_names_latin1.txt": "left out as undecodable",
        "untracked_notes.py": "not tracked by git",
    }
    (repo / "untracked_notes.py").write_text("x = 1\n")
    for path, why in cases.items():
        r = rg("explain", str(repo / path))
        assert r.returncode == 2 and why in r.stderr and "carries no secret" not in r.stdout, (path, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    # A file in the corpus that carries nothing still says so, exit 0.
    kept = json.loads(rg("explain", "--json", str(repo / "trading/alpha/signals.py")).stdout)
    assert kept["secrets"]
    r = rg("explain", str(repo / "README.md"))
    assert r.returncode == 0 and "carries no secret" in r.stdout


@pytest.mark.slow
def test_secret_matching_nothing_is_warned_by_name(analyzed):
    repo, r = analyzed
    line = [x for x in r.stderr.splitlines() if "typo-secret" in x]
    assert len(line) == 1, r.stderr
    for part in ("'tradng/alpha/**' matches no file", "'@acme/nobody' is named by no CODEOWNERS rule",
                 "'Zyzzyvaq' is mentioned in no file"):
        assert part in line[0]
    # The well-declared secrets of the fixture draw no warning.
    assert not [x for x in r.stderr.splitlines() if x.startswith("warning: secret") and "typo-secret" not in x]
    r = rg("plan", "--steps", "5", "--batch-size", "8", "--accountant", "kl", str(repo))
    assert r.returncode == 0 and "warning: secret 'typo-secret'" in r.stderr, r.stderr


# -- item 4: one behaviour for a directory that is not a git repository ----------------------------
@pytest.mark.slow
def test_non_git_directory_is_refused_by_every_subcommand_that_reads_it(tmp_path):
    """The decided behaviour: commands that read the repository (scan without --no-git, analyze,
    suggest, tag, run) refuse a directory outside git; the later stages read only OUT/ artefacts,
    which analyze alone writes, so on such a directory they say that the artefact is missing."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "app.py").write_text('TOKEN = "ghp_' + 'wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO2rUtEA' + '"\n')
    for sub in (["analyze"], ["suggest"], ["run"], ["scan"], ["tag", "--repo"]):
        r = rg(*sub, str(plain))
        assert r.returncode == 2 and "not a git repository" in r.stderr, (sub, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and not (plain / ".repoguard").exists()
    for sub in (["plan"], ["train"], ["report"], ["audit", "extract"]):
        r = rg(*sub, str(plain))
        assert r.returncode == 2 and ("run `repoguard" in r.stderr or "no artefacts" in r.stderr), (sub, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    r = rg("explain", str(plain / "app.py"))
    assert r.returncode == 2 and "repoguard analyze" in r.stderr, r.stderr
    r = rg("scan", "--no-git", str(plain))
    assert r.returncode == 1 and "github" in r.stdout.lower()


# -- items 5, 6: the budget fraction F = 1 as the docs state it; ledger verify counts runs --------
def _docs_f1_sentence() -> str:
    text = " ".join((ROOT / "docs" / "commands" / "run.md").read_text().split())
    start = text.index("With the default F = 1")
    return text[start:text.index(".", text.index("exit 1", start)) + 1]


@pytest.mark.slow
def test_budget_fraction_one_as_the_docs_say(fixture_repo_copy):
    repo = fixture_repo_copy
    claim = _docs_f1_sentence()
    assert "trains again" in claim and "refused (exit 1)" in claim
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text() + TYPO_SECRET)
    r1 = rg("run", "--json", *FAST, str(repo))
    assert r1.returncode == 0, r1.stderr
    assert "warning: secret 'typo-secret'" in r1.stderr          # item 3 through `run`
    s1 = json.loads(r1.stdout)
    # A later run at F = 1 trains again on what the ledger leaves: a larger σ, and every secret's
    # cumulative bound (the plan is calibrated against the ledger) stays within its r.
    r2 = rg("run", "--json", *FAST[:1], "60", *FAST[2:], str(repo))
    assert r2.returncode == 0, r2.stderr
    s2 = json.loads(r2.stdout)
    assert "train" in s2["ran"] and s2["sigma"] > s1["sigma"] and s2["run_id"] != s1["run_id"]
    plan = json.loads((repo / ".repoguard" / "plan" / "plan.json").read_text())
    assert all(x["achieved_bound"] <= x["r"] * (1 + 1e-9) for x in plan["secrets"])
    assert s2["bound_ratio_max"] <= 1 + 1e-9
    # Item 6: two runs, and the checkpoint record of the 60-step run is counted as such.
    v = rg("ledger", "verify", str(repo))
    assert v.returncode == 0 and "2 runs (2 completed)" in v.stdout, v.stdout
    vj = json.loads(rg("ledger", "verify", str(repo), "--json").stdout)
    assert vj["runs"] == 2 and vj["records"] == vj["entries"] == 3 and vj["checkpoint_records"] == 1
    assert "3 records, 1 of them checkpoint record" in v.stdout
    # A run whose target the ledger's spending already exceeds is refused before training.
    size = (repo / ".repoguard" / "ledger.jsonl").stat().st_size
    adapter = (repo / ".repoguard" / "train" / "adapter" / "adapter_model.safetensors").read_bytes()
    cfg.write_text(cfg.read_text().replace("medium = { p = 1e-6, r = 1e-2 }", "medium = { p = 1e-6, r = 1.0001e-6 }"))
    r3 = rg("run", *FAST[:1], "20", *FAST[2:], str(repo))
    assert r3.returncode == 1 and "risk-limits" in r3.stderr, r3.stderr
    assert (repo / ".repoguard" / "ledger.jsonl").stat().st_size == size
    assert (repo / ".repoguard" / "train" / "adapter" / "adapter_model.safetensors").read_bytes() == adapter


# -- items 7–9: output that survives logs and CI -----------------------------------------------------
@pytest.mark.slow
def test_piped_output_is_never_cut(fixture_repo_copy):
    repo = fixture_repo_copy
    long_id = "a-secret-with-a-very-long-identifier-that-rich-used-to-cut-in-eighty-columns"
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text() + f'\n[[secret]]\nid = "{long_id}"\npaths = ["trading/alpha/**"]\n')
    deep = repo / "a" / ("very-long-directory-name-" * 4) / "out"
    r = rg("analyze", "--out", str(deep), str(repo))
    assert r.returncode == 0, r.stderr
    assert f"→ {deep / 'incidence'}" in r.stdout and f"  {long_id}: " in r.stdout
    r = rg("plan", "--out", str(deep), "--steps", "5", "--batch-size", "8", "--accountant", "kl", str(repo))
    assert r.returncode == 0, r.stderr
    assert long_id in r.stdout and str(deep / "plan") in r.stdout and "…" not in r.stdout


@pytest.mark.slow
def test_submodule_notice_printed_once_with_count(fixture_repo_copy, tmp_path, make_repo):
    from conftest import git

    sub = make_repo({"lib.py": "x = 1\n"}, path=tmp_path / "sublib")
    repo = fixture_repo_copy
    for name in ("ext/one", "ext/two"):
        git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), name)
    git(repo, "commit", "-qm", "add submodules")
    r = rg("analyze", str(repo))
    assert r.returncode == 0, r.stderr
    notes = [x for x in r.stderr.splitlines() if "submodule" in x]
    assert len(notes) == 1 and "2 submodule(s) skipped" in notes[0] and "ext/one" in notes[0], r.stderr


@pytest.mark.slow
def test_no_library_info_lines_after_repoguard_output(tmp_path, fixture_repo):
    """torch's FakeTensor registers an atexit dump of its cache stats at INFO; it reached stderr
    after `repoguard: interrupted` when torch's own log setup had not run (its logger NOTSET)."""
    script = tmp_path / "exit.py"
    script.write_text(
        "import logging, sys\n"
        "import torch._subclasses.fake_tensor as ft\n"
        "logging.getLogger('torch').setLevel(logging.NOTSET)\n"
        "from repoguard.cli import main\n"
        "main(['config', 'validate', sys.argv[1]])\n"
        "ft.dump_cache_stats()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, str(script), str(fixture_repo)], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "valid" in r.stdout, r.stderr
    assert "FakeTensor" not in r.stderr and "cache_hits" not in r.stderr, r.stderr
