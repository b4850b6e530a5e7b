"""Module resolution: an import as written (imports_lang.RawImport) → files of this repository.

One `Resolver` is built per repository from its tracked paths and a few project files, then
answers `resolve(importer, raw) -> [paths]` ([] for the standard library and third-party code).

Rules per language:
- Python (grimp's): `from ..x import y` climbs `level - 1` packages from the importer's package
  (its directory); `from a.b import c` is the submodule `a.b.c` when that file exists, else the
  module `a.b`; `import a.b.c` is the deepest of `a.b.c`, `a.b`, `a` that exists. Absolute names
  are looked up under every source root: the repository root, each `src/` folder, each folder
  holding `pyproject.toml`/`setup.py`/`setup.cfg`, and the parent of every top-level regular
  package; packages without `__init__.py` (PEP 420) resolve like regular ones. When several
  roots match, the file sharing the longest path prefix with the importer wins; the importer's
  own folder (a script's `sys.path[0]`) is the last resort, for importers outside regular
  packages only.
- JavaScript/TypeScript: relative specifiers from the importer's folder; `compilerOptions.paths`
  and `baseUrl` of the nearest `tsconfig.json`/`jsconfig.json`; workspace packages by the
  `name` in their `package.json`; then the usual extension and `index` probing.
- Java: fully-qualified class names from each file's `package` declaration + file name;
  `a.b.*` is every class of package `a.b`; static imports drop the member.
- Go: the `module` line of each `go.mod`; an import path names a package folder (all its
  non-test `.go` files).
- C/C++: `"x.h"` next to the includer first, then any file whose path ends in `/x.h` (closest
  wins); `<a/b.h>` only by that suffix rule and only when it has a folder part.
- Rust: crate roots from `Cargo.toml` (`src/lib.rs` or `src/main.rs`, crate `name`); `crate::`,
  `self::`, `super::`, workspace crate names and child modules of the current module; a path is
  the deepest module file it reaches (`a/b.rs` or `a/b/mod.rs`); `mod x;` is `x.rs`/`x/mod.rs`.
"""
from __future__ import annotations

import json
import logging
import posixpath
import re
import sys
from collections import defaultdict
from typing import Callable, Iterable

from repoguard.analyzers.imports_lang import RawImport
from repoguard.analyzers.resolve_native import NativeResolution, closest as _closest

log = logging.getLogger(__name__)

_JS_EXTS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".json")


