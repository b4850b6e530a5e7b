"""The code slices of `compare` (issue 44 item 4): public-code, tied-code and uses-internal over
held-out code files only, and each protected arm against drop-dp (difference ± standard error over
repeats, share of the drop-dp → no-dp headroom recovered) in the table, JSON and report."""
from __future__ import annotations

import dataclasses
import math
import statistics
import subprocess

import numpy as np
import pytest

from repoguard.cli import main


def _run(losses: dict[str, float]) -> dict:
    return {"slices": {sl: {"loss": v} for sl, v in losses.items()}}


def test_versus_drop_dp_is_the_difference_of_means_with_welch_standard_error():
    from repoguard.evaluation.slices import versus_drop_dp

    hush = [3.10, 3.14, 3.12]
    drop = [3.20, 3.26, 3.23, 3.21]
    nodp = [2.90, 2.94]
    runs = {"hush": [_run({"tied-code": x, "public-code": 3.0}) for x in hush],
            "drop-dp": [_run({"tied-code": x, "public-code": 3.0}) for x in drop],
            "no-dp": [_run({"tied-code": x}) for x in nodp],
            "drop": [_run({"tied-code": 1.0})]}          # a reference: not compared
    vs = versus_drop_dp(runs)
    assert set(vs) == {"hush"}                           # drop-dp itself and references are not rows
    v = vs["hush"]["tied-code"]
    diff = statistics.fmean(hush) - statistics.fmean(drop)
    se = math.sqrt(statistics.variance(hush) / 3 + statistics.variance(drop) / 4)
    assert v["diff"] == pytest.approx(diff) and v["se"] == pytest.approx(se) and v["t"] == pytest.approx(diff / se)
    gap = statistics.fmean(drop) - statistics.fmean(nodp)
    assert v["headroom"] == pytest.approx(-diff / gap) and v["n"] == [3, 4, 2]
    # No no-dp on that slice: no headroom; equal losses: zero difference and se 0 (no t).
    pc = vs["hush"]["public-code"]
    assert pc["diff"] == 0 and pc["headroom"] is None and pc["se"] == 0 and pc["t"] is None
    # One repeat: a difference, no standard error; no drop-dp: nothing to say.
    one = versus_drop_dp({"hush": runs["hush"][:1], "drop-dp": runs["drop-dp"][:1]})
    assert one["hush"]["tied-code"]["se"] is None
    assert versus_drop_dp({"hush": runs["hush"]}) == {}


def test_code_slices_leave_out_docs_and_data_and_find_importers_of_a_declared_secret(tmp_path):
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.evaluation.slices import code_slices, internal_importers, is_code
    from repoguard.source.corpus import load_corpus
    from repoguard.source.gitrepo import open_repo
    from repoguard.source.split import example_path

    assert is_code("a/b.py") and is_code("x/Y.JAVA") and is_code("run.sh")
    assert not any(is_code(p) for p in ("README.md", "docs/a.rst", "conf.yaml", "data.json", "Makefile", "a.py/README"))
    repo = tmp_path / "repo"
    files = {
        "alpha/signals.py": "def signal(p):\n    return p * 0.42\n",
        "app/uses.py": "from alpha.signals import signal\n\ndef run(x):\n    return signal(x) + 1\n",
        "app/plain.py": "import os\n\ndef home():\n    return os.getcwd()\n",
        "app/again.py": "import app.uses\n\ndef twice(x):\n    return app.uses.run(x) * 2\n",   # two hops away
        "docs/guide.md": "# Guide\n\nCall `alpha.signals.signal` for the blend.\n",
        "conf/settings.yaml": "alpha:\n  weight: 0.42\n",
        "repoguard.toml": ('[[secret]]\nid = "alpha"\npaths = ["alpha/**"]\np = 1e-4\nr = 0.05\n'
                           '[secret.propagate]\nimports = 1\n'),
    }
    for p, text in files.items():
        (repo / p).parent.mkdir(parents=True, exist_ok=True)
        (repo / p).write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    assert main(["analyze", "-q", str(repo)]) == 0
    out = repo / ".repoguard"
    inc = load_incidence(out)
    test = np.ones(len(inc.example_ids), dtype=bool)          # every example held out
    importers = internal_importers(open_repo(repo, allow_plain=True), load_corpus(out, repo), inc, test)
    assert importers == {"app/uses.py"}                        # direct importers only, code only
    got = {k: sorted(example_path(inc.example_ids[i]) for i in v)
           for k, v in code_slices(inc, test, importers=importers).items()}
    assert got == {"public-code": ["app/again.py", "app/plain.py"],
                   "tied-code": ["alpha/signals.py", "app/uses.py"],
                   "uses-internal": ["app/uses.py"]}
    # Held out nowhere near the secret: empty slices are left out, not reported as zero examples.
    only_plain = np.array([example_path(e) == "app/plain.py" for e in inc.example_ids])
    assert set(code_slices(inc, only_plain, importers=set())) == {"public-code"}


