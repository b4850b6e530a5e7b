"""`repoguard explain`: a file's secrets with their evidence chain, a secret's files (JSON contract)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repoguard.analyzers.analyze import run_analyze
from repoguard.core.config import load_config
from repoguard.source.gitrepo import GitRepo


@pytest.fixture(scope="module")
def analyzed(fixture_repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("explain-out")
    run_analyze(GitRepo(fixture_repo), load_config(fixture_repo / "repoguard.toml"), out,
                only=["declared", "imports", "ownership", "cochange", "codenames"])
    return fixture_repo, out


def _cli(root, out, *args):
    res = subprocess.run([sys.executable, "-m", "repoguard.cli", "explain", "--repo", str(root),
                          "--out", str(out), *args], capture_output=True, text=True, cwd=root)
    return res


@pytest.mark.slow
def test_file_json_has_the_chain(analyzed, monorepo_module):
    root, out = analyzed
    res = _cli(root, out, "reports/daily_pnl.py", "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    row = next(r for r in monorepo_module.EXPECTED_INCIDENCE["alpha-strategy"]["imports"]
               if r["path"] == "reports/daily_pnl.py")
    assert got["path"] == "reports/daily_pnl.py"
    assert [s["secret"] for s in got["secrets"]] == ["alpha-strategy"]
    [ev] = got["secrets"][0]["evidence"]
    assert ev["analyzer"] == "imports" and ev["chain"] == row["chain"]
    # one chunk holds the import and the use of its name: one row naming both (issue 44)
    assert ev["reason"].startswith(f"imports trading/execution/router.py at line {row['line']} (from "
                                   "trading.execution import router), which imports trading/alpha/signals.py "
                                   "(2 hops); uses router at line ")
    text = _cli(root, out, "reports/daily_pnl.py").stdout
    assert "chain: reports/daily_pnl.py → trading/execution/router.py → trading/alpha/signals.py" in text


@pytest.mark.slow
def test_file_without_secrets_and_several_analyzers(analyzed):
    root, out = analyzed
    got = json.loads(_cli(root, out, "shared/utils/files.py", "--json").stdout)
    assert got == {"path": "shared/utils/files.py", "secrets": []}
    got = json.loads(_cli(root, out, str(root / "config/alpha_universe.yaml"), "--json").stdout)
    assert [(s["secret"], [e["analyzer"] for e in s["evidence"]]) for s in got["secrets"]] == [
        ("alpha-strategy", ["ownership"])]
    assert got["secrets"][0]["evidence"][0]["reason"].startswith("owned by @acme/alpha per .github/CODEOWNERS line ")


def test_secret_lists_its_files(analyzed, monorepo_module):
    root, out = analyzed
    got = json.loads(_cli(root, out, "--secret", "client-book", "--json").stdout)
    exp = monorepo_module.EXPECTED_INCIDENCE["client-book"]
    assert got["secret"] == "client-book"
    assert [x["path"] for x in got["examples"]] == sorted(exp["declared"] + exp["codenames"])
    for x in got["examples"]:
        assert x["example_ids"] and all(i.startswith(x["path"] + "#") for i in x["example_ids"])
        assert {e["analyzer"] for e in x["evidence"]} <= {"declared", "codenames"}


def test_errors_are_one_line(analyzed, tmp_path):
    root, out = analyzed
    bad = _cli(root, out, "--secret", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith("repoguard: error: unknown secret 'nope'")
    both = _cli(root, out, "a.py", "--secret", "x")
    assert both.returncode == 2 and "give the repository once" in both.stderr
    missing = _cli(root, tmp_path / "empty", "a.py")
    assert missing.returncode == 2 and "run `repoguard analyze`" in missing.stderr
    assert all(len(r.stderr.strip().splitlines()) == 1 for r in (bad, both, missing))


# -- issue 28 item 10: `explain --secret ID PATH`; evidence sorted by line number --------------------
def _plain_cli(cwd, *args):
    return subprocess.run([sys.executable, "-m", "repoguard.cli", "explain", *args],
                          capture_output=True, text=True, cwd=cwd)


@pytest.mark.slow
def test_secret_takes_a_trailing_repository_path(analyzed, tmp_path):
    """`explain --secret ID PATH` reads PATH as the repository, like every other command (it was
    refused: "give exactly one of FILE or --secret ID"); without PATH it is the current directory;
    `explain FILE` is unchanged."""
    root, out = analyzed
    want = json.loads(_cli(root, out, "--secret", "client-book", "--json").stdout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = _plain_cli(elsewhere, "--secret", "client-book", str(root), "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == want and want["examples"]
    here = _plain_cli(root, "--secret", "client-book", "--out", str(out), "--json")
    assert here.returncode == 0 and json.loads(here.stdout) == want
    text = _plain_cli(elsewhere, "--secret", "client-book", str(root), "--out", str(out))
    assert text.returncode == 0 and text.stdout.startswith("client-book: ")
    a_file = _plain_cli(elsewhere, "--secret", "client-book", str(root / "reports/daily_pnl.py"), "--out", str(out))
    assert a_file.returncode == 2 and "PATH is the repository" in a_file.stderr
    assert len(a_file.stderr.strip().splitlines()) == 1
    neither = _plain_cli(root, "--out", str(out))
    assert neither.returncode == 2 and "give FILE, or --secret ID [PATH]" in neither.stderr
    kept = _plain_cli(elsewhere, str(root / "reports/daily_pnl.py"), "--out", str(out), "--json")
    assert kept.returncode == 0 and json.loads(kept.stdout)["path"] == "reports/daily_pnl.py"


def test_evidence_is_sorted_by_line_number():
    """Line numbers compare as numbers: line 9, 14, 110 (text order put "110" before "14")."""
    import scipy.sparse as sp

    from repoguard.analyzers import explain
    from repoguard.analyzers.incidence import Evidence, Incidence, Secret

    rows = [Evidence("a.py", "s", "codenames", f"mentions codename 'Falcon' at line {n}") for n in (110, 14, 9)]
    rows += [Evidence("a.py", "s", "ownership", f"owned by @x per CODEOWNERS line {n}") for n in (21, 3)]
    inc = Incidence(["a.py#0@abc"], [Secret("s", "declared", 1e-6, 1e-3)], sp.csr_matrix([[True]]), rows)
    want = ["owned by @x per CODEOWNERS line 3", "owned by @x per CODEOWNERS line 21",
            "mentions codename 'Falcon' at line 9", "mentions codename 'Falcon' at line 14",
            "mentions codename 'Falcon' at line 110"]
    assert [e["reason"] for e in explain.secrets_of(inc, "a.py")["secrets"][0]["evidence"]] == want
    assert [e["reason"] for e in explain.examples_of(inc, "s")["examples"][0]["evidence"]] == want
    assert sorted(["b 10", "a 2", "b 9", "a 10"], key=explain.natural_key) == ["a 2", "a 10", "b 9", "b 10"]
