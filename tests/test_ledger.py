"""The privacy ledger: chaining, spending, tamper detection, crash safety, concurrency."""
from __future__ import annotations

import json
import multiprocessing as mp

import numpy as np
import pytest

from repoguard.accounting.ledger import record_run, spent, verify
from repoguard.core.errors import InputError, PolicyError
from repoguard.planning.plan import Plan, SecretPlan


def _plan(sigma=1.5, steps=100):
    secrets = [SecretPlan("alpha", 1e-10, 1e-3, 9e-4, "renyi:4", 0.02, {"2": 0.04, "4": 0.08}, 3, 0.1),
               SecretPlan("beta", 1e-10, 5e-4, 4e-4, "kl", 0.01, {"2": 0.02}, 2, 0.05)]
    return Plan(sigma=sigma, batch_size=8.0, steps=steps, clip_norm=1.0, c=1.0, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=["a", "b"], w=np.ones(2), rho=np.full(2, 0.5), secrets=secrets)


def test_record_and_spend(tmp_path):
    path = tmp_path / "ledger.jsonl"
    assert spent(path) == {}
    e = record_run(path, _plan(), run_id="r1", steps_completed=50, status="interrupted")
    assert e["seq"] == 0 and e["secrets"]["alpha"]["kl"] == pytest.approx(0.01)
    # the same run recorded again supersedes its earlier entry
    record_run(path, _plan(), run_id="r1", steps_completed=100, status="completed")
    record_run(path, _plan(), run_id="r2", steps_completed=100, status="completed")
    s = spent(path)
    assert s["alpha"][0] == pytest.approx(0.04)
    assert s["alpha"][1] == pytest.approx({"2": 0.08, "4": 0.16})
    assert s["beta"][1] == pytest.approx({"2": 0.04})
    v = verify(path)
    assert v["ok"] and v["entries"] == 3 and not v["problems"]


def test_bad_arguments(tmp_path):
    with pytest.raises(InputError):
        record_run(tmp_path / "l.jsonl", _plan(), run_id="x", steps_completed=101, status="completed")
    with pytest.raises(InputError):
        record_run(tmp_path / "l.jsonl", _plan(), run_id="x", steps_completed=1, status="done")


def _three(tmp_path):
    path = tmp_path / "ledger.jsonl"
    for i in range(3):
        record_run(path, _plan(sigma=1.0 + i), run_id=f"r{i}", steps_completed=100, status="completed")
    return path


def test_edit_detected(tmp_path):
    path = _three(tmp_path)
    lines = path.read_text().splitlines()
    e = json.loads(lines[1])
    e["sigma"] = 99.0                                      # pretend the run used more noise
    lines[1] = json.dumps(e, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    v = verify(path)
    assert not v["ok"] and any("edited" in p for p in v["problems"])
    with pytest.raises(PolicyError):
        spent(path)
    with pytest.raises(PolicyError):
        record_run(path, _plan(), run_id="r9", steps_completed=1, status="started")


def test_rehashed_edit_detected_by_chain(tmp_path):
    from repoguard.accounting.ledger import canonical, entry_hash

    path = _three(tmp_path)
    lines = path.read_text().splitlines()
    e = json.loads(lines[0])
    e["sigma"] = 99.0
    e["hash"] = entry_hash(e)                              # a careful forger recomputes the hash
    lines[0] = canonical(e).decode()
    path.write_text("\n".join(lines) + "\n")
    v = verify(path)
    assert not v["ok"] and any("chain broken" in p for p in v["problems"])


def test_truncation_detected(tmp_path):
    path = _three(tmp_path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n")
    v = verify(path)
    assert not v["ok"] and any("truncated" in p for p in v["problems"])


def test_torn_last_line_detected(tmp_path):
    path = _three(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-40])
    v = verify(path)
    assert not v["ok"] and "torn" in v["problems"][0]


def test_reorder_detected(tmp_path):
    path = _three(tmp_path)
    lines = path.read_text().splitlines()
    lines[0], lines[1] = lines[1], lines[0]
    path.write_text("\n".join(lines) + "\n")
    v = verify(path)
    assert not v["ok"] and any("sequence" in p or "chain" in p for p in v["problems"])


def test_missing_head_detected_and_interrupted_head_update_accepted(tmp_path):
    path = _three(tmp_path)
    head = path.with_name(path.name + ".head")
    saved = head.read_text()
    record_run(path, _plan(), run_id="r3", steps_completed=1, status="started")
    head.write_text(saved)                                 # crash between append and head update
    v = verify(path)
    assert v["ok"] and v["notes"]
    head.unlink()
    assert not verify(path)["ok"]


def _append(args):
    path, i = args
    record_run(path, _plan(), run_id=f"p{i}", steps_completed=10, status="completed")


def test_concurrent_appends_keep_the_chain(tmp_path):
    path = str(tmp_path / "ledger.jsonl")
    with mp.get_context("fork").Pool(4) as pool:
        pool.map(_append, [(path, i) for i in range(12)])
    v = verify(path)
    assert v["ok"] and v["entries"] == 12
    assert spent(path)["alpha"][0] == pytest.approx(12 * 0.002)


@pytest.mark.parametrize("argv", [["verify", "--json", "{root}"], ["verify", "{root}", "--json"],
                                  ["--json", "verify", "{root}"], ["verify", "--deep", "--json", "{root}"]])
def test_ledger_cli_options_before_or_after_the_path(tmp_path, capsys, argv):
    from repoguard.cli import main

    root = tmp_path / "repo"
    root.mkdir()
    record_run(root / ".repoguard" / "ledger.jsonl", _plan(), run_id="r1", steps_completed=100, status="completed")
    assert main(["ledger", *[a.format(root=root) for a in argv]]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["entries"] == 1 and out["runs"] == 1


def test_ledger_show_has_one_row_per_run_not_per_checkpoint_record():
    """A run appends a record at every checkpoint; `ledger show` lists runs (the new-user trial on
    scrapy read 4 rows for one run)."""
    from repoguard.commands.ledger import latest_records

    recs = [{"run_id": "a", "seq": 0, "status": "running"}, {"run_id": "a", "seq": 1, "status": "running"},
            {"run_id": "b", "seq": 2, "status": "completed"}, {"run_id": "a", "seq": 3, "status": "interrupted"}]
    rows = latest_records(recs)
    assert [(r["run_id"], r["status"], n) for r, n in rows] == [("a", "interrupted", 3), ("b", "completed", 1)]
