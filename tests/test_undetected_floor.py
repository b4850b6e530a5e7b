"""The undetected-secret floor as a plan target (issue 26), end to end on the fixture monorepo
with the embedded tiny model: the default run meets it (recomputed by an independent
dp_accounting call), the opt-out is marked in every output, the config and CLI forms parse, and a
scheduled run's floor follows the budget fraction."""
from __future__ import annotations

import json

import pytest

from floor_oracle import floor_bound
from repoguard.cli import main

FAST = ["--steps", "10", "--batch-size", "8", "--seed", "0", "--max-length", "96"]


def _run(capsys, *argv):
    capsys.readouterr()
    rc = main(["run", "--json", *argv])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if rc == 0 else None), cap.err


@pytest.mark.slow
def test_default_run_meets_the_floor_and_every_output_says_so(fixture_repo_copy, capsys):
    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    rc, s, err = _run(capsys, *FAST, str(repo))
    assert rc == 0, err
    plan = json.loads((out / "plan" / "plan.json").read_text())
    fl = plan["extra"]["undetected_floor"]
    assert fl["enabled"] and fl["k"] == 1 and fl["p"] == 1e-10 and fl["r"] == 1e-3
    assert fl["meets_r"] and fl["achieved_bound"] <= fl["r"] * (1 + 1e-9)
    assert plan["sigma"] >= fl["sigma_floor"] * (1 - 1e-9) > 0
    # independent: dp_accounting's PLD of the Poisson-subsampled Gaussian, T steps at ρ_u
    assert floor_bound([(fl["rho"], plan["sigma"], plan["steps"])], fl["p"]) <= fl["r"] * 1.02
    assert floor_bound([(fl["rho"], plan["sigma"] / 2, plan["steps"])], fl["p"]) > fl["r"]
    # the floor's noise is spent on the secrets' examples: tied weight is retained
    tied = sum(x["sum_w"] for x in plan["secrets"])
    assert tied > 0
    assert s["undetected_floor"]["enabled"] and s["undetected_floor"]["meets_r"]
    pr = json.loads((out / "train" / "privacy_report.json").read_text())
    assert pr["undetected_floor"]["enabled"] and pr["undetected_floor"]["meets_r"]
    from repoguard.accounting.ledger import read_entries, spent

    e = read_entries(out / "ledger.jsonl")[-1]
    assert e["floor"]["enabled"] and e["floor"]["account"] == "@undetected:k=1"
    assert spent(out / "ledger.jsonl")["@undetected:k=1"][0] > 0
    html = (out / "report" / "report.html").read_text()
    assert "undetected floor" in html and "OFF (opt-out)" not in html
    # one "retained" figure for the plan, the run summary and the report (issue 28 item 4)
    retained = plan["extra"]["retention"]["retained"]
    report = json.loads((out / "report" / "report.json").read_text())
    assert s["retained_fraction"] == retained == report["plan"]["retained"]
    assert f"{retained:.3f}" in html


@pytest.mark.slow
def test_opt_out_is_marked_in_every_output(fixture_repo_copy, capsys):
    repo, out = fixture_repo_copy, fixture_repo_copy / ".repoguard"
    cfg = repo / "repoguard.toml"
    cfg.write_text(cfg.read_text().replace("[defaults]", "[defaults]\nundetected = \"off\"", 1))
    rc, s, err = _run(capsys, *FAST, str(repo))
    assert rc == 0, err
    fl = json.loads((out / "plan" / "plan.json").read_text())["extra"]["undetected_floor"]
    assert fl["enabled"] is False and fl["binding"] == "off" and "sigma_floor" in fl
    assert s["undetected_floor"]["enabled"] is False                                    # run summary
    pr = json.loads((out / "train" / "privacy_report.json").read_text())                 # privacy report
    assert pr["undetected_floor"]["enabled"] is False and "OFF" in pr["undetected_floor"]["note"]
    from repoguard.accounting.ledger import read_entries

    assert read_entries(out / "ledger.jsonl")[-1]["floor"]["enabled"] is False          # ledger entry
    assert "OFF (opt-out)" in (out / "report" / "report.html").read_text()              # report
    capsys.readouterr()
    assert main(["plan", str(repo), "--batch-size", "8", "--steps", "10"]) == 0          # plan output
    assert "UNDETECTED FLOOR OFF" in capsys.readouterr().out
    assert main(["ledger", "show", str(repo)]) == 0                                      # ledger show
    assert "OFF (opt-out)" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["run", *FAST, str(repo)]) == 0                                          # run table
    assert "OFF (opt-out)" in capsys.readouterr().out


def test_config_and_cli_forms(tmp_path):
    from repoguard.core.config import Protection, load_config, parse_undetected
    from repoguard.core.errors import InputError

    d = Protection(1e-9, 1e-3)
    assert parse_undetected("off", d).enabled is False
    assert parse_undetected("k=3,r=1e-2", d) == parse_undetected({"k": 3, "r": 1e-2}, d)
    u = parse_undetected("k=3,r=1e-2", d)
    assert (u.k, u.p, u.r, u.enabled, u.account) == (3, 1e-9, 1e-2, True, "@undetected:k=3")
    for bad in ("k=0", "r=2", "p=1e-2,r=1e-3", "x=1", "k", "k=1.5"):
        with pytest.raises(InputError, match="--undetected"):
            parse_undetected(bad, d)
    f = tmp_path / "repoguard.toml"
    f.write_text("[defaults]\np = 1e-9\nr = 1e-3\nundetected = { k = 2 }\n")
    c = load_config(f)
    assert (c.undetected.k, c.undetected.p, c.undetected.r, c.undetected.enabled) == (2, 1e-9, 1e-3, True)
    f.write_text("[defaults]\nundetected = \"sometimes\"\n")
    with pytest.raises(InputError, match=r"repoguard.toml:2: defaults.undetected"):
        load_config(f)
    f.write_text("[defaults]\np = 1e-9\nr = 1e-3\n")
    c = load_config(f)
    assert (c.undetected.p, c.undetected.r, c.undetected.enabled) == (1e-9, 1e-3, True)   # on by default
