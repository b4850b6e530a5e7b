"""Words that are never codename candidates for `repoguard suggest`, all built offline.

- **common vocabulary**: spaCy's English stop words, `codenames.STOPLIST`, and every word (after
  identifier splitting, ≥ 4 letters, lower-cased) that occurs in ≥ 2 modules of the Python
  standard library at `sysconfig.get_paths()["stdlib"]` (public vocabulary: docstrings, comments
  and identifiers of ~1 800 modules, ~20 k words; read once per process, a few seconds).
- **month and weekday names** from `calendar` (English, full and abbreviated).
- **language and locale names**: `locale.locale_alias` keys that are words, plus `LANGUAGES`
  below — the English names of the ISO 639-1 languages (neither babel nor pycountry is assumed).
- **places** from the IANA time-zone names (`zoneinfo`), and lorem-ipsum filler (`LOREM`).
- **people**: every part of every author's and committer's name and e-mail local part in the
  history, and of names in `Co-authored-by:` / `Signed-off-by:` trailers.
"""
from __future__ import annotations

import calendar
import locale
import os
import re
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


@lru_cache(maxsize=1)
def stdlib_words(min_modules: int = 2) -> frozenset[str]:
    """Lower-cased words (≥ 4 letters, identifiers split) in ≥ `min_modules` standard-library
    modules; empty when the stdlib directory cannot be read."""
    root = sysconfig.get_paths().get("stdlib")
    df: Counter = Counter()
    if not root or not os.path.isdir(root):
        return frozenset()
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ("site-packages", "dist-packages", "__pycache__")]
        for name in names:
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(d, name), encoding="utf-8", errors="ignore") as fh:
                    text = fh.read(200_000)
            except OSError:
                continue
            df.update({w.lower() for w in WORD.findall(split_identifiers(text))})
    return frozenset(w for w, n in df.items() if n >= min_modules)


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


_TRAILER = re.compile(r"^(?:co-authored-by|signed-off-by|reviewed-by|reported-by):\s*(.+?)\s*(?:<([^>]*)>)?\s*$",
                      re.IGNORECASE | re.MULTILINE)


def name_parts(text: str) -> set[str]:
    """Lower-cased parts of a person's name or e-mail address: `Priya Raman <priya.raman@x>` →
    {priya, raman}; the domain is dropped; parts shorter than 3 letters are dropped."""
    local = text.split("@", 1)[0] if "@" in text and " " not in text.strip() else text
    return {w.lower() for w in re.split(r"[^A-Za-zÀ-ÿ]+", split_identifiers(local)) if len(w) >= 3}


def people_words(repo) -> frozenset[str]:
    """Name parts of every author and committer in `repo`'s history and of trailer names.
    Empty for a plain directory or an unborn HEAD."""
    if not getattr(repo, "is_git", False) or not getattr(repo, "head", None):
        return frozenset()
    out: set[str] = set()
    log = repo._git("log", "HEAD", "--format=%an%x00%ae%x00%cn%x00%ce%x00%aN%x00%aE%x00%b%x1e", check=False)
    for record in log.split("\x1e"):
        fields = record.split("\x00")
        for f in fields[:6]:
            f = f.strip()
            if f:
                out |= name_parts(f)
        if len(fields) > 6:
            for m in _TRAILER.finditer(fields[6]):
                out |= name_parts(m.group(1))
                if m.group(2):
                    out |= name_parts(m.group(2))
    return frozenset(out)
