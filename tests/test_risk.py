"""`repoguard audit risk` on trained runs of the fixture monorepo: a real tiny Llama, real LoRA,
real DP-SGD with the accountant's σ, real credential redaction.

A canary line is committed at the top of every file of the test secret (`fixtures/audit_setup.py`:
trading/alpha/, services/risk/, libs/pricing/), so it is repeated in many training examples. A
`--no-dp` run and a DP run are trained from the same plan (200 steps); the risk ranking must put
the canary's examples at the top of the --no-dp table and not under DP.
"""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from audit_setup import (HELD_OUT, LR, SECRET, K, M, one_thread, plant_canary, prepare_out, pretrained_public_base,
                         training_config)
from conftest import git

_RUNS: dict = {}


@pytest.fixture(scope="module")
def runs(fixture_repo, tmp_path_factory):
    """(repo, {"no-dp": out, "dp": out}, canary example ids): two runs trained once per module."""
    if not _RUNS:
        from repoguard.pipeline.train_stage import RunOptions, run_training

        base = tmp_path_factory.mktemp("risk")
        repo = base / "monorepo"
        shutil.copytree(fixture_repo, repo, symlinks=True)
        files = plant_canary(repo)
        # Held-out public files: never training examples (excluded from the corpus); the base is
        # pretrained on them, as a real base knows public code (licence headers, idioms) but
        # never saw the run's examples.
        held = [p for p in git(repo, "ls-files").split("\n") if p.startswith(HELD_OUT) and p.endswith(".py")]
        from repoguard.training.data import default_redactor

        red = default_redactor()
        base_dir = pretrained_public_base([red((repo / p).read_text(), p)[0] for p in held], base / "base",
                                          max_length=training_config().max_length)
        cfg = dataclasses.replace(training_config(), model=str(base_dir))
        outs = {}
        for label in ("no-dp", "dp"):
            out = base / label
            plan, _ = prepare_out(repo, out, steps=200, exclude=tuple(held))
            with one_thread():
                run_training(root=repo, out=out, cfg=dataclasses.replace(cfg, learning_rate=LR[label]),
                             opts=RunOptions(private=label == "dp", device="cpu", show_progress=False))
            outs[label] = out
        from repoguard.source.corpus import load_corpus

        corpus = load_corpus(outs["dp"], repo)
        canary_ids = {e.id for e in corpus.examples if e.path in files and e.chunk == 0}
        _RUNS.update(repo=repo, outs=outs, canary=canary_ids, cfg=cfg, held=held)
    return _RUNS


def _audit(runs, label, **kw):
    from repoguard.audit.risk import run_risk_audit

    with one_thread():
        return run_risk_audit(out=runs["outs"][label], root=runs["repo"], cfg=runs["cfg"], k=K, m=M,
                              device="cpu", per_secret=40, **kw)


@pytest.mark.slow
def test_canary_tops_the_no_dp_table_and_drops_under_dp(runs):
    canary = runs["canary"]
    assert len(canary) >= 15
    ranks = {}
    for label in ("no-dp", "dp"):
        doc = _audit(runs, label)
        assert doc["private"] is (label == "dp")
        table = next(t for t in doc["secrets"] if t["secret"] == SECRET)
        npz = np.load(runs["outs"][label] / "audit" / "risk.npz")
        from repoguard.planning.plan import load_plan

        ids = load_plan(runs["outs"][label]).example_ids
        is_canary = np.array([ids[r] in canary for r in npz["plan_row"]]) & ~npz["credential"]
        ranks[label] = npz["rank"][is_canary]
        n = int(is_canary.sum())
        top = np.argsort(npz["rank"])[:n]
        ranks[label + " top share"] = float(is_canary[top].mean())
        ranks[label + " table"] = [r["example"] in canary for r in table["rows"][:10]]
    # --no-dp: the canary's examples fill the top of the ranking and of the secret's table
    assert ranks["no-dp top share"] >= 0.8, ranks
    assert all(ranks["no-dp table"]), ranks
    # DP: they drop — most of the top is other examples and their median rank falls far
    assert ranks["dp top share"] <= 0.5, ranks
    assert np.median(ranks["dp"]) > 2 * np.median(ranks["no-dp"]), ranks


@pytest.mark.slow
def test_calibration_model_never_trained_on_the_examples(runs):
    """θ₀ is the run's base exactly as saved before training (adapter disabled): its losses equal
    a fresh load of base_model/ without any adapter, and the canary its run memorised is no more
    likely under θ₀ than any other text."""
    from repoguard.audit.lazy import Sampler, score_windows
    from repoguard.audit.risk import trained_window
    from repoguard.planning.plan import load_plan
    from repoguard.training.model import load_model

    out = runs["outs"]["no-dp"]
    doc = _audit(runs, "no-dp")
    assert doc["calibration"]["path"] == runs["cfg"].model
    z = np.load(out / "audit" / "risk.npz")
    # the base was pretrained on held-out files only: none of them is a training example
    from repoguard.source.corpus import load_corpus as _lc
    assert runs["held"] and not set(runs["held"]) & {e.path for e in _lc(out, runs["repo"]).examples}
    base, tok = load_model(runs["cfg"].model, device=__import__("torch").device("cpu"), bf16=False)
    assert not any("lora" in n for n, _ in base.named_parameters())
    from repoguard.source.corpus import load_corpus
    from repoguard.training.data import default_redactor, example_texts, tokenize

    plan = load_plan(out)
    keep = np.flatnonzero(~z["credential"])
    rows = z["plan_row"][keep]
    texts = example_texts(load_corpus(out, runs["repo"]), [plan.example_ids[r] for r in rows], redactor=default_redactor())
    wins = [trained_window(s, k=K, m=M) for s in tokenize(texts, tok, max_length=training_config().max_length)]
    fresh = score_windows(base, [w[0] for w in wins], [w[1] for w in wins], [Sampler()], pad_id=tok.pad_token_id)
    assert fresh.loss == pytest.approx(z["loss_calibration"][keep], abs=1e-5)
    assert np.max(np.abs(z["loss"][keep] - z["loss_calibration"][keep])) > 0.1   # the adapter was really off
    is_canary = np.array([plan.example_ids[r] in runs["canary"] for r in rows])
    # the run learned the canary; the calibration model did not (it is as surprised as by other text)
    run_gap = z["loss"][keep][~is_canary].mean() - z["loss"][keep][is_canary].mean()
    calib_gap = z["loss_calibration"][keep][~is_canary].mean() - z["loss_calibration"][keep][is_canary].mean()
    assert run_gap > 1.0 and calib_gap < 0.5, (run_gap, calib_gap)   # θ₀ fits the canary no better than other text


