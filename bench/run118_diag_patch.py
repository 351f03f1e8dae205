"""run118_diag_patch.py - the experiment patch of bench/device_run118.sh, applied to a copy of
the tree (argv[1]); not part of the library. Progress marks on every stream of the CUDA overlap
transport: after each wait, write, copy, event wait, GEMM and fold that it enqueues, the stream
writes the op's number into pinned host memory (cuStreamWriteValue32), and the op's description
is kept on the host. TPLA_DIAG_AFTER seconds after the first transport is created, a thread
prints, for every transport and stream, how many ops completed of those enqueued and the first
op not completed: where each rank's streams stand when a call never finishes."""
import sys

sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from patch_util import patch

root = sys.argv[1]
open(root + "/src/cuda/xp_diag.c", "w").write(r'''
#include "transport.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#define DG_X 32
#define DG_S (XP_STREAMS + 1)
#define DG_R 256
static volatile uint32_t *dg_done;
static uint32_t *dg_dev;
static int dg_count[DG_X][DG_S];
static char dg_desc[DG_X][DG_S][DG_R][112];
static const tpla_xport_t *dg_xp[DG_X];
static int dg_nx;
static pthread_mutex_t dg_mu = PTHREAD_MUTEX_INITIALIZER;

static void *dg_watch(void *arg) {
  (void)arg;
  const char *e = getenv("TPLA_DIAG_AFTER");
  sleep(e ? (unsigned)atoi(e) : 15);
  pthread_mutex_lock(&dg_mu);
  fprintf(stderr, "DIAG: %d transports\n", dg_nx);
  for (int x = 0; x < dg_nx; x++) {
    const tpla_xport_t *xp = dg_xp[x];
    fprintf(stderr, "DIAG x%d rank %d of %d kind %d last_seq %u\n", x, xp->rank, xp->nranks,
            (int)xp->kind, (unsigned)xp->last_seq);
    for (int s = 0; s < DG_S; s++) {
      int n = dg_count[x][s];
      if (n == 0)
        continue;
      uint32_t d = dg_done[x * DG_S + s];
      fprintf(stderr, "DIAG x%d r%d s%d: done %u of %d | last done: %s | next: %s\n", x, xp->rank,
              s, d, n, d > 0 ? dg_desc[x][s][d % DG_R] : "-",
              (int)d < n ? dg_desc[x][s][(d + 1) % DG_R] : "(all done)");
    }
  }
  pthread_mutex_unlock(&dg_mu);
  return NULL;
}

void xp_diag_mark(const tpla_xport_t *xp, cudaStream_t st, const char *fmt, ...) {
  xp_write_value_fn write;
  xp_wait_value_fn wait;
  const char *why;
  xp_driver_ops(&write, &wait, &why);
  pthread_mutex_lock(&dg_mu);
  if (dg_done == NULL) {
    void *h = NULL;
    if (cudaHostAlloc(&h, sizeof(uint32_t) * DG_X * DG_S,
                      cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
      pthread_mutex_unlock(&dg_mu);
      return;
    }
    memset(h, 0, sizeof(uint32_t) * DG_X * DG_S);
    dg_done = h;
    void *dv = NULL;
    cudaHostGetDevicePointer(&dv, h, 0);
    dg_dev = dv;
    pthread_t t;
    pthread_create(&t, NULL, dg_watch, NULL);
    pthread_detach(t);
  }
  int x = 0;
  while (x < dg_nx && dg_xp[x] != xp)
    x++;
  if (x == dg_nx) {
    if (dg_nx == DG_X) {
      pthread_mutex_unlock(&dg_mu);
      return;
    }
    dg_xp[dg_nx++] = xp;
  }
  int s = 0;
  while (s < XP_STREAMS && xp->streams[s] != st)
    s++;
  int idx = ++dg_count[x][s];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dg_desc[x][s][idx % DG_R], sizeof dg_desc[x][s][0], fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&dg_mu);
  if (write != NULL)
    write((CUstream)st, (CUdeviceptr)(uintptr_t)(dg_dev + x * DG_S + s), (cuuint32_t)idx,
          CU_STREAM_WRITE_VALUE_DEFAULT);
}
''')

