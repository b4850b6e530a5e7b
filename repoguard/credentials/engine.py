"""The matching engine: keyword prefilter, one multi-pattern pass, confirmation, filters.

Pipeline for one text (bytes):
1. one Hyperscan pass over the whole text with every rule regex, every keyword (as a caseless
   literal reported once), two blob detectors (base64, hex) and the structural detectors'
   prefilters (`Detector.prefilter`) in a single database — the Nosey Parker design. Hyperscan
   and RE2 are automata: no input makes them backtrack. Without Hyperscan, an Aho-Corasick
   automaton (pyahocorasick) finds the keywords, RE2 runs each candidate rule and each triggered
   detector searches the whole text (linear time each).
2. gitleaks' keyword semantics: a rule with keywords counts only when one of them occurs; a
   structural detector runs when one of its triggers occurs (and, with a prefilter, near its
   prefilter's matches only). When several rules and detectors claim one span, the finding of the
   lowest declared priority is kept (`credentials.priority`).
3. confirmation: RE2 on a small window around each hit end extracts the capture group; then
   Shannon entropy, allowlists (regexes on secret/match/line, stopwords, paths, commits, AND/OR),
   and inline `repoguard:allow` / `gitleaks:allow` on the line.
4. base64/hex blobs are decoded (depth-limited) and the decoded text scanned again; a finding in
   decoded text is reported at the encoded blob.

Entropy is Shannon's H = −Σ p_c log₂ p_c over the characters of the secret [Shannon 1948],
as in gitleaks.
"""
from __future__ import annotations

import hashlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass

import re2

from repoguard.credentials.allowlist import compile_allowlist, is_allowed
from repoguard.credentials.alphabet import mixed_alphabet
from repoguard.credentials.ci_services import is_workflow, service_values
from repoguard.credentials.checksums import check
from repoguard.credentials.decode import (B64, B64_CHARS, B64_PREFILTER, HEX, HEX_CHARS, NEED_B64,
                                          b64_blob_end, blob_rank, decode_blob)
from repoguard.credentials.entropy import entropy_floor, shannon_entropy  # noqa: F401  (re-exported)
from repoguard.credentials.findings import Finding, redact_secret, secret_hash
from repoguard.credentials.keys import process_key
from repoguard.credentials.made_up import (after_for_example, base64_of_made_up, counting,
                                           idempotency_token, spells_a_name)
from repoguard.credentials.priority import GENERIC, VENDOR
from repoguard.credentials.rule_types import (DEFAULT_WINDOW, Rule, RuleSet, compile_re2,  # noqa: F401
                                              literal_prefixes, max_width)
from repoguard.credentials.structural import all_detectors
from repoguard.credentials.structural.placeholders import home_row_mash, is_placeholder
from repoguard.credentials.structural.vendor_keywords import SHAPE_REJECTED
from repoguard.credentials.triage import location, severity

try:  # pragma: no branch
    import hyperscan
except ImportError:  # pragma: no cover - platform without wheels
    hyperscan = None

ALLOW_MARKERS = (b"repoguard:allow", b"gitleaks:allow")
MAX_DECODE_DEPTH = 2
_BLOB_WINDOW = 1002
_CACHE_VERSION = 6   # 6: the base64 blob prefilter is one bounded pattern (`decode.b64_blob_end`)
_CONTEXT = 4096  # bytes of a line kept around a match for line-target allowlists and markers
# Generic key/token rules whose candidates a vendor-keyword veto makes low-confidence (never the
# password rules: a password next to a vendor's name is still a password). A low finding is not
# reported by default (`scan --confidence low` shows it) and is still redacted from training text.
VETOED = frozenset(("generic-api-key", "generic-keyword-context", "generic-hex-secret", "generic-client-key"))
# The generic rules on the weakest evidence (a secret word nearby, a client's constructor): a veto
# naming one of them (a common key shape the vendor's rows reject) removes them both.
WEAK_GENERIC = frozenset(("generic-keyword-context", "generic-client-key"))


