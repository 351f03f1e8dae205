"""test_fp8_overlap.py - the FP8 overlapped GEMMs of tpla.torch (ag_gemm, gemm_rs,
gemm_ar with scale_a / scale_b / use_fast_accum / b_version, as torch._scaled_mm)
on the host executor: one rank against float64 products of the dequantized
inputs, the gathered FP8 bytes and scales, b_version's reuse of the transposed
B, scales that are per call (not in the plan cache), bad inputs; and two
processes (gloo) whose ranks quantize with different scales (checks_fp8.py).
"""
import pytest
import torch

import tpla
import tpla.torch as tt
from checks_fp8 import E4M3, E5M2, assert_close, dequantized_product, quantized

pytestmark = pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"),
                                reason="torch without float8 dtypes")

OPS = ("ag_gemm", "gemm_rs", "gemm_ar")
REL = 1e-5  # the host emulation sums in float32


@pytest.fixture
def comm():
    c = tt.Communicator.local("cpu", timeout=60)
    yield c
    c.close()


def scalar(value, shape=()):
    return torch.full(shape, value, dtype=torch.float32)


def call(op, a, b, comm, **kw):
    return getattr(tt, op)(a, b, comm, **kw)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("transpose_b", [True, False])
@pytest.mark.parametrize("fast", [False, True])
def test_fp8_ops_match_float64_of_dequantized_inputs(comm, op, transpose_b, fast):
    k, n = 24, 9
    a = quantized((13, k), 1)
    b = quantized((n, k) if transpose_b else (k, n), 2, E5M2 if fast else E4M3)
    sa, sb = 0.375, 1.75  # shape () and (1,): both are one element
    d = call(op, a, b, comm, transpose_b=transpose_b, scale_a=scalar(sa),
             scale_b=scalar(sb, (1,)), use_fast_accum=fast, out_dtype=torch.float32)
    want, bound = dequantized_product(a, sa, b, sb, transpose_b)
    assert d.dtype == torch.float32 and d.shape == want.shape
    assert_close(d, want, bound, REL)


@pytest.mark.parametrize("op", OPS)
def test_fp8_output_defaults_to_bfloat16_and_scales_to_one(comm, op):
    a = quantized((16, 32), 3)
    w = quantized((16, 32), 4)
    d = call(op, a, w, comm)
    assert d.dtype == torch.bfloat16
    want, bound = dequantized_product(a, 1.0, w, 1.0, True)
    assert_close(d, want, bound, REL)
    bias = torch.randn(16, generator=torch.Generator().manual_seed(5)).to(torch.float16)
    d16 = call(op, a, w, comm, out_dtype=torch.float16, bias=bias, scale_b=scalar(0.5))
    want, bound = dequantized_product(a, 1.0, w, 0.5, True)
    assert d16.dtype == torch.float16
    # two roundings: the host executor rounds the product to fp16, then adds the bias
    assert_close(d16, want + bias.double(), bound, REL, roundings=2)


def test_fp8_ag_gemm_returns_the_gathered_bytes_and_scales(comm):
    a = quantized((11, 16), 6)
    w = quantized((7, 16), 7)
    d, gathered, scales = tt.ag_gemm(a, w, comm, scale_a=scalar(0.625), scale_b=scalar(2.0),
                                     out_dtype=torch.float32, return_gathered=True)
    want, bound = dequantized_product(a, 0.625, w, 2.0, True)
    assert_close(d, want, bound, REL)
    assert gathered.dtype == E4M3 and gathered.shape == a.shape
    assert torch.equal(gathered.view(torch.uint8), a.view(torch.uint8))
    assert scales.dtype == torch.float32 and scales.shape == (1,)
    assert scales.tolist() == [0.625]
    _, _, scales = tt.ag_gemm(a, w, comm, return_gathered=True)  # no scale_a: 1.0 travels
    assert scales.tolist() == [1.0]
    # non-FP8 plans keep returning (D, gathered)
    res = tt.ag_gemm(a.float(), w.float(), comm, return_gathered=True)
    assert len(res) == 2 and torch.equal(res[1], a.float())


