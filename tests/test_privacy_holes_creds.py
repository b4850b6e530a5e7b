"""Issue 32, holes C and D: credentials never reach training text (whole-file redaction with the
scan's rule set), and nothing published lets a dictionary recover a credential (keyed
fingerprints, no value characters). Real repos, real scans, real corpus."""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import random
import re
import stat
import string
import subprocess

import pytest

from repoguard.analyzers.analyze import run_analyze
from repoguard.core.config import load_config
from repoguard.source.corpus import load_corpus
from repoguard.source.gitrepo import GitRepo
from repoguard.analyzers.incidence import load_incidence
from repoguard.training.data import default_redactor, example_texts

CUSTOM_RULES = """
[[rules]]
id = "acme-internal-token"
description = "ACME internal service token"
regex = '''\\b(acmetok_[a-z0-9]{32})\\b'''
secretGroup = 1
keywords = ["acmetok_"]
"""


def _pem_4096() -> tuple[str, list[str]]:
    """A 4096-bit-RSA-shaped PEM block (DER prefix of a 4096-bit PKCS#1 key, then random bytes:
    not a key anybody holds) and its base64 lines."""
    rng = random.SystemRandom()
    der = bytes.fromhex("308209280201000282020100") + bytes(rng.getrandbits(8) for _ in range(2336))
    b64 = base64.b64encode(der).decode()
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----\n", lines


def _custom_token() -> str:
    return "acmetok_" + "".join(random.SystemRandom().choice(string.ascii_lowercase + string.digits) for _ in range(32))


def _all_texts(out, root):
    corpus = load_corpus(out, root)
    return corpus, example_texts(corpus, corpus.example_ids(), redactor=default_redactor(out, root))


def _leaks(texts, pieces) -> int:
    """How many of `pieces` occur in any text (a count: a failing assert never prints a value)."""
    return sum(1 for p in pieces if any(p in t for t in texts))


def test_two_chunk_pem_leaves_no_key_line_in_any_training_text(make_repo, tmp_path):
    pem, lines = _pem_4096()
    intro = "".join(f"# certificate bundle entry {i}: issued by the ACME internal CA for host-{i}\n" for i in range(25))
    bundle = intro + pem + "# end of bundle\n"
    n_lines = len(lines)
    assert 5000 < len(bundle) < 5600 and n_lines >= 48
    repo = make_repo({"infra/certs/bundle.pem": bundle, "README.md": "# certs\n",
                      "repoguard.toml": "[corpus]\nexample_max_chars = 2600\n"})
    out = tmp_path / "out"
    run_analyze(GitRepo(repo), load_config(repo / "repoguard.toml"), out, only=["credentials"])
    corpus, texts = _all_texts(out, repo)
    pem_chunks = [e for e in corpus.examples if e.path == "infra/certs/bundle.pem"]
    holding = sum(any(ln in corpus.text(e) for ln in lines) for e in pem_chunks)
    assert holding >= 2, "the key must straddle a chunk boundary for this test to mean anything"
    leaked = _leaks(texts, lines)
    assert leaked == 0
    assert sum(t.count("<REDACTED:") for t in texts) >= 2


def test_custom_rule_token_is_tied_and_redacted(make_repo, tmp_path):
    tok = _custom_token()
    code = "".join(f"def handler_{i}(x):\n    return x * {i}\n\n\n" for i in range(40))
    rules = tmp_path / "acme-rules.toml"
    rules.write_text(CUSTOM_RULES)
    repo = make_repo({"services/client.py": code + f'client.connect("{tok}")\n' + code,
                      "repoguard.toml": f'[scan]\nrules = ["{rules}"]\n'})
    out = tmp_path / "out"
    run_analyze(GitRepo(repo), load_config(repo / "repoguard.toml"), out, only=["credentials"])
    inc = load_incidence(out)
    assert any(s.kind == "credential" and s.id.startswith("credential:acme-internal-token:") for s in inc.secrets)
    _, texts = _all_texts(out, repo)
    leaked = _leaks(texts, [tok, tok[8:20]])
    assert leaked == 0 and sum(t.count("<REDACTED:acme-internal-token>") for t in texts) == 1


def test_relative_custom_rules_resolve_against_the_repository(make_repo, tmp_path, monkeypatch):
    """`[scan] rules = ["rules/acme.toml"]` means the repository's file in analyze and training
    too (as in `repoguard scan`), whatever the working directory."""
    tok = _custom_token()
    repo = make_repo({"rules/acme.toml": CUSTOM_RULES, "svc.py": f'client.connect("{tok}")\n',
                      "repoguard.toml": '[scan]\nrules = ["rules/acme.toml"]\n'})
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    run_analyze(GitRepo(repo), load_config(repo / "repoguard.toml"), out, only=["credentials"])
    assert any(s.id.startswith("credential:acme-internal-token:") for s in load_incidence(out).secrets)
    _, texts = _all_texts(out, repo)
    leaked = _leaks(texts, [tok])
    assert leaked == 0


