"""`repoguard suggest`: ownership silos, codenames and credentials proposed as valid TOML."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repoguard.config import Config, load_config, parse_config
from repoguard.gitrepo import GitRepo
from repoguard.suggest import suggest


@pytest.fixture(scope="module")
def fresh(fixture_repo):
    """Suggestions for the fixture as if nothing were declared yet."""
    return suggest(GitRepo(fixture_repo), Config(path=None))


def test_ownership_silo_is_the_planted_one(fresh, monorepo_module):
    silos = {c["paths"][0]: c for c in fresh["candidates"] if c["kind"] == "silo"}
    for planted in monorepo_module.SILOS:
        c = silos[planted["path"] + "**"]
        assert c["owners"] == [planted["team"]]
        assert c["metrics"]["insiders"] == sorted(planted["authors"])
        assert c["metrics"]["closure"] >= 0.8
    # teams whose files are edited by people who mostly work elsewhere are not silos
    assert "web/**" not in silos and "java/**" not in silos and "reports/**" not in silos


def test_codenames_found_and_ordinary_words_not(fresh):
    names = {c["codenames"][0] for c in fresh["candidates"] if c["kind"] == "codename"}
    assert {"Falcon", "Nightjar"} <= names
    assert "Harbor" not in names       # "safe harbor" is written in lower case in the docs
    assert "Scholes" not in names      # part of "Black-Scholes"


def test_credentials_with_entropy_prior(fresh, monorepo_module):
    creds = [c for c in fresh["candidates"] if c["kind"] == "credential"]
    planted = {c["path"] for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]}
    assert creds and {p for c in creds for p in c["paths"]} <= planted
    for c in creds:
        assert c["p"] == pytest.approx(max(2.0 ** -c["metrics"]["bits"], 1e-300), rel=1e-3)
        assert all("…" in e for e in c["evidence"][:-1])


def test_snippet_is_valid_config_and_skips_declared(fresh, fixture_repo):
    cfg = parse_config(fresh["toml"])
    ids = [s.id for s in cfg.secrets]
    assert "alpha-owned" in ids and "falcon" in ids and len(ids) == len(set(ids))
    declared = suggest(GitRepo(fixture_repo), load_config(fixture_repo / "repoguard.toml"),
                       kinds=("silo", "codename"))
    covered = {c["id"]: c["covered_by"] for c in declared["candidates"] if c["covered_by"]}
    assert covered["alpha-owned"] == ["alpha-strategy"] and covered["falcon"] == ["alpha-strategy"]
    assert "alpha-owned" not in declared["toml"] and "Falcon" not in declared["toml"]


def test_cli(fixture_repo):
    res = subprocess.run([sys.executable, "-m", "repoguard.cli", "suggest", str(fixture_repo), "--json",
                          "--kinds", "silo"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert {c["kind"] for c in json.loads(res.stdout)["candidates"]} == {"silo"}
    bad = subprocess.run([sys.executable, "-m", "repoguard.cli", "suggest", str(fixture_repo), "--kinds", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown kind 'x'" in bad.stderr
