"""The ledger at scale: columnar side files, the carried-forward summary, tamper detection of side
files, and reading format-1 ledgers."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from repoguard.accounting import ledger_state as ls
from repoguard.accounting.divergences import mixture
from repoguard.accounting.ledger import (append_entry, canonical, entry_hash, pairs_of, read_entries, side_dir,
                                         spending, spent, spent_of, verify)
from repoguard.accounting.pld import pair_from_record, pair_record, pld_bound
from repoguard.core.errors import PolicyError

ALPHAS = ("2", "4", "8")


def _secrets(rng, n=6, sigma=1.0, steps=50, drop_alpha=False):
    out = {}
    for j in range(n):
        rho = rng.uniform(0.01, 0.2, 1 + j % 3)
        ren = {a: float(rng.uniform(0.01, 0.1)) for a in ALPHAS}
        if drop_alpha and j == 0:
            ren.pop("8")
        out[f"s{j}"] = {"kl": float(rng.uniform(0.001, 0.05)), "renyi": ren,
                        "pair": None if j == n - 1 else pair_record(mixture(rho), 1.0 / sigma, steps)}
    return out


def _fields(run_id, status, sigma=1.0):
    return {"run_id": run_id, "status": status, "plan_digest": "0" * 64, "sigma": sigma, "batch_size": 8.0,
            "steps": 50, "steps_completed": 50, "accountant": "best", "adjacency": "zero-out"}


def _history(tmp_path, rng, runs=8):
    """Runs recorded as a scheduler would: started, sometimes interrupted and resumed, completed;
    σ varies by run, some runs share σ (their pairs merge exactly); one run is left open."""
    path = tmp_path / "ledger.jsonl"
    for i in range(runs):
        sigma = 1.0 + 0.1 * (i % 3)
        append_entry(path, _fields(f"r{i}", "started", sigma), _secrets(rng, sigma=sigma, steps=0))
        if i % 3 == 1:
            append_entry(path, _fields(f"r{i}", "interrupted", sigma), _secrets(rng, sigma=sigma, steps=20))
        status = "running" if i == runs - 1 else "completed"
        append_entry(path, _fields(f"r{i}", status, sigma), _secrets(rng, sigma=sigma, drop_alpha=i == 3))
    return path


def _as_multiset(recs):
    return sorted((r["a"], tuple(r["m"]), r["steps"]) for r in ls.merge_parts(recs))


def test_carried_forward_state_equals_the_full_composition(tmp_path):
    rng = np.random.default_rng(1)
    path = _history(tmp_path, rng)
    entries = read_entries(path)
    assert all("secrets" not in e and e["v"] == 2 for e in entries)
    got_spent, got_pairs = spending(path)
    raw_spent, raw_pairs = spent_of(entries, path=path), pairs_of(entries, path=path)
    assert got_spent.keys() == raw_spent.keys()
    for sid, (kl, ren) in raw_spent.items():
        assert got_spent[sid][0] == pytest.approx(kl, rel=1e-12)
        assert got_spent[sid][1] == pytest.approx(ren, rel=1e-12)      # same orders, same sums
    assert "8" not in got_spent["s0"][1]           # an order missing from one run is +inf for good
    for sid, recs in raw_pairs.items():
        assert (recs is None) == (got_pairs[sid] is None)
        assert _as_multiset(got_pairs[sid]) == _as_multiset(recs)
        # runs at the same σ merged exactly: fewer parts, the same Neyman–Pearson bound
        assert len(got_pairs[sid]) <= len(recs)
    sid = "s1"
    mix, a, t = pair_from_record(raw_pairs[sid][0])
    full = pld_bound(mix, a, t, 1e-6, history=tuple(pair_from_record(d) for d in raw_pairs[sid][1:]))[0][0]
    m2, a2, t2 = pair_from_record(got_pairs[sid][0])
    carried = pld_bound(m2, a2, t2, 1e-6, history=tuple(pair_from_record(d) for d in got_pairs[sid][1:]))[0][0]
    assert carried == pytest.approx(full, rel=1e-6)
    # leaving out the open run, and leaving out a completed one, also match the raw composition
    for skip in ("r7", "r2"):
        s2, p2 = spending(path, skip_run=skip)
        r2 = spent_of(entries, skip, path=path)
        assert {k: v[0] for k, v in s2.items()} == pytest.approx({k: v[0] for k, v in r2.items()}, rel=1e-12)
    v = verify(path, deep=True)
    assert v["ok"], v["problems"]
    # only the newest summary is kept on disk; every spending file is
    d = side_dir(path)
    assert len(list(d.glob("summary-*.parquet"))) == 1
    assert len(list(d.glob("run-*.parquet"))) == len(entries)


def test_dominance_merge_is_an_upper_bound(tmp_path):
    rng = np.random.default_rng(2)
    mix = mixture([0.05, 0.1])
    recs = [pair_record(mix, float(1 / s), 40) for s in rng.uniform(0.9, 1.1, ls.MAX_PARTS + 8)]
    merged = ls.merge_parts(recs)
    assert len(merged) < len(recs) and sum(d["steps"] for d in merged) == 40 * len(recs)
    hist = [pair_from_record(d) for d in recs]
    full = pld_bound(*hist[0], 1e-8, history=tuple(hist[1:]))[0][0]
    mh = [pair_from_record(d) for d in merged]
    dom = pld_bound(*mh[0], 1e-8, history=tuple(mh[1:]))[0][0]
    assert full <= dom <= full * 1.1


@pytest.mark.parametrize("damage", ["edit", "swap", "delete", "summary", "truncate_dir"])
def test_side_file_tampering_detected(tmp_path, damage):
    rng = np.random.default_rng(3)
    path = _history(tmp_path, rng, runs=4)
    d = side_dir(path)
    runs = sorted(d.glob("run-*.parquet"))
    if damage == "edit":                     # rewrite a spending file with less spending
        secrets = ls.read_run(runs[1])
        secrets["s0"]["kl"] = 0.0
        ls.write_run(runs[1], secrets)
    elif damage == "swap":
        a, b = runs[1].read_bytes(), runs[2].read_bytes()
        runs[1].write_bytes(b)
        runs[2].write_bytes(a)
    elif damage == "delete":
        runs[0].unlink()
    elif damage == "summary":
        (s,) = d.glob("summary-*.parquet")
        st = ls.read_state(s)
        st.kl[st.index["s0"]] = 0.0
        ls.write_state(s, st)
    else:
        shutil.rmtree(d)
    v = verify(path)
    assert not v["ok"] and any("file" in p for p in v["problems"]), v
    if damage in ("summary", "truncate_dir"):
        with pytest.raises(PolicyError):
            spending(path)


def test_summary_edit_with_forged_digests_is_caught_by_the_head_and_the_deep_check(tmp_path):
    rng = np.random.default_rng(4)
    path = _history(tmp_path, rng, runs=3)
    d = side_dir(path)
    (s,) = d.glob("summary-*.parquet")
    st = ls.read_state(s)
    st.kl[st.index["s0"]] = 0.0
    digest = ls.write_state(s, st)
    lines = path.read_text().splitlines()
    e = json.loads(lines[-1])
    e["summary"]["sha256"] = digest
    e["hash"] = entry_hash(e)
    lines[-1] = canonical(e).decode()
    path.write_text("\n".join(lines) + "\n")
    v = verify(path)
    assert not v["ok"]                          # the head no longer matches the last entry's hash
    head = path.with_name("ledger.jsonl.head")  # a forger who also rewrites the head passes the
    head.write_text(json.dumps({"count": len(lines), "last_hash": e["hash"]}))   # chain checks…
    assert verify(path)["ok"]
    v = verify(path, deep=True)                 # …but not the recomputation from the spending files
    assert not v["ok"] and "differs from the composition" in v["problems"][0]


def _v1_entry(seq, prev, run_id, secrets):
    e = {"v": 1, "seq": seq, "prev": prev, "run_id": run_id, "time": "2026-01-01T00:00:00+00:00",
         "plan_digest": "0" * 64, "sigma": 1.0, "batch_size": 8.0, "steps": 50, "steps_completed": 50,
         "status": "completed", "accountant": "best", "adjacency": "zero-out", "secrets": secrets}
    e["hash"] = entry_hash(e)
    return e


def test_format_1_ledgers_are_read_and_extended(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "ledger.jsonl"
    s0 = _secrets(rng)
    s1 = {k: {kk: vv for kk, vv in v.items() if kk != "pair"} for k, v in _secrets(rng).items()}  # pre-pair
    e0 = _v1_entry(0, "0" * 64, "old0", s0)
    e1 = _v1_entry(1, e0["hash"], "old1", s1)
    path.write_bytes(canonical(e0) + b"\n" + canonical(e1) + b"\n")
    path.with_name("ledger.jsonl.head").write_text(json.dumps({"count": 2, "last_hash": e1["hash"]}))
    assert verify(path)["ok"]
    before = spent(path)
    assert before["s0"][0] == pytest.approx(s0["s0"]["kl"] + s1["s0"]["kl"])
    assert spending(path)[1]["s0"] is None          # an entry without pairs: unknown to the NP bound
    append_entry(path, _fields("new", "completed"), _secrets(rng))
    entries = read_entries(path)
    assert entries[-1]["v"] == 2 and "summary" in entries[-1]
    got, raw = spent(path), spent_of(entries, path=path)
    assert {k: v[0] for k, v in got.items()} == pytest.approx({k: v[0] for k, v in raw.items()}, rel=1e-12)
    assert verify(path, deep=True)["ok"]


def test_unknown_format_is_refused_with_a_message(tmp_path):
    path = tmp_path / "ledger.jsonl"
    e = _v1_entry(0, "0" * 64, "x", {})
    e["v"] = 9
    e["hash"] = entry_hash(e)
    path.write_bytes(canonical(e) + b"\n")
    path.with_name("ledger.jsonl.head").write_text(json.dumps({"count": 1, "last_hash": e["hash"]}))
    v = verify(path)
    assert not v["ok"] and "format 9" in v["problems"][0]
    with pytest.raises(PolicyError, match="format 9"):
        spent(path)


# -- the vectorised merge at scale: an upper bound on the full composition --------------------------
def _year(rng, nights, n_secrets, *, spread=0.35):
    """Per night: σ drifting from 0.95 by `spread` with ±1 % noise, ρ of every secret rescaled by
    a weekly random walk, secrets arriving over time — the records a scheduler would append."""
    base = [rng.uniform(0.01, 0.06, 1 + j % 4) for j in range(n_secrets)]
    birth = np.where(np.arange(n_secrets) < n_secrets * 3 // 4, 0, rng.integers(0, nights, n_secrets))
    walk = np.exp(np.cumsum(rng.normal(0, 0.02, nights // 7 + 1)))
    runs = []
    for t in range(nights):
        sigma = (0.95 + spread * t / max(nights - 1, 1)) * (1 + 0.01 * rng.standard_normal())
        secrets = {}
        for j in np.nonzero(birth <= t)[0]:
            ren = {a: float(rng.uniform(0.001, 0.01)) for a in ALPHAS}
            if rng.random() < 0.01:
                ren.pop("8")
            secrets[f"s{j:03d}"] = {"kl": float(rng.uniform(1e-4, 1e-3)), "renyi": ren,
                                    "pair": pair_record(mixture(base[j] * walk[t // 7]), 1.0 / sigma, 10)}
        runs.append((sigma, secrets))
    return runs


def _np_bound(recs, p):
    hist = tuple(pair_from_record(d) for d in recs)
    return float(pld_bound(*hist[0], p, history=hist[1:])[0][0])


@pytest.mark.slow
def test_carried_state_over_many_runs_upper_bounds_the_raw_composition():
    """60 runs, σ distinct every night: the carried KL/Rényi sums equal the raw ones, every
    secret keeps ≤ MAX_PARTS parts with its steps conserved and a ≥ each raw part's in its place,
    and the Neyman–Pearson bound from the carried parts is ≥ the one from every raw part, and
    close to it."""
    rng = np.random.default_rng(7)
    runs = _year(rng, 60, 40)
    carried, raw = ls.State(), ls.State()
    for _sigma, secrets in runs:
        carried.add(secrets)
        raw.add(secrets, merge=False)
    cs, rs = carried.spent(), raw.spent()
    assert cs.keys() == rs.keys()
    for sid, (kl, ren) in rs.items():
        assert cs[sid][0] == pytest.approx(kl, rel=1e-12)
        assert cs[sid][1].keys() == ren.keys() and cs[sid][1] == pytest.approx(ren, rel=1e-12)
    assert np.all(carried.parts_per_secret() <= ls.MAX_PARTS)
    assert raw.parts_per_secret().max() == 60
    cp, rp = carried.pairs(), raw.pairs()
    for sid in cp:
        assert sum(d["steps"] for d in cp[sid]) == sum(d["steps"] for d in rp[sid])
        assert max(d["a"] for d in cp[sid]) == max(d["a"] for d in rp[sid])
    for sid in ("s000", "s013", "s035"):
        full, dom = _np_bound(rp[sid], 1e-4), _np_bound(cp[sid], 1e-4)
        assert full <= dom <= full * 1.15, (sid, full, dom)


@pytest.mark.slow
def test_dominance_merge_matches_dp_accounting_oracle(monkeypatch):
    """The merged history's bound is ≥ the Neyman–Pearson bound of the full raw history computed
    by dp_accounting (connect-the-dots PLD per run, self-composed, all runs composed), and close
    to it when a secret's ρ drift slowly (±2 % a run, as re-solved weights do)."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    monkeypatch.setattr(ls, "MAX_PARTS", 8)      # a short history keeps the oracle quick
    rng = np.random.default_rng(8)
    base = rng.uniform(0.02, 0.05, 3)
    recs = [pair_record(mixture(base * (1 + 0.02 * rng.standard_normal())), 1.0 / s, 15)
            for s in rng.uniform(0.9, 1.4, ls.MAX_PARTS + 6)]
    merged = ls.merge_parts(recs)
    assert len(merged) == ls.MAX_PARTS
    p = 1e-4
    oracle = None
    for d in recs:
        mix, a, t = pair_from_record(d)
        one = pldm.from_mixture_gaussian_mechanism(1.0 / a, [float(m) for m in mix.m], list(np.exp(mix.logw)),
                                                   value_discretization_interval=5e-3,
                                                   use_connect_dots=True).self_compose(t)
        oracle = one if oracle is None else oracle.compose(one)
    eps = np.linspace(0.0, np.log(1 / p), 60)
    want = max(min(np.exp(e) * p + pmf.get_delta_for_epsilon(e) for e in eps)
               for pmf in (oracle._pmf_remove, oracle._pmf_add))
    got = _np_bound(merged, p)
    raw = _np_bound(recs, p)
    assert raw == pytest.approx(want, rel=0.02)  # our unmerged composition agrees with the oracle
    assert got >= want * (1 - 1e-3)              # ε-grid and discretisation slack of the oracle
    assert got <= want * 1.10


