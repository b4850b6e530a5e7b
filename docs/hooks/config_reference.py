"""MkDocs hook: the configuration reference, generated from the config dataclasses.

`repoguard/core/config.py` is the one definition of `repoguard.toml`: every key is a field of a
section dataclass, with its type and default. This hook walks those dataclasses
(`config_keys()`), takes each key's meaning from `docs/config-keys.yml`, and writes the tables
into `docs/configuration.md` where the page says `<!-- config-reference -->`. A key the code has
and the YAML lacks (or the reverse) stops the build, so the reference cannot drift from the code;
`tests/test_docs.py` checks the same without MkDocs.

Run by hand: `python docs/hooks/config_reference.py` prints the generated Markdown.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import tomli_w
import yaml

from repoguard.core import config as C

DOCS = Path(__file__).resolve().parents[1]
KEYS_FILE = DOCS / "config-keys.yml"
MARKER = "<!-- config-reference -->"
PAGE = "configuration.md"

# Fields of the dataclasses that are not keys of the file: the floor's `enabled` is written as
# `undetected = "off"` (documented under defaults.undetected).
NOT_KEYS = {"defaults.undetected.enabled"}


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of `repoguard.toml`: `name` as the YAML writes it (`plan.batch_size`), the TOML
    table it is written in (`[plan]`), its type in words and its default as TOML (or "")."""

    name: str
    table: str
    type: str
    default: str


def _type_words(tp: typing.Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_words(a) for a in args if a is not type(None))
    if origin is tuple:
        return "list of strings"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(tp, getattr(tp, "__name__", str(tp)))


def _toml(value: typing.Any) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        value = list(value)
    return tomli_w.dumps({"x": value}).strip()[len("x = "):]


def _fields(cls: type, prefix: str, table: str, defaults: typing.Any = None,
            skip: tuple[str, ...] = ()) -> list[Key]:
    """Keys of dataclass `cls` under `prefix`; `defaults` is an instance whose values are the
    defaults (None: a field without a default, such as a secret's id)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        name = f"{prefix}.{f.name}"
        if f.name in skip or name in NOT_KEYS:
            continue
        if defaults is not None:
            default = getattr(defaults, f.name)
        elif f.default is not dataclasses.MISSING:
            default = f.default
        else:
            default = None
        if dataclasses.is_dataclass(default):
            continue                       # a sub-table (secret.propagate), walked on its own
        out.append(Key(name, table, _type_words(hints[f.name]), _toml(default)))
    return out


def config_keys() -> list[Key]:
    """Every key `repoguard.toml` accepts, in the order the file is usually written."""
    base = C.Config(path=None)
    keys = _fields(C.Protection, "defaults", "[defaults]", base.defaults)
    keys.append(Key("defaults.undetected", "[defaults]", "table or \"off\"", "{ k = 1 }"))
    keys += _fields(C.Undetected, "defaults.undetected", "[defaults] undetected = { … }", base.undetected)
    keys += _fields(C.Protection, "levels", "[levels] NAME = { … }")
    keys += _fields(C.SecretConfig, "secret", "[[secret]]", skip=("propagate",))
    keys += _fields(C.Propagate, "secret.propagate", "[secret.propagate]", C.Propagate())
    for section, cls in C._SECTIONS.items():
        keys += _fields(cls, section, f"[{section}]", cls())
    return keys


def descriptions() -> dict[str, str]:
    """`docs/config-keys.yml`: key name → meaning (Markdown)."""
    return yaml.safe_load(KEYS_FILE.read_text(encoding="utf-8")) or {}


def check(keys: list[Key], described: dict[str, str]) -> list[str]:
    """Problems that stop the build: keys without a meaning, meanings without a key."""
    names = {k.name for k in keys}
    problems = [f"{KEYS_FILE.name}: no entry for config key {n!r}" for n in sorted(names - set(described))]
    problems += [f"{KEYS_FILE.name}: {n!r} is not a config key (repoguard/core/config.py)"
                 for n in sorted(set(described) - names)]
    return problems


def render() -> str:
    """The reference as Markdown: one table per TOML table, every key with type, default, meaning."""
    keys, described = config_keys(), descriptions()
    problems = check(keys, described)
    if problems:
        raise ValueError("; ".join(problems))
    out, table = [], None
    for k in keys:
        if k.table != table:
            table = k.table
            out += ["", f"### `{table}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        default = f"`{k.default}`" if k.default else "—"
        meaning = " ".join(described[k.name].split()).replace("|", "\\|")
        out.append(f"| `{k.name.rsplit('.', 1)[-1]}` | {k.type} | {default} | {meaning} |")
    return "\n".join(out).strip() + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # MkDocs hook
    """Fill the marker on the configuration page; any other page passes through unchanged."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE}: the marker {MARKER} is missing")
    return markdown.replace(MARKER, render())


if __name__ == "__main__":
    print(render())
