"""`repoguard run` end to end on the fixture monorepo with the embedded tiny model: every artefact,
stage skipping, `--from`, the scheduled path twice on one ledger, the lock and the budget refusal,
and the docs' cron/CI snippets as valid invocations."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import git
from repoguard.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--steps", "10", "--batch-size", "8", "--seed", "0", "--max-length", "128"]


def _run(capsys, *argv) -> tuple[int, dict | None, str]:
    capsys.readouterr()
    rc = main(["run", "--json", *argv])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if rc == 0 else None), cap.err


def _ledger(path: Path) -> tuple[dict, dict[str, str]]:
    from repoguard.accounting.ledger import read_entries, verify

    last = {}
    for e in read_entries(path):
        last[e["run_id"]] = e["status"]
    return verify(path), last


def _planted_values(monorepo_module) -> list[str]:
    return [monorepo_module.planted_secret(c["id"]) for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]]


@pytest.mark.slow
def test_run_end_to_end_every_artefact_then_skip_and_from(fixture_repo_copy, monorepo_module, capsys):
    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    rc, s, err = _run(capsys, *FAST, "--audit", "--audit-steps", "3", str(repo))
    assert rc == 0, err
    assert s["ran"] == ["scan", "analyze", "plan", "train", "audit", "report"] and s["skipped"] == []

    # scan/: findings (a planted credential in HEAD is found), redacted: no value anywhere.
    planted = _planted_values(monorepo_module)
    findings_text = (out / "scan" / "findings.json").read_text()
    findings = json.loads(findings_text)["findings"]
    assert s["credentials_found"] == len(findings) >= 1
    assert all(f["redacted"].startswith("****(") and f["redacted"].endswith(" chars)") for f in findings)
    assert not any(v in findings_text for v in planted)
    assert not any(v in (out / "scan" / "report.json").read_text() for v in planted)
    assert {f["path"] for f in findings} & {c["path"] for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]}

    # corpus/ and incidence/: the counts of the summary; credentials became secrets.
    from repoguard.source.corpus import load_corpus
    from repoguard.source.gitrepo import open_repo
    from repoguard.analyzers.incidence import load_incidence

    corpus = load_corpus(out, open_repo(repo).root)
    inc = load_incidence(out)
    assert len(corpus.examples) == s["examples"] == inc.shape[0]
    assert inc.shape[1] == s["secrets"] and int(inc.matrix.nnz) == s["incidences"]
    ids = [x.id for x in inc.secrets]
    assert {"alpha-strategy", "risk-limits", "client-book"} <= set(ids)
    assert any(i.startswith("credential:") for i in ids)

    # plan/: σ, T, B as flagged; every achieved bound within its target.
    from repoguard.planning.plan import load_plan

    plan = load_plan(out)
    assert plan.steps == 10 and plan.batch_size == 8 and plan.sigma == pytest.approx(s["sigma"])
    assert all(x.achieved_bound <= x.r * (1 + 1e-6) for x in plan.secrets)
    assert 0 < s["retained_fraction"] <= 1 and s["bound_ratio_max"] <= 1 + 1e-6
    assert s["bound_ratio_min"] <= s["bound_ratio_max"]

    # train/: a PEFT adapter that reloads offline, the log, the privacy report.
    from peft import AutoPeftModelForCausalLM

    assert Path(s["adapter"]) == out / "train" / "adapter"
    assert AutoPeftModelForCausalLM.from_pretrained(out / "train" / "adapter", local_files_only=True) is not None
    log = [json.loads(x) for x in (out / "train" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 11))
    privacy = json.loads((out / "train" / "privacy_report.json").read_text())
    assert privacy["sigma"] == pytest.approx(plan.sigma) and privacy["steps_completed"] == 10

    # ledger.jsonl verifies and holds this run as completed.
    check, runs = _ledger(out / "ledger.jsonl")
    assert check["ok"] and runs == {s["run_id"]: "completed"}

    # report/: self-contained HTML and JSON, no credential value in either.
    html = (out / "report" / "report.html").read_text()
    assert Path(s["report"]) == out / "report" / "report.html" and "<html" in html.lower()
    rep = json.loads((out / "report" / "report.json").read_text())
    assert rep and not any(v in html for v in planted)
    state = json.loads((out / "run_state.json").read_text())
    assert set(state["stages"]) == {"scan", "analyze", "plan", "train", "audit", "report"}
    # audit/: the extraction audit of a DP and a --no-dp model, in the report too.
    extraction = json.loads((out / "audit" / "extraction.json").read_text())
    assert extraction["steps"] == 3 and extraction["groups"] and s["audit"]["extraction"]
    assert "audit" in rep["sections"] and rep["extraction"]

    # Unchanged inputs: everything skipped, nothing spent, nothing rewritten.
    adapter = (out / "train" / "adapter" / "adapter_model.safetensors").read_bytes()
    rc, s2, err = _run(capsys, *FAST, "--audit", "--audit-steps", "3", str(repo))
    assert rc == 0, err
    assert s2["ran"] == [] and s2["skipped"] == s["ran"] and s2["sigma"] == s["sigma"]
    assert _ledger(out / "ledger.jsonl")[1] == runs
    assert (out / "train" / "adapter" / "adapter_model.safetensors").read_bytes() == adapter

    # --from plan: plan, train and report again, against the ledger the first run spent from.
    rc, s3, err = _run(capsys, *FAST, "--from", "plan", str(repo))
    assert rc == 0, err
    assert s3["ran"] == ["plan", "train", "report"] and s3["skipped"] == ["scan", "analyze"]
    assert s3["sigma"] > s["sigma"] and s3["run_id"] != s["run_id"]
    check, runs3 = _ledger(out / "ledger.jsonl")
    assert check["ok"] and list(runs3.values()) == ["completed", "completed"]

    # A changed training flag means a new training run, but the two runs (budget fraction 1) spent
    # every secret's budget as the divergence bounds count it (the Neyman–Pearson bound of the
    # composed runs may leave headroom, so the check uses the Rényi accountant): refused in the
    # plan stage, exit 1, naming the secret; nothing trained.
    size = (out / "ledger.jsonl").stat().st_size
    adapter = (out / "train" / "adapter" / "adapter_model.safetensors").read_bytes()
    capsys.readouterr()
    assert main(["run", "-q", *FAST[:-2], "--max-length", "96", "--accountant", "renyi", str(repo)]) == 1
    assert "risk-limits" in capsys.readouterr().err
    assert (out / "ledger.jsonl").stat().st_size == size
    assert (out / "train" / "adapter" / "adapter_model.safetensors").read_bytes() == adapter


@pytest.mark.slow
def test_scheduled_twice_on_one_ledger_then_lock_and_budget_refusal(fixture_repo_copy, capsys):
    from repoguard.pipeline.scheduled import EXIT_LOCKED, run_lock

    repo, out = fixture_repo_copy, fixture_repo_copy.parent / "rg-out"
    argv = ["--scheduled", *FAST, "--out", str(out), str(repo)]
    rc, s1, err = _run(capsys, *argv)
    assert rc == 0, err
    runs_dir = out / "runs"
    assert (runs_dir / "latest").resolve() == Path(s1["run_dir"]).resolve() and s1["previous_run"] is None
    run1 = Path(s1["run_dir"])
    for art in ("scan/findings.json", "corpus/examples.parquet", "incidence/incidence.npz", "plan/plan.json",
                "train/adapter/adapter_model.safetensors", "report/report.html", "status.json"):
        assert (run1 / art).is_file(), art
    assert (run1 / "ledger.jsonl").resolve() == (out / "ledger.jsonl").resolve()
    cache = out / "cache" / "analyzers.json"
    assert cache.is_file() and (run1 / "cache").resolve() == (out / "cache").resolve()

    # A second run while the lock is held: refused at once with exit 75, nothing created.
    with run_lock(out):
        capsys.readouterr()
        assert main(["run", *argv]) == EXIT_LOCKED
        assert "lock" in capsys.readouterr().err
    assert sorted(p.name for p in runs_dir.iterdir()) == sorted([run1.name, "latest"])

    # New commits, then the next scheduled run: incremental analysis, same ledger, spends more.
    target = repo / "trading" / "alpha" / "signals.py"
    target.write_text(target.read_text() + "\n# recalibrated after the Falcon review\n")
    git(repo, "commit", "-qam", "alpha: recalibrate")
    rc, s2, err = _run(capsys, *argv)
    assert rc == 0, err
    run2 = Path(s2["run_dir"])
    assert run2 != run1 and s2["previous_run"] == run1.name
    assert (runs_dir / "latest").resolve() == run2.resolve()
    # never less noise after spending; equal at the calibration's floor (SIGMA_MIN), where the
    # tied examples are sampled so rarely that no noise is needed (issue 32)
    assert "analyze" in s2["ran"] and s2["sigma"] >= s1["sigma"]
    check, runs = _ledger(out / "ledger.jsonl")
    assert check["ok"] and runs == {s1["run_id"]: "completed", s2["run_id"]: "completed"}
    from repoguard.accounting.ledger import spent

    plan1 = json.loads((run1 / "plan" / "plan.json").read_text())
    total = spent(out / "ledger.jsonl")
    grew = [x["id"] for x in plan1["secrets"] if total[x["id"]][0] > x["kl_spent"] * (1 + 1e-9)]
    assert grew, "the second run must add to some secret's cumulative spending"

    # A tighter target than the ledger already spent: refused in the plan stage, exit 1, before
    # training; nothing appended to the ledger and `latest` unchanged.
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text().replace("medium = { p = 1e-6, r = 1e-2 }", "medium = { p = 1e-6, r = 1.0001e-6 }"))
    size = (out / "ledger.jsonl").stat().st_size
    capsys.readouterr()
    assert main(["run", *argv]) == 1
    msg = capsys.readouterr().err
    assert "before training" in msg and "risk-limits" in msg
    assert (out / "ledger.jsonl").stat().st_size == size
    assert (runs_dir / "latest").resolve() == run2.resolve()
    refused = [p for p in runs_dir.iterdir() if p.name not in (run1.name, run2.name, "latest")]
    assert len(refused) == 1 and not (refused[0] / "train").exists()
    assert json.loads((refused[0] / "status.json").read_text())["status"] == "refused"


def test_fail_on_findings_stops_after_the_scan(fixture_repo_copy, capsys):
    out = fixture_repo_copy / ".repoguard"
    assert main(["run", "-q", "--fail-on-findings", str(fixture_repo_copy)]) == 1
    assert "credential finding" in capsys.readouterr().err
    assert (out / "scan" / "findings.json").is_file() and not (out / "corpus").exists()


def test_bad_flags_exit_2(fixture_repo, capsys):
    assert main(["run", "--steps", "0", str(fixture_repo)]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["run", "--from", "deploy", str(fixture_repo)])
    assert exc.value.code == 2


def _docs_commands() -> list[str]:
    """`repoguard …` invocations in the docs' run and scheduled pages (cron line, CI steps)."""
    text = "\n".join((ROOT / "docs" / page).read_text() for page in ("commands/run.md", "scheduled.md"))
    cmds = []
    for line in text.splitlines():
        m = re.search(r"\brepoguard (run|scan|ledger|report)\b.*", line)
        if m and "`repoguard" not in line:
            cmds.append(m.group(0))
    return cmds


