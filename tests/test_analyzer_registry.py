"""The analyzers as objects (analyzers/protocol.py, analyzers/registry.py): every registered one
keeps the `Analyzer` protocol, nothing is looked up by an import string, and an analyzer that
discovers secrets hands them back with its evidence from the same call (no module state)."""
from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

from repoguard.analyzers import credentials
from repoguard.analyzers.analyze import run_analyzers
from repoguard.analyzers.protocol import Analyzer, Found
from repoguard.analyzers.registry import ANALYZERS, REGISTRY
from repoguard.core.config import AnalyzersConfig, load_config
from repoguard.source.corpus import build_corpus
from repoguard.source.gitrepo import GitRepo

PACKAGE = Path(__file__).resolve().parent.parent / "repoguard" / "analyzers"


def test_registry_holds_protocol_objects_with_distinct_names():
    assert all(isinstance(a, Analyzer) for a in ANALYZERS)
    assert list(REGISTRY) == [a.name for a in ANALYZERS]
    assert len(set(REGISTRY)) == len(ANALYZERS) >= 6
    assert list(REGISTRY)[0] == "declared"       # the others propagate from its files
    # the analyzers that keep a cache section in OUT/cache/analyzers.json
    assert {a.name for a in ANALYZERS if a.cached} == {"imports", "codenames"}


def test_default_enabled_analyzers_are_all_registered():
    enabled = AnalyzersConfig().enabled
    assert enabled and set(enabled) <= set(REGISTRY)


def test_no_analyzer_is_found_by_an_import_string():
    """The package never resolves code from a name: no `__import__(…)`, no
    `importlib.import_module(…)` call (imports_lang only names them as strings to detect)."""
    calls = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in ("__import__", "import_module"):
                    calls.append(f"{path.name}:{node.lineno}")
    assert not calls, calls


def _repo_with_credential_removed(fixture_repo: Path, tmp_path: Path, path: str) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(fixture_repo, dest, symlinks=True)
    subprocess.run(["git", "rm", "-q", path], cwd=dest, check=True)
    return dest


def test_credential_secrets_come_back_with_their_evidence(fixture_repo, tmp_path, monorepo_module):
    config = load_config(fixture_repo / "repoguard.toml")
    repo = GitRepo(fixture_repo)
    found = credentials.ANALYZER.run(repo, build_corpus(repo, config.corpus), config)
    assert isinstance(found, Found)
    evidence, secrets = found
    ids = [s.id for s in secrets]
    # one secret per distinct credential, in the order its first row came, nothing else
    assert ids == list(dict.fromkeys(e.secret_id for e in evidence))
    assert all(s.kind == "credential" and 0 < s.p < s.r < 1 for s in secrets)
    assert {e.path for e in evidence} <= {c["path"] for c in monorepo_module.PLANTED_CREDENTIALS}

    # a second run over another repository returns its own secrets and leaves the first intact
    gone = evidence[0].path
    other = _repo_with_credential_removed(fixture_repo, tmp_path, gone)
    other_repo = GitRepo(other)
    second = credentials.ANALYZER.run(other_repo, build_corpus(other_repo, config.corpus), config)
    assert gone not in {e.path for e in second.evidence}
    assert [s.id for s in secrets] == ids and len(second.secrets) < len(ids)


def test_run_analyzers_gives_cache_sections_only_to_cached_analyzers(fixture_repo):
    config = load_config(fixture_repo / "repoguard.toml")
    repo = GitRepo(fixture_repo)
    corpus = build_corpus(repo, config.corpus)
    caches: dict = {}
    # the second value maps each analyzer that ran to its cost; only which ran, and in what order, is checked
    evidence, per_analyzer, extra = run_analyzers(repo, corpus, config, names=["declared", "codenames", "credentials"],
                                                  caches=caches)
    ran = list(per_analyzer)
    assert ran == ["declared", "codenames", "credentials"]     # registry order
    assert set(caches) == {"codenames"} and caches["codenames"]          # filled, keyed by blob
    assert {e.analyzer for e in evidence} == set(ran)
    assert [s.id for s in extra] == list(dict.fromkeys(e.secret_id for e in evidence
                                                       if e.analyzer == "credentials"))
