"""The fixture monorepo (fixtures/build_monorepo.py): deterministic, realistic, and true to the
ground truth it exports. Every later issue's tests assert against these constants, so each one is
checked here against the built repository with git itself (and, for co-change and codenames,
with small independent re-computations).

No assertion message ever contains a planted credential value.
"""
from __future__ import annotations

import ast
import collections
import itertools
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from repoguard.core.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=check,
                          env={"PATH": "/usr/bin:/bin:/usr/local/bin", "GIT_CONFIG_NOSYSTEM": "1",
                               "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": "/nonexistent"})


def _out(repo: Path, *args: str) -> str:
    return _git(repo, *args).stdout.decode()


def _head_files(repo: Path) -> set[str]:
    return set(_out(repo, "ls-files", "-z").split("\0")) - {""}


# -- determinism, shape -----------------------------------------------------------------------------
def test_build_is_deterministic(fixture_repo, monorepo_module, tmp_path):
    again = monorepo_module.build(tmp_path / "again")
    assert _out(again, "rev-parse", "HEAD") == _out(fixture_repo, "rev-parse", "HEAD")
    assert _out(again, "rev-list", "--all") == _out(fixture_repo, "rev-list", "--all")
    assert _out(again, "status", "--porcelain") == ""


def test_history_shape(fixture_repo, monorepo_module):
    m = monorepo_module
    n = int(_out(fixture_repo, "rev-list", "--count", "HEAD"))
    assert n == m.N_COMMITS >= 60
    assert _out(fixture_repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert _head_files(fixture_repo) == set(m.HEAD_FILES)
    # Authors after .mailmap: ≥ 5 people, exactly the AUTHORS table; the alias is merged.
    canonical = set(_out(fixture_repo, "log", "--format=%aN <%aE>").splitlines())
    assert canonical == {f"{a['name']} <{a['email']}>" for a in m.AUTHORS}
    assert len(canonical) >= 5
    raw = set(_out(fixture_repo, "log", "--format=%ae").splitlines())
    aliases = {al["email"] for a in m.AUTHORS for al in a["aliases"]}
    assert aliases and aliases <= raw
    assert len({a["team"] for a in m.AUTHORS}) >= 3


def test_codeowners_teams_and_no_invalid_line(fixture_repo, monorepo_module):
    text = (fixture_repo / ".github" / "CODEOWNERS").read_text()
    teams = set(re.findall(r"@acme/[a-z]+", text))
    assert len(teams) >= 3
    lines = text.split("\n")
    # No line GitHub would skip (a `!` negation made every quickstart run warn: issue 28 item 12).
    assert monorepo_module.CODEOWNERS_INVALID_LINES == []
    assert not [ln for ln in lines if ln.startswith("!")]
    # A pattern without owners exists (it unassigns), as the ground truth says.
    ownerless = [ln for ln in lines if ln.strip() and not ln.startswith("#") and len(ln.split()) == 1]
    assert ownerless
    for path in monorepo_module.CODEOWNERS_EXPECTED:
        assert (fixture_repo / path).exists(), path


def test_merge_rename_and_bulk_commit(fixture_repo, monorepo_module):
    m = monorepo_module
    merges = _out(fixture_repo, "log", "--merges", "--format=%H %P%x1f%s").splitlines()
    assert len(merges) == 1
    shas, subject = merges[0].split("\x1f")
    assert len(shas.split()) == 3 and m.MERGE_BRANCH in subject
    renames = _out(fixture_repo, "log", "-M", "--diff-filter=R", "--name-status", "--format=")
    old, new = m.RENAME
    assert re.search(rf"^R\d+\t{re.escape(old)}\t{re.escape(new)}$", renames, re.M)
    bulk = _out(fixture_repo, "log", "--format=%H", "-F", f"--grep={m.BULK_COMMIT_MESSAGE}").split()
    assert len(bulk) == 1
    changed = _out(fixture_repo, "show", "--name-only", "--format=", bulk[0]).split()
    assert len(changed) > 30


def test_config_loads_with_three_protected_secrets(fixture_repo, monorepo_module):
    cfg = load_config(fixture_repo / "repoguard.toml")
    ids = [s.id for s in cfg.secrets]
    assert len(ids) >= 3 and "alpha-strategy" in ids
    assert len({(s.p, s.r) for s in cfg.secrets}) == len(cfg.secrets)
    alpha = cfg.secret("alpha-strategy")
    assert alpha.paths == ("trading/alpha/**",) and alpha.owners == ("@acme/alpha",)
    assert alpha.codenames == ("Falcon",) and alpha.propagate.imports == 2 and alpha.propagate.cochange
    assert set(monorepo_module.EXPECTED_INCIDENCE) <= set(ids)
    assert cfg.corpus.max_file_bytes == monorepo_module.CORPUS_MAX_FILE_BYTES


# -- bad files ------------------------------------------------------------------------------------
def test_bad_files_have_their_defect(fixture_repo, monorepo_module):
    bad = monorepo_module.BAD_FILES
    assert set(bad.values()) == {"binary", "vendored", "generated", "minified", "lockfile", "undecodable", "oversize"}
    tracked = _head_files(fixture_repo)
    for path, reason in bad.items():
        assert path in tracked, path
        data = (fixture_repo / path).read_bytes()
        if reason == "binary":
            assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"\0" in data
        elif reason == "vendored":
            assert path.split("/")[0] in ("vendor", "third_party", "node_modules")
        elif reason == "generated":
            assert re.search(rb"DO NOT EDIT|@generated", data[:300])
        elif reason == "minified":
            assert path.endswith(".min.js") and data.count(b"\n") <= 1 and len(data) > 1500
        elif reason == "lockfile":
            assert Path(path).name in ("package-lock.json", "poetry.lock", "yarn.lock", "Cargo.lock")
        elif reason == "undecodable":
            with pytest.raises(UnicodeDecodeError):
                data.decode("utf-8")
        elif reason == "oversize":
            assert len(data) > monorepo_module.CORPUS_MAX_FILE_BYTES
            data.decode("utf-8")  # text, only too big


# -- credentials and bait -------------------------------------------------------------------------
def test_planted_credentials_are_where_the_ground_truth_says(fixture_repo, monorepo_module):
    m = monorepo_module
    creds = m.PLANTED_CREDENTIALS
    assert len({c["kind"] for c in creds}) >= 10
    assert any(not c["in_head"] for c in creds)
    commits = _out(fixture_repo, "rev-list", "--reverse", "--topo-order", "HEAD").split()
    subjects = {sha: _out(fixture_repo, "log", "-1", "--format=%s", sha).strip() for sha in commits}
    for c in creds:
        value = m.planted_secret(c["id"])
        first_line = value.split("\n")[0]
        # Present at HEAD exactly when in_head says so, anywhere in the tree.
        grep = _git(fixture_repo, "grep", "-q", "-F", "-e", first_line, "HEAD", check=False)
        found_at_head = grep.returncode == 0
        assert found_at_head == c["in_head"], f"{c['id']}: presence at HEAD differs from in_head"
        # Introduced by the named commit, at the stated line (HEAD's line when still present).
        intro = [sha for sha in commits if subjects[sha] == c["commit_message"]]
        assert len(intro) == 1, f"{c['id']}: introducing commit not unique"
        rev = "HEAD" if c["in_head"] else intro[0]
        text = _git(fixture_repo, "show", f"{rev}:{c['path']}").stdout.decode()
        ok_line = text.split("\n")[c["line"] - 1].find(first_line) >= 0
        assert ok_line, f"{c['id']}: not on line {c['line']} of {c['path']} at {rev}"
        ok_block = value in text
        assert ok_block, f"{c['id']}: full value not in {c['path']}"
        parent = _git(fixture_repo, "show", f"{intro[0]}~1:{c['path']}", check=False)
        absent_before = parent.returncode != 0 or value.encode() not in parent.stdout
        assert absent_before, f"{c['id']}: already present before its introducing commit"


def test_false_positive_bait_exists(fixture_repo, monorepo_module):
    kinds = {b["kind"] for b in monorepo_module.FALSE_POSITIVE_BAIT}
    assert {"placeholder-password", "env-reference", "env-lookup", "aws-documentation-example", "uuid",
            "git-sha", "test-hash"} <= kinds
    planted_paths_lines = {(c["path"], c["line"]) for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]}
    for b in monorepo_module.FALSE_POSITIVE_BAIT:
        lines = (fixture_repo / b["path"]).read_text().split("\n")
        assert 1 <= b["line"] <= len(lines) and lines[b["line"] - 1].strip(), b
        assert (b["path"], b["line"]) not in planted_paths_lines
    assert "AKIAIOSFODNN7EXAMPLE" in (fixture_repo / "docs/onboarding.md").read_text()
    assert 'password = "changeme"' in (fixture_repo / "scripts/dev_bootstrap.py").read_text()


