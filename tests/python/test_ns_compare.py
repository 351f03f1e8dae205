"""test_ns_compare.py - bench/ns_compare.py on made-up rows: issue #3's verdicts at
1 and 2 GPUs (each one able to go either way), and the 4-GPU table of issue #7,
which shows the same columns with no verdict."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "ns_compare.py")


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def tpla_row(shape, gpus, ms, gram="bf16", tmax_ms=None):
    """time_ms is rank 0's median, tmax_ms (default: the same) the slowest rank's."""
    return dict(shape=shape, gpus=gpus, gram=gram, time_ms=ms, algorithm="GRAM_SHARDED",
                iteration="x", orth_max=0.27, ws_bytes=1 << 20,
                tmax_ms=ms if tmax_ms is None else tmax_ms)


def torch_row(shape, gpus, variant, ms):
    return dict(shape=shape, gpus=gpus, variant=variant, time_ms=ms, orth_max=0.30)


def compare(tmp_path, two_gpu_ms, two_gpu_tmax_ms=None):
    """ns_compare's output for 8192^2: 1 GPU 18 ms (PyTorch 26), 2 GPUs two_gpu_ms on rank 0
    (two_gpu_tmax_ms on the slowest rank; PyTorch 20 and 27), 4 GPUs 5.5 ms."""
    s = "8192x8192"
    write(tmp_path / "tpla_1gpu.jsonl", [tpla_row(s, 1, 18.0)])
    write(tmp_path / "tpla_2gpu.jsonl", [tpla_row(s, 2, two_gpu_ms, tmax_ms=two_gpu_tmax_ms)])
    write(tmp_path / "tpla_4gpu.jsonl", [tpla_row(s, 4, 5.5)])
    write(tmp_path / "torch_1gpu.jsonl", [torch_row(s, 1, "torch_1gpu", 26.0)])
    write(tmp_path / "torch_2gpu.jsonl", [torch_row(s, 2, "torch_gram_ar", 20.0),
                                          torch_row(s, 2, "torch_gather", 27.0)])
    write(tmp_path / "torch_4gpu.jsonl", [torch_row(s, 4, "torch_gram_ar", 11.0)])
    out = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path)], check=True,
                         capture_output=True, text=True).stdout
    return out


def verdict_line(out, what):
    return next(line for line in out.splitlines() if line.strip().startswith(what))


def test_two_gpu_verdicts_follow_the_times(tmp_path):
    fast = compare(tmp_path, 9.9)    # 0.495x the better PyTorch, 1.82x over 1 GPU
    assert "PASS 0.49x" in verdict_line(fast, "2 GPUs 8192x8192 (bf16 Gram) vs PyTorch")
    assert "PASS 1.82x" in verdict_line(fast, "2 GPUs 8192x8192 (bf16 Gram) vs tpla 1 GPU")
    assert "PASS time 0.69x" in verdict_line(fast, "1 GPU 8192x8192 (bf16 Gram)")
    slow = compare(tmp_path, 13.5)   # 0.675x, 1.33x
    assert "MISS 0.68x" in verdict_line(slow, "2 GPUs 8192x8192 (bf16 Gram) vs PyTorch")
    assert "MISS 1.33x" in verdict_line(slow, "2 GPUs 8192x8192 (bf16 Gram) vs tpla 1 GPU")


def test_two_gpu_verdicts_take_the_slowest_rank(tmp_path):
    out = compare(tmp_path, 9.9, two_gpu_tmax_ms=10.5)  # rank 0 1.82x, the slowest 1.71x
    assert "MISS 1.71x" in verdict_line(out, "2 GPUs 8192x8192 (bf16 Gram) vs tpla 1 GPU")


def test_four_gpu_table_has_no_verdicts(tmp_path):
    out = compare(tmp_path, 9.9)
    table = out.split("## 4 GPUs")[1].split("##")[0]
    assert "no targets (issue #7)" in table
    row = next(line for line in table.splitlines() if line.startswith("8192x8192"))
    cells = row.split()
    assert cells[3] == "5.500" and cells[4] == "11.000"   # tpla, PyTorch's Gram all-reduce
    assert cells[6] == "0.50" and cells[9] == "3.27"       # ratio, speed-up over 1 GPU
    assert "PASS" not in table and "MISS" not in table
    assert not any(line.strip().startswith("4 GPUs") for line in out.splitlines())
    assert out.rstrip().endswith("3 PASS, 0 MISS, 0 n/a")
