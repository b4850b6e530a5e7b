"""Credential rules: gitleaks' TOML schema, loaded and validated.

A rule file is data reviewed like code (gitleaks `config/gitleaks.toml`): each `[[rules]]` has
`id`, `description`, `regex` (RE2 syntax), optional `secretGroup`, `entropy` (minimum Shannon
entropy of the secret, bits per character), `keywords` (case-insensitive prefilter), `path`
(regex on the file path), `tags` and `[[rules.allowlists]]` (`regexes`, `regexTarget` =
secret|match|line, `stopwords`, `paths`, `commits`, `condition` = OR|AND). Global allowlists are
`[allowlist]` (gitleaks < 8.25) or `[[allowlists]]` (with optional `targetRules`).

repoguard's own extensions, ignored by gitleaks: `tps`/`fps` (true/false positive examples that
tests replay; for a path-only rule, one without `regex`, they are file paths) and `window` (bytes
of context a match can span, for multi-line rules) and `checksum` (a named check of the token's
own checksum, credentials.checksums: the finding records valid/invalid) and `placeholder = true`
(the structural detectors' placeholder test on the secret: `YOUR_PASSWORD`, `mypassword`, `${X}`).

A user's gitleaks config loads with `load_rules(rule_files=[FILE], use_default=False)`; its
`[extend] useDefault = true` adds ours (and `disabledRules` drops some of ours).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

from repoguard.core.errors import InputError
from repoguard.credentials.rule_types import (DEFAULT_WINDOW, Allowlist, Rule, RuleSet,  # noqa: F401  (re-exported)
                                              compile_re2, max_width)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

def rules_dir() -> Path:
    """The directory of the default rule files: `$REPOGUARD_RULES_DIR`, the source tree's
    `rules/`, or `<prefix>/share/repoguard/rules` of an installed wheel."""
    env = os.environ.get("REPOGUARD_RULES_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[2] / "rules",
                   Path(sys.prefix) / "share" / "repoguard" / "rules"]
    for c in candidates:
        if c.is_dir() and any(c.glob("*.toml")):
            return c
    raise InputError(f"{candidates[0]}: default credential rules not found (set REPOGUARD_RULES_DIR)")


def default_rule_files() -> list[Path]:
    """The default rule files: `rules/*.toml` but the vendor-keyword table (credentials.vendor_table)."""
    return sorted(p for p in rules_dir().glob("*.toml") if p.name != "vendor_keywords.toml")


def _strs(value, where: str, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: `{key}` must be a list of strings")
    return tuple(value)


def _check_regex(pattern: str, where: str, key: str) -> None:
    try:
        compile_re2(pattern)
    except Exception as exc:  # re2.error
        raise InputError(f"{where}: `{key}` is not a valid RE2 regex ({exc})") from None


def _allowlist(d: dict, where: str) -> Allowlist:
    if not isinstance(d, dict):
        raise InputError(f"{where}: allowlist must be a table")
    cond = str(d.get("condition", "OR")).upper()
    if cond not in ("OR", "AND"):
        raise InputError(f"{where}: allowlist condition must be OR or AND, not {cond!r}")
    target = str(d.get("regexTarget", "secret")).lower()
    if target not in ("secret", "match", "line"):
        raise InputError(f"{where}: regexTarget must be secret, match or line, not {target!r}")
    al = Allowlist(
        description=str(d.get("description", "")), condition=cond, regex_target=target,
        regexes=_strs(d.get("regexes"), where, "regexes"), paths=_strs(d.get("paths"), where, "paths"),
        stopwords=tuple(s.lower() for s in _strs(d.get("stopwords"), where, "stopwords")),
        commits=_strs(d.get("commits"), where, "commits"),
        target_rules=_strs(d.get("targetRules"), where, "targetRules"),
    )
    for p in al.regexes:
        _check_regex(p, where, "regexes")
    for p in al.paths:
        _check_regex(p, where, "paths")
    return al


def _rule(d: dict, where: str) -> Rule:
    if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not d["id"]:
        raise InputError(f"{where}: every [[rules]] needs a string `id`")
    rid = d["id"]
    here = f"{where}: rule {rid}"
    regex, path = d.get("regex"), d.get("path")
    if regex is None and path is None:
        raise InputError(f"{here}: needs `regex` or `path`")
    for key, pat in (("regex", regex), ("path", path)):
        if pat is not None:
            if not isinstance(pat, str):
                raise InputError(f"{here}: `{key}` must be a string")
            _check_regex(pat, here, key)
    entropy = d.get("entropy")
    if entropy is not None and (not isinstance(entropy, (int, float)) or entropy < 0):
        raise InputError(f"{here}: `entropy` must be a non-negative number")
    group = d.get("secretGroup", 0)
    if not isinstance(group, int) or group < 0:
        raise InputError(f"{here}: `secretGroup` must be a non-negative integer")
    if regex is not None and group > compile_re2(regex).groups:
        raise InputError(f"{here}: secretGroup {group} but the regex has fewer groups")
    raw_al = d.get("allowlists", [])
    if "allowlist" in d:  # gitleaks < 8.21: a single [rules.allowlist] table
        raw_al = [d["allowlist"], *raw_al]
    if not isinstance(raw_al, list):
        raise InputError(f"{here}: `allowlists` must be an array of tables")
    checksum = d.get("checksum", "")
    from repoguard.credentials.checksums import CHECKSUMS
    if checksum and checksum not in CHECKSUMS:
        raise InputError(f"{here}: unknown `checksum` {checksum!r} (known: {', '.join(sorted(CHECKSUMS))})")
    placeholder = d.get("placeholder", False)
    if not isinstance(placeholder, bool):
        raise InputError(f"{here}: `placeholder` must be true or false")
    window = d.get("window", DEFAULT_WINDOW)
    if not isinstance(window, int) or not 16 <= window <= 1 << 20:
        raise InputError(f"{here}: `window` must be an integer in [16, 1048576]")
    return Rule(
        id=rid, description=str(d.get("description", "")), regex=regex, secret_group=group,
        entropy=float(entropy) if entropy is not None else None,
        keywords=tuple(k.lower() for k in _strs(d.get("keywords"), here, "keywords")),
        path=path, tags=_strs(d.get("tags"), here, "tags"),
        allowlists=tuple(_allowlist(a, here) for a in raw_al), window=window,
        tps=_strs(d.get("tps"), here, "tps"), fps=_strs(d.get("fps"), here, "fps"), source=where,
        checksum=str(checksum), placeholder=placeholder,
    )


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: rule file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML ({exc})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None


def is_yaml(path) -> bool:
    """True for a Nosey Parker-style YAML rule pack (by its `.yaml`/`.yml` suffix)."""
    return Path(path).suffix.lower() in (".yaml", ".yml")


def _parse_file(path: Path) -> tuple[list[Rule], list[Allowlist], dict]:
    if is_yaml(path):
        from repoguard.credentials.np_rules import load_yaml_rules
        return load_yaml_rules(path), [], {}
    doc = _read_toml(path)
    where = str(path)
    rules_raw = doc.get("rules", [])
    if not isinstance(rules_raw, list):
        raise InputError(f"{where}: `rules` must be an array of tables ([[rules]])")
    rules = [_rule(r, where) for r in rules_raw]
    allow = []
    if "allowlist" in doc:
        allow.append(_allowlist(doc["allowlist"], f"{where}: [allowlist]"))
    for a in doc.get("allowlists", []) or []:
        allow.append(_allowlist(a, f"{where}: [[allowlists]]"))
    return rules, allow, doc.get("extend", {}) or {}


def load_rules(*, rule_files: Sequence[str | os.PathLike] = (), use_default: bool = True) -> RuleSet:
    """Load the default rules (when `use_default`) and then each of `rule_files`; a later rule
    with the same id replaces an earlier one. A file's `[extend] useDefault = true` pulls in the
    defaults even when `use_default` is False; `[extend] disabledRules` removes rules by id.
    Nosey Parker-style YAML packs (`.yaml`/`.yml`, credentials.np_rules) add to the defaults:
    when every file given is YAML, the defaults are loaded too.

    Raises InputError naming the file for unreadable TOML, bad fields or invalid RE2 regexes.
    """
    files: list[Path] = []
    parsed = [(Path(f), *_parse_file(Path(f))) for f in rule_files]
    wants_default = use_default or any(bool(ext.get("useDefault")) for _, _, _, ext in parsed) \
        or (bool(parsed) and all(is_yaml(f) for f, *_ in parsed))
    disabled = {r for _, _, _, ext in parsed for r in ext.get("disabledRules", []) or []}
    ordered: dict[str, Rule] = {}
    allow: list[Allowlist] = []
    if wants_default:
        for f in default_rule_files():
            rules, al, _ = _parse_file(f)
            files.append(f)
            allow += al
            for r in rules:
                if r.id in ordered:
                    raise InputError(f"{f}: duplicate rule id {r.id} (also in {ordered[r.id].source})")
                ordered[r.id] = r
    for f, rules, al, _ in parsed:
        files.append(f)
        allow += al
        for r in rules:
            ordered[r.id] = r
    rules = tuple(r for r in ordered.values() if r.id not in disabled)
    if not rules:
        raise InputError(f"{files[0] if files else 'rules'}: no rules loaded")
    return RuleSet(rules=rules, allowlists=tuple(allow), sources=tuple(str(f) for f in files))


def iter_examples(ruleset: RuleSet) -> Iterable[tuple[Rule, str, bool]]:
    """(rule, example, is_true_positive) for every example carried by the rules."""
    for r in ruleset.rules:
        for tp in r.tps:
            yield r, tp, True
        for fp in r.fps:
            yield r, fp, False
