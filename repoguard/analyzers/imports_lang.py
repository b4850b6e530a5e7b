"""Import extraction with tree-sitter: one compiled query per language, imports as plain tuples.

`extract(language, source) -> Extracted` parses `source` (bytes) once and runs the language's
query once. It knows nothing about files or resolution (imports.py does that); it reports what
the file asks for, with the 1-based line of the statement:

    python      `import a.b`, `from ..x import y`, `from __future__ import …`,
                `importlib.import_module("x")`, `import_module(".x", package=…)`, `__import__("x")`
    javascript, typescript, tsx
                `import … from "s"`, `export … from "s"`, `require("s")`, `import("s")`,
                TypeScript `import x = require("s")`
    java        `import a.b.C;`, `import a.b.*;`, `import static a.b.C.m;` (+ the package decl.)
    go          `import "path"` (single and grouped)
    c, cpp      `#include "x.h"` (kind "local") and `#include <x/y.h>` (kind "system")
    rust        `use` trees expanded to one path each (`use a::{b, c::d as e}` → a::b, a::c::d),
                `mod x;` declarations (bodies `mod x { … }` are not files)

Imports that never execute are not reported: Python imports in the body of `if TYPE_CHECKING:` /
`if typing.TYPE_CHECKING:` (their `else:` runs and is kept), TypeScript `import type …`,
`export type … from` and `import { type A, type B } from` (every specifier type-only).

Uses the tree-sitter 0.21 API (`Language.query`, `Query.captures`) through
`tree_sitter_languages`; queries are compiled on first use per language and kept.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

EXTENSIONS = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".java": "java", ".go": "go",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hh": "cpp", ".hpp": "cpp", ".hxx": "cpp",
    ".rs": "rust",
}


class RawImport(NamedTuple):
    """One import as written. `kind`: python "import"/"from"/"dynamic"; js "static"/"require"/
    "dynamic"; java "class"/"wildcard"/"static"; go "go"; c "local"/"system"; rust "use"/"mod".
    `target` is the module/specifier text (Python: without leading dots); `level` counts a
    Python relative import's dots; `names` are the names a Python `from` import takes."""

    line: int
    kind: str
    target: str
    level: int = 0
    names: tuple[str, ...] = ()


@dataclass
class Extracted:
    """The import statements of one file, sorted (by line first), and its Java `package` ("" elsewhere)."""

    imports: list[RawImport] = field(default_factory=list)
    package: str = ""          # Java package declaration, "" elsewhere


_QUERIES = {
    "python": """
        (import_statement) @import
        (import_from_statement) @from
        (future_import_statement) @future
        (call function: [(identifier) (attribute)] @fn arguments: (argument_list . (string) @arg)) @call
    """,
    "javascript": """
        (import_statement source: (string) @src)
        (export_statement source: (string) @src)
        (call_expression function: (identifier) @fn arguments: (arguments . (string) @arg)) @call
        (call_expression function: (import) arguments: (arguments . (string) @src))
    """,
    "java": """
        (package_declaration) @package
        (import_declaration) @import
    """,
    "go": """(import_spec path: (interpreted_string_literal) @src)""",
    "c": """(preproc_include path: (_) @include)""",
    "rust": """
        (use_declaration argument: (_) @use)
        (mod_item name: (identifier) @modname) @mod
    """,
}
_QUERIES["typescript"] = _QUERIES["javascript"] + "(import_require_clause source: (string) @src)"
_QUERIES["tsx"] = _QUERIES["typescript"]
_QUERIES["cpp"] = _QUERIES["c"]

_DYNAMIC_PY = {"importlib.import_module", "import_module", "__import__"}
_STRING_BODY = re.compile(r"""^[rRbBuUfF]*("{3}|'{3}|"|'|`)(.*)\1$""", re.S)


@lru_cache(maxsize=None)
def _parser_and_query(language: str):
    import tree_sitter_languages as tsl

    with warnings.catch_warnings():  # tree_sitter_languages uses a deprecated Language() form
        warnings.simplefilter("ignore", FutureWarning)
        lang = tsl.get_language(language)
        parser = tsl.get_parser(language)
    return parser, lang.query(_QUERIES[language])


def supported(language: str | None) -> bool:
    """Whether `language` (as `language_of` names it; None for an unknown extension) has an import query."""
    return language in _QUERIES


