"""`repoguard synth` (SecPE) on the fixture monorepo with the embedded tiny model: the released
statistics are the only path from training examples — private ones, and with the undetected-secret
floor on (the default) untied ones too — to the output; the per-round σ meets every secret's
target, and the floor's, composed over the T rounds (checked by dp_accounting, which shares no code
with our accountant); no credential or held-out text is embedded, prompted or written; the HTTP
backend works against a local stub; the ledger records the synthesis (and the floor's account) and
a later plan pays for it."""
from __future__ import annotations

import copy
import dataclasses
import http.server
import inspect
import json
import shutil
import threading

import numpy as np
import pytest

from repoguard.cli import main

# ---- the one place randomness is fixed in this file --------------------------------------------
# Public seed (K-means, generator) and, with insecure_reproducible, the private inclusions and
# noise. `repoguard synth` itself draws the private randomness from OS entropy.
SEED = 11
# -------------------------------------------------------------------------------------------------
SMALL = dict(n=6, rounds=2, variations=1, clusters=6, c=1.0, max_length=64, max_new_tokens=16)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, monorepo_module, embedded_base_dir):
    """The fixture monorepo, analysed (nothing spent yet)."""
    repo = tmp_path_factory.mktemp("synth") / "monorepo"
    monorepo_module.build(repo)
    assert main(["analyze", "-q", str(repo)]) == 0
    return repo, repo / ".repoguard"


@pytest.fixture
def fresh_out(analysed, tmp_path):
    """A private copy of the analysed output directory (its own, empty ledger)."""
    def make(name: str = "out"):
        dest = tmp_path / name
        shutil.copytree(analysed[1], dest)
        return dest
    return make


@pytest.fixture(scope="module")
def backend(analysed):
    """The embedded base as generator and embedder (shared: building it is the slow part)."""
    from repoguard.synthesis.synthesize import SynthOptions, backends

    return backends(SynthOptions(**SMALL, show_progress=False))


class Recording:
    """An embedder or generator that records every text it is given, then delegates."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, []

    def embed(self, texts):
        self.seen.extend(texts)
        return self.inner.embed(texts)

    def sample(self, n, *, seed):
        return self.inner.sample(n, seed=seed)

    def vary(self, texts, per_text, *, seed):
        self.seen.extend(texts)
        return self.inner.vary(texts, per_text, seed=seed)

    def describe(self):
        return self.inner.describe()


def _config(repo):
    from repoguard.core.config import load_config

    return load_config(repo / "repoguard.toml", required=False)


def _synth(repo, out, gen, emb, undetected="off", **kw):
    from repoguard.synthesis.synthesize import SynthOptions, synthesize

    opts = SynthOptions(**{**SMALL, **kw}, seed=SEED, insecure_reproducible=True, show_progress=False,
                        undetected=undetected)
    return synthesize(root=repo, out=out, config=_config(repo), opts=opts, generator=gen, embedder=emb)


def _rows(out):
    return [json.loads(x) for x in (out / "synth" / "synthetic.jsonl").read_text().splitlines()]


# -- the guarantee: σ per round against dp_accounting --------------------------------------------
def _poisson_binomial(rhos) -> np.ndarray:
    pmf = np.array([1.0])
    for q in rhos:
        pmf = np.convolve(pmf, [1 - q, q])
    return pmf


def _oracle_bound(rhos, sigma: float, rounds: int, p: float) -> float:
    """dp_accounting's Neyman–Pearson bound min_ε e^ε p + δ_T(ε) for N(ΣBern(ρ_i), σ²) vs N(0, σ²)
    composed over `rounds` (both directions; connect-the-dots, pessimistic)."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    pmf = _poisson_binomial(rhos)
    keep = pmf > 1e-300
    pld = pldm.from_mixture_gaussian_mechanism(float(sigma), [float(m) for m in np.flatnonzero(keep)],
                                               [float(x) for x in pmf[keep]], value_discretization_interval=2e-3,
                                               use_connect_dots=True).self_compose(int(rounds))
    eps = np.linspace(0.0, np.log(1 / p) + 1.0, 800)
    return max(float(np.min(np.exp(eps) * p + np.asarray(d.get_delta_for_epsilon(eps))))
               for d in (pld._pmf_remove, pld._pmf_add))


