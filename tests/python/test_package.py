"""test_package.py - the tpla package's plumbing in one process: error translation (the
C status and tpla_last_error() reach Python as the right tpla.Error subclass), struct
layouts and the descriptors' defaults against a C compiler and the header, the library
search and its failure message, bad inputs, version counters, the plan cache, and
`pip install`. test_local.py has the local computations, test_muon.py the optimizer."""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

import tpla
import tpla.torch as tt
from tpla import _core, _lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_error_classes_and_c_messages():
    assert issubclass(tpla.InvalidArgumentError, tpla.Error)
    assert issubclass(tpla.InvalidArgumentError, ValueError)
    assert issubclass(tpla.TimeoutError, TimeoutError)
    assert issubclass(tpla.OutOfMemoryError, MemoryError)
    with _core.Context.single_host() as ctx:
        a = torch.zeros(3, 4)
        d = torch.zeros(3, 5)
        with pytest.raises(tpla.InvalidArgumentError) as e:  # inner sizes differ
            ctx.gemm(tt._tensors.matrix(d, "t", "d"), tt._tensors.matrix(a, "t", "a"),
                     _lib.OP_N, tt._tensors.matrix(a, "t", "b"), _lib.OP_N)
        assert e.value.status == 1 and e.value.status_name == "TPLA_ERROR_INVALID_ARGUMENT"
        assert e.value.detail.startswith("tpla_gemm: argument 'b'"), e.value.detail
        assert "inner sizes differ" in str(e.value)
        with pytest.raises(tpla.InvalidArgumentError, match="root"):
            ctx.broadcast(a.data_ptr(), 4, _lib.FLOAT32, 3)
    with pytest.raises(tpla.InvalidUsageError, match="closed"):
        ctx.barrier()
    assert _core.status_string(9) == "TPLA_ERROR_TIMEOUT"
    err = tpla._errors.error_for(99, "x")
    assert type(err) is tpla.Error and err.status == 99


STRUCTS = {
    "tpla_matrix_t": _lib.Matrix, "tpla_config_t": _lib.Config,
    "tpla_features_t": _lib.Features, "tpla_unique_id_t": _lib.UniqueId,
    "tpla_gemm_args_t": _lib.GemmArgs, "tpla_ns_desc_t": _lib.NsDesc,
    "tpla_overlap_args_t": _lib.OverlapArgs, "tpla_ag_gemm_desc_t": _lib.AgGemmDesc,
    "tpla_gemm_rs_desc_t": _lib.GemmRsDesc, "tpla_gemm_ar_desc_t": _lib.GemmArDesc,
    "tpla_overlap_info_t": _lib.OverlapInfo, "tpla_counters_t": _lib.Counters,
    "tpla_fp8_scaling_t": _lib.Fp8Scaling,
}


