"""Words that are never codename candidates for `repoguard suggest`, all built offline.

- **common vocabulary**: spaCy's English stop words, `codenames.STOPLIST`, and every word (after
  identifier splitting, ≥ 4 letters, lower-cased) that occurs in ≥ 2 modules of the Python
  standard library at `sysconfig.get_paths()["stdlib"]` (public vocabulary: docstrings, comments
  and identifiers of ~1 800 modules, ~20 k words; read in a few seconds, then cached per user and
  interpreter, see `stdlib_words`).
- **month and weekday names** from `calendar` (English, full and abbreviated).
- **language and locale names**: `locale.locale_alias` keys that are words, plus `LANGUAGES`
  below — the English names of the ISO 639-1 languages (neither babel nor pycountry is assumed).
- **places** from the IANA time-zone names (`zoneinfo`), and lorem-ipsum filler (`LOREM`).
- **people**: every part of every author's and committer's name and e-mail local part in the
  history, and of names in `Co-authored-by:` / `Signed-off-by:` trailers.
"""
from __future__ import annotations

import calendar
import hashlib
import locale
import os
import re
import sys
import sysconfig
from collections import Counter
from functools import lru_cache

from repoguard.analyzers.codenames import STOPLIST, split_identifiers

WORD = re.compile(r"[A-Za-z]{4,}")

# English names of the ISO 639-1 languages (ISO 639-2 registration authority list), lower case.
LANGUAGES = frozenset("""
abkhaz abkhazian afar afrikaans akan albanian amharic arabic aragonese armenian assamese avaric
avestan aymara azerbaijani bambara bashkir basque belarusian bengali bangla bihari bislama bosnian
breton bulgarian burmese catalan valencian chamorro chechen chichewa chewa nyanja chinese mandarin
cantonese chuvash cornish corsican cree croatian czech danish divehi dhivehi maldivian dutch
flemish dzongkha english esperanto estonian ewe faroese fijian finnish french fula fulah pulaar
galician ganda georgian german greek guarani gujarati haitian creole hausa hebrew herero hindi
hiri motu hungarian interlingua indonesian interlingue irish igbo inupiaq inupiat ido icelandic
italian inuktitut japanese javanese kalaallisut greenlandic kannada kanuri kashmiri kazakh khmer
kikuyu gikuyu kinyarwanda kyrgyz kirghiz komi kongo korean kurdish kwanyama kuanyama latin
luxembourgish letzeburgesch limburgish limburgan limburger lingala lao lithuanian luba katanga
latvian manx macedonian malagasy malay malayalam maltese maori marathi marshallese mongolian nauru
nauruan navajo navaho ndebele nepali ndonga norwegian bokmal bokmål nynorsk nuosu sichuan yi
occitan ojibwe ojibwa oromo oriya odia ossetian ossetic punjabi panjabi pali persian farsi polish
pashto pushto portuguese quechua romansh kirundi rundi romanian moldavian moldovan russian
sanskrit sardinian sindhi sami sámi samoan sango serbian gaelic scottish shona sinhala sinhalese
slovak slovene slovenian somali sotho sesotho spanish castilian sundanese swahili swati swedish
tamil telugu tajik thai tigrinya tibetan turkmen tagalog filipino tswana setswana tonga turkish
tsonga tatar twi tahitian uyghur uighur ukrainian urdu uzbek venda vietnamese volapük volapuk
walloon welsh wolof western frisian xhosa yiddish yoruba zhuang chuang zulu udmurt kabyle
asturian tamazight berber cebuano hawaiian hmong kapampangan ilocano sorani kurmanji dari
""".split())


_STDLIB_CACHE_VERSION = 1     # bump when WORD, split_identifiers or the counting change


def _stdlib_files(root: str) -> list[str]:
    """The stdlib's .py files (site-packages, dist-packages and __pycache__ skipped), sorted."""
    out = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "dist-packages", "__pycache__"))
        out.extend(os.path.join(d, n) for n in sorted(names) if n.endswith(".py"))
    return out


