"""Every public function, class and method in `repoguard/` has a docstring.

Public: a name without a leading underscore, defined at module level (also inside a module-level
`if`/`try`), or a method of such a class (a property too). Methods of a private class, nested
functions and dunder methods are left out: they are no module's interface.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "repoguard"

# Areas not checked yet (directories end in "/"; paths relative to repoguard/). Empty: every
# area is checked; a new entry needs a reason beside it.
NOT_YET_CHECKED: tuple[str, ...] = ()


def _defs(body: list[ast.stmt]):
    """The function and class definitions of a module body, also those inside `if`/`try`."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
        elif isinstance(node, ast.If):
            yield from _defs(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _defs(node.body + node.orelse + node.finalbody
                             + [s for h in node.handlers for s in h.body])


def undocumented(path: Path) -> list[str]:
    """`name (line N)` for each public definition of the module at `path` without a docstring."""
    missing = []
    for node in _defs(ast.parse(path.read_text(), filename=str(path)).body):
        if node.name.startswith("_"):
            continue
        if ast.get_docstring(node) is None:
            missing.append(f"{node.name} (line {node.lineno})")
        if isinstance(node, ast.ClassDef):
            for m in node.body:
                if (isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and not m.name.startswith("_")
                        and ast.get_docstring(m) is None and not _is_accessor(m)):
                    missing.append(f"{node.name}.{m.name} (line {m.lineno})")
    return missing


def _is_accessor(fn) -> bool:
    """A property's setter or deleter (`@x.setter`): the property's getter carries the docstring."""
    return any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in fn.decorator_list)


def _checked(rel: str) -> bool:
    return not any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in NOT_YET_CHECKED)


def test_the_walker_finds_a_missing_docstring(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""Module."""\n\n\ndef f():\n    pass\n\n\ndef _g():\n    pass\n\n\n'
                   'if True:\n    class C:\n        """C."""\n\n        def m(self):\n            pass\n\n'
                   '        def _n(self):\n            pass\n\n\nclass _P:\n    def q(self):\n        pass\n')
    assert undocumented(src) == ["f (line 4)", "C.m (line 16)"]


def test_skipped_areas_exist():
    """A skip that names nothing would hide a typo (and a stale entry after a move)."""
    for s in NOT_YET_CHECKED:
        assert (ROOT / s).exists(), s


def test_every_public_definition_has_a_docstring():
    missing = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if _checked(rel):
            missing += [f"repoguard/{rel}: {m}" for m in undocumented(path)]
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(missing)
