"""`repoguard synth [PATH]`: a SecPE synthetic corpus whose declared secrets keep their per-secret
(p, r) bound, the spending recorded in the ledger like a training run → OUT/synth/."""
from __future__ import annotations

NAME = "synth"
HELP = "make a shareable synthetic corpus (SecPE) under the per-secret guarantee (writes OUT/synth/, spends the ledger)"


def register(parser) -> None:
    """Add `synth`'s arguments to its subparser: PATH, the SecPE settings (N, T, L, K, c), the
    generator and embedder, the undetected floor, `--insecure-reproducible`, `--json`."""
    from repoguard.commands._common import add_json_flag, add_path_argument

    add_path_argument(parser)
    a = parser.add_argument
    a("--n", type=int, default=32, metavar="N", help="synthetic examples kept per round (N_syn; default 32)")
    a("--rounds", type=int, default=3, metavar="T", help="rounds (each spends privacy; default 3)")
    a("--variations", type=int, default=2, metavar="L", help="variations per kept example between rounds (default 2)")
    a("--clusters", type=int, default=16, metavar="K", help="public anchors (K-means; default 16)")
    a("--c", type=float, default=None, help="LP scale c (default: [plan] c, 0 = sweep and pick max Σρ/σ)")
    a("--model", metavar="DIR|NAME", default=None,
      help="local causal LM, or smollm2-135m once fetched (default: [training] model, else the embedded base)")
    a("--generator-url", metavar="URL", default="", help="OpenAI-compatible server (POST /v1/completions) to "
      "generate with; the local model then only embeds")
    a("--generator-model", metavar="NAME", default="default", help="model name sent to --generator-url")
    a("--embedder", metavar="DIR", default="", help="local embedding checkpoint (default: the model's mean-pooled "
      "hidden states)")
    a("--max-length", type=int, default=256, metavar="N", help="tokens embedded per text")
    a("--max-new-tokens", type=int, default=96, metavar="N", help="tokens generated per sample or variation")
    a("--temperature", type=float, default=1.0)
    a("--prompt", metavar="TEXT", default="",
      help="public text every local sample and variation starts from, not kept in the output (e.g. "
           "$'```python\\n' for an instruction-tuned base such as smollm2-135m, which otherwise writes prose); "
           "never build it from private text")
    a("--seed", type=int, default=None, help="seed of K-means and the generator (public); default [training] seed")
    a("--undetected", default=None, metavar="off|k=1,p=…,r=…",
      help="the undetected-secret floor (default: [defaults] undetected). On: anchors from the generator's own "
           "samples, every example (untied ones too) only through the noisy statistics, σ meets the floor. "
           "\"off\": the paper's mode, untied examples build the anchors in the clear (no floor; every output says so)")
    a("--insecure-reproducible", action="store_true",
      help="TESTS ONLY: derive the private inclusions and noise from --seed (no privacy guarantee)")
    add_json_flag(parser)


def run(args) -> int:
    """Make the synthetic corpus under OUT/run.lock (synthesis.synthesize), record it in the ledger and
    print the per-secret bounds (or `--json`). Returns 0; raises InputError (exit 2) for bad
    settings (SynthOptions.check), PolicyError (exit 1) when no σ meets a target or the floor, or
    the ledger fails verification."""
    from repoguard.commands._common import print_json, resolve_repo
    from repoguard.pipeline.scheduled import run_lock
    from repoguard.synthesis.synthesize import SynthOptions, synthesize

    repo, config, out = resolve_repo(args, allow_plain=True)
    opts = SynthOptions(n=args.n, rounds=args.rounds, variations=args.variations, clusters=args.clusters,
                        c=args.c if args.c is not None else 0.0, model=args.model or config.training.model,
                        generator_url=args.generator_url, generator_model=args.generator_model,
                        embedder=args.embedder, max_length=args.max_length, max_new_tokens=args.max_new_tokens,
                        temperature=args.temperature, prompt=args.prompt,
                        seed=args.seed if args.seed is not None else config.training.seed,
                        insecure_reproducible=args.insecure_reproducible, undetected=args.undetected,
                        show_progress=not (args.quiet or args.json))
    opts.check()
    with run_lock(out):                  # one command at a time spends or writes OUT
        summary = synthesize(root=repo.root, out=out, config=config, opts=opts)
    if args.json:
        print_json(summary)
    elif not args.quiet:
        _print(summary, out)
    return 0


def _print(s: dict, out) -> None:
    from rich.table import Table

    from repoguard.commands._common import make_console

    con = make_console()
    t = Table(title=f"per-secret bounds after {s['rounds']} rounds (σ = {s['sigma']:.4g} per round, noise std "
                    f"{s['noise_std']:.4g}; ledger included)")
    for col in ("secret", "|E_j|", "p", "r", "bound", "binding"):
        t.add_column(col, justify="left" if col in ("secret", "binding") else "right", overflow="fold")
    for x in sorted(s["secrets"], key=lambda x: -x["bound"] / x["r"])[:50]:
        t.add_row(x["id"], str(x["n_examples"]), f"{x['p']:.2g}", f"{x['r']:.3g}", f"{x['bound']:.3g}", x["binding"])
    if s["secrets"]:
        con.print(t)
    per = [r["total_s"] for r in s["per_round"]]
    vc = s["voting_cost"]
    inp = s["inputs"]
    src = (f"{inp['public_examples']} public (in the clear) and {inp['private_examples_counted']} private examples"
           if s.get("anchors") != "generated" else
           f"{inp['private_examples_counted']} tied and {inp['untied_examples_counted']} untied examples, all "
           f"through the noise (anchors from the generator's own samples)")
    con.print(f"{s['examples_written']} synthetic examples from {src} (K = {s['clusters']} anchors); "
              f"{sum(per) / len(per):.3g} s per round; voting with K anchors {vc['seconds_k_anchors'] * 1e3:.3g} ms "
              f"vs all M = {vc['m']} examples {vc['seconds_all_m'] * 1e3:.3g} ms", markup=False)
    con.print(f"recorded in the ledger as {s['run_id']}; written to {out / 'synth'}", markup=False)
    from repoguard.planning.undetected import describe

    fl = s.get("undetected_floor") or {}
    if fl.get("enabled", True):
        con.print(describe(fl), markup=False)
    else:
        con.print("UNDETECTED FLOOR OFF (opt-out): untied examples built the anchors in the clear; synthesis gives "
                  "them no guarantee", markup=False)
