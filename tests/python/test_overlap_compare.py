"""test_overlap_compare.py - bench/overlap_compare.py on made-up `tpla gemm-rs` rows: the
overlap efficiency is judged from the times, not from the two or three digits the tool
prints, so an efficiency just under 0.90 is a miss however it was rounded."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "overlap_compare.py")


def tpla_line(time_us, gemm_us, comm_us, eff_printed):
    """One gemm-rs row of the tool's table (columns as in tools/mode_overlap.c)."""
    return ("  gemm-rs     2  bf16   8192   4096   8192      4     peer %9.1f    600.0     100.0"
            " %9.1f %9.1f    1200.0 %s    512.0       0" % (time_us, gemm_us, comm_us, eff_printed))


def verdict(tmp_path, time_us, gemm_us, comm_us, eff_printed):
    log = tmp_path / "rs.log"
    log.write_text("# tpla gemm-rs\n" + tpla_line(time_us, gemm_us, comm_us, eff_printed) + "\n")
    torch = tmp_path / "torch.jsonl"
    torch.write_text(json.dumps(dict(op="gemm-rs", M=8192, K=4096, N=8192, fused_us=1100.0,
                                     serial_us=1200.0)) + "\n")
    out = subprocess.run([sys.executable, SCRIPT, "--tpla", str(log), "--torch", str(torch)],
                         check=True, capture_output=True, text=True).stdout
    return next(line for line in out.splitlines() if line.strip().startswith("gemm-rs"))


def test_efficiency_just_under_the_target_misses(tmp_path):
    row = verdict(tmp_path, 1000.0, 895.4, 500.0, "0.90")   # 0.8954, printed 0.90
    assert "eff MISS by 0.005" in row
    assert " 0.895 " in row


def test_efficiency_on_the_target_passes(tmp_path):
    row = verdict(tmp_path, 1000.0, 500.0, 900.0, "0.90")   # comm-bound, exactly 0.900
    assert "eff PASS" in row