def test_merge_bounds_parts_however_far_sigma_drifts():
    """σ spanning a factor 4 over 200 runs: merged down to MAX_PARTS parts, steps conserved."""
    mix = mixture([0.05, 0.1])
    recs = [pair_record(mix, float(a), 5) for a in np.geomspace(0.5, 2.0, 200)]
    merged = ls.merge_parts(recs)
    assert 1 < len(merged) <= ls.MAX_PARTS
    assert sum(d["steps"] for d in merged) == 1000
    # each raw part sits in a merged part whose a is at least its own
    a_merged = np.sort([d["a"] for d in merged])
    assert all(a_merged[np.searchsorted(a_merged, d["a"] * (1 - 1e-12))] >= d["a"] for d in recs)


def test_envelope_dominates_every_member():
    rng = np.random.default_rng(9)
    recs = [pair_record(mixture(rng.uniform(0.01, 0.2, rng.integers(1, 6))), 1.0 + 0.001 * k, 1)
            for k in range(ls.MAX_PARTS + 1)]
    (merged,) = [d for d in ls.merge_parts(recs) if d["steps"] > 1]
    def surv(d, top):
        pmf = np.zeros(top + 2)
        pmf[np.asarray(d["m"])] = np.exp(d["logw"])
        return np.cumsum(pmf[::-1])[::-1]
    top = max(max(d["m"]) for d in recs)
    s_env = surv(merged, top)
    members = [d for d in recs if d["a"] <= merged["a"] and not any(
        d == m for m in ls.merge_parts(recs) if m is not merged)]
    assert len(members) >= 2
    for d in members:
        assert np.all(s_env >= surv(d, top) * (1 - 1e-12))
    assert merged["n"] == max(d["n"] for d in members)


