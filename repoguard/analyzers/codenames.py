"""codenames — files that mention a secret's codename carry it (`propagate.codenames`).

Where a codename is looked for: the whole text of every file the corpus kept, whatever its
language (source code with its identifiers, YAML, TOML, SQL, shell, JSON, docs …: a codename in
`FALCON_BLEND_WEIGHTS = ...` of a config file is as telling as one in a comment), the file's path
(`models/falcon-blend.yaml`), and the messages of commits that touched the file — only commits of
at most `analyzers.codename_max_changeset` files (default 10). A message is one observation, not
a repeated one like co-change's five shared commits, and the bigger the commit the more likely a
codename in its body is a passing mention ("I left anything in `red-knot`" in a 30-file
astral-sh/ruff commit tied all 22 of its corpus files), so the bound is tighter than co-change's
bulk-commit bound of 30. A mention in a file's text ties only the examples (chunks) whose lines
hold it, as `credentials` does: each evidence row carries the byte span of the mention's line(s)
(`Evidence.span`), and mentions whose lines fall in the same chunks share one row ("mentions
codename 'Falcon' at lines 12, 40"). One mention at line 292 of a 5,000-line changelog no longer
ties its 109 examples (issue 28 item 5). A mention in the file's *path* or in the message of a
commit that touched it is about the whole file: it ties every example. The secret's own files
(its `paths`) are left to `declared`, which ties them whole. Codename ties are not propagation
seeds: imports, co-change and ownership start from a secret's declared paths only.

How: text, paths and codenames are normalised the same way first (`words`: split at every
character that is not a letter or digit — snake_case, kebab-case, dots, slashes, quotes,
brackets — and at camelCase and letter→digit boundaries, so
`falcon_refit`, `FalconRefit`, `FALCON_REFIT_V2`, `falcon-refit.yaml` and `trading.falcon` all
contain the words of "Falcon Refit"), then a spaCy `Matcher` on a blank English tokenizer
matches the codenames case-insensitively (attr LOWER), as whole words: "falconer" and "falcons"
are not "falcon" (a different word; a plural or suffix is not split off), while `FalconEye` and
`falcon2` are (a camelCase or digit boundary is a word boundary). A codename of several words also
matches written as one word (`falconrefit`), and its words may be parted by any run of
separators, line breaks included: `Falcon\nRefit` in prose wrapped at the line end, `# tuned for
Falcon\n# Refit` in a comment block (`#`, `//`, `*`, `--` are separators like any other
punctuation), spaCy's whitespace tokens between the words being skipped (`Matcher`, `IS_SPACE`).
Any letter case matches: the text is matched once as it is (camelCase split) and once lowered
(`fAlCoN rEfIt`, whose case changes are no camelCase boundaries). A codename that is an ordinary word (built-in stop
list + `analyzers.codename_stoplist`) is matched only with the capitalisation it was declared
with, and an ordinary word declared in lower case is not matched at all (a warning says so). spaCy reads only the runs of lines where some codename's letters occur in order with
only separators between them (`Matcher._lines`: the same matches, a fraction of the text; a
text too long for one spaCy doc is fed whole, in pieces below `nlp.max_length`). Results are
cached per blob SHA.
"""
from __future__ import annotations

import bisect
import hashlib
import logging
import re
import warnings
from functools import lru_cache
from typing import Iterator, MutableMapping

from repoguard.analyzers import _files
from repoguard.analyzers.history import load_history
from repoguard.analyzers.imports_lang import language_of as code_language
from repoguard.analyzers.incidence import Evidence
from repoguard.analyzers.protocol import EvidenceAnalyzer
from repoguard.core.progress import progress

log = logging.getLogger(__name__)
NAME = "codenames"

