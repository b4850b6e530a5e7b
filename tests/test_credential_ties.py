"""A credential secret ties only the examples (chunks) whose text held it, not every chunk of
its file: real corpus, real scan, real incidence."""
from __future__ import annotations

import random
import string
import zlib

from repoguard.analyzers.analyze import run_analyze
from repoguard.core.config import load_config
from repoguard.source.corpus import load_corpus
from repoguard.credentials.checksums import base62
from repoguard.source.gitrepo import GitRepo
from repoguard.analyzers.incidence import load_incidence


def _token() -> str:
    body = "".join(random.SystemRandom().choice(string.ascii_letters + string.digits) for _ in range(30))
    return "ghp_" + body + base62(zlib.crc32(body.encode())).decode()


def test_one_token_ties_only_its_chunk(make_repo, tmp_path):
    funcs = [f"def handler_{i}(x):\n    \"\"\"Handler {i}.\"\"\"\n    y = x * {i} + {i * 7}\n"
             f"    return [y + k for k in range({i % 9 + 3})]\n\n\n" for i in range(400)]
    tok = _token()
    funcs[200] = f"def release():\n    token = \"{tok}\"\n    return token\n\n\n"
    repo_dir = make_repo({"tools/handlers.py": "".join(funcs), "README.md": "# demo\n"})
    (repo_dir / "repoguard.toml").write_text("")
    out = tmp_path / "out"
    run_analyze(GitRepo(repo_dir), load_config(repo_dir / "repoguard.toml"), out, only=["credentials"])
    inc = load_incidence(out)
    corpus = load_corpus(out, repo_dir)
    creds = [j for j, s in enumerate(inc.secrets) if s.kind == "credential"]
    assert len(creds) == 1
    file_rows = [i for i, e in enumerate(corpus.examples) if e.path == "tools/handlers.py"]
    assert len(file_rows) >= 5, "the file must be cut into several chunks for this test to mean anything"
    tied = inc.matrix.tocsc()[:, creds[0]].nonzero()[0].tolist()
    holding = [i for i in file_rows if tok in corpus.text(corpus.examples[i])]
    assert tied == holding and len(tied) == 1


def test_fixture_credentials_tie_only_chunks_holding_them(fixture_repo, tmp_path, monorepo_module):
    out = tmp_path / "out"
    run_analyze(GitRepo(fixture_repo), load_config(fixture_repo / "repoguard.toml"), out, only=["credentials"])
    inc = load_incidence(out)
    corpus = load_corpus(out, fixture_repo)
    csc = inc.matrix.tocsc()
    ev_paths = {}
    for e in inc.evidence:
        ev_paths.setdefault(e.secret_id, set()).add(e.path)
    narrowed = 0
    for j, s in enumerate(inc.secrets):
        if s.kind != "credential":
            continue
        rows = csc[:, j].nonzero()[0].tolist()
        assert rows, s.id
        for path in ev_paths[s.id]:
            whole = corpus.file_examples.get(path, [])
            mine = [i for i in rows if i in whole]
            assert mine, (s.id, path)
            narrowed += len(mine) < len(whole)
    values = [monorepo_module.planted_secret(c["id"]) for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]]
    for j, s in enumerate(inc.secrets):  # a tied example of a planted single-line value holds it
        if s.kind != "credential":
            continue
        for i in csc[:, j].nonzero()[0].tolist():
            text = corpus.text(corpus.examples[i])
            assert any(v.splitlines()[0][:12] in text for v in values if v), s.id
    multi = {p for ps in ev_paths.values() for p in ps if len(corpus.file_examples.get(p, [])) > 1}
    assert narrowed >= (1 if multi else 0)
