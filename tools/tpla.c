/*
 * tpla.c - the `tpla` command-line tool: main, the mode table, the flags
 * every mode shares (nccl-tests style) and `tpla run`, the main job.
 *
 *   tpla info                        version, build features, GPUs, peer access
 *   tpla gemm [flags] [M N K]        local GEMM on every rank: check + timing table
 *   tpla ns [flags] [MxN ...]        distributed Newton-Schulz: timing, TFLOP/s and the
 *                                    error against the exact polar factor (tools/ns.c)
 *   tpla ag-gemm|gemm-rs|gemm-ar [flags] [M K N]
 *                                    communication + GEMM, overlapped, against its parts
 *                                    (tools/mode_overlap.c)
 *   tpla run [flags]                 info, then GEMM checks and benchmarks on the
 *                                    GPUs present, or on the host executor (with a
 *                                    notice) when there is none
 *
 * Output: '#' lines are comments (header, notices, summary); the other lines
 * are table rows with whitespace-separated columns, for awk. Exit status: 0
 * when everything ran and every check passed, 1 on a failure, 2 on a usage
 * error, 3 when a GPU did not finish a call within the timeout (a hang; the
 * process ends there). Build: `cmake -B build && cmake --build build`, run: build/tpla.
 */
#include "tool.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct {
  const char *name;
  int (*run)(tool_opts_t *opts);
  const char *summary;
} tool_mode_t;

/* The modes. To add one, write tools/<mode>.c with `int tool_mode_<x>(tool_opts_t *)`
 * (declared in tool.h), reuse the common flags and the team/memory/timing
 * helpers of tool.h, and add a row here. An unknown mode is a usage error. */
/* tools/mode_overlap.c */
int tool_mode_ag_gemm(tool_opts_t *opts);
int tool_mode_gemm_rs(tool_opts_t *opts);
int tool_mode_gemm_ar(tool_opts_t *opts);

static const tool_mode_t modes[] = {
    {"info", tool_mode_info, "version, build features, GPUs, peer-access matrix"},
    {"gemm", tool_mode_gemm, "local GEMM on every rank: float64 check and timing [M N K]"},
    {"run", tool_mode_run, "the main job: info, then GEMM checks and benchmarks"},
    {"ag-gemm", tool_mode_ag_gemm, "AllGather+GEMM, overlapped vs serial/GEMM/NCCL [M K N]"},
    {"gemm-rs", tool_mode_gemm_rs, "GEMM+ReduceScatter, overlapped vs its parts [M K N]"},
    {"gemm-ar", tool_mode_gemm_ar, "GEMM+AllReduce, overlapped vs its parts [M K N]"},
    {"ns", tool_mode_ns, "distributed Newton-Schulz: time, TFLOP/s, polar error [MxN ...]"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: tpla <mode> [flags] [sizes]\n\nmodes:\n");
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    fprintf(out, "  %-8s %s\n", modes[i].name, modes[i].summary);
  fprintf(out,
          "\nflags (the same in every mode; a mode ignores those it has no use for and refuses\n"
          "those it cannot honour: info takes none, the overlap modes no -b/-e/-f):\n"
          "  -b SIZE   smallest size of a sweep (e.g. 1024, 8K)\n"
          "  -e SIZE   largest size of a sweep\n"
          "  -f X      multiply the size by X at each step (default 2)\n"
          "  -g N      ranks: GPUs (default all) or host ranks (default 2)\n"
          "  -n N      timed iterations (default 20 on GPUs, 5 on the host; 3 there for\n"
          "            ag-gemm, gemm-rs, gemm-ar)\n"
          "  -w N      warm-up iterations (default 5 on GPUs, 1 on the host)\n"
          "  -c 0|1    check results against a float64 reference (default 1)\n"
          "  -d TYPE   input dtype: bf16, fp16, fp32, or FP8 e4m3 / e5m2 (default bf16)\n"
          "  -x EXEC   executor: host, cuda or auto (default: cuda if a GPU is present)\n"
          "  -s SEED   random seed (default: from the clock; printed in the header)\n"
          "GEMM flags:\n"
          "  -t OPS    op(A) op(B): NN, NT, TN or TT (default NN)\n"
          "  -o fp32   write D in fp32 (default: D has the input dtype)\n"
          "  -a X      alpha (default 1)\n"
          "  -B X      beta (default 0; 1 accumulates into D)\n"
          "  -T 0|1    let fp32 GEMMs use TF32 (default 0)\n"
          "  -h        this help\n"
          "gemm FP8 flags (-d e4m3: E4M3 x E4M3, -d e5m2: E5M2 x E4M3; -t NT is the layout\n"
          "cuBLASLt reads directly, others are transposed first):\n"
          "  --accum=A  split (default) or fast accumulation\n"
          "  --out=TYPE D: bf16 (default), fp16, fp32, e4m3 or e5m2 (an FP8 D needs -B 0)\n");
  tool_ns_usage(out);
  fprintf(out,
          "ag-gemm, gemm-rs, gemm-ar flags (tpla <mode> [flags] [M K N]; no -b/-e/-f sweep,\n"
          "op(A) N: -t NN or NT):\n"
          "  --chunks=N      row chunks per slice, 0..%d (default 0: automatic;\n"
          "                  env TPLA_OVERLAP_CHUNKS)\n"
          "  --transport=T   auto (default), peer or sendrecv (env TPLA_OVERLAP_TRANSPORT)\n"
          "  --accum=A       FP8: split (default) or fast accumulation\n"
          "  --cache-b       FP8, op(B) N: one B, passed with b_version 1 on every call, so\n"
          "                  the plan transposes it once (a weight between updates)\n",
          TPLA_OVERLAP_MAX_CHUNKS);
}

/* Modes that parse their own "--name[=value]" options and positional words
 * (opts->extra): ns (--preset ..., MxN shapes), gemm (--accum, --out, M N K)
 * and the overlap modes (--chunks, --transport, M K N); the others reject
 * both. */
static bool own_args(const char *mode) {
  return strcmp(mode, "ns") == 0 || strcmp(mode, "gemm") == 0 || strcmp(mode, "ag-gemm") == 0 ||
         strcmp(mode, "gemm-rs") == 0 || strcmp(mode, "gemm-ar") == 0;
}

/* ---- parsing ------------------------------------------------------------------- */

bool tool_parse_size(const char *text, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || errno != 0 || v <= 0)
    return false;
  int shift = 0;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  default: return false;
  }
  if (*end != '\0' || v > (INT64_MAX >> shift))
    return false;
  *out = (int64_t)v << shift;
  return true;
}

