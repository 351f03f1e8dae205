"""predict_tp.py - model of tpla's times at TP = 4 and 8 from the 2-GPU figures.

No 4- or 8-GPU machine has been lent yet (issue #7), so this predicts what
those runs should show, from quantities measured on 2x H200 (bench/results/
2026-11-29-run1 and -run3):
  - GEMM rate: cuBLASLt bf16 8192^3 at 798 TFLOP/s; the NS step's GEMMs
    (block rows of the symmetric products, the update) reach an effective
    rate calibrated from the measured 2-GPU NS time per step;
  - links: one GPU receives at most ~390 GB/s over NVLink (copy-engine peer
    copy, DESIGN.md), NCCL all-reduce bus bandwidth ~240 GB/s at 32-128 MB;
  - schedules: the Gram all-reduce of each block row hides behind the next
    block row's GEMM except the last one; REDISTRIBUTE's two all-to-alls
    are not hidden.
It prints the model's inputs and a table; docs/PERFORMANCE.md quotes it.
  python3 bench/predict_tp.py
"""
NB = 4           # symmetric block rows (src/core/ns_cost.c)
SYM = (NB + 1) / NB
ALLREDUCE_BUSBW = 240e9
ALLTOALL_BW = 390e9
LATENCY = 20e-6
STEPS = 5


def ns_step_flops(s, l, update):
    """FLOPs of one step on one rank: s = short side, l = this rank's long side."""
    gram = s * s * l * SYM
    if update == "square":
        return gram + s ** 3 * SYM + 2 * s * s * l
    return gram + 4 * s * s * l  # chain: Y = A X, X = aX + A(bX + cY)


def ns_time(m, n, p, rate, bytes_per=2):
    s, l = min(m, n), max(m, n)
    lp = l / p
    update = "square" if ns_step_flops(s, lp, "square") <= ns_step_flops(s, lp, "chain") \
        else "chain"
    compute = ns_step_flops(s, lp, update) / rate
    # the last block row's all-reduce is exposed: 1/NB of the Gram
    ar = 0.0 if p == 1 else LATENCY * NB + 2 * (p - 1) / p * (s * s * bytes_per / NB) \
        / ALLREDUCE_BUSBW
    redistribute = 0.0
    if m < n and p > 1:  # short side sharded: two all-to-alls per call
        redistribute = 2 * (p - 1) / p * (m / p * n * bytes_per) / ALLTOALL_BW
    return STEPS * (compute + ar) + redistribute, update


def main():
    # calibration: measured 2-GPU bf16-Gram times (run 3) -> effective GEMM rate
    measured = {(16384, 4096): 5.310e-3, (8192, 8192): 13.208e-3, (14336, 4096): 4.860e-3}
    rates = []
    for (m, n), t in measured.items():
        s, l = min(m, n), max(m, n)
        lp = l / 2
        upd = "square" if ns_step_flops(s, lp, "square") <= ns_step_flops(s, lp, "chain") \
            else "chain"
        rates.append(STEPS * ns_step_flops(s, lp, upd) / t)
    rate = sum(rates) / len(rates)
    print(f"# effective NS GEMM rate from the 2-GPU runs: {rate / 1e12:.0f} TFLOP/s "
          f"(each: {', '.join(f'{r / 1e12:.0f}' for r in rates)})")
    print("# Newton-Schulz, bf16, 5 Muon steps, rows sharded; predicted ms")
    print(f"#{'shape':>12} {'P=1':>8} {'P=2':>8} {'P=4':>8} {'P=8':>8}  update(P=8)")
    for m, n in [(8192, 8192), (16384, 4096), (4096, 14336), (14336, 4096), (16384, 16384)]:
        row = [ns_time(m, n, p, rate) for p in (1, 2, 4, 8)]
        print(f" {m:>5}x{n:<6} " + " ".join(f"{t * 1e3:8.2f}" for t, _ in row) +
              f"  {row[-1][1]}")

    print("# AllGather+GEMM, same global problem split over P (M rows, K, N total); ms")
    print(f"#{'M,K,N':>20} {'P':>3} {'T_gemm':>8} {'T_ag':>8} {'ideal':>8}")
    gemm_rate = 798e12 * 0.92  # the local GEMMs are smaller than 8192^3
    for m, k, n in [(8192, 8192, 8192), (16384, 8192, 28672), (32768, 8192, 8192)]:
        for p in (2, 4, 8):
            t_gemm = 2 * m * k * (n / p) / gemm_rate
            t_ag = (p - 1) / p * m * k * 2 / ALLTOALL_BW
            print(f" {m:>6},{k},{n:<6} {p:>3} {t_gemm * 1e3:8.3f} {t_ag * 1e3:8.3f} "
                  f"{max(t_gemm, t_ag) * 1e3:8.3f}")


if __name__ == "__main__":
    main()
