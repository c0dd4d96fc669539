"""The comparison with torch.autocast (python -m fpsim.torch.autocast) and the bridge's
benchmark (python -m fpsim.torch.bench), on small sizes; docs/torch.md quotes their full
runs."""

import json

import pytest

torch = pytest.importorskip("torch")

from fpsim.torch import autocast  # noqa: E402
from fpsim.torch import bench as torch_bench  # noqa: E402


def test_the_autocast_comparison_writes_its_record(tmp_path, capsys):
    out = tmp_path / "record.json"
    assert autocast.main(["--steps", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert set(record["models"]) == {"mlp", "cnn"}
    for rows in record["models"].values():
        assert sorted(rows) == sorted(autocast.RUNS)
        assert rows["float32"]["weights_vs_float32"] == 0.0
        for run in ("emulate bf16", "emulate mixed"):
            # autocast's first layer is one rounding of the products and the cast bias
            assert rows[run]["first_layer_one_rounding_same_bits"] > 0.99
    assert "| mlp | emulate bf16 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        autocast.main(["--steps", "-1"])


def test_the_bridge_benchmark_runs(capsys):
    rows = torch_bench.run(n=64, repeats=1)
    assert [(fmt, mode) for fmt, mode, *_ in rows] == list(torch_bench.CASES)
    assert all(numpy_ms > 0 and torch_ms > 0 and ratio > 0
               for _, _, numpy_ms, torch_ms, ratio in rows)
    assert torch_bench.main(["-n", "64", "--repeats", "1"]) == 0
    assert "x numpy" in capsys.readouterr().out
    for bad in (["-n", "0"], ["--repeats", "0"], ["-n", "x"]):
        with pytest.raises(SystemExit):
            torch_bench.main(bad)
