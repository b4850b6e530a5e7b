"""C/C++ includes: next to the includer first, then the closest path suffix."""
from __future__ import annotations

from analyzer_helpers import graph_of, make_repo


def test_resolution(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "alpha/include/alpha/signal.h": "int s(void);\n",
        "alpha/src/signal.c": '#include "alpha/signal.h"\n#include <stdio.h>\n#include "local.h"\n',
        "alpha/src/local.h": "",
        "other/local.h": "",
        "app/main.cpp": '#include <alpha/signal.h>\n#include "util.hpp"\n#include <vector>\n',
        "app/util.hpp": "",
    })
    ig, edges = graph_of(repo)
    assert edges == sorted([
        ("alpha/src/signal.c", "alpha/include/alpha/signal.h"),
        ("alpha/src/signal.c", "alpha/src/local.h"),
        ("app/main.cpp", "alpha/include/alpha/signal.h"),
        ("app/main.cpp", "app/util.hpp"),
    ])
    assert ig.external == 2  # stdio.h, vector
