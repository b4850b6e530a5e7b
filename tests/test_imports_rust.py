"""Rust: use-trees, crate/self/super paths, `mod x;`, workspace crates."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo

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