# Ordinary words that also occur in code and prose ("signal", "harbor" as in "safe harbor"): a
# codename among them is matched only with its declared capitalisation.
STOPLIST = frozenset("""
signal core engine model data main test new old base common shared util utils tool tools
service server client api app web mobile edge prime max pro plus lite red blue green black white
gold silver spring summer winter cloud storm star sun moon sky river ocean fire water stone
bridge gate tower harbor harbour anchor beacon compass horizon pioneer pilot vision
""".split())
DOC_LANGUAGES = {".md": "markdown", ".rst": "rst", ".txt": "text", ".adoc": "asciidoc"}
_PROSE_NODES = {
    "python": ["comment", "string"],
    "javascript": ["comment", "string", "template_string"],
    "typescript": ["comment", "string", "template_string"],
    "tsx": ["comment", "string", "template_string"],
    "java": ["line_comment", "block_comment", "string_literal"],
    "go": ["comment", "interpreted_string_literal", "raw_string_literal"],
    "c": ["comment", "string_literal"],
    "cpp": ["comment", "string_literal", "raw_string_literal"],
    "rust": ["line_comment", "block_comment", "string_literal", "raw_string_literal"],
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_./\\]+")
# What `words` adds for matching: every character but letters, digits and newlines separates
# words (hyphens, quotes, brackets: spaCy's tokenizer keeps `text('"""Falcon` in one token), and a
# letter→digit boundary does too (`falcon2`).
_MATCH_SEPARATORS = re.compile(r"(?:[^\w\n]|_)+")
_DIGIT = re.compile(r"(?<=[A-Za-z])(?=[0-9])")
_NON_ALNUM = re.compile(r"[\W_]+")
# Bumped when what is matched changes, so cached per-blob results of the old rule are not reused.
MATCH_VERSION = 5   # 5: words parted by line breaks, any letter case; 4: every mention's line and span


def split_identifiers(text: str) -> str:
    """Split identifiers into words: `alphaSignal_v2.core/x` → `alpha Signal v2 core x`.
    Separators become spaces and a space is inserted at camelCase boundaries; newlines are
    kept, so line numbers still hold."""
    return _CAMEL.sub(" ", _SEPARATORS.sub(" ", text))


def words(text: str) -> str:
    """What codenames are matched against (module doc): words split at every character that is
    not a letter, digit or newline, at camelCase and at letter→digit boundaries:
    `f('FALCON-blend_v2/falconRefit3')` → `f FALCON blend v 2 falcon Refit 3 `. Newlines are
    kept, so line numbers still hold."""
    return _DIGIT.sub(" ", _CAMEL.sub(" ", _MATCH_SEPARATORS.sub(" ", text)))


@lru_cache(maxsize=None)
def _query(language: str):
    import tree_sitter_languages as tsl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        lang = tsl.get_language(language)
        parser = tsl.get_parser(language)
    kinds = []
    for k in _PROSE_NODES[language]:
        try:
            lang.query(f"({k}) @p")
            kinds.append(k)
        except Exception:  # node type absent in this grammar version
            continue
    return parser, lang.query(" ".join(f"({k}) @p" for k in kinds))


def prose(path: str, data: bytes) -> list[tuple[int, str]]:
    """(1-based line, text) pieces of `path` that are prose: the comments, docstrings and strings
    of source in the 9 parsed languages, the whole text of a doc file, nothing otherwise. Codename
    matching reads every file whole (module doc); `suggest` reads prose to find candidates."""
    lang = code_language(path)
    if lang in _PROSE_NODES:
        parser, query = _query(lang)
        tree = parser.parse(data)
        out = []
        for node, _ in query.captures(tree.root_node):
            if node.parent is not None and node.parent.type in _PROSE_NODES[lang] and node.parent.type != "template_string":
                continue  # nested string parts are inside the parent capture already
            out.append((node.start_point[0] + 1, node.text.decode("utf-8", errors="replace")))
        return out
    if has_prose(path):
        return [(1, data.decode("utf-8", errors="replace"))]
    return []


def has_prose(path: str) -> bool:
    """Whether `prose(path, ...)` finds anything to read: source with comments/strings, or a doc file."""
    if code_language(path) in _PROSE_NODES:
        return True
    dot = path.rfind(".")
    name = path.rsplit("/", 1)[-1].upper()
    return (dot >= 0 and path[dot:].lower() in DOC_LANGUAGES) or name.startswith("README")