def test_docs_cron_and_ci_snippets_are_valid_invocations():
    cmds = _docs_commands()
    assert any("--scheduled" in c for c in cmds) and len(cmds) >= 3
    parser = build_parser()
    for cmd in cmds:
        argv = []
        for tok in shlex.split(cmd)[1:]:
            if tok in ("&&", "||", ";", "|") or tok.startswith((">", "2>")):
                break
            argv.append(tok)
        args = parser.parse_args(argv)       # exits 2 (SystemExit) on an invalid invocation
        assert args.command in ("run", "scan", "ledger", "report"), cmd


def test_run_targets_spend_a_fraction_of_the_remaining_headroom():
    """r_run = b₀ + f·(r − b₀): b₀ = p with nothing spent; with spending, b₀ is the ledger's own
    bound (Hush Lemma 3.2), and a secret already over r keeps r (the plan then refuses it)."""
    from repoguard.accounting.bounds import kl_bound
    from repoguard.analyzers.incidence import Secret
    from repoguard.accounting.targets import run_targets

    a, b, c = Secret("a", "declared", 1e-6, 1e-2, ""), Secret("b", "declared", 1e-6, 1e-2, ""), \
        Secret("c", "declared", 1e-6, 1e-4, "")
    spent = {"b": (0.01, {}), "c": (5.0, {})}
    ra, rb, rc = run_targets([a, b, c], spent, 0.5)
    assert ra.r == pytest.approx(1e-6 + 0.5 * (1e-2 - 1e-6))
    b0 = float(kl_bound(0.01, 1e-6))
    assert 1e-6 < b0 < 1e-2 and rb.r == pytest.approx(b0 + 0.5 * (1e-2 - b0))
    assert rc.r == 1e-4                     # over budget already: unchanged, refused by the plan
    assert run_targets([a, b, c], spent, 1.0) == [a, b, c]