# -- incidence ground truth -----------------------------------------------------------------------
def _expected_paths(entry: dict) -> set[str]:
    out: set[str] = set()
    for key, value in entry.items():
        if key == "imports":
            out |= {row["path"] for row in value} | {p for row in value for p in row["chain"]}
        else:
            out |= set(value)
    return out


def test_expected_incidence_is_consistent(fixture_repo, monorepo_module):
    tracked = _head_files(fixture_repo)
    for secret_id, entry in monorepo_module.EXPECTED_INCIDENCE.items():
        paths = _expected_paths(entry)
        missing = sorted(paths - tracked)
        assert not missing, f"{secret_id}: {missing}"
        assert not paths & set(monorepo_module.BAD_FILES), secret_id
        positive = set(entry["declared"]) | {r["path"] for r in entry["imports"]}
        for key in ("ownership", "cochange", "codenames"):
            positive |= set(entry.get(key, ()))
        assert not positive & set(entry["must_not"]), secret_id
        for row in entry["imports"]:
            line = (fixture_repo / row["path"]).read_text().split("\n")[row["line"] - 1]
            assert row["statement"] in line, row["path"]
            assert row["depth"] == len(row["chain"]) - 1 and row["chain"][0] == row["path"]
            assert row["chain"][-1] in entry["declared"]