def _vetoes(veto_rule: str, rule_id: str) -> bool:
    """Does a veto span naming `veto_rule` ("" or SHAPE_REJECTED for every rule of VETOED) make
    `rule_id`'s finding low-confidence?"""
    return veto_rule in ("", SHAPE_REJECTED, rule_id) or (veto_rule in WEAK_GENERIC and rule_id in WEAK_GENERIC)


@dataclass
class _Compiled:
    rule: Rule
    confirm: object  # re2 pattern on bytes
    path_re: object | None
    allow: tuple  # ((Allowlist, [re2 regexes], [re2 path regexes]), ...)
    multiline: bool = False  # may span lines: confirm in the whole window, not one line
    reach: int = -1  # bytes before a hit end where a match can start (-1: not computed yet)


def _max_width(pattern: str, cap: int) -> int:
    """An upper bound on a match's length in bytes (at most `cap`; `cap` when unbounded or
    unparsable)."""
    hi = max_width(pattern)
    return cap if hi is None else min(cap, 4 * hi)  # characters → UTF-8 bytes


def _hs_expr(pattern: str) -> bytes:
    # Go/RE2 accepts `(?i)` anywhere; PCRE (Hyperscan) too. `\z` is PCRE too. Nothing to do but
    # encode; patterns Hyperscan rejects are compiled in prefilter mode or left to RE2.
    return pattern.encode()


