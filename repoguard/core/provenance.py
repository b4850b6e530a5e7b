"""What an artefact was made from, as digests: a plan records the config, corpus and incidence it
was built from, and the trainer refuses a plan whose inputs changed since (issue 32, hole E: a
secret added to the config after `plan` was otherwise trained at w = 1 and missing from the
privacy report).

Digests are plain SHA-256 (unkeyed): they catch a stale or accidentally edited artefact, not a
forger who can write the output directory (docs/scheduled.md, "What the hash chain does and does not protect against").
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from repoguard.core.errors import InputError

# The config sections the analysis (corpus, secrets, incidence) depends on; `[plan]`, `[training]`
# and `[ledger]` change how a plan is made or trained, not which examples carry which secret.
ANALYSIS_SECTIONS = ("defaults", "levels", "corpus", "secrets", "scan", "analyzers")


def tree_digest(*paths: Path) -> str:
    """SHA-256 over the relative names and bytes of every regular file under `paths` (files or
    directories, missing ones count as absent); symlinks are not followed into directories."""
    h = hashlib.sha256()
    for base in paths:
        base = Path(base)
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        h.update(f"{base.name}:{len(files)}\0".encode())
        for f in files:
            h.update(f.relative_to(base.parent).as_posix().encode() + b"\0")
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def analysis_config_digest(config) -> str:
    """SHA-256 of the canonical JSON of the config's analysis sections (`ANALYSIS_SECTIONS`) as
    resolved (`Config.to_dict`): declared secrets, their (p, r), corpus, scan and analyzer settings."""
    d = config.to_dict()
    body = json.dumps({k: d.get(k) for k in ANALYSIS_SECTIONS}, sort_keys=True, separators=(",", ":"),
                      default=str, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def floor_digest(config) -> str:
    """SHA-256 of the canonical JSON of the config's `[defaults] undetected` (the undetected-secret
    floor's k, p, r and whether it is on). A plan records it (`plan.extra["inputs"]["floor"]`):
    the floor sets σ, so tightening it after `plan` must make `train` refuse the plan (issue 41
    item 4) although the analysis (corpus, incidence) is unchanged."""
    body = json.dumps(config.undetected.record(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def plan_config_inputs(config) -> dict:
    """What a plan records of the config it was made with: {"config": `analysis_config_digest`,
    "floor": `floor_digest`} (`save_plan` adds the corpus and incidence digests)."""
    return {"config": analysis_config_digest(config), "floor": floor_digest(config)}


def artefact_digests(out: Path) -> dict:
    """{"corpus", "incidence"}: `tree_digest` of `out/corpus` and `out/incidence`."""
    out = Path(out)
    return {"corpus": tree_digest(out / "corpus"), "incidence": tree_digest(out / "incidence")}


def check_plan_inputs(plan, out: Path, *, config_digest: str | None, floor: str | None = None) -> None:
    """Refuse a plan whose inputs changed since it was made: the plan files' own digest
    (`plan.digest`, checked by `load_plan`; None = an edited or older plan), the corpus and
    incidence in `out` against the digests the plan recorded (`plan.extra["inputs"]`), and, when
    `config_digest` (`analysis_config_digest` of the config in use) is given, the config against
    the plan's and the incidence's (`incidence/summary.json` "config_digest"), and when `floor`
    (`floor_digest` of the config in use) is given, the config's undetected floor against the plan's.

    Raises InputError naming the artefact and what to re-run."""
    out = Path(out)
    pj = out / "plan" / "plan.json"
    if getattr(plan, "digest", None) is None:
        raise InputError(f"{pj}: the plan carries no digest (edited by hand or made by an older repoguard); "
                         "re-run `repoguard plan`")
    rec = plan.extra.get("inputs")
    if not isinstance(rec, dict):
        raise InputError(f"{pj}: the plan does not record the corpus and incidence it was built from; "
                         "re-run `repoguard plan`")
    now = artefact_digests(out)
    for name in ("corpus", "incidence"):
        if rec.get(name) != now[name]:
            raise InputError(f"{out / name}: changed since the plan was made (re-analysed?); its examples or "
                             "secrets are not what the plan accounted for. Re-run `repoguard plan`")
    if floor is not None and rec.get("floor") != floor:
        raise InputError(f"{pj}: the config's [defaults] undetected (the undetected-secret floor) changed since "
                         "the plan was made; re-run `repoguard plan`")
    if config_digest is None:
        return
    if rec.get("config") != config_digest:
        raise InputError(f"{pj}: the config's secrets, corpus, scan or analyzer settings changed since the plan "
                         "was made; re-run `repoguard analyze` and `repoguard plan`")
    try:
        inc_cfg = json.loads((out / "incidence" / "summary.json").read_text(encoding="utf-8")).get("config_digest")
    except (OSError, ValueError, AttributeError):
        inc_cfg = None
    if inc_cfg is not None and inc_cfg != config_digest:
        raise InputError(f"{out / 'incidence'}: analysed with another config (secrets, corpus, scan or analyzer "
                         "settings); re-run `repoguard analyze` and `repoguard plan`")