bool tool_matrix_fits(int64_t rows, int64_t cols) {
  const int64_t max_elements = (int64_t)1 << 40;
  return rows >= 0 && cols >= 0 && (rows == 0 || cols <= max_elements / rows);
}

bool tool_parse_dtype(const char *text, tpla_dtype_t *out) {
  static const struct {
    const char *name;
    tpla_dtype_t dtype;
  } names[] = {{"fp32", TPLA_FLOAT32}, {"f32", TPLA_FLOAT32}, {"float", TPLA_FLOAT32},
               {"fp16", TPLA_FLOAT16}, {"f16", TPLA_FLOAT16}, {"half", TPLA_FLOAT16},
               {"bf16", TPLA_BFLOAT16}, {"bfloat16", TPLA_BFLOAT16},
               {"e4m3", TPLA_FLOAT8_E4M3}, {"fp8", TPLA_FLOAT8_E4M3}, {"e5m2", TPLA_FLOAT8_E5M2}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(text, names[i].name) == 0) {
      *out = names[i].dtype;
      return true;
    }
  return false;
}

static bool parse_int(const char *text, int lo, int hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
    return false;
  *out = (int)v;
  return true;
}

static bool parse_float(const char *text, float *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !isfinite(v) || fabs(v) > 1e30)
    return false;
  *out = (float)v;
  return true;
}

static bool parse_ops(const char *text, tpla_op_t *op_a, tpla_op_t *op_b) {
  if (strlen(text) != 2)
    return false;
  tpla_op_t ops[2];
  for (int i = 0; i < 2; i++) {
    if (text[i] == 'N' || text[i] == 'n')
      ops[i] = TPLA_OP_N;
    else if (text[i] == 'T' || text[i] == 't')
      ops[i] = TPLA_OP_T;
    else
      return false;
  }
  *op_a = ops[0];
  *op_b = ops[1];
  return true;
}

static bool bad_flag(int flag, const char *value, const char *expected) {
  fprintf(stderr, "tpla: -%c %s: expected %s\n", flag, value, expected);
  return false;
}

