"""Where a file uses what it imports: the lines of each import statement and of every use of the
names it binds, so an importer carries a secret only in the chunks that touch it (imports.py).

`import_uses(language, source) -> dict[key, ImportUse] | None`, keyed as the extractor
(imports_lang) reports an import: (line, target, level) with `line` the statement's first line in
Python and the line of the module string in JavaScript/TypeScript. None for a language this module
does not read, or a file it cannot parse: the caller then ties the whole file, as before.

What binds what:
    python      `import a.b.c` binds the dotted name `a.b.c` (a use is `a.b.c` or `a.b.c.x`,
                not another submodule of `a`); `import a.b as m` binds `m`; `from x import y as z`
                binds `z`; `from x import *` and `import_module(...)` bind names nobody can list
                (`names` None: the whole file stays tied).
    javascript, typescript, tsx
                default, namespace and named imports (aliases), `x = require("s")`,
                `{a, b: c} = require("s")`, `import x = require("s")`; a `type` specifier binds
                nothing (it is erased at compile time). `import "s"` and `export … from "s"` bind
                nothing: only their own line carries. A bare `require("s")` or `import("s")`
                binds what nobody can list (None).
    java        `import a.b.C;` binds `C`, `import static a.b.C.m;` binds `m`; a wildcard binds
                what nobody can list (None).
    go          `import "x/y/pkg"` binds `pkg` (a trailing `/vN` or `.vN` dropped), `import p "…"`
                binds `p`, `_` binds nothing; `.` is None. Go refuses an unused import, so a Go
                import none of whose names is used means the guessed package name is wrong: None.
A use is any identifier with a bound name outside import statements (Python: `ast.Name` and
dotted `ast.Attribute` chains; JS/TS: identifier, type_identifier and shorthand property nodes).
"""
from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

UsesKey = tuple[int, str, int]


@dataclass
class ImportUse:
    """One import statement: its lines [first, last], the names it binds (None: unknowable, tie
    the whole file), and for each name the (first, last) lines of its uses."""

    first: int
    last: int
    names: tuple[str, ...] | None
    uses: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def import_uses(language: str | None, source: bytes) -> dict[UsesKey, ImportUse] | None:
    """Import statements of `source` with their uses (module doc); None when unreadable."""
    if language == "python":
        return _python(source)
    if language in ("javascript", "typescript", "tsx"):
        return _js(language, source)
    if language in ("java", "go"):
        return _java_go(language, source)
    return None