@pytest.mark.parametrize("op", OPS)
def test_fp8_b_version_reuses_the_transposed_b(comm, op):
    """transpose_b=False: the plan transposes b and keeps it while b's pointer and
    a nonzero b_version stay; the contract says b is unchanged then, so changing
    it without a new version gives the old result (how the test sees the reuse)."""
    a = quantized((12, 16), 8)
    b = quantized((16, 10), 9)
    old = b.clone()
    kw = dict(transpose_b=False, scale_a=scalar(0.5), scale_b=scalar(1.5),
              out_dtype=torch.float32)
    want_old, bound_old = dequantized_product(a, 0.5, old, 1.5, False)
    assert_close(call(op, a, b, comm, b_version=7, **kw), want_old, bound_old, REL)
    b.copy_(quantized((16, 10), 10))
    want_new, bound_new = dequantized_product(a, 0.5, b, 1.5, False)
    assert (want_new - want_old).abs().max() > 1
    assert_close(call(op, a, b, comm, b_version=7, **kw), want_old, bound_old, REL)  # stale
    assert_close(call(op, a, b, comm, b_version=8, **kw), want_new, bound_new, REL)
    b.copy_(quantized((16, 10), 11))  # version 0: transposed every call
    want0, bound0 = dequantized_product(a, 0.5, b, 1.5, False)
    assert_close(call(op, a, b, comm, b_version=0, **kw), want0, bound0, REL)
    b2 = quantized((16, 10), 12)  # another pointer with the same version: fresh
    want2, bound2 = dequantized_product(a, 0.5, b2, 1.5, False)
    assert_close(call(op, a, b2, comm, b_version=8, **kw), want2, bound2, REL)


@pytest.mark.parametrize("op", OPS)
def test_fp8_scales_are_per_call_not_in_the_plan_cache(comm, op):
    a = quantized((16, 16), 13)
    w = quantized((8, 16), 14)
    sa, sb = scalar(0.25), scalar(4.0)
    kw = dict(out_dtype=torch.float32, use_fast_accum=False)
    call(op, a, w, comm, scale_a=sa, scale_b=sb, **kw)
    plans = dict(comm._plans)
    sa.fill_(3.0)  # the same tensor with another value, then other tensors: one plan
    d = call(op, a, w, comm, scale_a=sa, scale_b=sb, **kw)
    assert_close(d, *dequantized_product(a, 3.0, w, 4.0, True), REL)
    d = call(op, a, w, comm, scale_a=scalar(0.125), scale_b=None, use_fast_accum=True,
             b_version=5, out_dtype=torch.float32)
    assert_close(d, *dequantized_product(a, 0.125, w, 1.0, True), REL)
    assert comm._plans == plans
    call(op, a, w, comm)  # another output dtype (bf16) is another plan
    assert len(comm._plans) == len(plans) + 1


@pytest.mark.parametrize("op", OPS)
def test_fp8_arguments_on_other_dtypes_are_errors(comm, op):
    x = torch.randn(8, 16).bfloat16()
    w = torch.randn(4, 16).bfloat16()
    fn = "tpla.torch.%s: argument " % op
    for kw, name in ((dict(scale_a=scalar(1.0)), "scale_a"), (dict(scale_b=scalar(1.0)), "scale_b"),
                     (dict(use_fast_accum=True), "use_fast_accum")):
        with pytest.raises(tpla.InvalidArgumentError, match=fn + "'%s'.*float8" % name):
            call(op, x, w, comm, **kw)
    call(op, x, w, comm, b_version=3)  # ignored by non-FP8 plans, as in C


@pytest.mark.parametrize("op", OPS)
def test_fp8_bad_scales_are_errors_that_name_the_argument(comm, op):
    a = quantized((8, 16), 15)
    w = quantized((4, 16), 16)
    out = torch.full((8, 4), 7.0)
    fn = "tpla.torch.%s: argument " % op
    bad = [(dict(scale_b=torch.ones(2)), "'scale_b'.*one element.*\\(2,\\)"),
           (dict(scale_a=torch.ones(1, 1)), "'scale_a'.*one element.*\\(1, 1\\)"),
           (dict(scale_a=torch.ones((), dtype=torch.float64)), "'scale_a'.*float32.*float64"),
           (dict(scale_b=torch.ones((), dtype=torch.bfloat16)), "'scale_b'.*float32"),
           (dict(scale_a=0.5), "'scale_a' must be a float32 torch.Tensor.*float"),
           (dict(scale_b=torch.ones((), device="meta")), "'scale_b' is on meta"),
           (dict(b_version=-1), "'b_version'"), (dict(b_version=1.5), "'b_version'"),
           (dict(b_version=1 << 64), "'b_version'")]
    for kw, pattern in bad:
        with pytest.raises(tpla.InvalidArgumentError, match=fn + pattern):
            call(op, a, w, comm, out=out, out_dtype=torch.float32, **kw)
        assert bool((out == 7).all()), "out was written by a rejected call"
    with pytest.raises(tpla.Error):  # FP8 outputs: the C plans reject them
        call(op, a, w, comm, out_dtype=E4M3)


def test_two_ranks_with_different_scales_match_float64():
    import checks_fp8
    import dist_util
    errors = dist_util.run(2, checks_fp8.check_fp8_overlap, "cpu")
    print("max errors per rank:", errors)