/* Parse the flags and positional sizes after the mode into *o. */
static bool parse_args(int argc, char **argv, tool_opts_t *o, bool extra) {
  memset(o, 0, sizeof *o);
  int kept = 1; /* "--name..." would confuse getopt: set them aside */
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) != 0 || argv[i][2] == '\0')
      argv[kept++] = argv[i];
    else if (extra && o->nextra < (int)(sizeof o->extra / sizeof o->extra[0]))
      o->extra[o->nextra++] = argv[i];
    else {
      fprintf(stderr, "tpla: %s: %s\n", argv[i], extra ? "too many options" : "unknown option");
      return false;
    }
  }
  argc = kept;
  o->step_factor = 2;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->dtype = TPLA_BFLOAT16;
  o->op_a = o->op_b = TPLA_OP_N;
  o->alpha = 1;
  bool set_min = false, set_max = false;
  optind = 1;
  opterr = 0;
  int flag;
  while ((flag = getopt(argc, argv, ":b:e:f:g:n:w:c:d:x:s:t:o:a:B:T:h")) != -1) {
    const char *v = optarg;
    switch (flag) {
    case 'b':
      if (!tool_parse_size(v, &o->min_size))
        return bad_flag(flag, v, "a size > 0 (e.g. 1024 or 8K)");
      set_min = true;
      break;
    case 'e':
      if (!tool_parse_size(v, &o->max_size))
        return bad_flag(flag, v, "a size > 0 (e.g. 8192 or 8K)");
      set_max = true;
      break;
    case 'f': {
      float f;
      if (!parse_float(v, &f) || f <= 1.0f)
        return bad_flag(flag, v, "a factor > 1");
      o->step_factor = f;
      break;
    }
    case 'g':
      if (!parse_int(v, 1, 1024, &o->ranks))
        return bad_flag(flag, v, "a rank count in 1..1024");
      o->set_ranks = true;
      break;
    case 'n':
      if (!parse_int(v, 1, 1000000, &o->iters))
        return bad_flag(flag, v, "iterations in 1..1000000");
      o->set_iters = true;
      break;
    case 'w':
      if (!parse_int(v, 0, 1000000, &o->warmup))
        return bad_flag(flag, v, "warm-up iterations in 0..1000000");
      o->set_warmup = true;
      break;
    case 'c':
      if (!parse_int(v, 0, 1, &o->check))
        return bad_flag(flag, v, "0 or 1");
      break;
    case 'd':
      if (!tool_parse_dtype(v, &o->dtype))
        return bad_flag(flag, v, "bf16, fp16, fp32, e4m3 or e5m2");
      o->set_dtype = true;
      break;
    case 'x':
      if (strcmp(v, "host") == 0)
        o->executor = TOOL_EXEC_HOST;
      else if (strcmp(v, "cuda") == 0)
        o->executor = TOOL_EXEC_CUDA;
      else if (strcmp(v, "auto") == 0)
        o->executor = TOOL_EXEC_AUTO;
      else
        return bad_flag(flag, v, "host, cuda or auto");
      break;
    case 's': {
      char *end = NULL;
      errno = 0;
      unsigned long long seed = strtoull(v, &end, 10);
      if (end == v || *end != '\0' || errno != 0 || v[0] == '-')
        return bad_flag(flag, v, "a non-negative integer");
      o->seed = seed;
      break;
    }
    case 't':
      if (!parse_ops(v, &o->op_a, &o->op_b))
        return bad_flag(flag, v, "NN, NT, TN or TT");
      break;
    case 'o':
      if (strcmp(v, "fp32") != 0 && strcmp(v, "f32") != 0 && strcmp(v, "same") != 0)
        return bad_flag(flag, v, "fp32 or same");
      o->out_fp32 = strcmp(v, "same") != 0;
      break;
    case 'a':
      if (!parse_float(v, &o->alpha))
        return bad_flag(flag, v, "a finite number");
      break;
    case 'B':
      if (!parse_float(v, &o->beta))
        return bad_flag(flag, v, "a finite number");
      break;
    case 'T':
      if (!parse_int(v, 0, 1, &o->allow_tf32))
        return bad_flag(flag, v, "0 or 1");
      break;
    case 'h':
      usage(stdout);
      exit(0);
    case ':':
      fprintf(stderr, "tpla: -%c needs a value\n", optopt);
      return false;
    default:
      fprintf(stderr, "tpla: unknown flag -%c\n", optopt);
      return false;
    }
  }
  for (; extra && optind < argc; optind++) {
    if (o->nextra == (int)(sizeof o->extra / sizeof o->extra[0])) {
      fprintf(stderr, "tpla: '%s': too many arguments\n", argv[optind]);
      return false;
    }
    o->extra[o->nextra++] = argv[optind];
  }
  for (int i = optind; i < argc; i++) {
    if (o->npos == (int)(sizeof o->pos / sizeof o->pos[0]) ||
        !tool_parse_size(argv[i], &o->pos[o->npos])) {
      fprintf(stderr, "tpla: '%s': expected a size > 0 (e.g. 4096 or 4K)\n", argv[i]);
      return false;
    }
    o->npos++;
  }
  o->set_sizes = set_min || set_max;
  if (set_min && !set_max)
    o->max_size = o->min_size;
  if (set_max && !set_min)
    o->min_size = o->max_size;
  if (o->min_size > o->max_size) {
    fprintf(stderr, "tpla: -b %" PRId64 " is larger than -e %" PRId64 "\n", o->min_size,
            o->max_size);
    return false;
  }
  return true;
}