class Matcher:
    """Codename matcher for a set of secrets: `find(text) -> [(secret_id, codename, offset)]`.

    spaCy is imported only when some text passes the substring prefilter (importing it costs
    seconds; the pre-commit hook usually never needs it)."""

    def __init__(self, secrets, stoplist=()) -> None:
        stop = STOPLIST | {w.lower() for w in stoplist}
        self.names: dict[str, tuple[str, str]] = {}
        self.patterns: list[tuple[str, str, bool]] = []   # (key, split codename, exact case)
        self.words: list[list[str]] = []
        self.skipped: list[tuple[str, str]] = []
        for s in secrets:
            for name in s.codenames:
                split = " ".join(words(name).split())
                key = f"{s.id}\0{name}"
                ordinary = split.lower() in stop
                if ordinary and split == split.lower():
                    self.skipped.append((s.id, name))
                    log.warning("codename %r of %s is an ordinary word in lower case: not matched "
                                "(declare it capitalised to match it as a proper noun)", name, s.id)
                    continue
                self.names[key] = (s.id, name)
                self.patterns.append((key, split, ordinary))
                if " " in split and not ordinary:      # "Falcon Refit" written `falconrefit`
                    self.patterns.append((key, split.replace(" ", ""), False))
                self.words.append(split.lower().split())
        self.digest = hashlib.sha256(repr((MATCH_VERSION, sorted(self.names), sorted(stop))).encode()).hexdigest()[:16]
        self._nlp = None
        # `_lines`: a match's tokens, lowered, are a codename's letters and digits in order with
        # only separators between them; each needle finds every start of such a run (lookahead).
        self._needles = sorted({_NON_ALNUM.sub("", "".join(ws)) for ws in self.words} - {""})
        self._finders = [re.compile("(?=(" + r"[\W_]*".join(re.escape(ch) for ch in n) + "))")
                         for n in self._needles]
        # Python lowers Σ by its context (a final ς): a token lowered alone may then differ from
        # the same letters lowered inside the text, so such codenames read the whole text.
        self._by_lines = not any(ch in name for _, name in self.names.values() for ch in "Σσς")

    def _build(self) -> None:
        spacy, Matcher = _spacy()
        self._nlp = spacy.blank("en")
        # Token patterns, not phrases: between two words of a codename any whitespace tokens
        # (a line break, an indented continuation) are skipped, which a PhraseMatcher cannot do.
        self.lower = Matcher(self._nlp.vocab)
        self.exact = Matcher(self._nlp.vocab)
        for key, split, exact in self.patterns:
            attr = "ORTH" if exact else "LOWER"
            pattern: list[dict] = []
            for tok in self._nlp.make_doc(split):
                if pattern:
                    pattern.append({"IS_SPACE": True, "OP": "*"})
                pattern.append({attr: tok.text if exact else tok.text.lower()})
            (self.exact if exact else self.lower).add(key, [pattern])

    def __bool__(self) -> bool:
        return bool(self.names)

    def may_occur(self, data: bytes) -> bool:
        """False when no codename can occur in `data` (some word of each is absent)."""
        low = data.lower()
        return any(all(w.encode() in low for w in words) for words in self.words)

    def find(self, text: str) -> list[tuple[str, str, int]]:
        """Matches in `text` as (secret id, codename, 1-based line of the mention's first word)."""
        return [(sid, name, first) for sid, name, first, _ in self.find_lines(text)]

    def find_lines(self, text: str) -> list[tuple[str, str, int, int]]:
        """Distinct matches in `text` as (secret id, codename, first line, last line), 1-based:
        a codename wrapped over a line break spans two lines. Two passes (module doc): `words(text)`
        with every pattern, `words(text.lower())` with the case-insensitive ones; both keep every
        newline of `text`, so a line of either is the same line of `text`. Only the runs of lines
        that can hold a match are split and tokenised (`_lines`)."""
        found = set()
        for split, line0, sid, name, start, end in self._passes(text, by_lines=True):
            first = line0 + split.count("\n", 0, start) + 1
            found.add((sid, name, first, first + split.count("\n", start, end)))
        return sorted(found)

    def find_spans(self, text: str) -> list[tuple[str, str, int, int]]:
        """Matches in `text` as (secret id, codename, start, end): offsets in `words(text)`, or in
        `words(text.lower())` for a match only the lowered pass finds (`find_lines`); the whole
        text is tokenised."""
        return [(sid, name, start, end) for _, _, sid, name, start, end in self._passes(text, by_lines=False)]

    def _passes(self, text: str, *, by_lines: bool) -> Iterator[tuple[str, int, str, str, int, int]]:
        """(matched text, its first line's 0-based number in `text`, secret id, codename, start,
        end) of both passes (`find_lines`): the matched text is the whole of `words(...)`, or
        with `by_lines` that of one run of lines (`_lines`)."""
        low = text.lower()
        if not any(all(w in low for w in ws) for ws in self.words):
            return
        if self._nlp is None:
            self._build()
        runs = self._lines(text, low) if by_lines else None
        if runs is None:
            for split, matchers in ((words(text), (self.lower, self.exact)), (words(low), (self.lower,))):
                for sid, name, start, end in self._spans(split, matchers):
                    yield split, 0, sid, name, start, end
            return
        for src, matchers in ((text, (self.lower, self.exact)), (low, (self.lower,))):
            ends = [m.start() for m in re.finditer("\n", src)]        # line k of `src` ends at ends[k]
            for first, last in runs:
                piece = words(src[ends[first - 1] + 1 if first else 0:ends[last] if last < len(ends) else len(src)])
                for sid, name, start, end in self._spans(piece, matchers):
                    yield piece, first, sid, name, start, end

    def _lines(self, text: str, low: str) -> list[tuple[int, int]] | None:
        """The runs of lines (first, last; 0-based, inclusive, merged where they overlap) that can
        hold a match, or None when the whole text must be read (a Σ, or a text spaCy reads in
        pieces). Why reading only them finds every match: `words` works within a line, so
        `words` of a run of lines is those lines of `words(text)`; spaCy's tokens never cross
        whitespace, so it tokenises them as in the whole text; and a match's tokens, lowered,
        spell a needle with only separators between them, which its finder sees in `low` from
        the match's first line to its last. A file that names a codename once is split and
        tokenised on that line alone."""
        if not self._by_lines or "Σ" in text or 2 * len(text) >= self._nlp.max_length - 1:
            return None        # `words` at most doubles a text: below this it is one spaCy doc
        compact = _NON_ALNUM.sub("", low)
        low_ends = [m.start() for m in re.finditer("\n", low)]
        found = []
        for needle, finder in zip(self._needles, self._finders):
            if needle in compact:
                for m in finder.finditer(low):
                    found.append((bisect.bisect_left(low_ends, m.start()), bisect.bisect_left(low_ends, m.end(1))))
        runs: list[list[int]] = []
        for first, last in sorted(found):
            if runs and first <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], last)
            else:
                runs.append([first, last])
        return [(a, b) for a, b in runs]

    def _spans(self, text: str, matchers) -> Iterator[tuple[str, str, int, int]]:
        """(secret id, codename, start, end) offsets in `text` (already `words(...)`), fed to
        spaCy in pieces below `nlp.max_length`."""
        nlp = self._nlp
        step = nlp.max_length - 1
        for start in range(0, len(text), step):
            doc = nlp.make_doc(text[start:start + step])
            for matcher in matchers:
                if not len(matcher):
                    continue                       # spaCy warns on a matcher without patterns
                for match_id, i, j in matcher(doc):
                    sid, name = self.names[nlp.vocab.strings[match_id]]
                    last = doc[j - 1]
                    yield sid, name, start + doc[i].idx, start + last.idx + len(last.text)