def test_run_targets_use_the_certified_bound_of_the_ledgers_pairs():
    """b₀ is the certified bound of the earlier runs (issue 28 item 2): with the secret's pairs the
    Neyman–Pearson bound of their composition, far below the KL/Rényi bound at a small prior, so
    night k ends near (1 − (1−f)^k)·r instead of spending nearly everything on night 2."""
    import numpy as np

    from repoguard.accounting.bounds import kl_bound, renyi_bound
    from repoguard.accounting.divergences import DEFAULT_ALPHAS, Mixture
    from repoguard.accounting.pld import pair_record, pld_bound
    from repoguard.analyzers.incidence import Secret
    from repoguard.accounting.targets import run_targets
    from repoguard.planning.undetected import run_pair

    p, r = 1e-10, 2e-3                               # one night at the fixture's floor spends ≈ 1e-3
    mix, a, t, kl, ren = run_pair(1, 0.154, 0.49, 20, "zero-out", DEFAULT_ALPHAS)
    spent = {"d": (kl, {f"{x:g}": v for x, v in zip(DEFAULT_ALPHAS, ren)})}
    pairs = {"d": [pair_record(mix, a, t)]}
    d = Secret("d", "declared", p, r, "")
    nothing = Mixture(np.zeros(1, dtype=np.int64), np.zeros(1), 0)
    b_np = float(pld_bound(nothing, 0.0, 0, p, history=((mix, a, t),))[0][0])
    b_div = min([float(kl_bound(kl, p))] + [float(renyi_bound(v, x, p)) for x, v in zip(DEFAULT_ALPHAS, ren)])
    assert p < b_np < r < b_div                      # the divergences alone say "over budget"
    (with_pairs,) = run_targets([d], spent, 0.5, pairs)
    assert with_pairs.r == pytest.approx(b_np + 0.5 * (r - b_np))
    (without,) = run_targets([d], spent, 0.5)
    assert without.r == r                            # divergences only: the fraction cannot apply


