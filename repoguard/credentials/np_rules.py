"""Nosey Parker-style YAML rule packs (`rules: [{name, id, pattern, examples, negative_examples,
references, categories}]`), loaded next to the gitleaks-schema TOML rules so users can bring
their own packs: `repoguard scan --rules pack.yaml`.

Each entry becomes a Rule: `id`, `description` = `name`, `regex` = `pattern` translated to RE2
(Nosey Parker patterns are Rust regexes, usually in extended mode `(?x)`, which RE2 lacks: the
whitespace and `#` comments are removed here, escaped and in-class characters kept), `tps` =
`examples`, `fps` = `negative_examples`. The secret is the first capture group (the whole match
without one). The pattern's literal prefix, when it has one of ≥ 3 characters, becomes the
keyword so the engine's prefilter skips texts without it.
"""
from __future__ import annotations

import re
from pathlib import Path

from repoguard.credentials.rule_types import Rule, compile_re2, literal_prefixes
from repoguard.core.errors import InputError

_FLAGS = re.compile(r"^\(\?([a-zA-Z]+)\)")


def strip_extended(pattern: str) -> str:
    """`pattern` without RE2-unsupported extended mode: a leading `(?x…)` flag group loses its
    `x`, and outside character classes unescaped whitespace and `#…` comments are dropped.
    Raises ValueError for `x` set anywhere else (inline `(?x:…)`)."""
    m = _FLAGS.match(pattern)
    if not (m and "x" in m.group(1)):
        if re.search(r"\(\?[a-wyzA-Z]*x", pattern):
            raise ValueError("inline extended mode (?x:...) is not supported")
        return pattern
    flags = m.group(1).replace("x", "")
    body = pattern[m.end():]
    if re.search(r"\(\?[a-wyzA-Z]*x", body):
        raise ValueError("inline extended mode (?x:...) is not supported")
    out, i, in_class = [], 0, False
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append("\\x20" if nxt == " " else "\\#" if nxt == "#" else ch + nxt)
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if body[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if body[i + 1:i + 2] == "]":  # a literal ] first in the class
                out.append("]")
                i += 1
        elif ch == "#":
            nl = body.find("\n", i)
            i = len(body) if nl < 0 else nl
            continue
        elif not ch.isspace():
            out.append(ch)
        i += 1
    return (f"(?{flags})" if flags else "") + "".join(out)


def _strs(v, where: str, key: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise InputError(f"{where}: `{key}` must be a list of strings")
    return tuple(v)


def load_yaml_rules(path: str | Path) -> list[Rule]:
    """Rules of a Nosey Parker-style YAML file. Raises InputError (one line, naming the file)
    for unreadable or malformed YAML, a missing `rules` list, a rule without string `id`/`name`/
    `pattern`, or a pattern RE2 cannot compile."""
    import yaml


    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: rule file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{p}: invalid YAML{where} ({problem})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise InputError(f"{p}: expected a mapping with a `rules` list (Nosey Parker rule format)")
    out: list[Rule] = []
    for k, d in enumerate(doc["rules"]):
        if not isinstance(d, dict):
            raise InputError(f"{p}: rules[{k}] must be a mapping")
        rid, name, pattern = d.get("id"), d.get("name"), d.get("pattern")
        if not all(isinstance(x, str) and x for x in (rid, name, pattern)):
            raise InputError(f"{p}: rules[{k}] needs string `id`, `name` and `pattern`")
        here = f"{p}: rule {rid}"
        try:
            regex = strip_extended(pattern)
            compile_re2(regex)
        except Exception as exc:  # ValueError, re2.error
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"{here}: pattern is not valid RE2 ({msg})") from None
        kws = tuple(sorted({x.lower() for x in literal_prefixes(regex) if len(x) >= 3}))
        if kws and "(?i" not in regex[:8] and any(not x.isascii() for x in kws):
            kws = ()
        out.append(Rule(id=rid, description=name, regex=regex, keywords=kws,
                        tags=("noseyparker", *_strs(d.get("categories"), here, "categories")),
                        tps=_strs(d.get("examples"), here, "examples"),
                        fps=_strs(d.get("negative_examples"), here, "negative_examples"),
                        source=str(p)))
    if not out:
        raise InputError(f"{p}: no rules in the file")
    return out