def language_of(path: str) -> str | None:
    """The language of `path` by its extension (EXTENSIONS, compared lower-cased); None when unknown."""
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 else None


def _text(node) -> str:
    return node.text.decode("utf-8", errors="replace")


def _string_value(node) -> str | None:
    m = _STRING_BODY.match(_text(node))
    return m.group(2) if m else None


def extract(language: str, source: bytes) -> Extracted:
    """Imports of one file. Raises KeyError for an unsupported language (see `supported`)."""
    parser, query = _parser_and_query(language)
    tree = parser.parse(source)
    captures = query.captures(tree.root_node)
    fn = {"python": _python, "javascript": _js, "typescript": _js, "tsx": _js, "java": _java,
          "go": _go, "c": _c, "cpp": _c, "rust": _rust}[language]
    out = Extracted()
    fn(captures, out)
    if language == "python" and tree.root_node.has_error:
        # The bundled grammar predates some syntax (e.g. a trailing comma in a multi-line
        # subscript) and its error recovery can swallow the rest of the file; Python's own parser
        # then gives the imports, when the file is valid Python.
        fallback = _python_ast(source)
        if fallback is not None:
            out.imports = fallback
    out.imports.sort()
    return out


def _python_ast(source: bytes) -> list[RawImport] | None:
    """Imports of valid Python via the `ast` module, the same RawImports; None on SyntaxError."""
    import ast

    try:
        with warnings.catch_warnings():  # "invalid escape sequence" & co. are the file's business
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out = []
    skip: set[int] = set()     # nodes in an `if TYPE_CHECKING:` body (never executed)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking_test(ast.unparse(node.test)):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [RawImport(node.lineno, "import", a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(RawImport(node.lineno, "from", node.module or "", node.level,
                                 tuple(a.name for a in node.names)))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            f = node.func
            name = (f.id if isinstance(f, ast.Name) else
                    f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else "")
            if name in _DYNAMIC_PY:
                v = node.args[0].value
                out.append(RawImport(node.lineno, "dynamic", v.lstrip("."), len(v) - len(v.lstrip("."))))
    return out


# -- per language ---------------------------------------------------------------------------------
def _type_checking_test(text: str) -> bool:
    """`TYPE_CHECKING`, `typing.TYPE_CHECKING`, `t.TYPE_CHECKING`: a condition true only for a type
    checker, so what its block imports never runs."""
    text = "".join(text.split())
    return text == "TYPE_CHECKING" or text.endswith(".TYPE_CHECKING")


def _under_type_checking(node) -> bool:
    """True when `node` lies in the body of an `if TYPE_CHECKING:` (or `elif`) — not its `else`."""
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in ("if_statement", "elif_clause"):
            cond = parent.child_by_field_name("condition")
            body = parent.child_by_field_name("consequence")
            if cond is not None and body is not None and child == body and _type_checking_test(_text(cond)):
                return True
        child, parent = parent, parent.parent
    return False


def _python(captures, out: Extracted) -> None:
    pending_fn = None
    for node, name in captures:
        line = node.start_point[0] + 1
        if name != "arg" and _under_type_checking(node):
            pending_fn = None
            continue   # imports for a type checker never execute: they tie nothing (issue 44)
        if name == "import":
            for child in node.children_by_field_name("name"):
                mod = child.child_by_field_name("name") if child.type == "aliased_import" else child
                out.imports.append(RawImport(line, "import", _text(mod)))
        elif name in ("from", "future"):
            if name == "future":
                module, level = "__future__", 0
            else:
                mod = node.child_by_field_name("module_name")
                raw = _text(mod)
                level = len(raw) - len(raw.lstrip("."))
                module = raw.lstrip(".").strip()
            names = []
            for child in node.children_by_field_name("name"):
                n = child.child_by_field_name("name") if child.type == "aliased_import" else child
                names.append(_text(n))
            if any(c.type == "wildcard_import" for c in node.children):
                names.append("*")
            out.imports.append(RawImport(line, "from", module, level, tuple(names)))
        elif name == "fn":
            pending_fn = _text(node)
        elif name == "arg" and pending_fn in _DYNAMIC_PY:
            value = _string_value(node)
            if value:
                level = len(value) - len(value.lstrip("."))
                out.imports.append(RawImport(line, "dynamic", value.lstrip("."), level))
            pending_fn = None