def test_import_edges_are_written_where_stated(fixture_repo, monorepo_module):
    edges = monorepo_module.IMPORT_EDGES
    assert {e["language"] for e in edges} >= {"python", "typescript", "tsx", "javascript", "go", "java", "c", "cpp", "rust"}
    tracked = _head_files(fixture_repo)
    for e in edges:
        assert e["src"] in tracked and e["dst"] in tracked, e
        line = (fixture_repo / e["src"]).read_text().split("\n")[e["line"] - 1]
        assert e["statement"] in line, e
    # Namespace package and src/ layout exactly as the ground truth relies on.
    assert not (fixture_repo / "analytics" / "__init__.py").exists()
    assert not (fixture_repo / "analytics" / "vol" / "__init__.py").exists()
    assert (fixture_repo / "libs/pricing/src/pricing/__init__.py").exists()
    assert "@alpha/*" in (fixture_repo / "web/tsconfig.json").read_text()
    assert (fixture_repo / "services/risk/go.mod").read_text().startswith("module acme.example/monorepo/services/risk")


def _py_imports(repo: Path, rel: str, module_of: dict[str, str]) -> set[str]:
    """Repo files a Python file imports (absolute, relative and importlib), resolved by hand."""
    path = repo / rel
    pkg = module_of[rel].rsplit(".", 1)[0] if not rel.endswith("__init__.py") else module_of[rel]
    tree = ast.parse(path.read_bytes())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
    files = {m: f for f, m in module_of.items()}
    return {files[n] for n in names if n in files} - {rel}


def test_python_import_ground_truth_matches_an_ast_check(fixture_repo, monorepo_module):
    """Independent check of the Python rows: BFS over an `ast`-built graph (depth ≤ 2)."""
    module_of = {}
    for f in _head_files(fixture_repo):
        if f.endswith(".py") and not f.startswith(("third_party/", "libs/")):
            mod = f[:-3].replace("/", ".")
            module_of[f] = mod[: -len(".__init__")] if mod.endswith(".__init__") else mod
    graph = {f: _py_imports(fixture_repo, f, module_of) for f in module_of}
    entry = monorepo_module.EXPECTED_INCIDENCE["alpha-strategy"]
    depth = {f: 0 for f in module_of if f.startswith("trading/alpha/")}
    for d in (1, 2):
        for f, deps in graph.items():
            if f not in depth and any(depth.get(x) == d - 1 for x in deps):
                depth[f] = d
    expected = {r["path"]: r["depth"] for r in entry["imports"] if r["path"].endswith(".py")}
    found = {f: d for f, d in depth.items() if d > 0}
    assert found == expected
    assert not set(found) & set(entry["not_imports"])


def test_cochange_ground_truth_matches_code_maat_definitions(fixture_repo, monorepo_module):
    log = _out(fixture_repo, "log", "--no-merges", "--no-renames", "--name-only", "--format=%x1e")
    changesets = [[f for f in rec.split("\n") if f.strip()] for rec in log.split("\x1e") if rec.strip()]

    def coupled(max_changeset: int) -> set[tuple[str, str]]:
        revs: collections.Counter = collections.Counter()
        shared: collections.Counter = collections.Counter()
        for files in changesets:
            if len(files) > max_changeset:
                continue
            revs.update(files)
            shared.update(itertools.combinations(sorted(files), 2))
        return {pair for pair, s in shared.items()
                if s >= 5 and (revs[pair[0]] + revs[pair[1]]) / 2 >= 5 and s / ((revs[pair[0]] + revs[pair[1]]) / 2) >= 0.3}

    with_filter, without_filter = coupled(30), coupled(10**9)
    for pair in monorepo_module.COCHANGE_PAIRS:
        key = tuple(sorted((pair["a"], pair["b"])))
        assert (key in with_filter) == pair["coupled"], key
        if pair.get("coupled_if_bulk_counted"):
            assert key in without_filter, key
    # Nothing outside trading/alpha couples to it except the expected files.
    entry = monorepo_module.EXPECTED_INCIDENCE["alpha-strategy"]
    outside = {p for pair in with_filter for p in pair if not p.startswith("trading/alpha/")
               and any(q.startswith("trading/alpha/") for q in pair)}
    assert outside == set(entry["cochange"])


