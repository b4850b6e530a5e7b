"""The vendor-keyword table (`rules/vendor_keywords.toml`): vendors whose credentials have no
literal prefix of their own, so a value is recognisable only by the vendor's name nearby.

Each `[[vendor]]` row is one credential format of one vendor:
- `id` (the finding's rule id is `<id>-keyword`), `vendor` (the description), `aliases` (the
  vendor's names as written in code, logs and prose; matched case-insensitively, at a word start);
- the value's shape, from the vendor's published format: `alphabet` (a named class or an explicit
  `[...]` class), `length` (an integer or `[min, max]`), optional `prefix`; or `shape = "generic"`
  when the format is not documented: then any random-looking token (16–128 characters, a digit,
  mixed classes or a hex/base64 alphabet, enough entropy, no placeholder) is accepted;
- `source`: the vendor page the shape comes from; `veto = false` turns off the veto for a row
  whose shape is documented but not exclusive; `veto = "length"` keeps it for another length only,
  for a row whose vendor states the length in words but not the alphabet.

A vendor with several formats (an account id and a secret) has one row per format; rows sharing an
alias are read together, and a random-looking value next to the alias that none of them accepts is
"rejected by the vendor": generic detectors stay away from it (the veto, engine.VETOED), unless a
row of that alias is generic or says `veto = false`. Where a row says `veto = "length"` (and none
says false), only a value of another length is rejected: its alphabet was assumed, not stated.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import NamedTuple

from repoguard.core.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Named alphabets: the regex class of one value character.
ALPHABETS = {
    "hex": "0-9a-f", "HEX": "0-9A-F", "hexany": "0-9a-fA-F", "alnum": "0-9A-Za-z",
    "alnum_lower": "0-9a-z", "alnum_upper": "0-9A-Z", "digits": "0-9", "base64": "0-9A-Za-z+/",
    "base64url": "0-9A-Za-z_-", "uuid": "0-9a-fA-F-",
}
TABLE = "vendor_keywords.toml"


class VendorRow(NamedTuple):
    """One credential format of one vendor (see the module docstring). `cls` is the regex class
    body of a value character ("" for a generic row); `lo`/`hi` the value's length after the prefix."""

    id: str
    vendor: str
    aliases: tuple[str, ...]
    cls: str
    lo: int
    hi: int
    prefix: str = ""
    alphabet: str = ""
    source: str = ""
    veto: bool | str = True  # True, False or "length"

    @property
    def generic(self) -> bool:
        """Whether the row is a vendor's generic row (no value shape of its own: `cls` is "")."""
        return not self.cls

    @property
    def rule_id(self) -> str:
        """The rule id its findings carry: `<id>-keyword`."""
        return f"{self.id}-keyword"


def _row(d: dict, where: str) -> VendorRow:
    if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not d["id"]:
        raise InputError(f"{where}: every [[vendor]] needs a string `id`")
    here = f"{where}: vendor {d['id']}"
    aliases = d.get("aliases")
    if not isinstance(aliases, list) or not aliases or not all(isinstance(a, str) and len(a) >= 3 for a in aliases):
        raise InputError(f"{here}: `aliases` must be a non-empty list of names (3 characters or more)")
    aliases = tuple(a.lower() for a in aliases)
    source = str(d.get("source", ""))
    if d.get("shape") == "generic":
        return VendorRow(id=d["id"], vendor=str(d.get("vendor", d["id"])), aliases=aliases, cls="",
                         lo=16, hi=128, source=source, veto=False)
    alphabet = d.get("alphabet")
    if alphabet in ALPHABETS:
        cls = ALPHABETS[alphabet]
    elif isinstance(alphabet, str) and len(alphabet) > 2 and alphabet[0] == "[" and alphabet[-1] == "]":
        cls = alphabet[1:-1]
    else:
        raise InputError(f"{here}: `alphabet` must be one of {', '.join(ALPHABETS)} or a [...] class, "
                         f"not {alphabet!r} (or set shape = \"generic\")")
    length = d.get("length")
    if isinstance(length, int):
        lo = hi = length
    elif isinstance(length, list) and len(length) == 2 and all(isinstance(x, int) for x in length):
        lo, hi = length
    else:
        raise InputError(f"{here}: `length` must be an integer or [min, max]")
    if not 6 <= lo <= hi <= 256:
        raise InputError(f"{here}: `length` must satisfy 6 <= min <= max <= 256")
    if alphabet == "uuid" and (lo, hi) != (36, 36):
        raise InputError(f"{here}: a uuid has length 36")
    prefix = d.get("prefix", "")
    if not isinstance(prefix, str):
        raise InputError(f"{here}: `prefix` must be a string")
    veto = d.get("veto", True)
    if not (isinstance(veto, bool) or veto == "length"):
        raise InputError(f"{here}: `veto` must be true, false or \"length\", not {veto!r}")
    return VendorRow(id=d["id"], vendor=str(d.get("vendor", d["id"])), aliases=aliases, cls=cls, lo=lo,
                     hi=hi, prefix=prefix, alphabet=str(alphabet), source=source,
                     veto=veto)


def load_vendor_table(path: str | Path) -> tuple[VendorRow, ...]:
    """The rows of a vendor-keyword table; InputError naming the file and row on a bad field."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: vendor table not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML ({exc})") from None
    rows = tuple(_row(d, str(path)) for d in doc.get("vendor", []))
    ids = [r.id for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(f"{path}: duplicate vendor id(s) {', '.join(dup)}")
    return rows


@functools.lru_cache(maxsize=1)
def default_vendor_table() -> tuple[VendorRow, ...]:
    """The rows of `rules/vendor_keywords.toml` (empty when the rules directory has none). Every
    scanning process loads them: the validated rows are cached as JSON in the user cache directory,
    keyed by the file's SHA-256 (parsing the TOML costs more than the rest of the start-up)."""
    from repoguard.credentials.rules import rules_dir
    try:
        path = rules_dir() / TABLE
    except InputError:
        return ()
    if not path.is_file():
        return ()
    raw = path.read_bytes()
    from repoguard.core.artefacts import atomic_write_bytes, user_cache_dir
    cache = Path(user_cache_dir()) / f"vendors-{hashlib.sha256(raw).hexdigest()[:24]}.json"
    try:
        return tuple(VendorRow(d[0], d[1], tuple(d[2]), *d[3:]) for d in json.loads(cache.read_bytes()))
    except Exception:  # missing or damaged cache: parse the TOML
        pass
    rows = load_vendor_table(path)
    try:
        atomic_write_bytes(str(cache), json.dumps([list(r) for r in rows]).encode())
    except OSError:
        pass
    return rows
