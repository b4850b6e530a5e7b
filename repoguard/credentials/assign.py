"""The assignment fragment: how a value follows its name in code and configuration, as one regex
shared by the keyword-anchored rules of `rules/*.toml` (verbatim, after `(?i:NAME)[...]{0,24}`)
and by the keyword-context detector (`structural/keyword_context.py`), so the languages' shapes
are fixed in one place.

ASSIGN matches, from the end of the name to the start of the value: `=`, `:`, `=>`, `:=`, Makefile
`::=`/`:::=`/`?=`, PHP `.=`, shell `+=`, a comma (`setProperty("NAME", "v")`), an XML element
(`<NAME>` then the value on the same or the next line), a typed declaration (`var NAME string =`,
`NAME: &str =`, `val NAME: String =`), `NAME"] =`, `NAME[] =` and backslash-escaped quotes
(`\\"NAME\\": \\"v\\"`), then an optional opening quote or backtick.

Every repetition is bounded: each run of spaces/tabs holds at most WS_MAX characters (enough for
column-aligned `=` and indented XML values; gitleaks' generic rule accepts 3 to 5) and an array
size at most 10 digits, so a match has a finite length. That is what makes the two engines agree:
Hyperscan confirms a hit in a bounded window before its end, RE2 (the fallback) searches the
whole text, and both see every match only when no match is longer than the window. A name
followed by more than WS_MAX spaces before its `=` is consistently not found.

`rules/*.toml` hold copies of ASSIGN; tests/test_rules.py checks that ≥ 120 rules hold it verbatim.
To change it, edit it here and replace the old text by the new one in every rule file with a
script (str.replace over rules/*.toml), never by hand.
"""
from __future__ import annotations

WS_MAX = 32

ASSIGN = (r'''(?:\\?[\"']?(?:\]|\[[0-9]{0,10}\])?[ \t]{0,32}(?:=>|:{1,3}=|[?.+]?=|[:,]|>(?:[ \t]{0,32}\r?\n)?)'''
          r'''|(?:[ \t]{0,32}:[ \t]{0,32}|[ \t]{1,32})[&*]?[A-Za-z][0-9A-Za-z_.<>\[\]*]{0,24}[ \t]{0,32}:?=)'''
          r'''[ \t]{0,32}\\?[\"'\x60]?''')
