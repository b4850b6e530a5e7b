"""Issue 32, holes B, F, G and two small items, each reproduced on a real git repository:

B. a codename in any text file (YAML, TOML, SQL, shell, an identifier) or in a file's path ties
   the file; repoguard's own config, manifest and output are never training examples;
F. an exposure by a clear phase survives a `git mv` of the file (matched by content, not path);
G. a tracked directory replaced by a symlink is not followed out of the checkout;
and `repoguard tag DIR`, and `[scan] rules` paths resolved the same way by `scan` and `analyze`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyzer_helpers import git, make_repo

from repoguard.analyzers.analyze import run_analyze
from repoguard.cli import main
from repoguard.core.config import parse_config
from repoguard.source.corpus import build_corpus, load_corpus
from repoguard.source.gitrepo import GitRepo, OutsideRoot

FALCON = """
[[secret]]
id = "falcon"
paths = ["secret/**"]
codenames = ["Falcon", "Blue Heron"]
[secret.propagate]
imports = 0
owners = false
"""


def _tied(out: Path, secret: str) -> set[str]:
    """Files with an example tied to `secret` in the incidence at `out`."""
    from repoguard.analyzers.incidence import load_incidence

    inc = load_incidence(out)
    corpus = load_corpus(out)
    j = [s.id for s in inc.secrets].index(secret)
    col = inc.matrix.tocsc()[:, j]
    rows = set(col.nonzero()[0])
    return {p for p, idx in corpus.file_examples.items() if rows & set(idx)}


# -- B: codenames everywhere ----------------------------------------------------------------------
def test_codename_in_any_text_file_identifier_or_path_ties_the_file(tmp_path):
    """Before: only comments/strings of 9 languages and doc files were read, so every file below
    but the control ones was untied (w = 1, trained in the clear by a two-phase run's phase 1)."""
    root = tmp_path / "r"
    make_repo(root, {
        "secret/model.py": "W = 1\n",
        "config/blend.yaml": "weights:\n  falcon_blend: [0.2, 0.8]\n",
        "config/settings.toml": "[FalconRefit]\nlr = 0.1\n",
        "db/positions.sql": "SELECT * FROM FALCON_POSITIONS;\n",
        "scripts/run.sh": "#!/bin/sh\nexport FALCON_BLEND=1\n",
        "app/weights.py": "FALCON_BLEND_WEIGHTS = [0.1, 0.9]\n",           # an identifier, no prose
        "app/heron.py": "class BlueHeronModel:\n    pass\n",                # two-word codename, camelCase
        "app/heron2.py": "blueheron_rate = 3\n",                            # ... written as one word
        "app/call.py": "x = f('\"\"\"Falcon notes.')\n",                     # punctuation glued to it
        "models/falcon-blend.json": "{\"a\": 1}\n",                         # the path names it
        "Falcon2/notes.txt": "nothing\n",                                   # a directory, digit suffix
        # controls: other words that merely contain the codename are not it
        "birds/falconer.py": "falconer = 'a person who keeps falcons'\n",
        "birds/heron.txt": "a blue heron\n",  # not a control: the words are the codename (case-insensitive)
    })
    out = tmp_path / "out"
    run_analyze(GitRepo(root), parse_config(FALCON), out)
    tied = _tied(out, "falcon")
    assert tied == {"secret/model.py", "config/blend.yaml", "config/settings.toml", "db/positions.sql",
                    "scripts/run.sh", "app/weights.py", "app/heron.py", "app/heron2.py", "app/call.py",
                    "models/falcon-blend.json", "Falcon2/notes.txt", "birds/heron.txt"}
    from repoguard.analyzers.incidence import load_incidence

    reasons = {(e.path, e.reason) for e in load_incidence(out).evidence if e.analyzer == "codenames"}
    assert ("models/falcon-blend.json", "path names codename 'Falcon'") in reasons
    assert ("app/weights.py", "mentions codename 'Falcon' at line 1") in reasons


def test_config_manifest_and_output_are_never_examples(tmp_path, capsys, monkeypatch):
    """Before: repoguard.toml (codenames, descriptions), .repoguard/sensitive.toml (which files
    carry which secret) and a --config file in the checkout were untied examples at w = 1."""
    root = tmp_path / "r"
    make_repo(root, {
        "repoguard.toml": FALCON,
        "conf/guard.toml": FALCON.replace("paths =", 'description = "Falcon: our alpha blend"\npaths ='),
        ".repoguard/sensitive.toml": '[files]\n"secret/model.py" = ["falcon"]\n',
        "artefacts/old-report.json": "{\"secret\": \"falcon\"}\n",
        "secret/model.py": "W = 1\n",
        "public.py": "print('hello')\n",
    })
    monkeypatch.chdir(tmp_path)                  # --config and --out relative to the working directory
    rc = main(["analyze", "-q", "--json", "--config", "r/conf/guard.toml", "--out", "r/artefacts", "r"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    summary = json.loads(cap.out)
    corpus = load_corpus(root / "artefacts")
    assert sorted(corpus.files) == ["public.py", "secret/model.py"]
    own = sorted(e.path for e in corpus.excluded if e.reason == "repoguard")
    assert own == [".repoguard/sensitive.toml", "artefacts/old-report.json", "conf/guard.toml", "repoguard.toml"]
    assert summary["left_out"]["repoguard"]["files"] == 4
    assert "never training examples" in summary["left_out"]["repoguard"]["why"]
    # a plain build (no config path given) still leaves out the default config and manifest
    plain = build_corpus(GitRepo(root))
    assert "repoguard.toml" not in plain.files and ".repoguard/sensitive.toml" not in plain.files


# -- G: symlinks --------------------------------------------------------------------------------
def test_directory_replaced_by_symlink_is_not_followed(tmp_path, caplog):
    """Before: `etcconf/passwd` (tracked) read through `etcconf` → an outside directory entered the
    corpus, so the outside file's text was trained."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:OUTSIDE-MARKER\n")
    root = tmp_path / "r"
    make_repo(root, {"etcconf/passwd": "placeholder\n", "a.py": "x = 1\n"})
    (root / "etcconf" / "passwd").unlink()
    (root / "etcconf").rmdir()
    (root / "etcconf").symlink_to(outside, target_is_directory=True)
    repo = GitRepo(root)
    corpus = build_corpus(repo)
    assert corpus.files == ["a.py"]
    ex = {e.path: e for e in corpus.excluded}
    assert ex["etcconf/passwd"].reason == "symlink" and "etcconf" in ex["etcconf/passwd"].detail
    assert "below a directory replaced by a symlink" in caplog.text
    for text in (corpus.text(e) for e in corpus.examples):
        assert "OUTSIDE-MARKER" not in text
    for links_inside in (False, True):
        with pytest.raises(OutsideRoot):
            repo.read_working_file("etcconf/passwd", links_inside=links_inside)
    # metadata linked inside the checkout (a CODEOWNERS symlink) is still read where allowed
    (root / "docs").mkdir()
    (root / "docs" / "CODEOWNERS").write_text("* @acme/x\n")
    (root / ".github").mkdir()
    (root / ".github" / "CODEOWNERS").symlink_to("../docs/CODEOWNERS")
    assert repo.read_working_file(".github/CODEOWNERS", links_inside=True) == b"* @acme/x\n"
    with pytest.raises(OutsideRoot):
        repo.read_working_file(".github/CODEOWNERS")
    # and through the analyze stage: the summary states it
    res = run_analyze(repo, parse_config(FALCON), tmp_path / "out")
    assert res.summary["left_out"]["symlink"]["paths"] == ["etcconf/passwd"]


# -- F: exposure after a rename -------------------------------------------------------------------
RENAMED_SECRET = """

[[secret]]
id = "digest-moved"
description = "declared over a file moved after a two-phase run trained it in the clear"
paths = ["reports/moved_digest.py"]

[secret.propagate]
imports = 0
owners = false
codenames = false
"""


@pytest.mark.slow
def test_exposure_survives_a_rename(fixture_repo_copy, capsys):
    """Before: ids are `path#chunk@blob`, matched whole, so `git mv` then declaring the secret over
    the new path gave "exposures: none" and `plan` planned as if nothing had been trained in the
    clear."""
    from repoguard.accounting.ledger import record_run
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan

    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    fast = ["--steps", "20", "--batch-size", "8", "--c", "1"]
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", str(repo), *fast]) == 0
    inc, plan = load_incidence(out), load_plan(out)
    tied = inc.matrix.getnnz(axis=1) > 0
    row = {e: i for i, e in enumerate(plan.example_ids)}
    public = [e for i, e in enumerate(inc.example_ids) if not tied[i] and not plan.test_mask[row[e]]]
    old_ids = [e for e in public if e.startswith("reports/weekly_digest.py#")]
    assert old_ids
    record_run(out / "ledger.jsonl", plan, run_id="clear-1", steps_completed=plan.steps, status="completed",
               clear_example_ids=public)

    git(repo, "mv", "reports/weekly_digest.py", "reports/moved_digest.py")
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text() + RENAMED_SECRET)
    assert main(["analyze", "-q", str(repo)]) == 0
    capsys.readouterr()
    rc = main(["plan", "--json", str(repo), *fast])
    err = capsys.readouterr().err
    assert rc == 1, err
    line = err.strip().splitlines()[-1]
    assert "digest-moved" in line and "clear-1" in line and "reports/moved_digest.py#0@" in line
    rc, shown = main(["ledger", "show", str(repo), "--json"]), capsys.readouterr().out
    (x,) = [x for x in json.loads(shown)["exposures"] if x["secret"] == "digest-moved"]
    assert x["n_examples"] == len(old_ids) and x["run_id"] == "clear-1"


# -- small items --------------------------------------------------------------------------------
TAG_CONFIG = '[[secret]]\nid = "alpha"\npaths = ["secret/**"]\n'


def test_tag_a_directory_tags_the_files_below_it(tmp_path, monkeypatch, capsys):
    """Before: `repoguard tag .` took "." as a file, examined nothing and exited 0 silently."""
    from repoguard.tagging.tag import MANIFEST, read_manifest

    root = tmp_path / "r"
    make_repo(root, {"repoguard.toml": TAG_CONFIG, "secret/a.py": "A = 1\n", "lib/b.py": "B = 2\n",
                     "other/c.py": "C = 3\n"})
    monkeypatch.chdir(root)
    assert main(["tag", "--json", "."]) == 1                  # the manifest changed: review it
    doc = json.loads(capsys.readouterr().out)
    # repoguard.toml is repoguard's own file (it names every codename): never tagged, as in analyze
    assert doc["examined"] == ["lib/b.py", "other/c.py", "secret/a.py"]
    assert read_manifest(root / MANIFEST) == {"secret/a.py": {"alpha": ["declared"]}}
    (root / MANIFEST).unlink()
    assert main(["tag", "--json", "secret/"]) == 1
    assert json.loads(capsys.readouterr().out)["examined"] == ["secret/a.py"]
    assert main(["tag", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert "nosuch: not a file or directory in the git index" in err and "Traceback" not in err


RULE = """
[[rules]]
id = "acme-internal-token"
description = "ACME internal token"
regex = '''\\b(acme_[a-z0-9]{24})\\b'''
keywords = ["acme_"]
"""


def test_scan_rules_resolve_against_the_repository_in_scan_and_analyze(tmp_path, monkeypatch, capsys):
    """Before: `[scan] rules = ["rules/acme.toml"]` was read from the repository by `scan` and from
    the working directory by `analyze`: run elsewhere, analyze failed or loaded another file."""
    root = tmp_path / "r"
    make_repo(root, {
        "repoguard.toml": '[scan]\nrules = ["ci/acme.toml"]\nuse_default_rules = false\n',
        "ci/acme.toml": RULE,
        "app/settings.py": "TOKEN = 'acme_a0b1c2d3e4f5g6h7i8j9k0l1'\n",
    })
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    rc = main(["scan", "--format", "json", str(root)])
    found = json.loads(capsys.readouterr().out)
    assert rc == 1 and {f["rule_id"] for f in found["findings"]} == {"acme-internal-token"}
    rc = main(["analyze", "-q", "--json", str(root)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    secrets = json.loads(cap.out)["per_secret"]
    assert [s for s in secrets if s.startswith("credential:acme-internal-token:")]