@pytest.mark.slow
def test_replan_against_a_moved_ledger_is_reported_as_run(fixture_repo_copy, capsys):
    """The first run's training appends to the ledger; the plan's input (the last entry of other
    runs) is unchanged, so the next run skips the plan stage, and a changed training flag makes
    train re-plan against the moved ledger. The output must say the plan was re-made (a line after
    "plan: unchanged, skipped", the summary's `ran`, the state's record and seconds)."""
    from repoguard.accounting.ledger import read_entries
    from repoguard.core.config import load_config
    from repoguard.source.gitrepo import open_repo
    from repoguard.pipeline.context import RunSettings
    from repoguard.pipeline.runner import run_pipeline

    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    half = ["--budget-fraction", "0.5"]  # leaves budget for the second run's plan
    rc, s1, err = _run(capsys, *FAST, *half, str(repo))
    assert rc == 0, err
    first = json.loads((out / "run_state.json").read_text())["stages"]
    n_entries = len(read_entries(out / "ledger.jsonl"))
    assert n_entries >= 1

    lines: list[str] = []
    cfg = repo / "repoguard.toml"
    settings = RunSettings(steps=10, batch_size=8.0, seed=0, max_length=96, budget_fraction=0.5, show_progress=False)
    s2 = run_pipeline(open_repo(repo), load_config(cfg), config_path=str(cfg), out=out, settings=settings,
                      say=lines.append)
    assert "[3/5] plan: unchanged, skipped" in lines, lines
    skipped = lines.index("[3/5] plan: unchanged, skipped")
    replanned = [i for i, x in enumerate(lines) if x.startswith(
        f"       plan: re-planned against the ledger ({n_entries} entries) in ")]
    assert replanned and skipped < replanned[0] < lines.index("[4/5] train …"), lines
    assert f"σ = {s2['sigma']:.4g}" in lines[replanned[0]]
    assert s2["ran"] == ["plan", "train", "report"] and s2["skipped"] == ["scan", "analyze"]
    assert s2["sigma"] >= s1["sigma"]                       # the moved ledger leaves less budget
    plan_rec = json.loads((out / "run_state.json").read_text())["stages"]["plan"]
    assert plan_rec["info"]["sigma"] == s2["sigma"] and plan_rec["seconds"] == s2["seconds"]["plan"]
    # the record is the re-plan's, not the first run's (made before that run trained and reported)
    assert plan_rec["finished"] >= first["report"]["finished"] > first["plan"]["finished"]


