"""The default expected batch size B and steps T of a plan (issue 26 item 3): one rule for `plan`
and `run`, from the number of untied training examples, unless a flag or `[plan]` sets them."""
from __future__ import annotations

from repoguard.core.config import Config, PlanConfig

# The default B and T when neither a flag nor `[plan]` in the config sets them (issue 26 item 3):
# `batch_rule`, chosen from the B × T sweep at the undetected-secret floor in docs/results.md ("Choosing
# B and T"). One rule for `plan` and `run`, whatever the model.
RULE_STEPS = 200                 # T: at a fixed B·T, T = 200 beat T ≤ 100 and tied with T = 400
RULE_EPOCHS = 5                  # B = E·n/T: E passes over the n untied examples in T steps
RULE_B_MIN, RULE_B_MAX = 16, 256 # B_max·T = 51 200 example-gradients: the compute cap
RULE_RHO_MAX = 3                 # B ≤ n/3: an untied example's ρ = B/Σw ≤ 1/3 (σ_floor grows as ρ → 1)


def untied_count(incidence, plan_config: PlanConfig) -> int:
    """n of the batch rule: training examples tied to no secret and not held out. They keep w = 1,
    so Σw ≥ n and any B ≤ n keeps every ρ = B·w/Σw ≤ 1."""
    from repoguard.source.split import split_from_config

    test = split_from_config(incidence.example_ids, plan_config).test
    return int(((incidence.matrix.getnnz(axis=1) == 0) & ~test).sum())


def batch_rule(n_untied: int) -> tuple[float, int, str]:
    """(B, T, the rule in words) for a corpus with `n_untied` untied training examples: T =
    RULE_STEPS, and B = RULE_EPOCHS·n/T (that many passes over them), clamped to RULE_B_MIN…
    RULE_B_MAX and then to at most n/RULE_RHO_MAX (at least 1), so an untied example is sampled
    with ρ = B/Σw ≤ 1/3. The constants come from the sweep in docs/results.md ("Choosing B and T"):
    at a fixed B·T, T = 200 learned more than T ≤ 100 and as much as T = 400; more B·T helped;
    near ρ = 1 the undetected floor's σ grew 4× and the larger B bought nothing."""
    n = max(int(n_untied), 0)
    t = RULE_STEPS
    b = min(max(round(RULE_EPOCHS * n / t), RULE_B_MIN), RULE_B_MAX)
    if n >= 1:
        b = min(b, max(n // RULE_RHO_MAX, 1))
    words = (f"n = {n} untied training examples: T = {t}, B = {RULE_EPOCHS}·n/T = {RULE_EPOCHS * n / t:.1f} "
             f"({RULE_EPOCHS} passes over them) clamped to {RULE_B_MIN}…{RULE_B_MAX} and ≤ n/{RULE_RHO_MAX} "
             f"→ B = {b}")
    return float(b), int(t), words


_SOURCE_ORDER = ("given", "config", "default rule")


def _plan_keys_in_file(config: Config) -> set[str]:
    """The keys the config file's `[plan]` table sets (a value equal to PlanConfig's default is
    still "set in the file"), as `Config.file_keys` recorded them when the file was parsed."""
    return {k.split(".", 1)[1] for k in config.file_keys if k.startswith("plan.")}


def choose_batch(config: Config, n_untied: int, *, batch_size: float | None = None,
                 steps: int | None = None) -> dict:
    """B and T of the next plan, for `plan` and `run` alike: the flag, else `[plan]` batch_size /
    steps when the config sets it (in the file, or to a value other than PlanConfig's default),
    else `batch_rule(n_untied)`. Returns plan.json's `extra["batch_rule"]`: n_untied,
    batch_size, steps, rule (one line in words), source ("given" | "config" | "default rule", the
    most explicit of the two values') and sources (per value)."""
    pc, default, in_file = config.plan, PlanConfig(), _plan_keys_in_file(config)
    rb, rt, words = batch_rule(n_untied)
    picked = {}
    for key, given, rule_value in (("batch_size", batch_size, rb), ("steps", steps, rt)):
        if given is not None:
            picked[key] = (given, "given")
        elif key in in_file or getattr(pc, key) != getattr(default, key):
            picked[key] = (getattr(pc, key), "config")
        else:
            picked[key] = (rule_value, "default rule")
    sources = {k: v[1] for k, v in picked.items()}
    source = min(sources.values(), key=_SOURCE_ORDER.index)
    if set(sources.values()) == {"default rule"}:
        rule = words
    else:
        how = {"given": "flag", "config": f"[plan] in {config.path}", "default rule": "the default rule"}
        rule = "; ".join(f"{'B' if k == 'batch_size' else 'T'} = {picked[k][0]:g} from {how[sources[k]]}"
                         for k in ("batch_size", "steps"))
        if "default rule" in sources.values():
            rule += f" ({words})"
    return {"n_untied": int(n_untied), "batch_size": float(picked["batch_size"][0]),
            "steps": int(picked["steps"][0]), "rule": rule, "source": source, "sources": sources}


def batch_rule_line(rec: dict | None) -> str:
    """The one line `plan` and `run` print about where B and T came from: each value with its own
    source when they differ ("B = 256 (default rule), T = 20 (given)": a B from the batch rule is
    never labelled as given, issue 41 item 17)."""
    if not rec:
        return ""
    src = rec.get("sources") or {}
    if src.get("batch_size") and src.get("steps") and src["batch_size"] != src["steps"]:
        return (f"B = {rec['batch_size']:g} ({src['batch_size']}), T = {rec['steps']} ({src['steps']}): "
                f"{rec['rule']}")
    return f"B = {rec['batch_size']:g}, T = {rec['steps']} ({rec['source']}): {rec['rule']}"