def _js(captures, out: Extracted) -> None:
    pending_fn = None
    for node, name in captures:
        line = node.start_point[0] + 1
        if name == "fn":
            pending_fn = _text(node)
            continue
        if name == "arg":
            if pending_fn == "require":
                value = _string_value(node)
                if value:
                    out.imports.append(RawImport(line, "require", value))
            pending_fn = None
            continue
        if name == "src":
            value = _string_value(node)
            if value and node.parent is not None and _type_only(node.parent):
                continue   # `import type …`: erased at compile time, it ties nothing (issue 44)
            if value:
                kind = "dynamic" if node.parent is not None and node.parent.type == "arguments" else "static"
                out.imports.append(RawImport(line, kind, value))


def _type_only(stmt) -> bool:
    """`import type {A} from`, `export type {A} from`, or `import {type A, type B} from`: an
    import TypeScript erases, so it never runs."""
    if stmt.type not in ("import_statement", "export_statement"):
        return False
    if any(c.type == "type" for c in stmt.children):
        return True
    clause = next((c for c in stmt.children if c.type == "import_clause"), None)
    if clause is None or len(clause.named_children) != 1 or clause.named_children[0].type != "named_imports":
        return False
    specs = [c for c in clause.named_children[0].named_children if c.type == "import_specifier"]
    return bool(specs) and all(any(x.type == "type" for x in c.children) for c in specs)


_JAVA_IMPORT = re.compile(r"^import\s+(static\s+)?([\w.\s]+?)(\s*\.\s*\*)?\s*;", re.S)


def _java(captures, out: Extracted) -> None:
    for node, name in captures:
        text = re.sub(r"//[^\n]*|/\*.*?\*/", "", _text(node), flags=re.S)
        if name == "package":
            m = re.match(r"^package\s+([\w.\s]+?)\s*;", text, re.S)
            if m:
                out.package = re.sub(r"\s+", "", m.group(1))
            continue
        m = _JAVA_IMPORT.match(text)
        if not m:
            continue
        target = re.sub(r"\s+", "", m.group(2))
        kind = "static" if m.group(1) else ("wildcard" if m.group(3) else "class")
        out.imports.append(RawImport(node.start_point[0] + 1, kind, target))


def _go(captures, out: Extracted) -> None:
    for node, _ in captures:
        value = _string_value(node)
        if value:
            out.imports.append(RawImport(node.start_point[0] + 1, "go", value))


def _c(captures, out: Extracted) -> None:
    for node, _ in captures:
        text = _text(node).strip()
        if text.startswith("<") and text.endswith(">"):
            out.imports.append(RawImport(node.start_point[0] + 1, "system", text[1:-1].strip()))
        elif text.startswith('"'):
            value = _string_value(node)
            if value:
                out.imports.append(RawImport(node.start_point[0] + 1, "local", value))


def _rust(captures, out: Extracted) -> None:
    for node, name in captures:
        line = node.start_point[0] + 1
        if name == "use":
            for path in _use_paths(node, ""):
                out.imports.append(RawImport(line, "use", path))
        elif name == "mod" and node.child_by_field_name("body") is None:
            ident = node.child_by_field_name("name")
            if ident is not None:
                out.imports.append(RawImport(line, "mod", _text(ident)))


def _join(prefix: str, part: str) -> str:
    return f"{prefix}::{part}" if prefix else part


def _use_paths(node, prefix: str) -> list[str]:
    """Expand a Rust use tree into full paths (`a::{b, c::*}` → ["a::b", "a::c::*"])."""
    t = node.type
    if t == "use_as_clause":
        return _use_paths(node.child_by_field_name("path"), prefix)
    if t == "use_wildcard":
        inner = [c for c in node.named_children]
        base = _join(prefix, re.sub(r"\s+", "", _text(inner[0]))) if inner else prefix
        return [_join(base, "*")]
    if t == "scoped_use_list":
        path = node.child_by_field_name("path")
        base = _join(prefix, re.sub(r"\s+", "", _text(path))) if path is not None else prefix
        return _use_paths(node.child_by_field_name("list"), base)
    if t == "use_list":
        paths: list[str] = []
        for child in node.named_children:
            paths.extend(_use_paths(child, prefix))
        return paths
    if t in ("identifier", "scoped_identifier", "crate", "self", "super", "metavariable"):
        return [_join(prefix, re.sub(r"\s+", "", _text(node)))]
    return []
