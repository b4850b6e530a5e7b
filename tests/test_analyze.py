"""`repoguard analyze` on the fixture monorepo: exactly the planted incidence, per analyzer."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from repoguard.analyzers.analyze import run_analyze
from repoguard.core.config import load_config
from repoguard.source.corpus import load_corpus
from repoguard.source.gitrepo import GitRepo
from repoguard.analyzers.incidence import load_incidence

ANALYZERS = ("declared", "imports", "ownership", "cochange", "codenames")


@pytest.fixture(scope="module")
def analyzed(fixture_repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("analyze-out")
    repo = GitRepo(fixture_repo)
    result = run_analyze(repo, load_config(fixture_repo / "repoguard.toml"), out)
    return fixture_repo, out, result


def _paths(rows):
    return sorted(r["path"] if isinstance(r, dict) else r for r in rows)


def test_exact_expected_incidence_per_analyzer(analyzed, monorepo_module):
    _, out, _ = analyzed
    inc = load_incidence(out)
    got: dict[tuple[str, str], dict] = {}
    for e in inc.evidence:
        got.setdefault((e.secret_id, e.analyzer), {})[e.path] = e
    for sid, exp in monorepo_module.EXPECTED_INCIDENCE.items():
        for an in ANALYZERS:
            have = got.get((sid, an), {})
            if an in exp:
                assert sorted(have) == _paths(exp[an]), (sid, an)
            elif an == "codenames":
                assert set(have) <= set(exp.get("codenames_unspecified", ())), (sid, an)
            else:
                assert not have, (sid, an)
        for key in ("not_imports", "not_ownership", "not_cochange"):
            assert not set(exp.get(key, ())) & set(got.get((sid, key[4:]), {})), (sid, key)
        carriers = {e.path for e in inc.evidence if e.secret_id == sid}
        assert not carriers & set(exp["must_not"]), sid


def test_import_evidence_names_line_statement_and_chain(analyzed, monorepo_module):
    _, out, _ = analyzed
    inc = load_incidence(out)
    ev = {(e.secret_id, e.path): e for e in inc.evidence if e.analyzer == "imports"}
    for sid, exp in monorepo_module.EXPECTED_INCIDENCE.items():
        for row in exp["imports"]:
            e = ev[(sid, row["path"])]
            assert list(e.chain) == row["chain"]
            assert f"at line {row['line']} " in e.reason
            assert e.reason.startswith(f"imports {row['chain'][1]} at line")


def test_matrix_is_the_union_of_file_evidence(analyzed, monorepo_module):
    root, out, result = analyzed
    inc = load_incidence(out)
    corpus = load_corpus(out, root)
    assert inc.example_ids == corpus.example_ids()
    for j, s in enumerate(inc.secrets):
        files = {e.path for e in inc.evidence if e.secret_id == s.id}
        rows = sorted({i for p in files for i in corpus.file_examples.get(p, ())})
        assert inc.matrix[:, j].nonzero()[0].tolist() == rows, s.id
    assert [(s.id, s.kind) for s in inc.secrets][:3] == [
        ("alpha-strategy", "declared"), ("risk-limits", "declared"), ("client-book", "declared")]
    assert inc.secrets[0].p == 1e-10 and inc.secrets[0].r == 2e-4   # level "high"
    summary = result.summary
    assert summary["incidences"] == inc.matrix.nnz
    assert summary["per_analyzer"]["imports"]["files"] == 9
    assert [x["line"] for x in summary["codeowners"]["invalid_lines"]] == monorepo_module.CODEOWNERS_INVALID_LINES
    assert summary["codeowners"]["source"] == ".github/CODEOWNERS"
    assert summary["cochange_thresholds"] == {"max_changeset": 30, "min_revs": 5, "min_shared_revs": 5,
                                              "min_coupling": 0.3}


def test_rerun_uses_the_blob_cache(analyzed, tmp_path):
    root, out, _ = analyzed
    cache = json.loads((out / "cache/analyzers.json").read_text())
    assert len(cache["imports"]) > 30 and cache["codenames"]
    # A copy of the output: the second run reads the cache and gives the same incidence.
    import shutil
    out2 = tmp_path / "out"
    shutil.copytree(out, out2)
    again = run_analyze(GitRepo(root), load_config(root / "repoguard.toml"), out2)
    first = load_incidence(out)
    assert again.incidence.evidence == first.evidence
    assert (again.incidence.matrix != first.matrix).nnz == 0


def test_cli_json_and_bad_analyzer(fixture_repo, tmp_path):
    cmd = [sys.executable, "-m", "repoguard.cli", "analyze", str(fixture_repo), "--out", str(tmp_path / "o"),
           "--json", "-q", "--only", "declared,imports"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert sorted(s["per_analyzer"]) == ["declared", "imports"]
    assert s["per_secret"]["alpha-strategy"] > 0
    bad = subprocess.run(cmd[:-1] + ["nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown analyzer 'nope'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_credential_findings_become_credential_secrets(analyzed, monorepo_module):
    _, out, _ = analyzed
    inc = load_incidence(out)
    creds = [s for s in inc.secrets if s.kind == "credential"]
    assert creds, "the fixture plants credentials in corpus files"
    planted = {c["path"] for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]}
    bait = {b["path"] for b in monorepo_module.FALSE_POSITIVE_BAIT}
    tied = {e.path for e in inc.evidence if e.analyzer == "credentials"}
    assert tied <= planted and not tied & (bait - planted)
    for s in creds:
        assert s.id.startswith("credential:") and 0 < s.p < s.r
    for c in monorepo_module.PLANTED_CREDENTIALS:  # evidence shows 4 characters at most
        value = monorepo_module.planted_secret(c["id"])
        assert all(value[:8] not in e.reason for e in inc.evidence if len(value) >= 8)


def test_load_caches_reads_every_section_from_one_file(tmp_path):
    """Sections come from one decode of OUT/cache/analyzers.json; a missing, unreadable or
    other-version file gives empty caches, never an error."""
    from repoguard.analyzers.analyze import CACHE_FILE, FORMAT_VERSION, load_caches, save_cache

    save_cache(tmp_path, load_caches(tmp_path, ["imports"]) | {"codenames": {"k": 1}}, prune=False)
    got = load_caches(tmp_path, ["imports", "codenames", "other"])
    assert {n: dict(c) for n, c in got.items()} == {"imports": {}, "codenames": {"k": 1}, "other": {}}
    # a plain dict of sections (no `others` from load_caches): the file's other sections stay
    save_cache(tmp_path, {"imports": {"i": 2}}, prune=False)
    assert json.loads((tmp_path / CACHE_FILE).read_text())["codenames"] == {"k": 1}
    (tmp_path / CACHE_FILE).write_text(json.dumps({"format_version": FORMAT_VERSION + 1, "codenames": {"k": 1}}))
    assert dict(load_caches(tmp_path, ["codenames"])["codenames"]) == {}
    (tmp_path / CACHE_FILE).write_text("{not json")
    assert dict(load_caches(tmp_path, ["codenames"])["codenames"]) == {}


def test_analyze_only_keeps_the_other_analyzers_cache(fixture_repo_copy):
    """`analyze --only codenames` neither uses nor prunes the imports cache of a full run."""
    from repoguard.analyzers.analyze import CACHE_FILE
    from repoguard.cli import main

    root = fixture_repo_copy
    assert main(["analyze", "-q", str(root)]) == 0
    cache = root / ".repoguard" / CACHE_FILE
    before = json.loads(cache.read_text())
    assert before["imports"] and before["codenames"]
    assert main(["analyze", "-q", "--only", "codenames", str(root)]) == 0
    after = json.loads(cache.read_text())
    assert after["imports"] == before["imports"] and after["codenames"] == before["codenames"]