def test_fixture_keys_do_not_leak_with_small_examples(fixture_repo, tmp_path, monorepo_module):
    cfg = load_config(fixture_repo / "repoguard.toml")
    cfg = dataclasses.replace(cfg, corpus=dataclasses.replace(cfg.corpus, example_max_chars=600))
    out = tmp_path / "out"
    run_analyze(GitRepo(fixture_repo), cfg, out, only=["credentials"])
    _, texts = _all_texts(out, fixture_repo)
    rsa = [ln for ln in monorepo_module.planted_secret("rsa-private-key").split("\n") if len(ln) >= 40]
    gcp = [ln for ln in monorepo_module.planted_secret("gcp-service-account").split("\\n") if len(ln) >= 40]
    assert len(rsa) >= 17 and len(gcp) >= 17
    leaked_rsa, leaked_gcp = _leaks(texts, rsa), _leaks(texts, gcp)
    assert leaked_rsa == 0 and leaked_gcp == 0
    every = [monorepo_module.planted_secret(c["id"]) for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]]
    leaked = _leaks(texts, [v for v in every if "\n" not in v and "\\n" not in v])
    assert leaked == 0


def test_overlapping_findings_are_redacted_as_one_span():
    from repoguard.credentials.findings import Finding
    from repoguard.credentials.redact import redact_range

    def f(rule, s, e):
        return Finding(rule_id=rule, path="a", line=1, column=1, end_line=1, start=s, end=e,
                       secret_hmac="", redacted="", entropy=0.0)

    data = b"0123456789abcdefghij"
    text, local = redact_range(data, [f("a", 2, 6), f("b", 4, 12)], 0, len(data))
    assert text == "01<REDACTED:a>cdefghij"
    text, local = redact_range(data, [f("a", 2, 6), f("b", 4, 12)], 5, 15)
    assert text == "<REDACTED:a>cde" and [(x.start, x.end) for x in local] == [(0, 1), (0, 7)]


# -- D: keyed fingerprints, no value characters ---------------------------------------------------
_SCHEMES = ("sha256", "sha1", "md5", "sha512", "sha3_256", "blake2b", "sha224", "sha384")


