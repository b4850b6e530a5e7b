"""Module resolution for Java, Go, C/C++ and Rust (the rules are listed in resolve.py).

A mixin of `resolve.Resolver`: it uses the resolver's `paths`, `read` and `_nearest`.
"""
from __future__ import annotations

import posixpath
import re
import sys
from collections import defaultdict

from repoguard.analyzers.imports_lang import RawImport

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def common_prefix_len(a: str, b: str) -> int:
    """How many leading path components ("/"-separated) `a` and `b` share."""
    n = 0
    for x, y in zip(a.split("/"), b.split("/")):
        if x != y:
            break
        n += 1
    return n


def closest(importer: str, candidates: Iterable[str]) -> list[str]:
    """Of `candidates`, the one sharing the most leading path components with `importer` (the first in
    sorted order on a tie), as a list of at most one; all of them when there are fewer than two."""
    cands = sorted(set(candidates))
    if len(cands) <= 1:
        return cands
    best = max(common_prefix_len(importer, c) for c in cands)
    return [c for c in cands if common_prefix_len(importer, c) == best][:1]



class NativeResolution:
    """Java, Go, C/C++ and Rust resolution over `self.paths`."""

    # -- java -----------------------------------------------------------------------------------
    def _java_index(self, packages: dict[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
        classes: dict[str, str] = {}
        by_package: dict[str, list[str]] = defaultdict(list)
        for path, pkg in packages.items():
            stem = posixpath.splitext(posixpath.basename(path))[0]
            classes[f"{pkg}.{stem}" if pkg else stem] = path
            by_package[pkg].append(path)
        return classes, by_package

    def _java_resolve(self, raw: RawImport) -> list[str]:
        classes, by_package = self._java
        if raw.kind == "wildcard":
            if raw.target in by_package:
                return sorted(by_package[raw.target])
        parts = raw.target.split(".")
        if raw.kind == "static":
            parts = parts[:-1]
        while parts:  # nested classes: a.b.Outer.Inner lives in a/b/Outer.java
            hit = classes.get(".".join(parts))
            if hit:
                return [hit]
            parts = parts[:-1]
        return []

    # -- go -------------------------------------------------------------------------------------
    def _go_modules(self) -> list[tuple[str, str]]:
        mods = []
        for p in self.paths:
            d, base = posixpath.split(p)
            if base != "go.mod":
                continue
            m = re.search(r"^\s*module\s+(\S+)", self.read(p) or "", re.M)
            if m:
                mods.append((m.group(1).strip('"'), d))
        return sorted(mods, key=lambda x: -len(x[0]))

    def _go_resolve(self, spec: str) -> list[str]:
        for module, d in self._go:
            if spec == module or spec.startswith(module + "/"):
                folder = posixpath.join(d, spec[len(module) + 1:]) if spec != module else d
                folder = folder.strip("/")
                return sorted(p for p in self.paths if posixpath.dirname(p) == folder
                              and p.endswith(".go") and not p.endswith("_test.go"))
        return []

    # -- c / c++ --------------------------------------------------------------------------------
    def _c(self, importer: str, raw: RawImport) -> list[str]:
        spec = raw.target
        if raw.kind == "local":
            cand = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
            if cand in self.paths:
                return [cand]
        elif "/" not in spec:
            return []
        spec = posixpath.normpath(spec)
        hits = [p for p in self._suffix.get(posixpath.basename(spec), ())
                if p == spec or p.endswith("/" + spec)]
        return closest(importer, hits)

    # -- rust -----------------------------------------------------------------------------------
    def _rust_crates(self) -> tuple[dict[str, str], dict[str, str]]:
        crates: dict[str, str] = {}    # crate folder → src folder
        names: dict[str, str] = {}     # crate name (with _) → crate folder
        for p in self.paths:
            d, base = posixpath.split(p)
            if base != "Cargo.toml":
                continue
            src = posixpath.join(d, "src") if d else "src"
            crates[d] = src
            try:
                name = tomllib.loads(self.read(p) or "").get("package", {}).get("name")
            except (tomllib.TOMLDecodeError, AttributeError):
                name = None
            if isinstance(name, str):
                names[name.replace("-", "_")] = d
        return crates, names

    def _rust_root_file(self, src: str) -> str | None:
        for f in ("lib.rs", "main.rs"):
            if posixpath.join(src, f) in self.paths:
                return posixpath.join(src, f)
        return None

    def _rust_module_of(self, path: str) -> tuple[str, list[str]] | None:
        """(src folder, module segments) of a .rs file inside a crate's src/, else None."""
        d, cfg = self._nearest(self._crates, path)
        if cfg is None:
            return None
        src = cfg
        if not path.startswith(src + "/"):
            return None
        rel = path[len(src) + 1:][:-3].split("/")
        if rel in (["lib"], ["main"]):
            return src, []
        if rel[-1] == "mod":
            rel = rel[:-1]
        return src, rel

    def _rust_file(self, src: str, segs: list[str]) -> str | None:
        if not segs:
            return self._rust_root_file(src)
        stem = posixpath.join(src, *segs)
        for cand in (stem + ".rs", posixpath.join(stem, "mod.rs")):
            if cand in self.paths:
                return cand
        return None

    def _rust(self, importer: str, raw: RawImport) -> list[str]:
        here = self._rust_module_of(importer)
        if raw.kind == "mod":
            if here is None:
                d = posixpath.dirname(importer)
                for cand in (posixpath.join(d, raw.target + ".rs"), posixpath.join(d, raw.target, "mod.rs")):
                    if cand in self.paths:
                        return [cand]
                return []
            src, mod = here
            f = self._rust_file(src, mod + [raw.target])
            return [f] if f else []
        segs = [s for s in raw.target.split("::") if s and s != "*"]
        if not segs:
            return []
        src, base = (here if here else (None, []))
        first = segs[0]
        if first == "crate":
            segs = segs[1:]
        elif first in ("self", "super"):
            base = list(base)
            while segs and segs[0] in ("self", "super"):
                if segs.pop(0) == "super":
                    if not base:
                        return []
                    base.pop()
            segs = base + segs
        elif first in self._crate_names and raw.target.split("::")[0] in (first, ""):
            src = self._crates[self._crate_names[first]]
            segs = segs[1:]
        elif src is not None and self._rust_file(src, base + [first]):
            segs = base + segs
        else:
            return []
        if src is None:
            return []
        for n in range(len(segs), -1, -1):
            f = self._rust_file(src, segs[:n])
            if f:
                return [f]
        return []