class Engine:
    """Compiled rules. Build once per process (`Engine(ruleset)`) and call `scan(data, path)`.

    `use_hyperscan`: None = when importable. Patterns Hyperscan cannot compile exactly are
    compiled in its prefilter mode (a superset, confirmed by RE2), or else scanned by RE2 alone.
    """

    def __init__(self, ruleset: RuleSet, *, use_hyperscan: bool | None = None,
                 hs_database: bytes | None = None, structural: bool = True, key: bytes | None = None) -> None:
        """`structural`: also run the vendor-independent detectors (repoguard.credentials.structural)
        on texts holding one of their trigger literals. `key`: the fingerprint key of the findings'
        `secret_hmac` (`credentials.keys.repo_key` wherever fingerprints are published or compared
        across processes; default a random per-process key)."""
        self.ruleset = ruleset
        self.key = key or process_key()
        self.detectors = all_detectors() if structural else ()
        self._det_compiled = [_Compiled(rule=Rule(id=d.id, description=d.description, regex=None,
                                                  tags=d.tags, source="structural", priority=d.priority),
                                        confirm=None, path_re=None, allow=()) for d in self.detectors]
        # Per-hit rules of a detector (`Hit.rule`): the vendor-keyword rows.
        self._rule_for = [d.rule_for for d in self.detectors if d.rule_for is not None]
        self._hit_compiled: dict[str, _Compiled] = {}  # filled on a rule's first hit
        # Detectors without trigger literals run wherever their prefilter matched.
        self._untriggered = [j for j, d in enumerate(self.detectors) if not d.triggers and d.prefilter]
        self.rules = [r for r in ruleset.rules]
        self.compiled: list[_Compiled] = []
        for r in self.rules:
            self.compiled.append(_Compiled(
                rule=r, confirm=compile_re2(r.regex) if r.regex else None,
                path_re=re2.compile(r.path) if r.path else None,
                allow=tuple(compile_allowlist(a) for a in r.allowlists),
                multiline=r.window != DEFAULT_WINDOW or any(
                    m in (r.regex or "") for m in ("(?s", "\\n", "\\r", "[\\s\\S")),
                reach=-1))
        self._vendor_prefixes = vendor_prefixes(self.rules)
        self._path_only = [c for c in self.compiled if c.rule.regex is None and c.path_re is not None]
        self._path_memo: dict = {}   # `_path_facts` (path keys), `_path_matches` ((rule, path) keys)
        self.global_allow = [compile_allowlist(a) for a in ruleset.allowlists]
        # Global allowlists made only of paths skip a whole file before it is scanned.
        self._skip_paths = [c.paths for c in self.global_allow if c.paths is not None and not (
            c.allowlist.regexes or c.allowlist.stopwords or c.allowlist.commits or c.allowlist.target_rules)]
        self._kw_detectors: dict[str, list[int]] = {}
        for j, d in enumerate(self.detectors):
            for t in d.triggers:
                self._kw_detectors.setdefault(t.decode("latin-1"), []).append(j)
        self.keywords = sorted({k for r in self.rules for k in r.keywords} | set(self._kw_detectors))
        self._kw_rules: dict[str, list[int]] = {}
        for i, r in enumerate(self.rules):
            for k in r.keywords:
                self._kw_rules.setdefault(k, []).append(i)
        self._always = [i for i, r in enumerate(self.rules) if not r.keywords and r.regex]
        self._b64 = re2.compile(B64)
        self._hex = re2.compile(HEX)
        self._b64_end = re2.compile(B64 + rb"$")
        self._hex_end = re2.compile(HEX + rb"$")
        if use_hyperscan is None:
            use_hyperscan = hyperscan is not None
        self.backend = "re2"
        self.hs_db = None
        self._re2_only: list[int] = []
        if use_hyperscan and hyperscan is not None:
            self._build_hyperscan(hs_database)
            self.backend = "hyperscan"
        else:
            import ahocorasick
            self._ac = ahocorasick.Automaton()
            for k in self.keywords:
                self._ac.add_word(k, k)
            if self.keywords:
                self._ac.make_automaton()

    # -- database ----------------------------------------------------------------------------
    def _build_hyperscan(self, serialized: bytes | None) -> None:
        n = len(self.rules)
        self._kw_base = n
        self._blob_b64 = n + len(self.keywords)
        self._blob_hex = self._blob_b64 + 1
        self._det_base = self._blob_hex + 1  # + detector index: that detector's prefilter
        if serialized is not None:
            meta, _, blob = serialized.partition(b"\n")
            self._re2_only = [int(x) for x in meta.split(b",") if x]
            self.hs_db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
            self.hs_db.scratch = hyperscan.Scratch(self.hs_db)
            return
        exprs, ids, flags = [], [], []
        # A rule limited to some paths (`.pgpass`, data bags, config files) is read by RE2 in
        # those files only: in the one database it would cost every text its scan.
        self._re2_only = [i for i, r in enumerate(self.rules) if r.regex and r.path]
        rule_idx = [i for i, r in enumerate(self.rules) if r.regex and not r.path]
        try:  # the common case: every pattern compiles exactly, one compile
            probe = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            probe.compile(expressions=[_hs_expr(self.rules[i].regex) for i in rule_idx],
                          ids=rule_idx, elements=len(rule_idx), flags=[0] * len(rule_idx))
            exprs = [_hs_expr(self.rules[i].regex) for i in rule_idx]
            ids, flags = list(rule_idx), [0] * len(rule_idx)
        except Exception:  # hyperscan.CompilerError: find the culprits one by one
            for i in rule_idx:
                expr = _hs_expr(self.rules[i].regex)
                for fl in (0, hyperscan.HS_FLAG_PREFILTER):
                    try:
                        probe = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                        probe.compile(expressions=[expr], ids=[i], elements=1, flags=[fl])
                    except Exception:
                        continue
                    exprs.append(expr), ids.append(i), flags.append(fl)
                    break
                else:
                    self._re2_only.append(i)
        caseless = hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH
        for j, k in enumerate(self.keywords):
            exprs.append(re.escape(k).encode()), ids.append(self._kw_base + j), flags.append(caseless)
        # Blobs end at a non-blob byte (or the end), so each blob is reported about once.
        # Base64: the last 32 characters of a run, its padding and what ends it; which of those
        # runs are worth decoding (a digit and an upper-case letter) is `decode.b64_blob_end`'s check.
        # The pattern that said it all (`c*[0-9]c*[A-Z]c*…`, min_length 33) cost 2.4× this one,
        # more than all the rules together (issue 45).
        ext = [hyperscan.ExpressionExt(flags=0)] * len(exprs)
        exprs.append(B64_PREFILTER)
        ids.append(self._blob_b64), flags.append(0), ext.append(hyperscan.ExpressionExt(flags=0))
        exprs.append(HEX + rb"(?:[^0-9a-zA-Z]|$)"), ids.append(self._blob_hex), flags.append(0)
        ext.append(hyperscan.ExpressionExt(flags=0))
        for j, d in enumerate(self.detectors):
            if d.prefilter:  # every match end is reported: the detector looks just before each
                exprs.append(d.prefilter), ids.append(self._det_base + j)
                flags.append(hyperscan.HS_FLAG_CASELESS), ext.append(hyperscan.ExpressionExt(flags=0))
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=exprs, ids=ids, elements=len(exprs), flags=flags, ext=ext)
        self.hs_db = db

    @classmethod
    def build(cls, ruleset: RuleSet, *, use_hyperscan: bool | None = None,
              structural: bool = True, key: bytes | None = None) -> "Engine":
        """An Engine, loading the compiled Hyperscan database from the on-disk cache
        (`artefacts.user_cache_dir()`: `$REPOGUARD_CACHE_DIR` or `~/.cache/repoguard`) when the
        same rules were compiled before:
        compiling ~250 patterns takes about a second, loading them a tenth of that."""
        if use_hyperscan is False or hyperscan is None:
            return cls(ruleset, use_hyperscan=False, structural=structural, key=key)
        triggers = [(d.triggers, d.prefilter) for d in all_detectors()] if structural else []
        digest = hashlib.sha256(repr((_CACHE_VERSION, getattr(hyperscan, "__version__", ""),
                                      [(r.regex, r.keywords, bool(r.path)) for r in ruleset.rules], triggers,
                                      B64, HEX))
                                .encode()).hexdigest()[:24]
        from repoguard.core.artefacts import user_cache_dir

        path = os.path.join(user_cache_dir(), f"hs-{digest}.db")
        try:
            with open(path, "rb") as fh:
                return cls(ruleset, hs_database=fh.read(), structural=structural, key=key)
        except Exception:  # missing or unreadable/corrupt cache: compile
            pass
        eng = cls(ruleset, structural=structural, key=key)
        try:
            from repoguard.core.artefacts import atomic_write_bytes
            atomic_write_bytes(path, eng.serialize())
        except OSError:
            pass  # read-only home: no cache, still correct
        return eng

    def serialize(self) -> bytes | None:
        """The compiled Hyperscan database (for worker processes), or None on the RE2 backend."""
        if self.hs_db is None:
            return None
        meta = ",".join(str(i) for i in self._re2_only).encode()
        return meta + b"\n" + hyperscan.dumpb(self.hs_db)

    # -- scanning ----------------------------------------------------------------------------
    def path_allowed(self, path: str) -> bool:
        """True when a global path allowlist excludes `path` entirely."""
        return self._path_facts(path)[0]

    def _path_matches(self, i: int, c: _Compiled, path: str) -> bool:
        """Does rule `i`'s path pattern match `path`? Kept per (rule, path), as `_path_facts`."""
        got = self._path_memo.get((i, path))
        if got is None:
            if len(self._path_memo) >= 200_000:
                self._path_memo.clear()
            got = self._path_memo[(i, path)] = c.path_re.search(path) is not None
        return got

    def _path_facts(self, path: str) -> tuple[bool, tuple[_Compiled, ...]]:
        """(a global path allowlist excludes `path`, the path-only rules matching it), kept per
        path: a history scan meets the same few thousand paths in tens of thousands of commits,
        and each RE2 search from Python costs microseconds (issue 45)."""
        got = self._path_memo.get(path)
        if got is None:
            if len(self._path_memo) >= 200_000:      # bounded: a history of many distinct paths
                self._path_memo.clear()
            got = self._path_memo[path] = (any(p.search(path) for p in self._skip_paths),
                                           tuple(c for c in self._path_only if c.path_re.search(path)))
        return got

    def scan(self, data: bytes, path: str, *, commit: str | None = None, depth: int = 0) -> list[Finding]:
        """Findings in `data` (the content of `path`), sorted by offset. Never raises on content:
        any bytes (binary, invalid UTF-8, one 100 MB line) are scanned in linear time."""
        out: list[Finding] = []
        if depth == 0:
            skip, path_rules = self._path_facts(path)
            if skip:
                return []
            for c in path_rules:
                out.append(self._path_finding(c.rule, path))
        if not data:
            return out
        hits, blobs, present, det_ends = self._candidates(data)
        spans: list[tuple] = []  # (compiled, match start, match end, secret start, secret end, secret)
        for i, ends in hits.items():
            c = self.compiled[i]
            if c.path_re is not None and not self._path_matches(i, c, path):
                continue
            spans += [(c, *sp[1:]) for sp in self._confirm(i, c, data, ends)]
        vetoes: list[tuple[int, int, str]] = []
        wanted = {j for k in present for j in self._kw_detectors.get(k, ())}
        wanted.update(j for j in self._untriggered if self.hs_db is None or j in det_ends)
        for j in sorted(wanted):
            c, d = self._det_compiled[j], self.detectors[j]
            if not d.prefilter:
                found = d.find(data, path)
            elif self.hs_db is None:
                found = d.find(data, path, None)  # RE2 backend: the detector reads the whole text
            elif j in det_ends:
                found = d.find(data, path, det_ends[j])
            else:
                continue  # its prefilter did not match: nothing to find
            for h in found:
                if h.veto:  # h.rule: the one rule vetoed, or "" for every rule of VETOED
                    vetoes.append((h.start, h.end, h.rule))
                    continue
                hc = self._hit_compiled.get(h.rule) or self._compile_hit_rule(h.rule, c) if h.rule else c
                spans.append((hc, h.start, h.end, h.start, h.end, h.secret))
        low: set[int] = set()  # ids of spans found low-confidence
        if vetoes:  # a vendor-named value its vendor's documented shapes reject: low confidence
            low = {id(sp) for sp in spans if sp[0].rule.id in VETOED
                   and any(a < sp[4] and sp[3] < b and _vetoes(rid, sp[0].rule.id) for a, b, rid in vetoes)}
        if spans and is_workflow(path):  # a CI job's own service containers: their passwords gate nothing
            ephemeral = service_values(data)
            spans = [sp for sp in spans if sp[5] not in ephemeral  # a vendor's token there is still one
                     or (sp[0].rule.priority < GENERIC and "password" not in sp[0].rule.id)]
        kept: list[Finding] = []
        prio: list[tuple[bool, int]] = []
        cands = sorted(spans, key=lambda x: (x[3], -(x[4] - x[3]), x[0].rule.priority, x[0].rule.id))
        for sp in cands:
            c, ms, me, s, e, secret = sp
            f = self._finding(c, data, path, s, e, secret, data[ms:me], commit, ms)
            if f is None:
                continue
            if id(sp) in low:
                f.confidence = "low"
            pr = (f.confidence == "low", c.rule.priority)
            if kept and s < kept[-1].end:
                # One secret, several rules: keep one, the most specific (lowest priority level:
                # vendor rule, structural detector, generic rule, keyword context), a confident
                # finding before a low one.
                if pr < prio[-1] and not _cut_short(kept[-1], f, data):
                    kept[-1], prio[-1] = f, pr
                continue
            kept.append(f)
            prio.append(pr)
        out += kept
        if depth < MAX_DECODE_DEPTH and blobs:
            out += self._decoded(data, path, blobs, commit, depth, out)
        out.sort(key=lambda f: (f.start, f.rule_id))
        _set_lines(data, out)
        return out

    def _compile_hit_rule(self, rule_id: str, default: _Compiled) -> _Compiled:
        r = next((r for f in self._rule_for if (r := f(rule_id)) is not None), None)
        if r is None:
            return default
        c = self._hit_compiled[rule_id] = _Compiled(rule=r, confirm=None, path_re=None,
                                                    allow=tuple(compile_allowlist(a) for a in r.allowlists))
        return c

    def _candidates(self, data: bytes) -> tuple[dict[int, list[int]], list[tuple[str, int]], set[str],
                                                dict[int, list[int]]]:
        """Rule index → hit end offsets, blob (kind, end) hits after the keyword filter, the
        keywords present, and detector index → its prefilter's match ends (Hyperscan only)."""
        hits: dict[int, list[int]] = {}
        blobs: list[tuple[str, int]] = []
        det_ends: dict[int, list[int]] = {}
        if self.hs_db is not None:
            raw: list[tuple[int, int]] = []
            append = raw.append
            det = defaultdict(list)
            base = self._det_base

            def on_match(i, _from, t, _flags, _ctx):  # a prefilter can report an end per byte:
                if i < base:                          # its ends skip the tuple and loop below
                    append((i, t))
                else:
                    det[i].append(t)

            self.hs_db.scan(data, match_event_handler=on_match)
            present: set[str] = set()
            nrules = self._kw_base
            for i, t in raw:
                if i < nrules:
                    hits.setdefault(i, []).append(t)
                elif i < self._blob_b64:
                    present.add(self.keywords[i - nrules])
                elif i == self._blob_b64:
                    if b64_blob_end(data, t):
                        blobs.append(("base64", t))
                else:
                    blobs.append(("hex", t))
            det_ends = {i - base: ends for i, ends in det.items()}
            allowed = self._allowed_rules(present)
            hits = {i: ends for i, ends in hits.items() if i in allowed}
            for i in self._re2_only:
                if i in allowed:
                    hits[i] = [-1]
            return hits, blobs, present, det_ends
        present = set()
        if self.keywords:
            for _, k in self._ac.iter(data.lower().decode("latin-1")):
                present.add(k)
        for i in self._allowed_rules(present):
            if self.rules[i].regex:
                hits[i] = [-1]  # -1: scan the whole text with RE2
        for m in self._b64.finditer(data):
            blobs.append(("base64", m.end()))
        for m in self._hex.finditer(data):
            blobs.append(("hex", m.end()))
        return hits, blobs, present, det_ends

    def _allowed_rules(self, present: set[str]) -> set[int]:
        allowed = set(self._always)
        for k in present:
            allowed.update(self._kw_rules.get(k, ()))
        return allowed

    def _confirm(self, i: int, c: _Compiled, data: bytes, ends: list[int]) -> list[tuple]:
        """RE2 matches in small windows around the hit ends, as (rule index, match start, match
        end, secret start, secret end, secret). A window reaches back the rule's longest match
        (`reach`) from its end, so it holds every match ending there even when an earlier window
        covered that match's start (windows may overlap by at most `reach`); an end inside an
        earlier window opens none. Each window advances past the previous one and every search is
        bounded, so one 100 MB line stays linear."""
        found: dict[tuple[int, int], tuple] = {}
        groups = c.confirm.groups
        g0 = c.rule.secret_group
        w = 0
        if ends == [-1]:
            windows = [(0, len(data))]
        else:
            if c.reach < 0:  # parsed on first use: most rules never hit
                c.reach = _max_width(c.rule.regex, c.rule.window)
            windows, covered, w = [], -1, c.reach
            for e in sorted(set(ends)):
                if e <= covered:
                    continue
                lo = max(0, e - w)
                if c.multiline:
                    s, t = lo, min(len(data), e + 256)
                else:
                    # The line holding the match's last byte (e - 1; the byte at e - 1 may be
                    # the newline that terminated it), cut to the window.
                    s = data.rfind(b"\n", lo, max(lo, e - 1)) + 1 or lo
                    t = data.find(b"\n", e - 1 + 1, e + 256)
                    t = max(min(len(data), e + 256) if t < 0 else t, e)
                windows.append((s, t))
                covered = t
        for s, t in windows:
            chunk = data[s:t] if (s, t) != (0, len(data)) else data
            cut = t < len(data) and data[t:t + 1] != b"\n"  # the window ends inside a line
            for m in c.confirm.finditer(chunk):
                if m.end() <= m.start():
                    continue
                ms = s + m.start()
                if cut and s + m.end() == t:
                    # `$` matched at the cut: the value may go on. Match again from the same
                    # start over the rule's longest match, which holds the whole of it.
                    m = c.confirm.search(data[ms:min(len(data), ms + w + 1)])
                    if m is None or m.start() != 0 or m.end() <= 0:
                        continue
                    base = ms
                else:
                    base = s
                g = g0 or next((k for k in range(1, groups + 1) if m.group(k)), 0)
                a, b = m.span(g)
                if a < 0:
                    continue
                found[(base + m.start(), base + m.end())] = (
                    i, base + m.start(), base + m.end(), base + a, base + b, m.group(g))
        return list(found.values())

    def _line_context(self, data: bytes, s: int, e: int) -> bytes:
        lo = data.rfind(b"\n", max(0, s - _CONTEXT), s) + 1 or max(0, s - _CONTEXT)
        hi = data.find(b"\n", e, e + _CONTEXT)
        hi = min(len(data), e + _CONTEXT) if hi < 0 else hi
        return data[lo:hi]

    def _finding(self, c: _Compiled, data: bytes, path: str, s: int, e: int, secret: bytes,
                 match_text: bytes, commit: str | None, ms: int) -> Finding | None:
        r = c.rule
        ent = shannon_entropy(secret)
        if r.entropy is not None and ent < entropy_floor(r.entropy, len(secret)):
            return None
        if r.id.startswith("generic") and r.entropy and not any(ch in b"0123456789" for ch in secret):
            return None  # gitleaks' extra guard for generic rules: random keys contain a digit
        if r.id in VETOED and (mixed_alphabet(secret) or home_row_mash(secret)):
            return None  # two base64 alphabets, `~`, hex typed over, a home-row mash: hand-made
        if self._vendor_prefixes and (r.priority >= GENERIC or "name-only" in r.tags) \
                and secret.startswith(self._vendor_prefixes):
            return None  # a vendor's format owns this prefix, and its rule did not accept the value
        if r.placeholder and is_placeholder(secret, min_len=3):
            return None
        if r.id in VETOED and (spells_a_name(secret) or counting(secret) or base64_of_made_up(secret)
                               or idempotency_token(secret, match_text[:max(0, s - ms)])):
            return None  # a name, a count, base64 of either, a retry's id: made up, not generated
        if "private-key" not in r.id and after_for_example(data, s):
            return None  # a docstring's "For example:" shows the shape of a header or a config
        line = self._line_context(data, s, e)
        if any(mk in line for mk in ALLOW_MARKERS):
            return None
        for allow in (*c.allow, *[a for a in self.global_allow
                                   if not a.allowlist.target_rules or r.id in a.allowlist.target_rules]):
            if is_allowed(allow, secret, match_text, line, path, commit):
                return None
        checksum = check(r.checksum, secret) if r.checksum else ""
        where = location(path, line[:512])
        return Finding(rule_id=r.id, path=path, line=0, column=0, end_line=0, start=s, end=e,
                       secret_hmac=secret_hash(secret, self.key), redacted=redact_secret(secret),
                       entropy=ent, description=r.description, location=where, checksum=checksum,
                       severity=severity(r.id, r.source, where, checksum))

    def _path_finding(self, r: Rule, path: str) -> Finding:
        p = path.encode("utf-8", "surrogateescape")
        where = location(path)
        return Finding(rule_id=r.id, path=path, line=1, column=1, end_line=1, start=0, end=0,
                       secret_hmac=secret_hash(p, self.key), redacted=redact_secret(p),
                       entropy=shannon_entropy(p), description=r.description, location=where,
                       severity=severity(r.id, r.source, where))

    def _decoded(self, data, path, blobs, commit, depth, direct) -> list[Finding]:
        out: list[Finding] = []
        taken = [(f.start, f.end) for f in direct if f.confidence != "low"]  # a low one may hide a blob's secret
        last_end = -1
        for kind, e in sorted(blobs, key=lambda b: (b[1], blob_rank(data, *b))):
            if e <= last_end:
                continue
            chars = B64_CHARS if kind == "base64" else HEX_CHARS
            end = e if data[e - 1:e].translate(None, chars) == b"" else e - 1
            if kind == "hex" and data[end - 2:end - 1] not in b"0234567":
                continue  # the last byte is not text (high nibble 2–7, or a control char)
            # The one blob ending at `end`: leftmost start of a match anchored at the end.
            lo = max(0, end - _BLOB_WINDOW)
            m = (self._b64_end if kind == "base64" else self._hex_end).search(data[lo:end])
            if m is None:
                continue
            s0, e0 = lo + m.start(), lo + m.end()
            last_end = e0
            blob = m.group(0)
            if kind == "base64" and not all(blob.translate(None, d) for d in NEED_B64):
                continue  # base64 of text mixes digits and both cases; paths and words do not
            if any(a < e0 and s0 < b for a, b in taken):
                continue
            decoded = decode_blob(kind, blob)
            if decoded is None:
                continue
            for f in self.scan(decoded, path, commit=commit, depth=depth + 1):
                f.start, f.end = s0, e0
                f.decoded = kind if not f.decoded else f"{kind}+{f.decoded}"
                out.append(f)
                taken.append((s0, e0))
                break
        return out