@pytest.mark.slow
def test_per_round_sigma_meets_every_target_composed_over_the_rounds(analysed):
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.source.split import split_from_config
    from repoguard.synthesis.noise import SENSITIVITY, secret_noise

    repo, out = analysed
    inc = load_incidence(out)
    test = split_from_config(inc.example_ids, _config(repo).plan).test
    rounds = 3
    noise = secret_noise(inc, test, rounds=rounds, c=1.0)
    assert noise.noise_std == pytest.approx(noise.sigma * SENSITIVITY)
    assert np.all(noise.rho[test] == 0) and np.all(noise.rho[noise.public] == 0)
    assert noise.rho.max() == pytest.approx(1.0)             # ρ = w / max w
    csc = inc.matrix.tocsc()
    cases = {}
    for j, s in enumerate(inc.secrets):
        rh = np.sort(noise.rho[csc.indices[csc.indptr[j]:csc.indptr[j + 1]]])
        rh = rh[rh > 0]
        if rh.size:
            cases.setdefault((tuple(np.round(rh, 12)), s.p, s.r), []).append(s.id)
    assert cases, "the fixture has private examples"
    tightest = 0.0
    for (rh, p, r), ids in cases.items():
        got = _oracle_bound(rh, noise.sigma, rounds, p)
        assert got <= r * 1.03, (ids, got, r)                # every target holds over T rounds
        assert got >= p
        tightest = max(tightest, _oracle_bound(rh, 0.8 * noise.sigma, rounds, p) / r)
    assert tightest > 1.0          # and σ is not needlessly large: 0.8σ breaks some target
    # one round at the same σ spends less: the T rounds are really composed
    one = secret_noise(inc, test, rounds=1, c=1.0)
    assert one.sigma < noise.sigma


@pytest.mark.slow
def test_the_floor_holds_over_the_rounds_with_every_untied_example_counted(analysed):
    """Floor on (the default): untied training examples are counted at ρ_u; a secret nobody
    declared, in k = 1 untied example, gets bound ≤ r over the T rounds at the calibrated σ
    (dp_accounting), and so does every declared secret; held-out rows still get ρ = 0."""
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.core.config import Undetected
    from repoguard.source.split import split_from_config
    from repoguard.synthesis.noise import UNTIED_RHO, secret_noise

    repo, out = analysed
    inc = load_incidence(out)
    test = split_from_config(inc.example_ids, _config(repo).plan).test
    rounds = 3
    und = Undetected()                                     # the default floor: k = 1, p = 1e-10, r = 1e-3
    noise = secret_noise(inc, test, rounds=rounds, c=1.0, floor=und)
    assert noise.public.any() and np.all(noise.rho[noise.public] == UNTIED_RHO) and noise.rho_u == UNTIED_RHO
    assert np.all(noise.rho[test] == 0) and not noise.clear.any()
    fl = noise.floor
    assert fl["enabled"] and fl["meets_r"] and fl["account"]["id"] == "@undetected:k=1"
    assert fl["achieved_bound"] <= und.r * (1 + 1e-9)
    got = _oracle_bound([noise.rho_u] * und.k, noise.sigma, rounds, und.p)
    assert und.p <= got <= und.r * 1.03, got                   # the floor over T rounds, by dp_accounting
    csc = inc.matrix.tocsc()
    for j, s in enumerate(inc.secrets):                       # and every declared target still holds
        rh = noise.rho[csc.indices[csc.indptr[j]:csc.indptr[j + 1]]]
        rh = rh[rh > 0]
        if rh.size:
            assert _oracle_bound(np.sort(rh), noise.sigma, rounds, s.p) <= s.r * 1.03, s.id
    # σ is the max of what the secrets and the floor need: one of them binds at 0.8σ
    worst = max([_oracle_bound([noise.rho_u], 0.8 * noise.sigma, rounds, und.p) / und.r] +
                [_oracle_bound(np.sort(rh[rh > 0]), 0.8 * noise.sigma, rounds, s.p) / s.r
                 for j, s in enumerate(inc.secrets)
                 for rh in [noise.rho[csc.indices[csc.indptr[j]:csc.indptr[j + 1]]]] if (rh > 0).any()])
    assert worst > 1.0
    off = secret_noise(inc, test, rounds=rounds, c=1.0, floor=dataclasses.replace(und, enabled=False))
    assert off.floor["enabled"] is False and off.clear.any() and np.all(off.rho[off.public] == 0)