def test_truncated_side_file_is_detected(tmp_path):
    rng = np.random.default_rng(10)
    path = _history(tmp_path, rng, runs=3)
    f = sorted(side_dir(path).glob("run-*.parquet"))[1]
    f.write_bytes(f.read_bytes()[:-100])
    v = verify(path)
    assert not v["ok"] and "does not match its digest" in " ".join(v["problems"])


def test_ledger_is_parsed_once_per_state_of_the_file(tmp_path, monkeypatch):
    """verify, read_entries and spending in one process parse the chain once; an append or an
    edit is seen at once."""
    import repoguard.accounting.ledger_io as lg

    rng = np.random.default_rng(11)
    path = _history(tmp_path, rng, runs=3)
    calls = []
    real = lg._parse
    monkeypatch.setattr(lg, "_parse", lambda p: calls.append(p) or real(p))
    lg.clear_caches()
    verify(path)
    n = len(read_entries(path))
    spending(path)
    spending(path, skip_run="r1")
    assert len(calls) == 1
    append_entry(path, _fields("r9", "completed"), _secrets(rng))
    assert len(read_entries(path)) == n + 1 and len(calls) == 2
    lines = path.read_text().splitlines()
    e = json.loads(lines[0])
    e["sigma"] = 9.0                         # same length, new content
    lines[0] = canonical(e).decode()
    path.write_text("\n".join(lines) + "\n")
    assert not verify(path)["ok"]


def test_readers_never_see_a_summary_disappear_under_concurrent_appends(tmp_path):
    """An append replaces the summary file and deletes the superseded one; readers hold the
    shared lock, so a concurrent `spending` never hits a missing file."""
    import threading

    rng = np.random.default_rng(12)
    path = _history(tmp_path, rng, runs=2)
    errors, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                spending(path)
                verify(path, side_files=False)
            except Exception as exc:          # noqa: BLE001 — any failure is the finding
                errors.append(exc)
                return

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(12):
            append_entry(path, _fields(f"c{i}", "completed"), _secrets(np.random.default_rng(i)))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert verify(path, deep=True)["ok"]
