"""`repoguard compare`'s text: the arms table, the code slices against drop-dp, repeats, floor
levels and the protection label each arm earns. Formatting only; `evaluation.compare` runs the arms.
"""
from __future__ import annotations


def format_repeats(doc: dict) -> list[str]:
    """The repeats as text: per arm the public and secret-tied loss, mean ± sd [min, max] over n."""
    rep = doc.get("repeats") or {}
    if not rep:
        return []
    n = max(v["n"] for v in rep.values())
    out = [f"over {n} repeats (fresh sampler and noise randomness, LoRA init seed + i), held-out loss "
           "mean ± sd [min, max]:"]
    from repoguard.evaluation.slices import CODE_SLICES

    for name, v in rep.items():
        label = protection_label(doc["arms"][name])
        cells = [f"{k} {v[k + '_mean']:.3f} ± {v[k + '_sd']:.3f} [{v[k + '_min']:.3f}, {v[k + '_max']:.3f}]"
                 for k in ("public", "tied", *CODE_SLICES) if v.get(k + "_mean") is not None]
        out.append(f"  {name:>18}  {'  '.join(cells) or '—'}  ({label})")
    return out


def floor_title(doc: dict) -> str:
    """One line naming what every protected arm meets: the declared targets and the floor
    (k, p, r), or that the floor is off; and the ledger state they were calibrated against."""
    fl = doc.get("floor") or {}
    led = doc.get("ledger") or {}
    runs = f"ledger: {led.get('runs', 0)} earlier run(s), head {str(led.get('head') or '')[:12]}"
    if not fl:
        return "compare (made before the floor was a target)"
    if not fl.get("enabled", True):
        return (f"UNDETECTED FLOOR OFF (opt-out): protected arms meet the declared targets only; floor bounds "
                f"(k = {fl.get('k')}, p = {fl.get('p'):g}) are shown for information; {runs}")
    return (f"equal protection: declared targets + undetected floor k = {fl['k']}, p = {fl['p']:g}, "
            f"r = {fl['r']:g} for every protected arm; {runs}")


def protection_label(r: dict) -> str:
    """'meets floor' / 'FAILS floor' / 'FAILS targets' (a declared secret's certified bound above
    its r) / 'declared only' (floor off) / 'reference (no floor)'."""
    if r.get("protection") == "reference":
        return "reference (no floor)"
    if r.get("meets_targets") is False and r.get("meets_floor") is not False:
        return "FAILS targets"
    m = r.get("meets_floor")
    return "declared only" if m is None and r.get("protection") else "meets floor" if m else \
        "FAILS floor" if m is False else "—"


def format_table(doc: dict) -> str:
    """The text table: a title line (`floor_title`), then one row per arm, columns σ, Σw/n, each
    slice's loss/accuracy/exact match (public and secret-tied), achieved/target bound range, the
    arm's cumulative undetected-floor bound at the floor's k, its protection
    (`protection_label`), wall time; with a floor sweep, `format_levels` below it."""
    base = doc["base"]
    k = (doc.get("floor") or {}).get("k", 1)
    head = ("arm", "σ", "Σw/n", "public loss", "acc", "EM", "tied loss", "acc", "EM", "max bound/r", f"floor k={k}",
            "protection", "s")
    rows = [("base", "—", "—", *_cells(base.get("public")), *_cells(base.get("secret-tied")),
             "—", "—", "—", "—")]
    for name, r in doc["arms"].items():
        fb = (r.get("floor") or {}).get("bound")
        if fb is None:
            fb = (r.get("undetected_floor") or {}).get("1")
        # the worst secret only: the smallest ratio is p/r of a secret the arm never samples
        br = ("≤ 1 (calibrated)" if name == "uniform" and r["bound_ratio_max"] is None else "—"
              if r["bound_ratio_max"] is None else f"{r['bound_ratio_max']:.2g}")
        label = f"{name} (+{r['phase1']['steps']} public)" if r.get("phase1") else name
        if r.get("synthesis"):
            from repoguard.evaluation.synth_arm import synth_label

            label = f"{name} ({synth_label(r['synthesis'])})"
        sw = f"{r['sum_w_over_n']:.3f}" if r.get("sum_w_over_n") is not None else "—"    # synth: none
        rows.append((label, f"{r['sigma']:.4g}", sw, *_cells(r["slices"].get("public")),
                     *_cells(r["slices"].get("secret-tied")), br, f"{fb:.2g}" if fb is not None else "none",
                     protection_label(r), f"{r['seconds']:.0f}"))
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    lines = [floor_title(doc)] + ["  ".join(str(c).rjust(w) for c, w in zip(x, widths)) for x in [head, *rows]]
    code = format_code_slices(doc)
    if code:
        lines += ["", *code]
    if doc.get("repeats"):
        lines += ["", *format_repeats(doc)]
    if doc.get("versus"):
        from repoguard.evaluation.slices import format_versus

        lines += ["", *format_versus(doc["versus"])]
    if doc.get("levels"):
        lines += ["", *format_levels(doc["levels"])]
    return "\n".join(lines)


