"""A command's settings resolved once: each value from its flag, else the config file, else the
built-in default, with where it came from.

`plan` and `run` build one `Settings` from the parsed flags and the `Config` (`resolve`), print it
with `-v` (`lines`) and write it into the plan (`record`, plan.json `extra["settings"]`), so a
plan says which of its knobs the user chose and which were defaults.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

FLAG, FILE, DEFAULT = "flag", "file", "default"


@dataclass(frozen=True)
class Setting:
    """One resolved value and its source: "flag", "file" (the config file set the key) or
    "default" (the config dataclass's default, or the command's own default)."""

    value: Any
    source: str


class Settings(Mapping[str, Any]):
    """Name → value, resolved once per command; `source(name)` says where each came from.

    Reading a name gives its value (`s["steps"]`); `with_value` returns a copy with one value
    replaced (a value only known later, such as B and T from the batch rule)."""

    def __init__(self, items: Mapping[str, Setting]) -> None:
        self._items = dict(items)

    def __getitem__(self, name: str) -> Any:
        return self._items[name].value

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def source(self, name: str) -> str:
        """"flag", "file" or "default" for `name`; KeyError for a name not resolved."""
        return self._items[name].source

    def with_value(self, name: str, value: Any, source: str | None = None) -> "Settings":
        """A copy with `name` set to `value` (keeping its source unless `source` is given)."""
        items = dict(self._items)
        old = items[name].source if name in items else DEFAULT
        items[name] = Setting(value, source or old)
        return Settings(items)

    def record(self) -> dict:
        """JSON-ready {name: {"value", "source"}} in resolution order; a value with a `record()`
        method (`config.Undetected`) is written as that record."""
        return {k: {"value": _json(v.value), "source": v.source} for k, v in self._items.items()}

    def lines(self) -> list[str]:
        """One line per setting, "name = value (source)", for `-v`."""
        return [f"{k} = {_show(v.value)} ({v.source})" for k, v in self._items.items()]


def _json(value: Any) -> Any:
    return value.record() if hasattr(value, "record") else value


def _show(value: Any) -> str:
    v = _json(value)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {x}" for k, x in v.items()) + "}"
    return "—" if v is None else repr(v) if v == "" else str(v)


def resolve(config, flags: Mapping[str, Any], keys: Mapping[str, str | None],
            defaults: Mapping[str, Any] | None = None) -> Settings:
    """Resolve each name in `keys` (name → dotted config key "plan.steps", or None for a setting
    with no config key): the flag value `flags[name]` when not None, else the config's value
    (source "file" when `config.file_keys` holds the key, else "default"; a value that differs
    from the section's built-in default also counts as "file": a Config built in code), else
    `defaults[name]` (source "default"). Raises KeyError for a key naming no config field."""
    import dataclasses

    defaults = defaults or {}
    out: dict[str, Setting] = {}
    for name, key in keys.items():
        given = flags.get(name)
        if given is not None:
            out[name] = Setting(given, FLAG)
            continue
        if key is None:
            out[name] = Setting(defaults.get(name), DEFAULT)
            continue
        section, field = key.split(".", 1)
        # `[defaults] undetected` is parsed into `Config.undetected`, beside `Config.defaults`
        obj = config if key == "defaults.undetected" else getattr(config, section)
        value = getattr(obj, field)
        builtin = None
        if section != "defaults" and dataclasses.is_dataclass(obj):
            builtin = getattr(type(obj)(), field)
        set_here = key in config.file_keys or (builtin is not None and value != builtin)
        out[name] = Setting(value, FILE if set_here else DEFAULT)
    return Settings(out)