def _published_text(path) -> str:
    """A published file as text: parquet tables and npz arrays decoded, other files as bytes."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return str(pq.read_table(path).to_pylist())
    if path.suffix == ".npz":
        import numpy as np

        with np.load(path, allow_pickle=False) as z:
            return " ".join(str(z[k].tolist()) for k in z.files)
    return path.read_bytes().decode("utf-8", errors="replace")


def _exact_values(repo) -> list[bytes]:
    """Every credential value the scan finds in the working tree, as the engine extracted it."""
    from repoguard.credentials.engine import Engine
    from repoguard.credentials.rules import load_rules

    eng = Engine.build(load_rules())
    out = []
    for p in sorted(x for x in repo.rglob("*") if x.is_file() and ".git" not in x.parts and ".repoguard" not in x.parts):
        data = p.read_bytes()
        if b"\0" in data[:8000]:
            continue
        out += [data[f.start:f.end] for f in eng.scan(data, str(p.relative_to(repo))) if f.end > f.start and not f.decoded]
    return out


@pytest.mark.slow
def test_no_published_file_lets_a_dictionary_recover_a_credential(fixture_repo_copy, tmp_path, monkeypatch,
                                                                   monorepo_module, capsys):
    from repoguard.cli import main

    repo = fixture_repo_copy
    monkeypatch.setenv("REPOGUARD_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.delenv("REPOGUARD_KEY_FILE", raising=False)
    pub = tmp_path / "pub"
    pub.mkdir()
    assert main(["scan", str(repo), "--format", "sarif", "--output", str(pub / "scan.sarif")]) == 1
    assert main(["scan", str(repo), "--json", "--output", str(pub / "scan.json")]) == 1
    assert main(["scan", str(repo), "--output", str(pub / "scan.txt")]) == 1
    assert main(["scan", str(repo), "--baseline", str(pub / "baseline.json"), "--update-baseline"]) == 0
    assert main(["analyze", str(repo)]) == 0
    assert main(["plan", str(repo), "--steps", "20", "--batch-size", "8"]) == 0
    assert main(["tag", "--all", "--repo", str(repo)]) in (0, 1)
    printed = capsys.readouterr()
    files = [p for p in [*pub.iterdir(), *(repo / ".repoguard").rglob("*")] if p.is_file()]
    assert any(p.name == "sensitive.toml" for p in files) and any(p.name == "plan.json" for p in files)
    texts = [_published_text(p).lower() for p in files] + [printed.out.lower(), printed.err.lower()]
    assert sum("credential:" in t for t in texts) >= 3          # secret ids are published (plan, incidence, manifest)

    exact = _exact_values(repo)
    values = exact + [monorepo_module.planted_secret(c["id"]).encode() for c in monorepo_module.PLANTED_CREDENTIALS]
    assert len(values) >= 15
    recovered = 0
    for v in values:
        digests = [hashlib.new(s, v).hexdigest() for s in _SCHEMES]
        recovered += any(d[:12] in t for d in digests for t in texts)
    assert recovered == 0
    # no value characters: no finding shows the first characters of its value
    prefixes = {v[:4].decode().lower() + "…" for v in exact} | {v[:8].decode().lower() for v in exact
                                                               if len(v) >= 16 and not v.startswith(b"-----")}
    shown = sum(1 for p in prefixes for t in texts if p in t)
    assert shown == 0 and len(prefixes) >= 10
    sarif = json.loads((pub / "scan.sarif").read_text())
    for res in sarif["runs"][0]["results"]:
        assert re.search(r"credential \*{4}\(\d+ chars\) found", res["message"]["text"])


def test_key_file_is_private_shared_by_clones_and_can_be_set_for_a_team(make_repo, tmp_path, monkeypatch, capsys):
    from repoguard.cli import main
    from repoguard.credentials import keys

    monkeypatch.setenv("REPOGUARD_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.delenv("REPOGUARD_KEY_FILE", raising=False)
    tok = "ghp_" + "".join(random.SystemRandom().choice(string.ascii_letters + string.digits) for _ in range(36))
    repo = make_repo({"app.py": f"T = '{tok}'\n"})
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)

    def fingerprints(root):
        capsys.readouterr()
        main(["scan", str(root), "--json"])
        return sorted(f["fingerprint"] for f in json.loads(capsys.readouterr().out)["findings"])

    a, b = fingerprints(repo), fingerprints(clone)
    assert a == b and len(a) == 1 and hashlib.sha256(tok.encode()).hexdigest()[:32] not in a[0]
    (key,) = (tmp_path / "keys").iterdir()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    # A team's key file (CI secret): fingerprints follow it, the same on every machine.
    team = tmp_path / "team.key"
    team.write_text("ab" * 32 + "\n")
    monkeypatch.setenv("REPOGUARD_KEY_FILE", str(team))
    c = fingerprints(repo)
    assert c != a and c == fingerprints(clone)
    monkeypatch.setenv("REPOGUARD_KEY_FILE", str(tmp_path / "missing.key"))
    with pytest.raises(Exception) as exc:
        keys.repo_key(repo)
    assert "missing.key" in str(exc.value)


def test_old_and_foreign_baselines_are_refused_with_one_line(make_repo, tmp_path, monkeypatch, capsys):
    from repoguard.cli import main

    monkeypatch.setenv("REPOGUARD_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.delenv("REPOGUARD_KEY_FILE", raising=False)
    tok = "ghp_" + "".join(random.SystemRandom().choice(string.ascii_letters + string.digits) for _ in range(36))
    repo = make_repo({"app.py": f"T = '{tok}'\n"})
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 1, "tool": "repoguard", "entries": [
        {"fingerprint": f"github-pat:app.py:{hashlib.sha256(tok.encode()).hexdigest()[:32]}",
         "rule_id": "github-pat", "path": "app.py"}]}))
    capsys.readouterr()
    assert main(["scan", str(repo), "--baseline", str(old)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "version 1" in err and "--update-baseline" in err and str(old) in err
    assert main(["scan", str(repo), "--baseline", str(old), "--update-baseline"]) == 0
    doc = json.loads(old.read_text())
    assert doc["version"] == 2 and doc["fingerprints"] == "hmac-sha256" and len(doc["entries"]) == 1
    assert main(["scan", str(repo), "--baseline", str(old)]) == 0          # suppressed under the same key
    monkeypatch.setenv("REPOGUARD_KEY_DIR", str(tmp_path / "other-machine"))
    capsys.readouterr()
    assert main(["scan", str(repo), "--baseline", str(old)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another fingerprint key" in err and "REPOGUARD_KEY_FILE" in err