# -- python ---------------------------------------------------------------------------------------
def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain, None for anything else (a call, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _python(source: bytes) -> dict[UsesKey, ImportUse] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: dict[UsesKey, ImportUse] = {}
    bound: dict[str, list[ImportUse]] = {}          # a name (dotted for `import a.b`) → its statements
    names: list[ast.Name] = []
    attrs: list[ast.Attribute] = []
    for node in ast.walk(tree):                     # one walk: ast.walk is most of the cost
        if isinstance(node, ast.Name):
            names.append(node)
            continue
        if isinstance(node, ast.Attribute):
            attrs.append(node)
            continue
        last = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for a in node.names:
                u = ImportUse(node.lineno, last, (a.asname or a.name,))
                out[(node.lineno, a.name, 0)] = u
                bound.setdefault(u.names[0], []).append(u)
        elif isinstance(node, ast.ImportFrom):
            took = None if any(a.name == "*" for a in node.names) else tuple(a.asname or a.name for a in node.names)
            u = ImportUse(node.lineno, last, took)
            out[(node.lineno, node.module or "", node.level)] = u
            for n in took or ():
                bound.setdefault(n, []).append(u)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            v = node.args[0].value
            # a dynamic import binds whatever the call's result is assigned to: not listed (None)
            out.setdefault((node.lineno, v.lstrip("."), len(v) - len(v.lstrip("."))), ImportUse(node.lineno, last, None))
    if not bound:
        return out
    for node in names:
        if node.id in bound:
            _add(bound[node.id], node.id, node)
    if any("." in n for n in bound):
        for node in attrs:
            # `a.b.c.x` holds the chain `a.b.c` as its own Attribute node: that one is the use
            d = _dotted(node)
            if d is not None and "." in d and d in bound:
                _add(bound[d], d, node)
    return out


def _add(stmts: list[ImportUse], name: str, node) -> None:
    span = (node.lineno, getattr(node, "end_lineno", None) or node.lineno)
    for u in stmts:
        if u.first <= span[0] <= u.last:
            continue                                 # the import statement itself
        u.uses.setdefault(name, []).append(span)


# -- javascript / typescript ----------------------------------------------------------------------
_USE_NODES = {"identifier", "type_identifier", "shorthand_property_identifier"}


def _string(node) -> str | None:
    from repoguard.analyzers.imports_lang import _string_value

    return _string_value(node)


def _has_type_keyword(node) -> bool:
    return any(c.type == "type" for c in node.children)


def _js(language: str, source: bytes) -> dict[UsesKey, ImportUse] | None:
    from repoguard.analyzers.imports_lang import _parser_and_query

    parser, _ = _parser_and_query(language)
    tree = parser.parse(source)
    out: dict[UsesKey, ImportUse] = {}
    bound: dict[str, list[ImportUse]] = {}

    def add(src, stmt, names) -> None:
        value = _string(src)
        if not value:
            return
        u = ImportUse(stmt.start_point[0] + 1, stmt.end_point[0] + 1, names)
        out[(src.start_point[0] + 1, value, 0)] = u
        for n in names or ():
            bound.setdefault(n, []).append(u)

    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        t = node.type
        if t in ("import_statement", "export_statement") and node.child_by_field_name("source") is not None:
            names: list[str] = []
            for clause in node.children:
                if clause.type == "import_clause":
                    names += _clause_names(clause)
            add(node.child_by_field_name("source"), node, () if _has_type_keyword(node) else tuple(names))
            continue
        if t == "import_statement":              # `import x = require("s")`
            for c in node.children:
                if c.type == "import_require_clause":
                    ident = next((x for x in c.children if x.type == "identifier"), None)
                    src = c.child_by_field_name("source") or next((x for x in c.children if x.type == "string"), None)
                    if src is not None:
                        add(src, node, (ident.text.decode(),) if ident is not None else None)
            continue
        if t == "call_expression":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            if fn is not None and first is not None and first.type == "string" and fn.type in ("identifier", "import"):
                if fn.type == "identifier" and fn.text == b"require":
                    decl = node.parent
                    if decl is not None and decl.type == "variable_declarator" and decl.child_by_field_name("value") == node:
                        add(first, decl, _pattern_names(decl.child_by_field_name("name")))
                    else:
                        add(first, node, None)
                elif fn.type == "import":
                    add(first, node, None)
        stack.extend(reversed(node.children))
    if bound:
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            if node.type == "import_statement" or (node.type == "export_statement"
                                                    and node.child_by_field_name("source") is not None):
                continue                             # the statement binds, it does not use
            if node.type in _USE_NODES:
                name = node.text.decode("utf-8", errors="replace")
                if name in bound:
                    _add_ts(bound[name], name, node)
            stack.extend(node.children)
    return out


def _add_ts(stmts: list[ImportUse], name: str, node) -> None:
    line = node.start_point[0] + 1
    for u in stmts:
        if u.first <= line <= u.last:
            continue
        u.uses.setdefault(name, []).append((line, node.end_point[0] + 1))


def _clause_names(clause) -> list[str]:
    """Local names an import clause binds, without `type` specifiers (erased at compile time)."""
    out = []
    for c in clause.children:
        if c.type == "identifier":
            out.append(c.text.decode())
        elif c.type == "namespace_import":
            out += [x.text.decode() for x in c.children if x.type == "identifier"]
        elif c.type == "named_imports":
            for spec in c.named_children:
                if spec.type != "import_specifier" or _has_type_keyword(spec):
                    continue
                alias = spec.child_by_field_name("alias") or spec.child_by_field_name("name")
                if alias is not None:
                    out.append(alias.text.decode())
    return out


def _pattern_names(node) -> tuple[str, ...] | None:
    """Names a `const … = require(…)` binds: an identifier, or an object pattern's locals."""
    if node is None:
        return None
    if node.type == "identifier":
        return (node.text.decode(),)
    if node.type == "object_pattern":
        out = []
        for c in node.named_children:
            if c.type == "shorthand_property_identifier_pattern":
                out.append(c.text.decode())
            elif c.type == "pair_pattern":
                v = c.child_by_field_name("value")
                if v is not None and v.type == "identifier":
                    out.append(v.text.decode())
                else:
                    return None
            else:
                return None
        return tuple(out)
    return None


def to_json(uses: dict[UsesKey, ImportUse] | None) -> list | None:
    """`import_uses`'s answer as JSON-ready lists, for the analyzer cache (per blob SHA)."""
    if uses is None:
        return None
    return [[k[0], k[1], k[2], u.first, u.last, None if u.names is None else list(u.names),
             {n: [list(x) for x in s] for n, s in u.uses.items()}] for k, u in uses.items()]


def from_json(rows: list | None) -> dict[UsesKey, ImportUse] | None:
    """The inverse of `to_json`."""
    if rows is None:
        return None
    return {(r[0], r[1], r[2]): ImportUse(r[3], r[4], None if r[5] is None else tuple(r[5]),
                                          {n: [tuple(x) for x in s] for n, s in r[6].items()}) for r in rows}


# -- java / go --------------------------------------------------------------------------------------
_GO_VERSION = re.compile(r"^v[0-9]+$")


def _go_name(path: str) -> str:
    """The package name Go gives `import "path"` by default (its last element, not a version)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) > 1 and _GO_VERSION.match(parts[-1]):
        parts.pop()
    last = parts[-1] if parts else path
    return re.sub(r"\.v[0-9]+$", "", last).replace("-", "_")


def _java_go(language: str, source: bytes) -> dict[UsesKey, ImportUse]:
    from repoguard.analyzers.imports_lang import _JAVA_IMPORT, _parser_and_query

    parser, _ = _parser_and_query(language)
    tree = parser.parse(source)
    out: dict[UsesKey, ImportUse] = {}
    bound: dict[str, list[ImportUse]] = {}
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "import_declaration" and language == "java":
            text = re.sub(r"//[^\n]*|/\*.*?\*/", "", node.text.decode("utf-8", errors="replace"), flags=re.S)
            m = _JAVA_IMPORT.match(text)
            if m:
                target = re.sub(r"\s+", "", m.group(2))
                names = None if m.group(3) else (target.rsplit(".", 1)[-1],)
                u = ImportUse(node.start_point[0] + 1, node.end_point[0] + 1, names)
                out[(node.start_point[0] + 1, target, 0)] = u
                for n in names or ():
                    bound.setdefault(n, []).append(u)
            continue
        if node.type == "import_spec" and language == "go":
            src = node.child_by_field_name("path")
            value = _string(src) if src is not None else None
            if value:
                alias = node.child_by_field_name("name")
                if alias is None:
                    names = (_go_name(value),)
                elif alias.type == "package_identifier":
                    names = (alias.text.decode(),)
                elif alias.type == "blank_identifier":
                    names = ()
                else:                                   # `.`: every exported name, unlisted
                    names = None
                u = ImportUse(node.start_point[0] + 1, node.end_point[0] + 1, names)
                out[(src.start_point[0] + 1, value, 0)] = u
                for n in names or ():
                    bound.setdefault(n, []).append(u)
            continue
        stack.extend(node.children)
    if bound:
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            if node.type in ("import_declaration", "import_spec"):
                continue
            if node.type in ("identifier", "type_identifier", "package_identifier"):
                name = node.text.decode("utf-8", errors="replace")
                if name in bound:
                    _add_ts(bound[name], name, node)
            stack.extend(node.children)
    if language == "go":
        for u in out.values():
            if u.names and not u.uses:
                u.names = None                          # unused in Go: our package name is wrong
    return out