void tool_flush(void) { fflush(stdout); }

/* ---- tpla run ------------------------------------------------------------------ */

int tool_mode_run(tool_opts_t *opts) {
  if (opts->npos != 0 && opts->npos != 3) {
    fprintf(stderr, "tpla run: %d sizes: give M N K (three sizes) or none\n", opts->npos);
    return 2;
  }
  printf("# tpla run: build and device information, then GEMM checks and benchmarks\n");
  int failed = tool_mode_info(opts) != 0;
  tool_exec_t asked = opts->executor;
  tool_opts_t probe = *opts;
  int gpus = 0;
  if (!tool_pick_executor(&probe, &gpus))
    return 2;
  if (probe.executor == TOOL_EXEC_HOST && asked == TOOL_EXEC_AUTO) {
    tpla_features_t f = TPLA_FEATURES_INIT;
    bool built = tpla_get_features(&f, -1) == TPLA_SUCCESS && f.cuda_executor;
    printf("#\n# NOTICE: %s.\n"
           "# NOTICE: Running on the host executor (threads as ranks) with small sizes;\n"
           "# NOTICE: on a GPU machine, tpla run uses the GPUs (NCCL + cuBLASLt).\n",
           built ? "no CUDA GPU found" : "this build has no CUDA executor (TPLA_CUDA=OFF)");
  }
  /* One table per input dtype, unless -d picked one. */
  tpla_dtype_t dtypes[] = {TPLA_BFLOAT16, TPLA_FLOAT16, TPLA_FLOAT32};
  int ndtypes = opts->set_dtype ? 1 : 3;
  for (int i = 0; i < ndtypes; i++) {
    tool_opts_t o = *opts;
    if (!opts->set_dtype) {
      o.dtype = dtypes[i];
      o.set_dtype = true;
    }
    printf("#\n");
    tool_flush();
    int rc = tool_mode_gemm(&o);
    if (rc == 2)
      return 2;
    failed |= rc != 0;
  }
  printf("#\n# tpla run: %s\n", failed ? "FAILED" : "OK");
  tool_flush();
  return failed ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  const tool_mode_t *mode = NULL;
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(argv[1], modes[i].name) == 0)
      mode = &modes[i];
  if (mode == NULL) {
    fprintf(stderr, "tpla: unknown mode '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
  }
  if (mode->run == tool_mode_info && argc > 2) {
    fprintf(stderr, "tpla info: takes no flags or sizes\n");
    return 2;
  }
  tool_opts_t opts;
  if (!parse_args(argc - 1, argv + 1, &opts, own_args(mode->name))) {
    fprintf(stderr, "(tpla -h for help)\n");
    return 2;
  }
  /* One process drives every GPU of -g: CUDA must load its modules before
   * any overlapped call can wait on a peer (docs/OVERLAP.md, "One process,
   * several GPUs"); set before the mode's first CUDA call. */
  if (strncmp(mode->name, "ag-gemm", 7) == 0 || strncmp(mode->name, "gemm-", 5) == 0 ||
      strcmp(mode->name, "run") == 0)
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  return mode->run(&opts);
}