def test_release_adds_the_calibrated_noise_to_counts_and_sums():
    from repoguard.synthesis.anchors import Anchors
    from repoguard.synthesis.clustering import release

    k, d = 4, 3
    anchors = Anchors(np.eye(k, d), np.arange(k, dtype=float), np.zeros((k, d)))
    rng = np.random.default_rng(0)
    draws = [release(anchors, np.zeros(0, dtype=np.int64), np.zeros((0, d)), np.zeros(0), 2.5, rng=rng)
             for _ in range(4000)]
    counts = np.array([s.counts for s in draws]) - anchors.counts
    sums = np.array([s.sums for s in draws])
    assert counts.std() == pytest.approx(2.5, rel=0.03) and abs(counts.mean()) < 0.05
    assert sums.std() == pytest.approx(2.5, rel=0.03)
    # an always-included example adds 1 to its anchor's count and its clipped embedding to the sum
    x = np.array([[3.0, 4.0, 0.0]])
    from repoguard.synthesis.clustering import assign
    lab, xc = assign(anchors, x)
    assert np.linalg.norm(xc) == pytest.approx(1.0)
    a = release(anchors, lab, xc, np.ones(1), 1e-12, rng=np.random.default_rng(1))
    assert a.counts[lab[0]] == pytest.approx(anchors.counts[lab[0]] + 1)
    assert np.allclose(a.sums[lab[0]], xc[0])


# -- the only path --------------------------------------------------------------------------------
@pytest.mark.slow
def test_released_statistics_are_the_only_path_from_private_examples(analysed, fresh_out, backend, monkeypatch):
    """Change one private example's text (ρ = 1: it is counted every round). With the noise held
    fixed (insecure test seed), the released statistics change, and the output is exactly what
    `run_rounds` makes of the released statistics alone: given run A's statistics, run B's world
    (changed private text) produces run A's corpus bit for bit."""
    import repoguard.synthesis.rounds as rounds_mod
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.source.split import split_from_config
    from repoguard.synthesis.noise import secret_noise

    assert list(inspect.signature(rounds_mod.run_rounds).parameters) == [
        "stats", "generator", "embedder", "n", "variations", "seed", "progress", "initial", "initial_embeddings"]
    repo, out0 = analysed
    gen, emb = backend
    inc = load_incidence(out0)
    test = split_from_config(inc.example_ids, _config(repo).plan).test
    noise = secret_noise(inc, test, rounds=SMALL["rounds"], c=SMALL["c"])
    row = int(np.flatnonzero(noise.rho == 1.0)[0])
    from repoguard.source.corpus import load_corpus
    from repoguard.training.data import default_redactor, example_texts

    target = example_texts(load_corpus(out0, repo), [inc.example_ids[row]], redactor=default_redactor(out0, repo))[0]

    class Changed:
        """The embedder, except that the chosen private example's text is replaced."""

        def embed(self, texts):
            # prepended: the embedder reads the first max_length tokens
            return emb.embed(["def exfiltrate():\n    return 42\n" * 3 + t if t == target else t for t in texts])

    captured = []
    real = rounds_mod.run_rounds

    def spy(stats, *a, **kw):
        captured.append(copy.deepcopy(list(stats)))
        return real(stats, *a, **kw)

    monkeypatch.setattr(rounds_mod, "run_rounds", spy)
    a_out, b_out = fresh_out("a"), fresh_out("b")
    _synth(repo, a_out, gen, emb)
    _synth(repo, b_out, gen, Changed())
    stats_a, stats_b = captured
    assert any(not np.allclose(x.sums, y.sums) for x, y in zip(stats_a, stats_b))   # the change is released
    rows_a, rows_b = _rows(a_out), _rows(b_out)

    def texts(res):
        return [(c.text, c.round, pytest.approx(c.score)) for c in res.kept]

    # the corpus is a function of the release: A's statistics in B's world give A's corpus
    redo_a = real(stats_a, gen, Changed(), n=SMALL["n"], variations=SMALL["variations"], seed=SEED)
    redo_b = real(stats_b, gen, emb, n=SMALL["n"], variations=SMALL["variations"], seed=SEED)
    assert [(r["text"], r["round"], pytest.approx(r["score"])) for r in rows_a] == texts(redo_a)
    assert [(r["text"], r["round"], pytest.approx(r["score"])) for r in rows_b] == texts(redo_b)
    # and the private side of each release is only the noisy counts and sums, nothing else
    assert all(set(vars(s)) == {"counts", "sums"} for s in stats_a)