def vendor_prefixes(rules) -> tuple[bytes, ...]:
    """Literal prefixes (≥ 3 characters) of vendor rules, except an encoding's (`eyJ`): a generic
    rule's candidate that starts with one is left to that vendor's rule (which knows its length
    and alphabet)."""
    out = set()
    for r in rules:
        if r.regex and r.priority == VENDOR:
            for p in literal_prefixes(r.regex):
                if len(p) >= 3 and p not in _ENCODING_PREFIXES:
                    out.add(p.encode())
    return tuple(sorted(out))


# Prefixes that an encoding gives, not a vendor: `eyJ` is base64 of `{"` (any base64url JSON, the
# JWT rule's start). A named random value starting with it that the JWT rule rejects (no payload,
# no signature) is still a secret, so the generic rules are not told to leave it.
_ENCODING_PREFIXES = frozenset(("eyJ",))


def _cut_short(longer: Finding, f: Finding, data: bytes) -> bool:
    """Is `f` the head of `longer`'s secret, cut at a raw `@` or `/` (a URL rule that stops where
    RFC 3986 says a password must, where the password runs on)? Then `longer` is kept: redacting
    the head alone would leave the rest of the password in the training text."""
    return f.start == longer.start and f.end < longer.end and data[f.end:f.end + 1] in (b"@", b"/")


def _set_lines(data: bytes, findings: list[Finding]) -> None:
    """Fill 1-based line/column/end_line from byte offsets (findings sorted by start). Counting
    is incremental, so many findings on one huge line cost one pass, not one pass each."""
    pos, line = 0, 1
    col_pos, col = -1, 1  # last offset whose column is known, on the current line
    for f in findings:
        if f.line:  # path-only findings
            continue
        nl = data.count(b"\n", pos, f.start)
        line += nl
        if nl or col_pos < 0:
            ls = data.rfind(b"\n", 0, f.start) + 1
            col_pos, col = ls, 1
        col += len(data[col_pos:f.start].decode("utf-8", "replace"))
        col_pos = pos = f.start
        f.line, f.column = line, col
        f.end_line = line + data.count(b"\n", f.start, f.end)
