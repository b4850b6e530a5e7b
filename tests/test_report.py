"""The report: report.json structure, a self-contained HTML page (no network, no script), its size
for 10^5 secrets, and a headless-Chromium screenshot showing the plots and tables."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from audit_helpers import SECRET, canary_pair
from repoguard.cli import main
from repoguard.report import HTML_SIZE_BOUND, MAX_ROWS, build_report


@pytest.fixture(scope="module")
def full_out(fixture_repo, tmp_path_factory):
    """Every stage's artefact on the fixture: scan findings, incidence, plan, the canary audit and
    a (short) extraction audit through the command line."""
    out, _, _ = canary_pair(fixture_repo, tmp_path_factory.mktemp("canary"))
    assert main(["scan", "-q", str(fixture_repo), "--out", str(out), "--format", "json"]) in (0, 1)
    assert main(["audit", "extract", "-q", str(fixture_repo), "--out", str(out), "--steps", "3",
                 "--max-length", "32", "--per-secret", "4"]) == 0
    return fixture_repo, out


def _html_checks(page: str) -> None:
    assert "<script" not in page.lower()
    # No resource loads from anywhere: every src/href is inline data or an in-page anchor.
    for attr in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page, flags=re.I):
        assert attr.startswith(("data:image/png;base64,", "#")), attr[:60]
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", page, flags=re.I)
    assert "@import" not in page


@pytest.mark.slow
def test_report_json_and_html_on_the_fixture(full_out, capsys):
    repo, out = full_out
    capsys.readouterr()
    assert main(["report", "--json", str(repo), "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    doc = json.loads((out / "report" / "report.json").read_text())
    page = (out / "report" / "report.html").read_text()
    assert res["html_bytes"] == len(page.encode())
    assert doc["sections"] == ["summary", "findings", "plan", "secrets", "sweep", "histogram", "explorer", "left-out",
                               "training", "audit"]
    # Secrets table: the plan's numbers for the test secret.
    from repoguard.planning.plan import load_plan
    sp = load_plan(out).secrets[0]
    row = doc["secrets"]["rows"][0]
    assert row["id"] == SECRET and row["achieved_bound"] == sp.achieved_bound and row["n_examples"] == 22
    assert set(row) >= {"p", "r", "achieved_bound", "binding", "n_examples", "sum_w", "kl_spent", "ledger_kl_total"}
    # Credential findings: redacted only (rule and length, no character of the value).
    f = doc["findings"]
    assert f["count"] > 5 and all(r["redacted"].startswith("****(") and r["redacted"].endswith(" chars)") for r in f["rows"])
    findings = json.loads((out / "scan" / "findings.json").read_text())["findings"]
    assert all(x["redacted"] in page for x in findings[:5])
    # Training: DP and --no-dp curves of both audits; the audit results; the explorer's evidence.
    names = {r["name"] for r in doc["training"]["runs"]}
    assert {"audit/canaries (dp)", "audit/canaries (no-dp)", "audit/extraction (dp)", "audit/extraction (no-dp)"} <= names
    assert doc["canaries"]["runs"]["no-dp"]["rank_in_sample"] == 1
    assert doc["extraction"]["k"] == 16 and "clamped" in doc["extraction"]["note"]
    ex = doc["explorer"][0]
    assert ex["id"] == SECRET and ex["n_evidence"] > 0 and ex["evidence"][0]["analyzer"] == "declared"
    assert page.count("<details>") == len(doc["explorer"])
    # histogram, loss, exposure; this plan was made with a given c, so there is no sweep to draw
    assert page.count('src="data:image/png;base64,') == 3 and "(c sweep: no data)" in page
    assert "compare" not in doc["sections"] and 'id="compare"' not in page       # no `repoguard compare` run
    _html_checks(page)


def _synthetic_plan(out: Path, n_secrets: int) -> None:
    import scipy.sparse as sp

    from repoguard.analyzers.incidence import Evidence, Secret, build_incidence, save_incidence
    from repoguard.planning.plan import Plan, SecretPlan, save_plan

    rng = np.random.default_rng(0)
    n_ex = 2 * n_secrets
    ids = [f"ex{i}" for i in range(n_ex)]
    secrets = [Secret(f"credential:rule-{j % 40}:{j:08x}", "credential", 1e-10, 1e-3, f"secret number {j}")
               for j in range(n_secrets)]
    files = {f"src/f{i}.py": [2 * i, 2 * i + 1] for i in range(n_secrets)}
    ev = [Evidence(f"src/f{j}.py", s.id, "credentials", f"aws-access-token at line {j % 300 + 1}")
          for j, s in enumerate(secrets)]
    save_incidence(build_incidence(ids, files, secrets, ev), out)
    w = rng.uniform(0.1, 1.0, n_ex)
    ach = 1e-3 * rng.uniform(0.2, 1.0, n_secrets)
    plan = Plan(sigma=1.3, batch_size=256.0, steps=1000, clip_norm=1.0, c=0.25, cap="kl", accountant="best",
                adjacency="zero-out", example_ids=ids, w=w, rho=256 * w / w.sum(),
                secrets=[SecretPlan(id=s.id, p=s.p, r=s.r, achieved_bound=float(a), binding="renyi:8",
                                    kl_spent=0.01, renyi_spent={"2": 0.01, "8": 0.05}, n_examples=2, sum_w=1.0)
                         for s, a in zip(secrets, ach)],
                extra={"sweep": [{"c": 2.0 ** k, "frac_positive": min(1.0, 0.5 + 0.05 * k), "sum_w": 1e5,
                                  "sigma": 0.5 * 2 ** (k / 3), "score": 1.0} for k in range(-6, 5)]})
    save_plan(plan, out)


@pytest.mark.slow
def test_page_stays_small_for_100k_secrets(tmp_path):
    _synthetic_plan(tmp_path, 100_000)
    res = build_report(tmp_path, repo_name="big")
    page = Path(res["html"]).read_text()
    assert res["html_bytes"] < HTML_SIZE_BOUND
    assert Path(res["json"]).stat().st_size < 2 * HTML_SIZE_BOUND
    doc = json.loads(Path(res["json"]).read_text())
    assert doc["secrets"]["count"] == 100_000 and doc["secrets"]["shown"] == MAX_ROWS
    assert f"Showing the {MAX_ROWS} with the highest" in page and "of 100000 secrets" in page
    ratios = [r["ratio"] for r in doc["secrets"]["rows"]]
    assert ratios == sorted(ratios, reverse=True)                        # the worst first
    assert sum(doc["secrets"]["ratio_log10_hist"]["counts"]) == 100_000  # the histogram covers all
    assert page.count('src="data:image/png;base64,') == 2                # c sweep and histogram
    assert page.count("<details>") == 100 and "… " not in page.split("<details>")[1].split("</details>")[0]
    _html_checks(page)


def test_report_refuses_an_empty_out_dir(tmp_path, capsys):
    (tmp_path / "repo").mkdir()
    assert main(["report", str(tmp_path / "repo"), "--out", str(tmp_path / "empty")]) == 2
    assert "no artefacts" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report").exists()


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.slow
def test_screenshot_in_headless_chromium_shows_plots_and_tables(full_out, tmp_path):
    from PIL import Image

    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install -y chromium)")
    repo, out = full_out
    res = build_report(out, repo_name="fixture")
    shot = tmp_path / "report.png"
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--hide-scrollbars", f"--screenshot={shot}", "--window-size=1280,4000",
             Path(res["html"]).resolve().as_uri()],
            capture_output=True, text=True, timeout=900, env={**os.environ, "HOME": profile})
    assert shot.is_file(), proc.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (4000, 1280)
    non_white = np.any(img < 240, axis=2)
    rows = non_white.mean(axis=1)
    # Content runs well down the page (summary, tables, plots), not a blank or error page.
    assert non_white.mean() > 0.03 and np.flatnonzero(rows > 0.01).max() > 2000
    # Plots: matplotlib's coloured lines/bars (saturated pixels) are on the page in several places.
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    colour = (np.max(img, axis=2) - np.min(img, axis=2)) > 80
    colour_rows = np.flatnonzero(colour.sum(axis=1) > 5)
    assert colour_rows.size > 300
    bands = np.split(colour_rows, np.flatnonzero(np.diff(colour_rows) > 40) + 1)
    assert len(bands) >= 3, [(int(x[0]), int(x[-1])) for x in bands]
    # Tables: the header fill (#f3f6f9) appears in many rows.
    header = (np.abs(r - 0xF3) <= 2) & (np.abs(g - 0xF6) <= 2) & (np.abs(b - 0xF9) <= 2)
    assert np.count_nonzero(header.sum(axis=1) > 100) > 20
    shutil.copy(shot, out / "report" / "screenshot.png")     # for a human look


def test_jargon_explained_where_it_appears_and_glossary_at_the_end(tmp_path):
    """Issue 15 item 11/12: binding pld/renyi, KL in nats and Σw explained next to the secrets
    table; a glossary closes the page (plain HTML, no JavaScript); triage fields become columns."""
    from repoguard.report.html import render

    _synthetic_plan(tmp_path, 1000)
    page = Path(build_report(tmp_path, repo_name="small")["html"]).read_text()
    secrets = page.split('id="secrets"')[1].split("<h2")[0]
    for term in ("<code>pld:ε</code>", "<code>renyi:α</code>", "in nats", "<b>Σw</b>"):
        assert term in secrets
    assert page.rindex('id="glossary"') > page.rindex('id="secrets"') and "<script" not in page.lower()
    glossary = page.split('id="glossary"')[1]
    for term in ("nats", "binding", "w, Σw", "σ (noise multiplier)"):
        assert f"<dt>{term}</dt>" in glossary
    left = page.split('id="left-out"')[1].split("<h2")[0]
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    lo = doc["left_out"]
    assert lo["n_secrets"] == 1000 and lo["per_directory"][0]["directory"] == "(root)"   # ids "exN": no folder
    worst = lo["per_secret"][0]   # least retained first; Σw/n over the secret's 2 examples
    assert worst["examples"] == 2 and abs(worst["retained"] - worst["sum_w"] / 2) < 1e-12
    assert worst["retained"] == min(r["retained"] for r in lo["per_secret"])
    assert "<th>retained %</th>" in left and worst["secret"] in left and "(root)" in left
    row = {"rule_id": "github-pat", "path": "tests/x.py", "line": 3, "redacted": "ghp_…", "entropy": 4.8,
           "where": "test", "severity": "low"}
    doc = {"findings": {"count": 1, "shown": 1, "by_rule": {"github-pat": 1}, "rows": [row]}}
    findings = render(doc).split('id="findings"')[1].split("<h2")[0]
    assert "<th>where</th>" in findings and "<th>severity</th>" in findings and ">low<" in findings


def _finding(rule, path, line, hmac, *, severity="high", location="source"):
    return {"rule_id": rule, "path": path, "line": line, "column": 1, "secret_hmac": hmac,
            "fingerprint": f"{rule}:{path}:{hmac}", "redacted": "****(40 chars)", "entropy": 4.5,
            "severity": severity, "location": location}


def _write_findings(out: Path, findings: list[dict]) -> None:
    (out / "scan").mkdir(parents=True, exist_ok=True)
    (out / "scan" / "findings.json").write_text(json.dumps({"findings": findings, "stats": {}}))


def test_identical_values_are_one_row_sorted_by_severity(tmp_path):
    """Issue 28 item 8: on wagtail the table was 56 rows of one test-fixture hash."""
    from repoguard.report.collect import _findings
    from repoguard.report.html import render

    same = [_finding("generic-api-key", f"wagtail/tests/fixtures/f{i:02d}.json", 3, "ab" * 16,
                     severity="medium", location="fixture") for i in range(56)]
    others = [_finding("rsa-private-key", "tests/keys/test.pem", 1, "cd" * 16, severity="medium", location="test"),
              _finding("github-pat", "docs/setup.md", 9, "ef" * 16, severity="low", location="docs")]
    _write_findings(tmp_path, others[:1] + same[:30] + others[1:] + same[30:])
    f = _findings(tmp_path)
    assert f["count"] == 58 and f["distinct"] == 3 and f["shown"] == 3
    top = f["rows"][0]    # medium before low; of the two mediums, the one with more copies first
    assert [r["rule_id"] for r in f["rows"]] == ["generic-api-key", "rsa-private-key", "github-pat"]
    assert top["count"] == 56 and top["where"] == "fixture" and len(top["files"]) == 20
    assert top["files"][0] == {"path": "wagtail/tests/fixtures/f00.json", "line": 3}
    assert f["summary"] == ("58 finding(s): 56 fixture, 1 test, 1 docs; severity 57 medium, 1 low"
                            " — all in tests, fixtures, docs or examples (likely samples)")
    page = render({"findings": f})
    table = page.split('id="findings"')[1].split("<h2")[0]
    assert table.count("<tr>") == 1 + 3       # header and one row per value
    assert "<th>severity</th><th>rule</th><th>where</th><th>count</th><th>files</th>" in table
    assert '<td class="n">56</td>' in table and "+53 more" in table and "… and 36 more" in table
    assert "all in tests, fixtures, docs or examples" in table
    assert table.index("generic-api-key") < table.index("rsa-private-key") < table.index("github-pat")
    _html_checks(page)


def test_severity_order_critical_first_and_worst_placement_wins(tmp_path):
    from repoguard.report.collect import _findings

    _write_findings(tmp_path, [
        _finding("slack-bot-token", "a.py", 1, "11" * 16, severity="low"),
        _finding("aws-access-token", "b.py", 2, "22" * 16, severity="medium", location="test"),
        _finding("aws-access-token", "src/c.py", 5, "22" * 16, severity="high"),      # same value, in source
        _finding("openssh-private-key", "k", 1, "33" * 16, severity="critical"),
    ])
    f = _findings(tmp_path)
    assert [(r["rule_id"], r["severity"], r["count"]) for r in f["rows"]] == [
        ("openssh-private-key", "critical", 1), ("aws-access-token", "high", 2), ("slack-bot-token", "low", 1)]
    assert f["rows"][1]["where"] == "test, source" and "likely samples" not in f["summary"]


def test_dp_run_says_why_it_has_no_loss_curve():
    from repoguard.report.html import DP_LOSS_NOTE, render

    dp = {"name": "train (DP)", "private": True, "log": [{"step": 1, "loss": None}, {"step": 2, "loss": None}]}
    section = render({"training": {"runs": [dp]}}).split('id="training"')[1].split("<h2")[0]
    assert "no data" not in section
    assert "Training loss of train (DP): Not published for DP runs" in section
    assert "OUT/train/internal/steps.jsonl" in DP_LOSS_NOTE and "accountant" in DP_LOSS_NOTE
    nodp = {"name": "train (--no-dp)", "private": False, "log": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]}
    both = render({"training": {"runs": [dp, nodp]}}).split('id="training"')[1].split("<h2")[0]
    assert 'src="data:image/png;base64,' in both and "Training loss of train (DP)" in both
    only = render({"training": {"runs": [nodp]}}).split('id="training"')[1].split("<h2")[0]
    assert "Not published" not in only


def test_dp_run_plots_its_public_heldout_loss(tmp_path):
    """A published DP log keeps the public held-out evaluation: the report draws it (and says the
    per-step training loss is not published)."""
    from repoguard.report.collect import _training
    from repoguard.report.html import render

    (tmp_path / "train").mkdir()
    ev = lambda x: {"public": {"loss": x, "examples": 6}}   # noqa: E731
    lines = [{"step": 1, "lr": 1e-3, "eval_base": ev(3.9)}, {"step": 2, "lr": 1e-3},
             {"step": 3, "lr": 1e-3, "eval": ev(3.8)}, {"step": 4, "lr": 1e-3, "eval": ev(3.7)}]
    (tmp_path / "train" / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "train" / "privacy_report.json").write_text(json.dumps({"private": True}))
    tr = _training(tmp_path)
    (run,) = tr["runs"]
    assert run["name"] == "train (DP)" and run["heldout"] == [[0, 3.9], [3, 3.8], [4, 3.7]]
    section = render({"training": tr}).split('id="training"')[1].split("<h2")[0]
    assert 'src="data:image/png;base64,' in section and "Not published for DP runs" in section
    assert "public held-out loss of train (DP) instead" in section