def format_code_slices(doc: dict) -> list[str]:
    """The held-out loss (examples scored) of the base and every arm on the code slices
    (`slices.CODE_SLICES`), repeat 0; [] when the compare predates them."""
    from repoguard.evaluation.slices import CODE_SLICES

    base = doc.get("base") or {}
    if not any(sl in base for sl in CODE_SLICES):
        return []
    head = ("arm", *(f"{sl} loss" for sl in CODE_SLICES))
    size = {sl: (base.get(sl) or {}).get("examples", 0) for sl in CODE_SLICES}
    rows = [("base", *(_f3((base.get(sl) or {}).get("loss")) for sl in CODE_SLICES))]
    rows += [(name, *(_f3(((r.get("slices") or {}).get(sl) or {}).get("loss")) for sl in CODE_SLICES))
             for name, r in doc["arms"].items()]
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    return ["code slices (held-out code files only; examples scored: "
            + ", ".join(f"{sl} {size[sl]}" for sl in CODE_SLICES) + "):",
            *("  ".join(str(c).rjust(w) for c, w in zip(x, widths)) for x in [head, *rows])]


def format_levels(lv: dict) -> list[str]:
    """The floor sweep as text: one row per protected arm, per level r its public loss, σ and
    achieved floor bound; the references once; then which arm has the lowest public loss at each
    level (among arms meeting that floor)."""
    head = ["arm", *(f"r={r:g}: loss (σ, bound)" for r in lv["r"])]
    rows = []
    for name, pts in lv["arms"].items():
        rows.append([name, *(f"{_f3(x['public_loss'])} ({x['sigma']:.3g}, {_g2(x['floor_bound'])})"
                             + ("" if x.get("meets_floor") in (True, None) else " FAILS") for x in pts)])
    for name, ref in lv["references"].items():
        rows.append([f"{name} (reference, no floor)",
                     *([f"{_f3(ref['public_loss'])} (bound {_g2(ref['floor_bound'])})"] * len(lv["r"]))])
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    out = [f"floor sweep (k = {lv['k']}, p = {lv['p']:g}; declared targets unchanged):"]
    out += ["  ".join(str(c).rjust(w) for c, w in zip(x, widths)) for x in [head, *rows]]
    out += [best_sentence(b) for b in lv.get("best") or []]
    return out


def best_sentence(b: dict) -> str:
    """'At floor r = …: lowest held-out public loss: ARM (LOSS).' for one level of the sweep."""
    if not b.get("arm"):
        return f"At floor r = {b['r']:g}: no protected arm meets the floor."
    return (f"At floor r = {b['r']:g}: lowest held-out public loss among arms meeting it: {b['arm']} "
            f"({b['public_loss']:.3f}).")


def _f3(x) -> str:
    return "—" if x is None else f"{x:.3f}"


def _g2(x) -> str:
    return "—" if x is None else f"{x:.2g}"


def _cells(m: dict | None) -> tuple[str, str, str]:
    if not m or m.get("loss") is None:
        return "—", "—", "—"
    em = m.get("exact_match")
    return f"{m['loss']:.3f}", f"{m['accuracy']:.3f}", "—" if em is None else f"{em:.2f}"