@pytest.mark.slow
def test_with_the_floor_untied_examples_too_reach_the_output_only_through_the_release(
        analysed, fresh_out, backend, monkeypatch):
    """Default mode (floor on): change one *untied* example's text. The anchors (built from the
    generator's own samples) are identical in both worlds; the released statistics change; and the
    corpus is exactly what `run_rounds` makes of the release and the generator's public samples:
    A's release in B's world gives A's corpus bit for bit."""
    import repoguard.synthesis.clustering as clustering_mod
    import repoguard.synthesis.rounds as rounds_mod
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.core.config import Undetected
    from repoguard.source.corpus import load_corpus
    from repoguard.source.split import split_from_config
    from repoguard.synthesis.noise import secret_noise
    from repoguard.training.data import default_redactor, example_texts

    repo, out0 = analysed
    gen, emb = backend
    inc = load_incidence(out0)
    test = split_from_config(inc.example_ids, _config(repo).plan).test
    noise = secret_noise(inc, test, rounds=SMALL["rounds"], c=SMALL["c"], floor=Undetected())
    row = int(np.flatnonzero(noise.public)[0])                 # untied, counted every round (ρ_u = 1)
    assert noise.rho[row] == 1.0
    target = example_texts(load_corpus(out0, repo), [inc.example_ids[row]], redactor=default_redactor(out0, repo))[0]

    class Changed:
        def embed(self, texts):
            return emb.embed(["def exfiltrate():\n    return 42\n" * 3 + t if t == target else t for t in texts])

    captured, anchors = [], []
    real, real_release = rounds_mod.run_rounds, clustering_mod.release_rounds

    def spy(stats, *a, **kw):
        captured.append((copy.deepcopy(list(stats)), list(kw["initial"]), np.array(kw["initial_embeddings"])))
        return real(stats, *a, **kw)

    def spy_release(anch, *a, **kw):
        anchors.append(anch)
        return real_release(anch, *a, **kw)

    monkeypatch.setattr(rounds_mod, "run_rounds", spy)
    monkeypatch.setattr(clustering_mod, "release_rounds", spy_release)
    a_out, b_out = fresh_out("a"), fresh_out("b")
    sa = _synth(repo, a_out, gen, emb, undetected=None)
    sb = _synth(repo, b_out, gen, Changed(), undetected=None)
    assert sa["anchors"] == "generated" and sa["inputs"]["public_examples"] == 0
    assert sa["inputs"]["untied_examples_counted"] == int(noise.public.sum())
    assert sa["undetected_floor"]["meets_r"] and sb["undetected_floor"]["meets_r"]
    (stats_a, init_a, iemb_a), (stats_b, init_b, iemb_b) = captured
    assert init_a == init_b and np.allclose(iemb_a, iemb_b)          # round 0 never saw the repository
    assert np.array_equal(anchors[0].centres, anchors[1].centres)    # nor did the anchors
    assert not anchors[0].counts.any() and not anchors[0].sums.any()
    assert any(not np.allclose(x.sums, y.sums) for x, y in zip(stats_a, stats_b))   # the change is released
    kw = dict(n=SMALL["n"], variations=SMALL["variations"], seed=SEED)
    redo_a = real(stats_a, gen, Changed(), initial=init_a, **kw)     # A's release, B's world
    redo_b = real(stats_b, gen, emb, initial=init_b, **kw)
    for out, redo in ((a_out, redo_a), (b_out, redo_b)):
        assert [(r["text"], r["round"], pytest.approx(r["score"])) for r in _rows(out)] == \
            [(c.text, c.round, pytest.approx(c.score)) for c in redo.kept]
    assert all(set(vars(s)) == {"counts", "sums"} for s in stats_a)