def _stdlib_digest(root: str, files: list[str], min_modules: int) -> str:
    """Cache key: interpreter version, stdlib root, and every file's path, size and mtime (cheap:
    stat only, no reads); any change to the stdlib or the interpreter makes a new key."""
    h = hashlib.sha256(repr((_STDLIB_CACHE_VERSION, sys.version, sys.implementation.cache_tag, root,
                             min_modules)).encode())
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            continue
        h.update(f"{os.path.relpath(f, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


@lru_cache(maxsize=1)
def stdlib_words(min_modules: int = 2) -> frozenset[str]:
    """Lower-cased words (≥ 4 letters, identifiers split) in ≥ `min_modules` standard-library
    modules; empty when the stdlib directory cannot be read.

    Reading the stdlib takes seconds, so the result is cached across runs in
    `artefacts.user_cache_dir()` (`$REPOGUARD_CACHE_DIR`, default `~/.cache/repoguard`) as
    `stdlib-words-KEY.txt`, KEY the digest of the interpreter version and the stdlib's file
    list, sizes and mtimes (`_stdlib_digest`); written atomically, rebuilt when missing or
    unreadable, never required (a read-only home only costs the rescan)."""
    from repoguard.artefacts import atomic_write_text, user_cache_dir

    root = sysconfig.get_paths().get("stdlib")
    if not root or not os.path.isdir(root):
        return frozenset()
    files = _stdlib_files(root)
    path = user_cache_dir() / f"stdlib-words-{_stdlib_digest(root, files, min_modules)}.txt"
    try:
        return frozenset(path.read_text(encoding="utf-8").split())
    except (OSError, UnicodeDecodeError):
        pass
    df: Counter = Counter()
    for f in files:
        try:
            with open(f, encoding="utf-8", errors="ignore") as fh:
                text = fh.read(200_000)
        except OSError:
            continue
        df.update({w.lower() for w in WORD.findall(split_identifiers(text))})
    words = frozenset(w for w, n in df.items() if n >= min_modules)
    try:
        atomic_write_text(path, "\n".join(sorted(words)) + "\n")
    except OSError:
        pass
    return words


@lru_cache(maxsize=1)
def calendar_words() -> frozenset[str]:
    """English month and weekday names, full and abbreviated, lower case."""
    names = list(calendar.month_name[1:]) + list(calendar.month_abbr[1:]) + list(calendar.day_name) \
        + list(calendar.day_abbr) + ["sept", "tues", "thur", "thurs"]
    return frozenset(n.lower() for n in names if n)


LOREM = frozenset("""lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor incididunt labore
dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi aliquip commodo
consequat duis aute irure reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur
sint occaecat cupidatat proident sunt culpa officia deserunt mollit anim aenean donec vestibulum
pellentesque curabitur vivamus nullam morbi etiam maecenas mauris nunc integer""".split())


@lru_cache(maxsize=1)
def place_words() -> frozenset[str]:
    """Regions and cities of the IANA time-zone names (`zoneinfo`): america, york, berlin, …"""
    try:
        import zoneinfo
        zones = zoneinfo.available_timezones()
    except Exception:  # no tz database installed
        return frozenset()
    return frozenset(w.lower() for z in zones for w in re.split(r"[/_\-]+", z) if len(w) >= 4)


@lru_cache(maxsize=1)
def language_words() -> frozenset[str]:
    """Language and locale names: `LANGUAGES` ∪ the alphabetic keys of `locale.locale_alias`."""
    return LANGUAGES | {k.lower() for k in locale.locale_alias if k.isalpha() and len(k) >= 4}


@lru_cache(maxsize=1)
def common_words() -> frozenset[str]:
    """spaCy English stop words ∪ STOPLIST ∪ stdlib vocabulary ∪ calendar ∪ language names ∪
    time-zone places ∪ lorem ipsum."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset({w.lower() for w in STOP_WORDS} | STOPLIST | stdlib_words() | calendar_words()
                     | language_words() | place_words() | LOREM)


def name_parts(text: str) -> set[str]:
    """Lower-cased parts of a person's name or e-mail address: `Priya Raman <priya.raman@x>` →
    {priya, raman}; the domain is dropped; parts shorter than 3 letters are dropped."""
    local = text.split("@", 1)[0] if "@" in text and " " not in text.strip() else text
    return {w.lower() for w in re.split(r"[^A-Za-zÀ-ÿ]+", split_identifiers(local)) if len(w) >= 3}


def people_words(repo) -> frozenset[str]:
    """Name parts of every author and committer in `repo`'s history and of trailer names, from the
    history `analyzers.history.load_history` reads once (one streamed `git log`, shared with the
    silo and codename candidates). Empty for a plain directory or an unborn HEAD."""
    from repoguard.analyzers.history import load_history

    out: set[str] = set()
    for ident in load_history(repo).identities:
        out |= name_parts(ident)
    return frozenset(out)