def test_codename_ground_truth(fixture_repo, monorepo_module):
    """Files tied by a codename mention it in their text or in a commit message touching them;
    must-not files do neither."""
    log = _out(fixture_repo, "log", "--no-merges", "--name-only", "--format=%x1e%B%x1f")
    touched_by: dict[str, str] = collections.defaultdict(str)
    for rec in log.split("\x1e"):
        if "\x1f" in rec:
            msg, files = rec.split("\x1f", 1)
            for f in files.split():
                touched_by[f] += msg
    for secret_id, name in (("alpha-strategy", "falcon"), ("client-book", "nightjar")):
        entry = monorepo_module.EXPECTED_INCIDENCE[secret_id]
        for path in entry["codenames"]:
            text = (fixture_repo / path).read_text().lower() + touched_by[path].lower()
            assert name in text, path
        for path in entry["must_not"]:
            text = (fixture_repo / path).read_text(errors="replace").lower() + touched_by[path].lower()
            assert name not in text, path
    # Stop-list bait: the ordinary word appears, lower-case, in prose that must not be tied.
    assert "safe harbor" in (fixture_repo / "docs/compliance/trade_reporting.md").read_text()


def test_alpha_team_is_an_ownership_silo(fixture_repo, monorepo_module):
    silo = monorepo_module.SILOS[0]
    log = _out(fixture_repo, "log", "--no-merges", "--name-only", "--format=%x1e%aE%x1f%s%x1f")
    inside, total = collections.Counter(), collections.Counter()
    alpha_authors = set()
    for rec in filter(None, log.split("\x1e")):
        email, subject, files = rec.split("\x1f")
        if subject == monorepo_module.BULK_COMMIT_MESSAGE:
            continue
        for f in files.split():
            total[email] += 1
            # Alpha-owned areas: the package, its config files and its docs.
            inside[email] += f.startswith((silo["path"], "config/alpha_", "docs/alpha/"))
            if f.startswith(silo["path"]):
                alpha_authors.add(email)
    assert alpha_authors == set(silo["authors"])
    for email in silo["authors"]:
        assert inside[email] / total[email] >= 0.8, email


# -- sources parse ----------------------------------------------------------------------------------
def test_sources_parse(fixture_repo, monorepo_module):
    bad = set(monorepo_module.BAD_FILES)
    files = sorted(_head_files(fixture_repo) - bad)
    for f in files:
        if f.endswith(".py"):
            ast.parse((fixture_repo / f).read_bytes(), filename=f)
    tsl = pytest.importorskip("tree_sitter_languages")
    langs = {".ts": "typescript", ".tsx": "tsx", ".js": "javascript", ".go": "go", ".java": "java",
             ".c": "c", ".h": "c", ".cpp": "cpp", ".rs": "rust"}
    seen = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for f in files:
            lang = langs.get(Path(f).suffix)
            if lang:
                seen.add(lang)
                tree = tsl.get_parser(lang).parse((fixture_repo / f).read_bytes())
                assert not tree.root_node.has_error, f
    assert seen == set(langs.values())


# -- CLI ------------------------------------------------------------------------------------------
def test_cli_builds_and_refuses_a_non_empty_destination(tmp_path, monorepo_module):
    script = ROOT / "fixtures" / "build_monorepo.py"
    ok = subprocess.run([sys.executable, str(script), str(tmp_path / "repo")], capture_output=True, text=True)
    assert ok.returncode == 0 and (tmp_path / "repo" / ".git").is_dir()
    again = subprocess.run([sys.executable, str(script), str(tmp_path / "repo")], capture_output=True, text=True)
    assert again.returncode == 2
    assert again.stderr.strip().count("\n") == 0 and "not empty" in again.stderr
    with pytest.raises(monorepo_module.BuildError):
        monorepo_module.build(tmp_path / "repo")