# -- what enters and what leaves ------------------------------------------------------------------
def test_no_credential_or_held_out_text_is_embedded_prompted_or_written(analysed, fresh_out, backend,
                                                                         monorepo_module):
    from repoguard.analyzers.incidence import load_incidence
    from repoguard.source.corpus import load_corpus
    from repoguard.source.split import split_from_config

    repo, out0 = analysed
    gen, emb = backend
    out = fresh_out()
    rgen, remb = Recording(gen), Recording(emb)
    summary = _synth(repo, out, rgen, remb)
    inc = load_incidence(out0)
    test = split_from_config(inc.example_ids, _config(repo).plan).test
    corpus = load_corpus(out0, repo)
    by_id = {e.id: e for e in corpus.examples}
    held = [corpus.text(by_id[i]) for i, t in zip(inc.example_ids, test) if t]
    assert held, "the fixture holds examples out"
    creds = [monorepo_module.planted_secret(c["id"]) for c in monorepo_module.PLANTED_CREDENTIALS if c["in_head"]]
    needles = [ln for c in creds for ln in c.splitlines() if len(ln.strip()) >= 12]
    assert needles
    embedded = "\n".join(remb.seen)
    assert "<REDACTED:" in embedded                    # credentialed examples were embedded, redacted
    for n in needles:
        assert n not in embedded
    for h in held:                                     # held-out examples never enter
        assert h not in remb.seen
    public_or_private = set(remb.seen)
    assert not any(h in public_or_private for h in held)
    prompts = "\n".join(rgen.seen)                      # the generator saw only its own candidates
    for text in remb.seen[: summary["inputs"]["public_examples"] + summary["inputs"]["private_examples_counted"]]:
        if len(text) > 40:
            assert text not in prompts
    written = (out / "synth" / "synthetic.jsonl").read_text() + (out / "synth" / "summary.json").read_text()
    for n in needles:
        assert n not in written
    for eid in inc.example_ids:                          # no example ids published
        assert eid not in written
    assert len(_rows(out)) == SMALL["n"]
    assert all({"text", "round", "score"} <= set(r) for r in _rows(out))