def test_locked_scheduled_run_with_json_says_why(fixture_repo_copy, capsys):
    """Issue 28 item 12: a refused second scheduled run (exit 75) with --json printed nothing."""
    import os

    from repoguard.pipeline.scheduled import EXIT_LOCKED, run_lock

    repo, out = fixture_repo_copy, fixture_repo_copy.parent / "rg-out"
    with run_lock(out) as lock:
        capsys.readouterr()
        assert main(["run", "--scheduled", "--json", *FAST, "--out", str(out), str(repo)]) == EXIT_LOCKED
        captured = capsys.readouterr()
    got = json.loads(captured.out)
    assert got["status"] == "locked" and got["exit_code"] == EXIT_LOCKED and got["retry"] is True
    assert got["lock"] == str(lock) and got["holder_pid"] == os.getpid()
    assert "holds the lock" in got["error"] and "holds the lock" in captured.err
    assert not (out / "runs").exists()      # nothing was started


def test_refusal_json_for_policy_and_input_errors():
    from repoguard.commands._common import refusal
    from repoguard.core.errors import InputError, PolicyError

    assert refusal(PolicyError("budget spent")) == {"status": "refused", "exit_code": 1, "error": "budget spent"}
    assert refusal(InputError("bad"))["status"] == "failed"


@pytest.mark.parametrize("command", ["plan", "train"])
def test_locked_plan_and_train_with_json_say_why(fixture_repo_copy, capsys, command):
    """Every command with --json prints a JSON object when refused, not only `run` (issue 28 item
    12): `plan --json` and `train --json` while another process holds OUT's lock."""
    from repoguard.pipeline.scheduled import EXIT_LOCKED, run_lock

    out = fixture_repo_copy.parent / "rg-out"
    with run_lock(out):
        capsys.readouterr()
        assert main([command, "--json", "--out", str(out), str(fixture_repo_copy)]) == EXIT_LOCKED
        captured = capsys.readouterr()
    got = json.loads(captured.out)
    assert got["status"] == "locked" and got["exit_code"] == EXIT_LOCKED
    assert captured.err.count("\n") == 1 and "holds the lock" in captured.err


def test_input_error_with_json_is_a_json_object(tmp_path, capsys):
    assert main(["plan", "--json", str(tmp_path)]) == 2       # not a git repository
    got = json.loads(capsys.readouterr().out)
    assert got["status"] == "failed" and got["exit_code"] == 2 and got["error"]


def test_summary_seconds_are_this_runs_skipped_stages_say_skipped(tmp_path):
    """Issue 28 item 1: night 2's JSON reported `seconds.analyze` (night 1's figure, from
    run_state.json) although analyze was skipped. Only stages that ran in this run carry seconds."""
    from repoguard.core.config import load_config
    from repoguard.pipeline.context import Context, RunSettings
    from repoguard.pipeline.runner import summarize

    state = {"stages": {s: {"seconds": 17.984, "info": {}} for s in ("scan", "analyze", "plan", "train", "report")}}
    state["stages"]["plan"]["seconds"] = 2.5
    ctx = Context(repo=None, config=load_config(None, required=False), config_bytes=b"", config_path=None, out=tmp_path,
                  settings=RunSettings(), state=state, say=lambda s: None,
                  ran=["plan", "train", "report"], skipped=["scan", "analyze"])
    s = summarize(ctx)
    assert s["seconds"] == {"scan": "skipped", "analyze": "skipped", "plan": 2.5, "train": 17.984, "report": 17.984}
    assert list(s["seconds"]) == ["scan", "analyze", "plan", "train", "report"]
    assert s["cpu_seconds"] == {"scan": "skipped", "analyze": "skipped", "plan": None, "train": None, "report": None}


def test_a_no_op_run_does_not_import_scipy_stats():
    """Issue 28 item 6 (no-op re-run ≤ 1 s): the stage digests read the ledger, which imports the
    accounting package; scipy.stats (0.7 s) is imported only where the Poisson table is built."""
    import subprocess
    import sys

    code = ("import sys, repoguard.pipeline.runner, repoguard.pipeline.stages, repoguard.accounting.ledger; "
            "print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