def _spacy():
    """(spacy, Matcher), imported without torch when torch is not loaded yet: thinc, under
    spaCy, imports torch if it can (~0.9 s of spaCy's ~1.8 s), and a blank tokenizer with a
    token matcher uses none of it (issue 28 item 6: `analyze`). `import torch` is made to fail
    only while spaCy is imported; a later `import torch` (training) loads it as usual."""
    import sys

    block = "torch" not in sys.modules and "spacy" not in sys.modules
    if block:
        sys.modules["torch"] = None         # type: ignore[assignment]  # `import torch` → ImportError
    try:
        import spacy
        from spacy.matcher import Matcher
    finally:
        if block and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return spacy, Matcher


def _file_hits(matcher: Matcher, path: str, data: bytes) -> list[tuple[str, str, int, int, int]]:
    """(secret id, codename, line, start byte, end byte) of every line holding a mention in the
    file's whole text (any language: module doc), sorted; the bytes are those of the mention's
    line(s) in `data`, without the newline (`Matcher.find_lines`: lines of the decoded text, the
    same lines as the bytes')."""
    if not matcher.may_occur(data):
        return []  # no codename's words anywhere in the bytes: skip decoding and matching
    found = matcher.find_lines(data.decode("utf-8", errors="replace"))
    if not found:
        return []
    starts = [0]                                   # byte offset of each line's start
    at = data.find(b"\n")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    starts.append(len(data) + 1)

    def line_bytes(first: int, last: int) -> tuple[int, int]:
        return starts[first - 1], max(starts[first - 1], starts[min(last, len(starts) - 1)] - 1)

    return sorted((sid, name, first, *line_bytes(first, last)) for sid, name, first, last in found)


_own_chunks = _files.own_chunks   # shared with imports (import_ties)


def _line_list(lines: list[int]) -> str:
    """`line 7`, `lines 7, 9, 12`, `lines 7, 9, 12 and 5 more`."""
    if len(lines) == 1:
        return f"line {lines[0]}"
    head = ", ".join(str(n) for n in lines[:3])
    return f"lines {head}" + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")