def _strip_json_comments(text: str) -> str:
    text = re.sub(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', lambda m: m.group(1) or "", text, flags=re.S)
    return re.sub(r",(\s*[}\]])", r"\1", text)



# The only files a Resolver reads (through `read`); with the set of paths and the Java packages
# they are everything a resolution depends on besides the importer and its imports.
PROJECT_FILES = frozenset({"tsconfig.json", "jsconfig.json", "package.json", "go.mod", "Cargo.toml"})

# Top-level names of the standard library (Python ≥ 3.10); `__future__` included.
_STDLIB = frozenset(sys.stdlib_module_names)

class Resolver(NativeResolution):
    """Resolves imports against `paths` (all tracked files). `read(path) -> str | None` reads the
    project files (tsconfig.json, package.json, go.mod, Cargo.toml); `java_packages` maps each Java
    file to its declared package."""

    def __init__(self, paths: Iterable[str], read: Callable[[str], str | None], *,
                 java_packages: dict[str, str] | None = None) -> None:
        self.paths = set(paths)
        self.read = read
        self.dirs: set[str] = {""}
        for p in self.paths:
            d = posixpath.dirname(p)
            while d not in self.dirs:
                self.dirs.add(d)
                d = posixpath.dirname(d)
        self._py_roots = self._python_roots()
        self._py_stems = self._py_index()
        self._suffix: dict[str, list[str]] = defaultdict(list)   # basename → paths (C/C++)
        for p in self.paths:
            self._suffix[posixpath.basename(p)].append(p)
        self._java = self._java_index(java_packages or {})
        self._go = self._go_modules()
        self._ts = self._ts_configs()
        self._npm = self._npm_packages()
        self._crates, self._crate_names = self._rust_crates()

    # -- dispatch -------------------------------------------------------------------------------
    def resolve(self, importer: str, language: str, raw: RawImport) -> list[str]:
        """Files of this repo that `raw` (found in `importer`) refers to; [] when external."""
        try:
            if language == "python":
                return self._python(importer, raw)
            if language in ("javascript", "typescript", "tsx"):
                return self._js(importer, raw.target)
            if language == "java":
                return self._java_resolve(raw)
            if language == "go":
                return self._go_resolve(raw.target)
            if language in ("c", "cpp"):
                return self._c(importer, raw)
            if language == "rust":
                return self._rust(importer, raw)
        except (ValueError, IndexError):  # a malformed specifier: external, never a crash
            return []
        return []

    # -- python ---------------------------------------------------------------------------------
    def _python_roots(self) -> list[str]:
        roots = {""}
        for p in self.paths:
            d, base = posixpath.split(p)
            if base in ("pyproject.toml", "setup.py", "setup.cfg"):
                roots.add(d)
            if base == "__init__.py":
                parent = posixpath.dirname(d)
                if posixpath.join(parent, "__init__.py").lstrip("/") not in self.paths:
                    roots.add(parent)
        roots |= {d for d in self.dirs if posixpath.basename(d) == "src"}
        return sorted(roots)

    def _py_index(self) -> dict[str, str]:
        """Module stem ("a/b/c") → file: a/b/c.py, else a/b/c.pyi, else a/b/c/__init__.py."""
        idx: dict[str, str] = {}
        rank: dict[str, int] = {}
        for p in self.paths:
            if p.endswith("/__init__.py") or p == "__init__.py":
                stem, r = p[:-len("__init__.py")].rstrip("/"), 2
            elif p.endswith(".py"):
                stem, r = p[:-3], 0
            elif p.endswith(".pyi"):
                stem, r = p[:-4], 1
            else:
                continue
            if stem not in rank or r < rank[stem]:
                idx[stem], rank[stem] = p, r
        return idx

    def _py_file(self, base: str, dotted: str) -> str | None:
        if dotted:
            stem = f"{base}/{dotted.replace('.', '/')}" if base else dotted.replace(".", "/")
            return self._py_stems.get(stem)
        # the package itself (`from . import x` falling back to the package): __init__.py only
        return self._py_stems.get(base) if self._py_stems.get(base, "").endswith("__init__.py") else None

    def _py_lookup(self, importer: str, dotted: str) -> list[str]:
        roots = self._py_roots
        if dotted.split(".", 1)[0] in _STDLIB:
            # `import logging` means the standard library unless the importer's own source root
            # shadows it: another project's test fixture named logging/ is never on its path.
            roots = [r for r in roots if not r or importer.startswith(f"{r}/")]
        hits = [f for r in roots if (f := self._py_file(r, dotted))]
        if hits:
            return _closest(importer, hits)
        here = posixpath.dirname(importer)
        if (f"{here}/__init__.py" if here else "__init__.py") not in self.paths:
            # a script's folder is sys.path[0]; inside a package there are no implicit relative
            # imports (Python 3), so `import logging` in pkg/x.py never means pkg/logging.py
            f = self._py_file(here, dotted)
            hits = [f] if f else []
        return _closest(importer, hits)

    def _py_deepest(self, importer: str, dotted: str, base: str | None) -> list[str]:
        parts = dotted.split(".") if dotted else []
        for n in range(len(parts), 0 if base is None else -1, -1):
            name = ".".join(parts[:n])
            if base is None:
                hit = self._py_lookup(importer, name)
            else:
                f = self._py_file(base, name)
                hit = [f] if f else []
            if hit:
                return hit
        return []

    def _python(self, importer: str, raw: RawImport) -> list[str]:
        base = None
        if raw.level:
            base = posixpath.dirname(importer)
            for _ in range(raw.level - 1):
                if not base:
                    return []
                base = posixpath.dirname(base)
        if raw.kind in ("import", "dynamic"):
            return self._py_deepest(importer, raw.target, base)
        out: list[str] = []
        for name in raw.names or ("*",):
            sub = f"{raw.target}.{name}" if raw.target else name
            if name != "*":
                hit = self._py_lookup(importer, sub) if base is None else (
                    [f] if (f := self._py_file(base, sub)) else [])
                if hit:
                    out.extend(hit)
                    continue
            out.extend(self._py_deepest(importer, raw.target, base))
        return sorted(set(out))

    # -- javascript / typescript ----------------------------------------------------------------
    def _probe(self, stem: str) -> str | None:
        stem = posixpath.normpath(stem) if stem else stem
        if stem.startswith("../") or stem == "..":
            return None
        stem = "" if stem == "." else stem
        if stem in self.paths:
            return stem
        root, ext = posixpath.splitext(stem)
        if ext in (".js", ".jsx", ".mjs", ".cjs"):  # TS ESM: "./a.js" written for a.ts
            for e in (".ts", ".tsx", ".mts", ".cts"):
                if root + e in self.paths:
                    return root + e
        for e in _JS_EXTS:
            if stem + e in self.paths:
                return stem + e
        for e in _JS_EXTS:
            cand = posixpath.join(stem, "index" + e) if stem else "index" + e
            if cand in self.paths:
                return cand
        return None

    def _ts_configs(self) -> dict[str, tuple[str, dict[str, list[str]]]]:
        """Folder of each tsconfig/jsconfig → (baseUrl folder, paths patterns)."""
        out = {}
        for p in sorted(self.paths):
            d, base = posixpath.split(p)
            if base not in ("tsconfig.json", "jsconfig.json") or d in out:
                continue
            text = self.read(p)
            try:
                opts = json.loads(_strip_json_comments(text or "{}")).get("compilerOptions") or {}
            except (json.JSONDecodeError, AttributeError):
                log.info("%s: unreadable, its path aliases are ignored", p)
                continue
            base_url = opts.get("baseUrl")
            paths = opts.get("paths") or {}
            if base_url is None and not paths:
                continue
            root = posixpath.normpath(posixpath.join(d, base_url or "."))
            out[d] = ("" if root == "." else root, {k: list(v) for k, v in paths.items() if isinstance(v, list)})
        return out

    def _npm_packages(self) -> dict[str, str]:
        out = {}
        for p in self.paths:
            d, base = posixpath.split(p)
            if base != "package.json" or "node_modules/" in p:
                continue
            try:
                name = json.loads(self.read(p) or "{}").get("name")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(name, str) and name:
                out[name] = d
        return out

    def _nearest(self, table: dict, importer: str):
        d = posixpath.dirname(importer)
        while True:
            if d in table:
                return d, table[d]
            if not d:
                return None, None
            d = posixpath.dirname(d)

    def _js(self, importer: str, spec: str) -> list[str]:
        spec = spec.split("?")[0]
        if spec.startswith("."):
            hit = self._probe(posixpath.join(posixpath.dirname(importer), spec))
            return [hit] if hit else []
        _, cfg = self._nearest(self._ts, importer)
        if cfg:
            base, aliases = cfg
            for pattern, targets in aliases.items():
                prefix, star, suffix = pattern.partition("*")
                if star and spec.startswith(prefix) and spec.endswith(suffix) and len(spec) >= len(prefix) + len(suffix):
                    middle = spec[len(prefix):len(spec) - len(suffix)]
                elif not star and spec == pattern:
                    middle = ""
                else:
                    continue
                for t in targets:
                    hit = self._probe(posixpath.join(base, t.replace("*", middle)))
                    if hit:
                        return [hit]
            hit = self._probe(posixpath.join(base, spec))
            if hit:
                return [hit]
        parts = spec.split("/")
        name_len = 2 if spec.startswith("@") else 1
        name, rest = "/".join(parts[:name_len]), "/".join(parts[name_len:])
        if name in self._npm:
            d = self._npm[name]
            hit = self._probe(posixpath.join(d, rest)) if rest else None
            if hit is None and not rest:
                main = None
                try:
                    main = json.loads(self.read(posixpath.join(d, "package.json")) or "{}").get("main")
                except (json.JSONDecodeError, AttributeError):
                    pass
                hit = (self._probe(posixpath.join(d, main)) if isinstance(main, str) else None) \
                    or self._probe(posixpath.join(d, "src", "index")) or self._probe(d)
            return [hit] if hit else []
        return []