def run_c(body):
    """Compile and run a C program (stdio.h, stddef.h and tpla.h included; `body`, a list of
    statements, is main's); returns its output lines. Skips without a C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "tpla.h"', 'int main(void) {']
    lines += body + ["return 0; }"]
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        subprocess.check_call([cc, "-I", os.path.join(REPO, "include"), src, "-o", exe])
        return list(filter(None, subprocess.check_output([exe]).decode().split("\n")))


def test_struct_layouts_match_the_header():
    body = []
    for cname, cls in STRUCTS.items():
        body.append('printf("%s sizeof() %%zu\\n", sizeof(%s));' % (cname, cname))
        for f, _ in cls._fields_:
            body.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, f, cname, f))
    got = {}
    for line in run_c(body):
        name, field, value = line.split()
        got[(name, field)] = int(value)
    import ctypes
    for cname, cls in STRUCTS.items():
        assert got[(cname, "sizeof()")] == ctypes.sizeof(cls), cname
        for f, _ in cls._fields_:
            assert got[(cname, f)] == getattr(cls, f).offset, (cname, f)


def test_library_not_found_says_what_to_do():
    env = dict(os.environ, TPLA_LIBRARY="/nonexistent/libtpla.so")
    code = ("import tpla\ntry:\n    tpla.library_path()\nexcept tpla.LibraryNotFoundError as e:\n"
            "    print('OK', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.startswith("OK"), out.stderr
    assert "TPLA_LIBRARY" in out.stdout and "/nonexistent/libtpla.so" in out.stdout


def test_library_search_leaves_sanitizer_builds_out(tmp_path, monkeypatch):
    # a repository whose newest build is an ASan one: loading it into this interpreter
    # would abort the process (review 95), so the search skips it
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "tpla.h").write_text("")
    (tmp_path / "python" / "tpla").mkdir(parents=True)
    for name, sanitize in (("build-plain", "OFF"), ("build-asan", "ON"), ("build-asan1", "1")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "CMakeCache.txt").write_text("TPLA_SANITIZE:BOOL=%s\n" % sanitize)
        (tmp_path / name / "libtpla.so").write_text("")
    for name in ("build-asan", "build-asan1"):
        os.utime(tmp_path / name / "libtpla.so", (2e9, 2e9))  # the newest
    monkeypatch.delenv("TPLA_LIBRARY", raising=False)
    monkeypatch.setattr(_lib, "__file__", str(tmp_path / "python" / "tpla" / "_lib.py"))
    found, explicit = _lib._candidates()
    assert not explicit
    assert [str(p) for p in found[:-2]] == [str(tmp_path / "build-plain" / "libtpla.so")]


def test_bad_inputs():
    x = torch.randn(6, 4)
    with pytest.raises(tpla.InvalidArgumentError, match="torch.Tensor"):
        tt.newton_schulz(x.numpy())
    with pytest.raises(tpla.InvalidArgumentError, match="must be an int"):
        tt.newton_schulz(x, steps=2.0)
    with pytest.raises(tpla.InvalidArgumentError, match="expanded|strides"):
        tt.newton_schulz(torch.randn(1, 4).expand(6, 4))
    with pytest.raises(tpla.InvalidArgumentError, match="requires grad"):
        p = torch.randn(6, 4, requires_grad=True)
        tt.newton_schulz(p.detach(), out=p)
    with pytest.raises(tpla.InvalidArgumentError, match="algorithm"):
        tt.newton_schulz(x, algorithm="fast")
    with pytest.raises(tpla.InvalidArgumentError, match="momentum"):
        tt.Muon([torch.nn.Parameter(x)], momentum=1.5)


def test_library_writes_bump_the_version_counter():
    """A tensor the library wrote in place is seen as modified by autograd, as after a
    torch in-place op: a backward that saved its old values raises."""
    comm = tt.local_communicator("cpu")
    x = torch.randn(6, 4)
    w = torch.randn(6, 4, requires_grad=True)
    loss = (x * w).sum()  # saves x for backward
    tt.newton_schulz(x, out=x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    a, b = torch.randn(5, 3), torch.randn(4, 3)
    d = torch.zeros(5, 4)
    before = d._version
    tt.gemm_ar(a, b, comm, out=d)
    tt.local_gemm(d, a, b, comm, transpose_b=True, beta=1.0)
    assert d._version >= before + 2
    with torch.inference_mode():  # no version counter there: still works
        assert tt.ag_gemm(torch.randn(5, 3), b, comm).shape == (5, 4)
    # not differentiable: refused rather than silently without a gradient
    w = b.clone().requires_grad_(True)
    with pytest.raises(tpla.InvalidArgumentError, match="argument 'b' requires grad"):
        tt.ag_gemm(a, w, comm)
    with pytest.raises(tpla.InvalidArgumentError, match="argument 'x' requires grad"):
        tt.newton_schulz(torch.randn(6, 4, requires_grad=True))
    with torch.no_grad():
        assert tt.gemm_ar(a, w, comm).shape == (5, 4)


def test_clear_plans():
    comm = tt.Communicator.local("cpu")
    for rows in (5, 6, 7):
        tt.newton_schulz(torch.randn(rows, 4), comm=comm)
    plans = list(comm._plans.values())
    assert len(plans) == 3 and comm.workspace_bytes() > comm.context.workspace_bytes()
    comm.clear_plans()
    assert not comm._plans
    # destroyed, not just forgotten (the context's set held them alive before)
    assert all(not p.handle for p in plans) and not comm.context._plans
    assert tt.newton_schulz(torch.randn(5, 4), comm=comm).shape == (5, 4)
    comm.close()
    comm.clear_plans()  # closed: nothing to do


def test_clear_plans_frees_window_groups():
    """A window group's SERIAL plan is refused while OVERLAP plans live in it: after
    clear_plans none does."""
    comm = tt.Communicator.local("cpu")
    a, b = torch.randn(8, 4), torch.randn(6, 4)
    tt.ag_gemm(a, b, comm, transpose_b=True, mode="overlap", window_group=1)
    with pytest.raises(tpla.InvalidArgumentError, match="window_group 1 holds OVERLAP"):
        tt.ag_gemm(a, b, comm, transpose_b=True, mode="serial", window_group=1)
    comm.clear_plans()
    assert tt.ag_gemm(a, b, comm, transpose_b=True, mode="serial", window_group=1).shape == (8, 6)
    comm.close()


def test_descriptor_defaults_match_the_header_init_macros():
    """new() of every sized struct holds its *_INIT macro's values (scalar fields)."""
    import ctypes
    scalars = (ctypes.c_int, ctypes.c_int64, ctypes.c_size_t, ctypes.c_float, ctypes.c_uint64)
    sized = {c: cls for c, cls in STRUCTS.items() if issubclass(cls, _lib._Sized)}
    body = []
    for cname, cls in sized.items():
        macro = "TPLA_" + cname[len("tpla_"):-len("_t")].upper() + "_INIT"
        body.append("{ %s v = %s;" % (cname, macro))
        for f, t in cls._fields_:
            if t in scalars:
                body.append('printf("%s %s %%.9g\\n", (double)v.%s);' % (cname, f, f))
        body.append("}")
    checked = 0
    for line in run_c(body):
        cname, field, value = line.split()
        got = getattr(sized[cname].new(), field)
        assert got == pytest.approx(float(value), rel=1e-6), (cname, field)
        checked += 1
    assert checked > 40


