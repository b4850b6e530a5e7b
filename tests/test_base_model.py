"""The embedded base model (`training.base_model`): pretrained on the interpreter's standard library,
cached by corpus and config digest, built once (lock + temp dir + rename), rebuilt when corrupt;
it knows public code (held-out fixture loss far below a random model's) and its tokenizer never
saw the repository."""
from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from repoguard.training import base_model as bm
from repoguard.training.model import TinyConfig

# A base small enough to build in about a second: the cache's behaviour does not depend on size.
SMALL = bm.PretrainConfig(size=TinyConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_layers=1,
                                          num_heads=2, max_position=64), steps=3, batch_size=2, seq_len=32)


@pytest.fixture(scope="module")
def small_corpus():
    """The first 40 files of the real standard-library corpus, each cut to 4 000 characters."""
    return [(p, t[:4000]) for p, t in bm.stdlib_corpus()[:40]]


def test_corpus_is_the_standard_library_without_tests_and_generated_tables():
    corpus = bm.stdlib_corpus()
    paths = [p for p, _ in corpus]
    assert paths == sorted(paths) and len(paths) > 100
    assert "os.py" in paths and "json/decoder.py" in paths
    assert not any(set(p.split("/")[:-1]) & bm.SKIP_DIRS for p in paths)
    assert not any(p.startswith(("test/", "encodings/", "site-packages/")) for p in paths)


def test_cache_key_changes_with_config_corpus_and_location_env(small_corpus, monkeypatch, tmp_path):
    digest = bm.corpus_digest(small_corpus)
    key = bm.cache_key(digest, SMALL)
    assert key == bm.cache_key(bm.corpus_digest(list(small_corpus)), SMALL)          # deterministic
    for change in (dict(steps=4), dict(seq_len=64), dict(lr=1e-3), dict(seed=1),
                   dict(size=dataclasses.replace(SMALL.size, hidden_size=32))):
        assert bm.cache_key(digest, dataclasses.replace(SMALL, **change)) != key, change
    edited = [(p, t + "\n# edited") if i == 3 else (p, t) for i, (p, t) in enumerate(small_corpus)]
    assert bm.cache_key(bm.corpus_digest(edited), SMALL) != key                     # contents
    assert bm.cache_key(bm.corpus_digest(small_corpus[1:]), SMALL) != key           # file list
    monkeypatch.delenv("REPOGUARD_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert bm.cache_root() == tmp_path / "xdg" / "repoguard"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert bm.cache_root() == Path.home() / ".cache" / "repoguard"
    monkeypatch.setenv("REPOGUARD_CACHE_DIR", str(tmp_path / "mine"))
    assert bm.cache_root() == tmp_path / "mine"


@pytest.mark.slow
def test_second_call_reuses_the_cache_and_a_corrupt_entry_is_rebuilt(small_corpus, tmp_path, caplog):
    cache = tmp_path / "cache"
    n0 = bm.builds
    with caplog.at_level(logging.INFO, logger="repoguard"):
        d = bm.ensure_base(config=SMALL, cache_dir=cache, corpus=small_corpus, show_progress=False)
    assert bm.builds == n0 + 1
    building = [r.getMessage() for r in caplog.records if "building the embedded base" in r.getMessage()]
    assert len(building) == 1 and str(d) in building[0]
    assert d.name == f"base-{bm.cache_key(bm.corpus_digest(small_corpus), SMALL)}"
    weights = d / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="repoguard"):
        again = bm.ensure_base(config=SMALL, cache_dir=cache, corpus=small_corpus, show_progress=False)
    assert again == d and bm.builds == n0 + 1 and weights.stat().st_mtime_ns == stamp
    assert not any("building" in r.getMessage() for r in caplog.records)
    assert not [p for p in cache.iterdir() if p.name.startswith(".base-")]             # no temp dir left
    meta = json.loads((d / "meta.json").read_text())
    assert meta["val_loss"] < meta["val_loss_init"]                                     # it trained

    # Half-written (weights truncated): rebuilt, and the rebuilt model loads.
    weights.write_bytes(weights.read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="repoguard"):
        d2 = bm.ensure_base(config=SMALL, cache_dir=cache, corpus=small_corpus, show_progress=False)
    assert d2 == d and bm.builds == n0 + 2
    assert any("corrupt" in r.getMessage() and str(d) in r.getMessage() for r in caplog.records)
    # No meta.json (a crash before the rename would never leave this, a hand copy might): rebuilt.
    (d / "meta.json").unlink()
    bm.ensure_base(config=SMALL, cache_dir=cache, corpus=small_corpus, show_progress=False)
    assert bm.builds == n0 + 3 and (d / "meta.json").is_file()
    model, tok = bm.embedded_base(max_length=100, config=SMALL, cache_dir=cache, show_progress=False)
    assert model.config.max_position_embeddings == 100 and len(tok) == model.config.vocab_size
    # A cache that cannot be created: one line naming the directory.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    from repoguard.core.errors import InputError
    with pytest.raises(InputError, match=r"file/sub: cannot create the model cache"):
        bm.ensure_base(config=SMALL, cache_dir=blocker / "sub", corpus=small_corpus, show_progress=False)


