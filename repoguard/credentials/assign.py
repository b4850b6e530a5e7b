"""The assignment fragment: how a value follows its name in code and configuration, as one regex
shared by the keyword-anchored rules of `rules/*.toml` (verbatim, after `(?i:NAME)[...]{0,24}`)
and by the keyword-context detector (`structural/keyword_context.py`), so the languages' shapes
are fixed in one place.

ASSIGN matches, from the end of the name to the start of the value: `=`, `:`, `=>`, `:=`, Makefile
`::=`/`:::=`/`?=`, PHP `.=`, shell `+=`, a comma (`setProperty("NAME", "v")`), an XML element
(`<NAME>` then the value on the same or the next line), a typed declaration (`var NAME string =`,
`NAME: &str =`, `val NAME: String =`), `NAME"] =`, `NAME[] =` and backslash-escaped quotes
(`\\"NAME\\": \\"v\\"`), then an optional opening quote or backtick.
"""
from __future__ import annotations

ASSIGN = (r'''(?:\\?[\"']?(?:\]|\[[0-9]*\])?[ \t]*(?:=>|:{1,3}=|[?.+]?=|[:,]|>(?:[ \t]*\r?\n)?)'''
          r'''|(?:[ \t]*:[ \t]*|[ \t]+)[&*]?[A-Za-z][0-9A-Za-z_.<>\[\]*]{0,24}[ \t]*:?=)'''
          r'''[ \t]*\\?[\"'\x60]?''')