def test_errors_pickle_as_themselves():
    import pickle
    for e in (tpla.RemoteError("peer 1 left"), tpla.Error("odd", 42)):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and back.status == e.status and str(back) == str(e)


def test_batch_execute_needs_every_matrix():
    comm = tt.Communicator.local("cpu")
    ctx = comm.context
    descs = [_lib.NsDesc.new(local_rows=4, local_cols=3, dtype=_lib.FLOAT32) for _ in range(3)]
    plan = _core.NsBatchPlan(ctx, descs)
    x = torch.randn(4, 3)
    view = _lib.Matrix(x.data_ptr(), 4, 3, 3, _lib.FLOAT32)
    with pytest.raises(tpla.InvalidArgumentError, match="1 matrices for a plan of 3"):
        plan.execute([view])
    with pytest.raises(tpla.InvalidArgumentError, match="2 values for 1 ranks"):
        ctx.allgather_rows(x.data_ptr(), x.data_ptr(), [4, 4])
    comm.close()


def test_pip_install_bundles_the_library():
    pytest.importorskip("setuptools")
    lib = tpla.library_path()
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TPLA_LIBRARY=lib)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--target", d, os.path.join(REPO, "python")],
                       env=env, check=True, capture_output=True, cwd=d)
        env = {k: v for k, v in os.environ.items() if k not in ("TPLA_LIBRARY", "PYTHONPATH")}
        env["PYTHONPATH"] = d
        code = "import tpla; print(tpla.library_path()); print(tpla.version())"
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=d, capture_output=True,
                             text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(os.path.join(d, "tpla", "libtpla.so")), out.stdout
    shutil.rmtree(os.path.join(REPO, "python", "build"), ignore_errors=True)
    shutil.rmtree(os.path.join(REPO, "python", "tpla.egg-info"), ignore_errors=True)
