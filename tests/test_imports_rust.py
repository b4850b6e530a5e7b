"""Rust: use-trees, crate/self/super paths, `mod x;`, workspace crates."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo

from repoguard.analyzers.imports import carriers
from repoguard.analyzers.imports_lang import extract


def test_use_trees_expand():
    got = extract("rust", b"use crate::a::{b, c::d as e, f::*};\nuse super::g;\nmod h;\n"
                          b"pub mod i { fn x() {} }\n").imports
    assert [(i.line, i.kind, i.target) for i in got] == [
        (1, "use", "crate::a::b"), (1, "use", "crate::a::c::d"), (1, "use", "crate::a::f::*"),
        (2, "use", "super::g"), (3, "mod", "h")]


def test_resolution(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "alpha/Cargo.toml": '[package]\nname = "alpha-core"\nversion = "0.1.0"\n',
        "alpha/src/lib.rs": "pub mod signal;\nmod util;\n",
        "alpha/src/signal/mod.rs": "use super::util::helper;\npub mod inner;\n",
        "alpha/src/signal/inner.rs": "use crate::signal::{self};\n",
        "alpha/src/util.rs": "",
        "app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\n',
        "app/src/main.rs": "use alpha_core::signal::inner::Thing;\nuse std::io;\nuse serde::Deserialize;\n",
    })
    ig, edges = graph_of(repo)
    assert edges == sorted([
        ("alpha/src/lib.rs", "alpha/src/signal/mod.rs"),
        ("alpha/src/lib.rs", "alpha/src/util.rs"),
        ("alpha/src/signal/mod.rs", "alpha/src/util.rs"),
        ("alpha/src/signal/mod.rs", "alpha/src/signal/inner.rs"),
        ("alpha/src/signal/inner.rs", "alpha/src/signal/mod.rs"),
        ("app/src/main.rs", "alpha/src/signal/inner.rs"),
    ])
    assert ig.external == 2


def test_mod_declarations_contain_but_do_not_carry(tmp_path):
    """`mod a; mod b;` puts a.rs and b.rs in the crate; only the module that *uses* the secret
    crate carries it. Both go back up with `use crate::VERSION`, so counting `mod` edges would
    make lib.rs, a.rs and b.rs one cycle and tie b.rs (and lib.rs) at one hop."""
    repo = make_repo(tmp_path / "r", {
        "secret/Cargo.toml": '[package]\nname = "secret-core"\nversion = "0.1.0"\n',
        "secret/src/lib.rs": "pub fn key() {}\n",
        "app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\n',
        "app/src/lib.rs": "mod a;\nmod b;\nmod c;\npub const VERSION: u32 = 1;\n",
        "app/src/a.rs": "use secret_core::key;\nuse crate::VERSION;\npub fn run() {}\n",
        "app/src/b.rs": "use crate::VERSION;\n",
        "app/src/c.rs": "use crate::a::run;\n",
    })
    ig, _ = graph_of(repo)
    assert ig.graph.edges["app/src/lib.rs", "app/src/a.rs"]["contains"]
    assert ig.imported_by("app/src/lib.rs") == ["app/src/a.rs", "app/src/b.rs", "app/src/c.rs"]
    assert sorted(carriers(ig, ["secret/src/lib.rs"], 1)) == ["app/src/a.rs"]
    # c.rs really uses a.rs: two hops, through a use; lib.rs and b.rs never carry it.
    deep = carriers(ig, ["secret/src/lib.rs"], 5)
    assert deep == {"app/src/a.rs": (1, ["app/src/a.rs", "secret/src/lib.rs"]),
                    "app/src/c.rs": (2, ["app/src/c.rs", "app/src/a.rs", "secret/src/lib.rs"])}


def test_mod_then_use_of_the_same_file_carries(tmp_path):
    """A `use` of a module declared in the same file is a real use: it carries, cited by its line."""
    repo = make_repo(tmp_path / "r", {
        "secret/Cargo.toml": '[package]\nname = "secret-core"\nversion = "0.1.0"\n',
        "secret/src/lib.rs": "",
        "app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\n',
        "app/src/main.rs": "mod a;\nuse a::run;\n",
        "app/src/a.rs": "use secret_core::key;\n",
    })
    ig, _ = graph_of(repo)
    edge = ig.graph.edges["app/src/main.rs", "app/src/a.rs"]
    assert (edge["line"], edge["spec"], edge["contains"]) == (2, "use a::run", False)
    assert sorted(carriers(ig, ["secret/src/lib.rs"], 2)) == ["app/src/a.rs", "app/src/main.rs"]


def test_resolutions_are_cached_until_the_resolver_inputs_change(tmp_path, monkeypatch):
    """A warm build resolves nothing (no Resolver is built); a changed blob re-resolves, and a
    changed Cargo.toml (a crate renamed) invalidates every cached resolution."""
    from analyzer_helpers import commit

    from repoguard.analyzers import imports as imports_analyzer
    from repoguard.source.gitrepo import GitRepo

    root = tmp_path / "r"
    make_repo(root, {
        "core/Cargo.toml": '[package]\nname = "core-lib"\nversion = "0.1.0"\n',
        "core/src/lib.rs": "",
        "app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\n',
        "app/src/main.rs": "use core_lib::x;\n",
    })
    cache: dict = {}
    build = lambda: imports_analyzer.build_graph(  # noqa: E731
        GitRepo(root), {f.path: f.blob_sha for f in GitRepo(root).tracked_files()}, cache=cache)
    cold = sorted(build().graph.edges())
    assert cold == [("app/src/main.rs", "core/src/lib.rs")]

    real = imports_analyzer.Resolver
    built = []
    monkeypatch.setattr(imports_analyzer, "Resolver", lambda *a, **kw: built.append(1) or real(*a, **kw))
    assert sorted(build().graph.edges()) == cold and built == []

    commit(root, {"app/src/main.rs": "use core_lib::x;\nuse std::io;\n"}, "edit")
    assert sorted(build().graph.edges()) == cold and built == [1]

    commit(root, {"core/Cargo.toml": '[package]\nname = "core-two"\nversion = "0.1.0"\n'}, "rename")
    assert sorted(build().graph.edges()) == [] and built == [1, 1]
