"""bench/gpu.py stays runnable: its --smoke path (tiny config, CPU, bf16 autocast) runs both arms
and reports every field; without CUDA the full benchmark exits with one line."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "bench" / "gpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_runs_both_arms_and_reports_the_split(tmp_path):
    out = tmp_path / "gpu.json"
    assert _bench().main(["--smoke", "--lengths", "24", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["precision"] == "bf16" and res["lora_parameters"] > 0
    (row,) = res["rows"]
    assert row["length"] == 24 and row["micro_batch_size"] == 4 and row["ratio_dp_over_no_dp"] > 0
    for arm in ("dp", "no_dp"):
        assert row[arm]["tokens_per_s"] > 0
        split = row[arm]["ms_per_step"]
        assert split["forward"] > 0 and split["backward"] > 0 and split["optimizer"] > 0
    assert row["dp"]["ms_per_step"]["noise"] > 0 and row["no_dp"]["ms_per_step"]["noise"] == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: the full benchmark would run")
def test_without_cuda_the_benchmark_exits_with_one_line():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py")], capture_output=True, text=True,
                       cwd=ROOT, timeout=1800)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "CUDA is not available" in r.stderr