def _mention_rows(path: str, sid: str, name: str, mentions: list, chunks: list[tuple[int, int]]
                  ) -> Iterator[Evidence]:
    """One row per run of consecutive mentions (by line) whose lines overlap the same chunks of
    the file, its span from the run's first line to its last: it ties exactly those chunks."""
    def key(m):   # the chunks whose bytes overlap the mention's line(s), as build_incidence reads spans
        return tuple(k for k, (a, b) in enumerate(chunks) if a < m[4] and m[3] < b)

    run: list = []
    for m in sorted(mentions, key=lambda m: m[2]):
        if run and key(m) != key(run[-1]):
            yield _mention_row(path, sid, name, run)
            run = []
        run.append(m)
    if run:
        yield _mention_row(path, sid, name, run)


def _mention_row(path: str, sid: str, name: str, run: list) -> Evidence:
    span = (min(m[3] for m in run), max(m[4] for m in run))
    return Evidence(path, sid, NAME, f"mentions codename {name!r} at {_line_list([m[2] for m in run])}",
                    span=span, selector=name)


def path_hits(matcher: Matcher, path: str) -> list[tuple[str, str]]:
    """(secret id, codename) of each codename the repo-relative `path` names (directories and
    file name, `models/falcon-blend.yaml`), sorted and distinct."""
    return sorted({(sid, name) for sid, name, _ in matcher.find(path)})


def analyze(repo, corpus, config, *, cache: MutableMapping | None = None,
            commit_messages: bool = True) -> Iterator[Evidence]:
    """Evidence for corpus files outside a secret's own paths that mention one of its codenames
    in their text or their path (`commit_messages=False`: file contents and paths only, as the
    pre-commit hook does)."""
    secrets = [s for s in config.secrets if s.propagate.codenames and s.codenames]
    if not secrets:
        return
    matcher = Matcher(secrets, config.analyzers.codename_stoplist)
    if not matcher:
        return
    files = _files.corpus_files(corpus)
    hits: dict[str, list] = {}
    todo = {}
    for p, sha in files.items():
        key = f"{matcher.digest}:{sha}"
        if cache is not None and sha and key in cache:
            hits[p] = cache[key]
        else:
            todo[p] = sha
    with progress("codenames", total=len(todo)) as advance:
        for path, data in _files.read_sources(repo, todo):
            hits[path] = [list(h) for h in _file_hits(matcher, path, data)]
            if cache is not None and todo.get(path):
                cache[f"{matcher.digest}:{todo[path]}"] = hits[path]
            advance()
    own = {s.id: set(_files.secret_files(s, files)) for s in secrets}
    for path in sorted(files):
        in_path = path_hits(matcher, path)
        for sid, name in in_path:
            if path not in own[sid]:
                yield Evidence(path, sid, NAME, f"path names codename {name!r}", selector=name)
        named = set(in_path)
        mentions: dict[tuple[str, str], list] = {}
        for h in hits.get(path, ()):
            sid, name = h[0], h[1]
            if path in own[sid] or (sid, name) in named:
                continue  # the secret's own files: `declared` ties them whole already
            mentions.setdefault((sid, name), []).append(h)
        if mentions:
            chunks = _own_chunks(corpus, path)
            for (sid, name), ms in sorted(mentions.items()):
                yield from _mention_rows(path, sid, name, ms, chunks)
    if commit_messages:
        yield from _commit_messages(repo, matcher, set(files), own, config.analyzers.codename_max_changeset)


def _commit_messages(repo, matcher: Matcher, files: set[str], own: dict, max_changeset: int) -> Iterator[Evidence]:
    """Evidence for files touched by a commit of at most `max_changeset` files whose message
    mentions a codename (module doc): one row per (file, secret, codename), citing the oldest
    such commit."""
    hist = load_history(repo)
    first: dict[tuple[str, str, str], str] = {}
    for c in reversed(hist.commits):  # oldest first: cite the commit that introduced the name
        if len(c.paths) > max_changeset:
            continue
        found = {(sid, name) for sid, name, _ in matcher.find(c.message)}
        for sid, name in sorted(found):
            for p in c.paths:
                if p in files and p not in own[sid] and (p, sid, name) not in first:
                    first[(p, sid, name)] = c.sha
    for (p, sid, name), sha in sorted(first.items()):
        yield Evidence(p, sid, NAME, f"commit {sha[:10]} touching it mentions codename {name!r}", selector=name)


ANALYZER = EvidenceAnalyzer(NAME, analyze, cached=True)