_RACE = """
import json, sys
from pathlib import Path
from repoguard.training import base_model as bm
from repoguard.training.model import TinyConfig
cfg = bm.PretrainConfig(size=TinyConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_layers=1,
                                        num_heads=2, max_position=64), steps=40, batch_size=2, seq_len=32)
d = bm.ensure_base(config=cfg, cache_dir=Path(sys.argv[1]), corpus=[(p, t[:4000]) for p, t in bm.stdlib_corpus()[:40]],
                   show_progress=False)
print(json.dumps({"dir": str(d), "builds": bm.builds}))
"""


@pytest.mark.slow
def test_two_processes_build_once_and_never_see_a_half_written_model(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(tmp_path / "cache")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["dir"] == results[1]["dir"]
    assert sorted(r["builds"] for r in results) == [0, 1]      # one built, the other waited and loaded
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == \
        [Path(results[0]["dir"]).name]


def test_pretrained_base_knows_public_code_far_better_than_a_random_model(embedded_base_dir, fixture_repo_copy):
    """Held-out: the fixture's public examples (tied to no secret), which the base never saw."""
    import torch

    from repoguard.cli import main
    from repoguard.source.corpus import load_corpus
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.training.data import collate, default_redactor, example_texts, per_example_loss, tokenize
    from repoguard.training.model import tiny_llama

    assert main(["analyze", "-q", str(fixture_repo_copy)]) == 0
    out = fixture_repo_copy / ".repoguard"
    inc = load_incidence(out)
    tied = inc.matrix.getnnz(axis=1) > 0
    texts = example_texts(load_corpus(out, fixture_repo_copy), inc.example_ids, redactor=default_redactor())
    public = [t for t, bad in zip(texts, tied) if not bad]
    assert len(public) >= 30
    model, tok = bm.embedded_base(max_length=128, show_progress=False)
    size = bm.DEFAULT.size
    random_model, _ = tiny_llama(tok, seed=0, size=size)
    batch = collate(tokenize(public, tok, max_length=128), pad_id=tok.pad_token_id)
    losses = {}
    with torch.no_grad():
        for name, m in (("pretrained", model), ("random", random_model)):
            logits = m.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            losses[name] = float(per_example_loss(logits, batch["labels"]).mean())
    assert losses["pretrained"] < 0.85 * losses["random"], losses


@pytest.mark.slow
def test_tokenizer_never_saw_the_repository(embedded_base_dir, make_repo, capsys):
    """A word repeated all over a repository's public files — a merge of any tokenizer fitted on
    that text — is no token of the embedded base, whose tokenizer `train` ships unchanged."""
    from repoguard.cli import main
    from repoguard.training.model import train_tokenizer

    word = "zqxwvk_qualmprat"
    files = {f"src/web/m{i}.py": f"def {word}_{i}(x):\n" + f"    {word} = x  # {word}\n" * 40 for i in range(12)}
    files["src/alpha/signals.py"] = "ALPHA_BLEND_WEIGHTS = [0.42, 0.58]\n"
    files["repoguard.toml"] = '[[secret]]\nid = "alpha"\npaths = ["src/alpha/**"]\np = 1e-4\nr = 0.05\n'
    repo = make_repo(files)
    fitted_on_repo = json.loads(train_tokenizer(list(files.values()), vocab_size=300).backend_tokenizer.to_str())
    assert any("qualm" in t for t in fitted_on_repo["model"]["vocab"])   # the leak the old design risked
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "2", "--steps", "2", "--c", "1", str(repo)]) == 0
    assert main(["train", "-q", "--max-length", "32", str(repo)]) == 0
    shipped = json.loads((repo / ".repoguard" / "train" / "base_model" / "tokenizer.json").read_text())
    cached = json.loads((embedded_base_dir / "tokenizer.json").read_text())
    assert shipped["model"]["vocab"] == cached["model"]["vocab"]
    assert shipped["model"]["merges"] == cached["model"]["merges"]
    pieces = ("qualm", "zqxw", "ALPHA_BLEND")
    assert not any(p in t for t in shipped["model"]["vocab"] for p in pieces)
    assert not any(p in "".join(m) if isinstance(m, list) else p in m.replace(" ", "")
                   for m in shipped["model"]["merges"] for p in pieces)
