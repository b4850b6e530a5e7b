"""Credentials where the content scan did not look (issue 41 items 5 and 6): in a file that also
holds a NUL byte, in a file's name, in a commit message; and the report says what it read only
in part. Fake keys come from a seeded generator (fake_values), built at run time."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pyarrow.parquet as pq
from conftest import git
from fake_values import random_key

from repoguard.cli import main


def _keys(seed: int) -> tuple[str, str, str]:
    rng = random.Random(seed)
    return ("ghp_" + random_key(rng, 36), "sk_live_" + random_key(rng, 24), "ghp_" + random_key(rng, 36))


def _scan(capsys, *args) -> tuple[int, str, str]:
    rc = main(["scan", "--jobs", "1", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _clean(text: str, *secrets: str) -> None:
    for s in secrets:
        assert s not in text and s[4:] not in text and s[8:] not in text, "a credential was printed"


def test_nul_byte_file_is_scanned_and_the_summary_says_so(make_repo, capsys, monkeypatch):
    """A `.py` file with a NUL byte in its first 8 KB and a Stripe live key: reported by `scan`
    (the pre-commit hook's `scan FILE`), `scan --history` and `scan --staged`, with the real line;
    the text report says one file was read as binary and one was cut at --max-file-bytes."""
    gh, stripe, _ = _keys(5)
    body = b"# header\x00\x01\x02\nimport os\nKEY = '" + stripe.encode() + b"'\n"
    repo = make_repo({"app.py": body, "big.txt": "x = 1\n" * 200, "ok.py": "y = 2\n"})
    rc, out, err = _scan(capsys, str(repo), "--max-file-bytes", "1000")
    _clean(out + err, stripe)
    assert rc == 1 and "app.py:3:8: stripe-access-token" in out
    assert "note: 1 binary file(s) (a NUL byte in the first 8000 bytes) scanned over their printable runs only" in out
    assert "note: 1 file(s) longer than 1000 bytes scanned up to it only" in out
    monkeypatch.chdir(repo)
    rc, out, err = _scan(capsys, "app.py")                           # as the pre-commit hook calls it
    assert rc == 1 and "app.py:3:8: stripe-access-token" in out
    rc, out, err = _scan(capsys, str(repo), "--history", "--format", "json")
    _clean(out + err, stripe)
    doc = json.loads(out)
    assert [(f["path"], f["line"], f["rule_id"]) for f in doc["findings"]] == [("app.py", 3, "stripe-access-token")]
    assert doc["stats"]["binary"] == 1 and "binary file(s)" in err        # json: the note goes to stderr
    (repo / "new.py").write_bytes(b"\x00\x00" + b"\nT = '" + gh.encode() + b"'\n")
    git(repo, "add", "new.py")
    rc, out, err = _scan(capsys, str(repo), "--staged")
    _clean(out + err, gh)
    assert rc == 1 and "new.py:2:6: github-pat" in out


def test_short_printable_runs_of_a_binary_are_not_read(make_repo, capsys):
    """`strings -n 8`: a key cut into runs shorter than 8 characters by binary bytes is noise,
    not a key; the same key in one run is found."""
    _, stripe, _ = _keys(6)
    cut = b"\x00".join(stripe.encode()[i:i + 5] for i in range(0, len(stripe), 5))
    repo = make_repo({"blob.bin": b"\x00\x00KEY=" + cut + b"\n", "whole.bin": b"\x00\x00KEY=" + stripe.encode() + b"\n"})
    rc, out, _ = _scan(capsys, str(repo))
    assert rc == 1 and "whole.bin:1:7: stripe-access-token" in out and "blob.bin" not in out


def test_credentials_in_file_names_and_commit_messages(make_repo, capsys, tmp_path):
    """A token in a file name and one in a commit message: `scan` reports the name (redacted:
    the path is shown with the token as `****(40 chars)`), `scan --history` reports both, with
    the commit that introduced them; no output, baseline or example id holds either."""
    gh, _, gh2 = _keys(7)
    repo = make_repo({"README.md": "hi\n"})
    (repo / "cfg").mkdir()
    (repo / "cfg" / f"token_{gh}.txt").write_text("nothing secret here\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"add config\n\ntoken {gh2}\n")
    shown = "cfg/token_****(40 chars).txt"
    rc, out, err = _scan(capsys, str(repo))
    _clean(out + err, gh, gh2)
    assert rc == 1 and f"{shown}:1:11: github-pat: ****(40 chars) (in the file name)" in out
    rc, out, err = _scan(capsys, str(repo), "--history", "--format", "json")
    _clean(out + err, gh, gh2)
    got = sorted((f["path"], f["found_in"], f["rule_id"], f["line"]) for f in json.loads(out)["findings"])
    assert got == [("(commit message)", "commit message", "github-pat", 3), (shown, "file name", "github-pat", 1)]
    head = git(repo, "rev-parse", "HEAD").strip()
    assert all(f["commit"] == head for f in json.loads(out)["findings"])
    base = tmp_path / "baseline.json"
    rc, out, err = _scan(capsys, str(repo), "--history", "--baseline", str(base), "--update-baseline")
    _clean(base.read_text(), gh, gh2)
    rc, out, err = _scan(capsys, str(repo), "--history", "--baseline", str(base))
    assert rc == 0
    # example ids: the corpus keeps the file (its content is clean) under the redacted name
    out_dir = tmp_path / "out"
    assert main(["analyze", str(repo), "--out", str(out_dir), "--only", "credentials"]) == 0
    capsys.readouterr()
    ids = pq.read_table(out_dir / "corpus" / "examples.parquet").column("id").to_pylist()
    assert any(i.startswith(shown + "#0@") for i in ids)
    _clean(json.dumps(ids), gh)


def test_name_scan_of_many_files_finds_only_the_named_one(make_repo, capsys):
    """The names of 300 ordinary files plus one holding a token: exactly that one is reported,
    once; an ordinary `token_store.py` is not."""
    gh, _, _ = _keys(8)
    files = {f"pkg/mod_{i}/api_key_{i}.py": "x = 1\n" for i in range(300)}
    files["pkg/token_store.py"] = "y = 2\n"
    files[f"deploy/{gh}"] = "z = 3\n"
    repo = make_repo(files)
    rc, out, err = _scan(capsys, str(repo), "--format", "json")
    _clean(out + err, gh)
    found = json.loads(out)["findings"]
    assert [(f["path"], f["found_in"]) for f in found] == [("deploy/****(40 chars)", "file name")]


def test_report_evidence_shows_credential_file_names_redacted():
    """The published report's evidence explorer lists tied files: a file whose name holds a
    token is listed under its redacted name (issue 41 item 6, "everywhere else published")."""
    from repoguard.analyzers.incidence import Evidence
    from repoguard.report.collect import _explorer

    gh, _, _ = _keys(9)
    inc = SimpleNamespace(secrets=[SimpleNamespace(id="falcon", description="")], evidence=[
        Evidence(f"cfg/token_{gh}.txt", "falcon", "codenames", "path names codename 'Falcon'"),
        Evidence("src/falcon.py", "falcon", "codenames", "path names codename 'Falcon'")])
    (row,) = _explorer(None, inc, [{"id": "falcon"}])
    assert [e["path"] for e in row["evidence"]] == ["cfg/token_****(40 chars).txt", "src/falcon.py"]


def test_a_key_inside_a_file_with_a_token_name_is_still_tied(make_repo, tmp_path):
    """The name is redacted in ids, but the key in the file's text is tied to the file's
    example under its real path (the incidence matches evidence to files by path)."""
    from repoguard.analyzers.analyze import run_analyze
    from repoguard.core.config import parse_config
    from repoguard.source.gitrepo import GitRepo

    gh, stripe, _ = _keys(10)
    repo = make_repo({f"cfg/token_{gh}.py": f"KEY = '{stripe}'\n", "ok.py": "x = 1\n"})
    res = run_analyze(GitRepo(repo), parse_config(""), tmp_path / "out", only=["credentials"])
    inc = res.incidence
    (sid,) = [s.id for s in inc.secrets if s.id.startswith("credential:stripe-access-token:")]
    tied = [inc.example_ids[i] for i in inc.examples_of(sid)]
    assert len(tied) == 1 and tied[0].startswith("cfg/token_****(40 chars).py#0@")
    _clean(json.dumps(inc.example_ids), gh)