@pytest.mark.slow
def test_no_credential_text_in_any_output(runs, monorepo_module, capsys, monkeypatch):
    """Credential examples are scored on their pre-redaction text, yet no output file (JSON, NPZ,
    report) and no command output holds any planted credential's value. With --sample, only the
    scored examples' files are redacted, each scanned whole once (a spy around the real redactor
    records them)."""
    import repoguard.training.data as data
    from repoguard.cli import main
    from repoguard.report import build_report

    redacted = []
    real = data.default_redactor

    def spy(*args):
        red = real(*args)
        return lambda text, path: (redacted.append(path), red(text, path))[1]

    def scored_paths(stem):     # the files of the scored examples (each scanned whole, once)
        from repoguard.source.corpus import load_corpus
        from repoguard.planning.plan import load_plan

        ids, corpus = load_plan(out).example_ids, load_corpus(out, runs["repo"])
        by_id = {e.id: e.path for e in corpus.examples}
        return sorted({by_id[ids[r]] for r in np.load(out / "audit" / f"{stem}.npz")["plan_row"]})

    monkeypatch.setattr(data, "default_redactor", spy)
    out = runs["outs"]["no-dp"]
    capsys.readouterr()
    with one_thread():
        assert main(["audit", "risk", str(runs["repo"]), "--out", str(out), "--max-length", "32", "-k", str(K),
                     "-m", str(M), "--json", "--label", "cli", "--sample", "10", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(printed)
    assert doc["sample"]["untied_scored"] == 10 and doc["sample"]["untied_total"] > 100
    assert doc["n_tied"] + 10 == doc["n_scored_examples"] < doc["n_examples"] / 3
    assert sorted(redacted) == scored_paths("risk-cli")
    assert (out / "audit" / "risk-cli.json").is_file() and (out / "audit" / "risk-cli.npz").is_file()
    redacted.clear()
    with one_thread():
        assert main(["audit", "risk", str(runs["repo"]), "--out", str(out), "--max-length", "32", "-k", str(K),
                     "-m", str(M), "--device", "cpu"]) == 0
    printed += capsys.readouterr().err
    doc = json.loads((out / "audit" / "risk.json").read_text())
    assert doc["n_examples"] == doc["n_scored_examples"] and sorted(redacted) == scored_paths("risk")
    assert doc["n_credential_windows"] >= 10 and doc["n_credential_examples"] >= 8
    assert any(t["kind"] == "credential" for t in doc["secrets"])
    build_report(out)
    html = (out / "report" / "report.html").read_text()
    assert 'id="risk"' in html and "<script" not in html and "At-risk examples" in html
    values = [monorepo_module.planted_secret(c["id"]) for c in monorepo_module.PLANTED_CREDENTIALS]
    assert len(values) >= 10
    blobs = [printed.encode()] + [p.read_bytes() for p in out.rglob("*") if p.is_file() and "train" not in p.parts]
    for v in values:
        for line in v.split("\n"):
            if len(line.strip()) >= 12:
                assert not any(line.strip().encode() in b for b in blobs), "credential text in an output"
    # npz members are compressed: check them decompressed too
    for p in (out / "audit").glob("risk*.npz"):
        z = np.load(p)
        for key in z.files:
            assert not any(v.split("\n")[0] in str(x) for v in values for x in np.ravel(z[key])[:1000])


def test_bad_inputs_are_one_line_errors(fixture_repo, tmp_path, capsys):
    from repoguard.cli import main

    out = tmp_path / "out"
    prepare_out(fixture_repo, out, steps=2)
    assert main(["audit", "risk", str(fixture_repo), "--out", str(out)]) == 2
    assert "no trained adapter" in capsys.readouterr().err
    assert main(["audit", "risk", str(fixture_repo), "--out", str(out), "--label", "a/b"]) == 2
    assert main(["audit", "risk", str(fixture_repo), "--out", str(out), "--top-k", "0"]) == 2
    assert not (out / "audit").exists()


def test_windows():
    from repoguard.audit.risk import risk_scores, trained_window

    w, s = trained_window(np.arange(10), k=4, m=4)
    assert s == 4 and len(w) == 8
    w, s = trained_window(np.arange(5), k=4, m=4)      # short: context shrinks first
    assert s == 1 and len(w) == 5
    w, s = trained_window(np.arange(2), k=4, m=4)
    assert (s, len(w)) == (1, 2)
    assert trained_window(np.arange(1), k=4, m=4) is None
    sc = risk_scores(np.array([[-4.0, -2.0], [-np.inf, -np.inf]]), np.array([2, 2]), np.array([1.0, 1.0]),
                     np.array([3.0, 1.0]))
    assert sc[0] == pytest.approx(-1.0 + 2.0) and sc[1] == -np.inf