@pytest.mark.slow
def test_compare_reports_each_protected_arm_against_drop_dp(tmp_path, monorepo_module):
    """On the fixture (B 8, 2 steps, 2 repeats): the code slices are scored for the base and every
    arm on held-out code examples only, and hush − drop-dp with its standard error and headroom
    is in the JSON, the text table and the report."""
    from repoguard.core.config import load_config
    from repoguard.evaluation.compare import run_compare
    from repoguard.evaluation.compare_text import format_table
    from repoguard.report import build_report
    from repoguard.source.split import example_path
    from repoguard.evaluation.slices import is_code

    repo = tmp_path / "monorepo"
    monorepo_module.build(repo)
    assert main(["analyze", "-q", str(repo)]) == 0
    assert main(["plan", "-q", "--batch-size", "8", "--steps", "4", "--c", "1", str(repo)]) == 0
    out = repo / ".repoguard"
    cfg = dataclasses.replace(load_config(repo / "repoguard.toml", required=False).training,
                              max_length=48, learning_rate=2e-2, seed=3, eval_max_examples=8,
                              eval_max_lines=2, micro_batch_size=8, eval_every=0)
    doc = run_compare(root=repo, out=out, cfg=cfg, arms=("hush", "drop-dp", "no-dp"), seed=3, steps=2,
                      show_progress=False, risk=False, repeats=2)
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.planning.plan import load_plan
    from repoguard.source.split import slices

    inc = load_incidence(out)
    ids, full = inc.example_ids, slices(inc, load_plan(out).test_mask)
    rows = doc["arms"]["hush"]["eval_rows"]
    assert rows["public-code"] and rows["tied-code"] and rows == doc["arms"]["drop-dp"]["eval_rows"]
    assert all(is_code(example_path(ids[i])) for sl in ("public-code", "tied-code") for i in rows[sl])
    assert set(rows["public-code"]) <= set(full["public"].tolist())
    assert set(rows["tied-code"]) <= set(full["secret-tied"].tolist())
    assert doc["base"]["public-code"]["loss"] is not None
    v = doc["versus"]["hush"]["public-code"]
    hush = doc["repeats"]["hush"]["public-code_loss"]
    drop = doc["repeats"]["drop-dp"]["public-code_loss"]
    nodp = doc["repeats"]["no-dp"]["public-code_loss"]
    assert len(hush) == len(drop) == 2
    assert v["diff"] == pytest.approx(statistics.fmean(hush) - statistics.fmean(drop))
    assert v["se"] == pytest.approx(math.sqrt(statistics.variance(hush) / 2 + statistics.variance(drop) / 2))
    gap = statistics.fmean(drop) - statistics.fmean(nodp)
    assert v["headroom"] == (pytest.approx(-v["diff"] / gap) if gap > 0 else None)
    assert "no-dp" not in doc["versus"] and "drop-dp" not in doc["versus"]
    text = format_table(doc)
    assert "code slices" in text and "against drop-dp" in text and "public-code" in text
    page = open(build_report(out)["html"], encoding="utf-8").read()
    sec = page[page.index('id="compare"'):]
    assert "Code slices" in sec and "arm − drop-dp" in sec and "headroom recovered" in sec