# -- the HTTP backend ------------------------------------------------------------------------------
class _Stub(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body))
        if self.path != "/v1/completions":
            self.send_response(404)
            self.end_headers()
            return
        choices = [{"index": i, "text": f"\ndef f_{i}_{len(body['prompt'])}(x):\n    return x + {i}\n"}
                   for i in range(int(body["n"]))]
        data = json.dumps({"object": "text_completion", "choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    _Stub.requests = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", _Stub.requests
    srv.shutdown()
    srv.server_close()


def test_http_backend_against_a_local_stub(stub_server, analysed, fresh_out, capsys):
    from repoguard.core.errors import InputError
    from repoguard.synthesis.generators import HTTPGenerator

    url, seen = stub_server
    g = HTTPGenerator(url, model="stub", max_tokens=8)
    s = g.sample(3, seed=1)
    assert len(s) == 3 and s[0].startswith("\ndef f_0_0")
    v = g.vary(["abcdefgh"], 2, seed=2)
    assert len(v) == 1 and [x[:4] for x in v[0]] == ["abcd", "abcd"]
    path, body = seen[-1]
    assert path == "/v1/completions" and body["prompt"] == "abcd" and body["n"] == 2 and body["model"] == "stub"
    with pytest.raises(InputError, match="request failed"):
        HTTPGenerator(url + "/nowhere/v1/completions").sample(1, seed=0)
    # end to end through the command: the server generates, the local model only embeds
    repo, _ = analysed
    out = fresh_out()
    seen.clear()
    assert main(["synth", str(repo), "--out", str(out), "--n", "4", "--rounds", "2", "--variations", "1",
                 "--clusters", "4", "--c", "1", "--max-length", "64", "--generator-url", url, "--undetected", "off",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["generator"]["backend"] == "http" and summary["randomness"] == "os-entropy"
    rows = _rows(out)
    assert len(rows) == 4 and all("def f_" in r["text"] for r in rows)
    assert {r["round"] for r in rows} <= {0, 1}
    prompts = [b["prompt"] for _, b in seen]
    assert prompts[0] == "" and len(prompts) == 1 + 4          # one sample call, one variation call per survivor


# -- the ledger -----------------------------------------------------------------------------------
def _plan_json(repo, out, capsys) -> dict:
    assert main(["plan", str(repo), "--out", str(out), "--c", "1", "--undetected", "off", "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_the_ledger_records_the_synthesis_and_a_later_plan_pays_for_it(analysed, fresh_out, capsys):
    repo, _ = analysed
    before = _plan_json(repo, fresh_out("before"), capsys)
    out = fresh_out("spent")
    argv = ["synth", str(repo), "--out", str(out), "--n", "4", "--rounds", "2", "--variations", "1",
            "--clusters", "4", "--c", "1", "--max-length", "64", "--max-new-tokens", "8",
            "--insecure-reproducible", "--seed", "3", "--json"]
    off = fresh_out("off")                                  # the paper's mode, opt-in only
    assert main(argv[:3] + [str(off)] + argv[4:] + ["--undetected", "off"]) == 0
    s_off = json.loads(capsys.readouterr().out)
    assert s_off["undetected_floor"]["enabled"] is False and s_off["anchors"] == "public (in the clear)"
    assert s_off["guarantee"].startswith("UNDETECTED FLOOR OFF")
    assert main(argv) == 0                                  # the default: the floor is met, not refused
    summary = json.loads(capsys.readouterr().out)
    fl = summary["undetected_floor"]
    assert fl["enabled"] and fl["meets_r"] and fl["achieved_bound"] <= fl["r"] and summary["anchors"] == "generated"
    assert summary["inputs"]["public_examples"] == 0 and summary["inputs"]["untied_examples_counted"] > 0
    assert summary["randomness"] == "insecure-reproducible"
    assert summary["sigma_per_round"] == [summary["sigma"]] * 2
    assert all(s["bound"] <= s["r"] * (1 + 1e-9) for s in summary["secrets"])
    assert main(["ledger", "show", str(repo), "--out", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    (run,) = shown["runs"]
    assert run["run_id"] == summary["run_id"] and run["status"] == "completed" and run["steps"] == 2
    assert run["randomness"] == "insecure-reproducible"
    tied = [s["id"] for s in summary["secrets"] if s["kl_this_run"] > 0]
    assert tied and all(shown["spent"][sid]["kl"] > 0 for sid in tied)
    assert shown["spent"]["@undetected:k=1"]["kl"] > 0       # the floor's account, like a training run
    after = _plan_json(repo, out, capsys)
    assert after["sigma"] > before["sigma"] * 1.01          # the synthesis's spending is paid for
    assert all(s["achieved_bound"] <= s["r"] for s in after["secrets"])
    # a published synthesis guards the ledger like a published adapter: deleting it is refused
    (out / "ledger.jsonl").unlink()
    assert main(["plan", str(repo), "--out", str(out), "--c", "1", "-q"]) == 1
    assert "synth" in capsys.readouterr().err


# -- the compare arm ------------------------------------------------------------------------------
@pytest.mark.slow
def test_compare_synth_arm_scores_the_same_held_out_rows_and_records_nothing(analysed, fresh_out):
    from repoguard.core.config import load_config
    from repoguard.evaluation.compare import run_compare

    repo, _ = analysed
    out = fresh_out()
    assert main(["plan", "-q", str(repo), "--out", str(out), "--batch-size", "8", "--steps", "4", "--c", "1"]) == 0
    cfg = load_config(repo / "repoguard.toml", required=False).training
    cfg = dataclasses.replace(cfg, max_length=48)
    doc = run_compare(root=repo, out=out, cfg=cfg, arms=("synth",), steps=4, seed=SEED, risk=False,
                      show_progress=False)
    arm = doc["arms"]["synth"]
    assert arm["protection"] == "floor" and arm["meets_floor"] is True        # the default floor, met
    assert arm["floor"]["bound"] <= arm["floor"]["r"] and arm["synthesis"]["anchors"] == "generated"
    assert arm["bound_ratio_max"] <= 1 + 1e-9                  # every declared target at the snapshot
    from repoguard.evaluation.compare_text import format_table

    assert "meets floor" in format_table(doc)
    assert arm["synthesis"]["examples"] == 32 and arm["synthesis"]["randomness"] == "insecure-reproducible"
    from repoguard.evaluation.metrics import headline

    assert headline(arm["slices"]) > 0       # scored on the base's rows (compare raises otherwise)
    assert not (out / "ledger.jsonl").exists() and not (out / "synth").exists()   # measured, never recorded


# -- the compare arm's settings (--synth-n/-rounds/-variations/-clusters) ---------------------------
TINY_ARM = {"n": 4, "rounds": 2, "variations": 1, "clusters": 3}


def _small_cfg(repo):
    from repoguard.core.config import load_config

    return dataclasses.replace(load_config(repo / "repoguard.toml", required=False).training, max_length=48,
                               eval_max_examples=8, eval_max_lines=2, micro_batch_size=8, eval_every=0)


def test_synth_settings_default_and_reject_bad_values_naming_the_flag(tmp_path, capsys):
    """`synth_settings`: SYNTH_ARM for nothing given, a typed value replaces its default; ≤ 0, a
    non-integer or a bool is a one-line InputError naming the compare flag, before any work (on
    the CLI: exit 2, one line on stderr)."""
    from repoguard.core.errors import InputError
    from repoguard.evaluation.synth_arm import SYNTH_ARM, synth_settings

    assert synth_settings(None) == SYNTH_ARM == {"n": 32, "rounds": 3, "variations": 2, "clusters": 16}
    assert synth_settings({"n": "128", "clusters": 8, "rounds": None}) == {**SYNTH_ARM, "n": 128, "clusters": 8}
    for name, bad in (("n", 0), ("rounds", -1), ("variations", "1.5"), ("clusters", "x"), ("n", 2.0),
                      ("n", True), ("rounds", "")):
        with pytest.raises(InputError, match=f"--synth-{name}"):
            synth_settings({name: bad})
    (tmp_path / "plain").mkdir()
    capsys.readouterr()
    for flag, bad, what in (("--synth-n", "0", "≥ 1"), ("--synth-rounds", "-2", "≥ 1"),
                            ("--synth-variations", "1.5", "integer"), ("--synth-clusters", "many", "integer")):
        assert main(["compare", str(tmp_path / "plain"), "--arms", "synth", flag, bad]) == 2, flag
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0] and what in err[0], err


@pytest.mark.slow
def test_compare_synth_settings_reach_the_arm_are_recorded_and_key_its_saved_result(analysed, fresh_out,
                                                                                      monkeypatch):
    """`synth=` (the --synth-* flags) reaches SecPE (the rounds run with that N, T, L, K), the
    result and the table record the settings, and they are part of the saved result's key: the
    same settings reuse it, another N trains the arm again (so does --fresh)."""
    from repoguard.evaluation import synth_arm
    from repoguard.evaluation.compare import run_compare
    from repoguard.evaluation.compare_text import format_table
    from repoguard.synthesis import rounds as rounds_mod

    repo, _ = analysed
    out = fresh_out()
    assert main(["plan", "-q", str(repo), "--out", str(out), "--batch-size", "8", "--steps", "2", "--c", "1"]) == 0
    cfg = _small_cfg(repo)
    seen = []
    real = rounds_mod.run_rounds
    monkeypatch.setattr(rounds_mod, "run_rounds",
                        lambda stats, gen, emb, **kw: seen.append((len(stats), kw["n"], kw["variations"]))
                        or real(stats, gen, emb, **kw))

    def cmp(synth, resume=True):
        return run_compare(root=repo, out=out, cfg=cfg, arms=("synth",), steps=2, seed=SEED, risk=False,
                           show_progress=False, synth=synth, resume=resume)

    doc = cmp(TINY_ARM)
    arm = doc["arms"]["synth"]
    assert seen == [(TINY_ARM["rounds"], TINY_ARM["n"], TINY_ARM["variations"])]      # one release per round
    assert {k: arm["synthesis"][k] for k in synth_arm.SYNTH_ARM} == TINY_ARM
    assert arm["synthesis"]["examples"] == TINY_ARM["n"] and arm["meets_floor"] is True
    assert "synth (N = 4, T = 2, L = 1, K = 3)" in format_table(doc)
    saved = json.loads((out / "compare" / "synth.json").read_text())
    assert saved["key"]["synthesis"] == TINY_ARM
    assert cmp(dict(TINY_ARM))["arms"]["synth"]["seconds"] == arm["seconds"] and len(seen) == 1   # reused
    other = cmp({**TINY_ARM, "n": 5})["arms"]["synth"]                                            # retrained
    assert len(seen) == 2 and seen[-1][1] == 5 and other["synthesis"]["n"] == 5
    assert other["synthesis"]["examples"] == 5
    assert json.loads((out / "compare" / "synth.json").read_text())["key"]["synthesis"]["n"] == 5
    cmp({**TINY_ARM, "n": 5}, resume=False)                                                       # --fresh
    assert len(seen) == 3


@pytest.mark.slow
def test_floor_sweep_trains_the_synth_arm_at_every_level(analysed, fresh_out):
    """`--floors`: synth meets the floor (by default), so the sweep trains it at every level with
    the floor enforced (its σ falls and its floor bound stays ≤ r as r grows), reusing the main
    result at the main floor's r; it can be a level's best arm."""
    from repoguard.evaluation.compare import run_compare, swept_arms
    from repoguard.evaluation.compare_text import format_table

    assert swept_arms(("hush", "drop", "synth", "no-dp")) == ["hush", "synth"]
    repo, _ = analysed
    out = fresh_out()
    assert main(["plan", "-q", str(repo), "--out", str(out), "--batch-size", "8", "--steps", "2", "--c", "1"]) == 0
    levels = (1e-3, 1e-2)
    doc = run_compare(root=repo, out=out, cfg=_small_cfg(repo), arms=("synth", "drop"), steps=2, seed=SEED,
                      risk=False, show_progress=False, synth=TINY_ARM, floors=levels)
    lv = doc["levels"]
    assert set(lv["arms"]) == {"synth"} and set(lv["references"]) == {"drop"}
    pts = lv["arms"]["synth"]
    assert [x["r"] for x in pts] == list(levels)
    assert all(x["meets_floor"] and x["floor_bound"] <= x["r"] * (1 + 1e-9) for x in pts)
    assert pts[0]["sigma"] == doc["arms"]["synth"]["sigma"] and pts[1]["sigma"] <= pts[0]["sigma"]
    lvl = json.loads((out / "compare" / "levels" / "synth@r=0.01.json").read_text())
    assert lvl["key"]["synthesis"] == TINY_ARM and lvl["key"]["floor"]["r"] == 1e-2
    assert lvl["result"]["floor"]["r"] == 1e-2 and lvl["result"]["synthesis"]["anchors"] == "generated"
    assert [b["arm"] for b in lv["best"]] == ["synth", "synth"]
    assert "floor sweep" in format_table(doc)