patch(root + "/src/cuda/transport.h", [
    ("/* flags of rank q as mapped here */\n",
     "void xp_diag_mark(const tpla_xport_t *xp, cudaStream_t st, const char *fmt, ...);\n"
     "/* flags of rank q as mapped here */\n"),
])
patch(root + "/src/cuda/transport_map.c", [
    ("""  return driver_status(write((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                             CU_STREAM_WRITE_VALUE_DEFAULT),
                       xp, "cuStreamWriteValue32", what);""",
     """  tpla_status_t ds = driver_status(write((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                             CU_STREAM_WRITE_VALUE_DEFAULT),
                       xp, "cuStreamWriteValue32", what);
  xp_diag_mark(xp, stream, "write %s word %td := %u", what,
               (char *)addr - (char *)xp->peer_base[xp->rank], value);
  return ds;"""),
    ("""  return driver_status(wait((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                            CU_STREAM_WAIT_VALUE_GEQ),
                       xp, "cuStreamWaitValue32", what);""",
     """  tpla_status_t ds = driver_status(wait((CUstream)stream, (CUdeviceptr)(uintptr_t)addr, value,
                            CU_STREAM_WAIT_VALUE_GEQ),
                       xp, "cuStreamWaitValue32", what);
  xp_diag_mark(xp, stream, "wait %s own word %td >= %u", what,
               ((char *)addr - (char *)xp->peer_base[xp->rank]) / 4, value);
  return ds;"""),
])
patch(root + "/src/cuda/transport.c", [
    ("""  CUDA_TRY(xp->fn, cudaStreamWaitEvent(waiter, xp->ev[source], 0));
  return TPLA_SUCCESS;""",
     """  CUDA_TRY(xp->fn, cudaStreamWaitEvent(waiter, xp->ev[source], 0));
  xp_diag_mark(xp, waiter, "follow stream %d", source);
  return TPLA_SUCCESS;"""),
    ("""    CUDA_TRY(fn, cudaStreamWaitEvent(xp->streams[s], xp->fork, 0));
""",
     """    CUDA_TRY(fn, cudaStreamWaitEvent(xp->streams[s], xp->fork, 0));
    xp_diag_mark(xp, xp->streams[s], "fork seq %u", seq);
"""),
    ("""                         xp, "push to", s->to, v->rows, v->cols));
""",
     """                         xp, "push to", s->to, v->rows, v->cols));
    xp_diag_mark(xp, st, "push copy to %d flag %d seq %u rows %lld", s->to, s->flag, seq,
                 (long long)v->rows);
"""),
    ("""                         xp, "pull from", s->from, v->rows, v->cols));
""",
     """                         xp, "pull from", s->from, v->rows, v->cols));
    xp_diag_mark(xp, st, "pull copy from %d flag %d seq %u rows %lld", s->from, s->flag, seq,
                 (long long)v->rows);
"""),
    ("""    CUDA_TRY(xp->fn, cudaStreamWaitEvent(st, xp->flag_events[flag], 0));
    return TPLA_SUCCESS;""",
     """    CUDA_TRY(xp->fn, cudaStreamWaitEvent(st, xp->flag_events[flag], 0));
    xp_diag_mark(xp, st, "arrival by event flag %d seq %u", flag, seq);
    return TPLA_SUCCESS;"""),
    ("""  return copy_status(copy2d(dst.data, dst.ld, src.data, src.ld, dst.rows, dst.cols,
                            tpla_dtype_size(dst.dtype), xp_lane_stream(xp, lane)),
                     xp, "local copy, own", xp->rank, dst.rows, dst.cols);""",
     """  tpla_status_t cs = copy_status(copy2d(dst.data, dst.ld, src.data, src.ld, dst.rows, dst.cols,
                            tpla_dtype_size(dst.dtype), xp_lane_stream(xp, lane)),
                     xp, "local copy, own", xp->rank, dst.rows, dst.cols);
  xp_diag_mark(xp, xp_lane_stream(xp, lane), "local copy rows %lld", (long long)dst.rows);
  return cs;"""),
])
patch(root + "/src/cuda/transport_gemm.c", [
    ("""                                   f->y2, xp_lane_stream(xp, lane));
  if (e == cudaSuccess)
    return TPLA_SUCCESS;""",
     """                                   f->y2, xp_lane_stream(xp, lane));
  xp_diag_mark(xp, xp_lane_stream(xp, lane), "fold %lld rows %d slots", (long long)f->y.rows,
               f->nslots);
  if (e == cudaSuccess)
    return TPLA_SUCCESS;"""),
    ("""                            xp->fn, &what));
  if (bias != NULL && !epi_bias) {""",
     """                            xp->fn, &what));
  xp_diag_mark(xp, xp_lane_stream(xp, lane), "gemm %lld rows", (long long)g->d.rows);
  if (bias != NULL && !epi_bias) {"""),
])
