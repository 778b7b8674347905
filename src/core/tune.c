/*
 * Algorithm selection. At communicator creation a table is loaded (SYMCOLL_TUNE_FILE, else
 * ~/.cache/symcoll/tune.txt, else the built-in rows below); core then adopts rank 0's table
 * so every rank picks the same algorithm for the same call. The launch path indexes it by
 * the size's power-of-two bucket: O(1).
 *
 * Table format (plain text, one row per line, '#' starts a comment; docs/tuning.md):
 *   [coll] <backend>[:class] <nranks|*|NxL> <dtype|*> <max_bytes|inf> <algo> [blocks] [threads] [round_bytes]
 * e.g. "all_gather cuda 8 bf16 262144 pull 0 512". coll is all_reduce (the default: rows of 0.2
 * tables have none), all_gather or reduce_scatter; class narrows a row to one kind of machine
 * (host: the CPU reduce loops in use, e.g. host:avx2). Rows apply in order of max_bytes; a
 * row covers sizes above the previous row's max_bytes up to its own; of two rows with the same
 * max_bytes (a dtype's own and a * row), the one listed first applies. A communicator spanning
 * nodes takes only rows whose nranks reads NxL (N nodes of L ranks, either may be *).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Built-in rows: symcoll-tune's choices on an H200 (bench/results/h200/tuning; 3 ranks between
 * the 2- and 4-rank tables). Ranks sharing one GPU emulate a node: on 8 GPUs over NVLink, run
 * symcoll-tune and load its table. */
static const char *const builtin_table =
    "# [coll] backend[:class] nranks dtype max_bytes algo blocks threads\n"
    /* CPU ranks, by the reduce loops the CPU runs (2-vCPU AMD EPYC, bench/results/host): where
     * the loops are scalar, or SSE2 (no vector half conversion), reducing is the cost and
     * two-shot halves it; with AVX2 / AVX-512 moving the bytes is, and 16-bit floats still
     * gain from two-shot up to 1 MiB. */
    "host:scalar * * inf twoshot\n"
    "host:sse2 * * inf twoshot\n"
    "host 1 * inf oneshot\n"
    "host 2 bf16 1048576 twoshot\n"
    "host 2 fp16 1048576 twoshot\n"
    "host 2 * inf oneshot\n"
    "host * * 1048576 oneshot\n"
    "host * * inf twoshot\n"
    /* all_reduce on a node of one GPU a rank (class nvlink): the cost model of
     * docs/gpu-tuning-model.md (a peer round trip of 1 us, 370 GB/s a link direction; not yet
     * measured on such a node: scripts/multi-gpu re-tunes there). */
    "cuda:nvlink 1 * inf oneshot\n"
    "cuda:nvlink 2 * 1048576 lamport\n"
    "cuda:nvlink 2 * inf oneshot_db\n"
    "cuda:nvlink 3 * 1048576 lamport\n"
    "cuda:nvlink 3 * 2097152 oneshot_db\n"
    "cuda:nvlink 3 * inf twoshot\n"
    "cuda:nvlink 4 * 1048576 lamport\n"
    "cuda:nvlink 4 * inf twoshot\n"
    "cuda:nvlink 5 * 524288 lamport\n"
    "cuda:nvlink 5 * inf twoshot\n"
    "cuda:nvlink 6 * 262144 lamport\n"
    "cuda:nvlink 6 * inf twoshot\n"
    "cuda:nvlink * * 262144 lamport\n"
    "cuda:nvlink * * inf twoshot\n"
    /* all_reduce where ranks share a GPU (class shared), and the other collectives everywhere:
     * measured on the H200 (bench/results/h200/tuning). */
    "cuda 1 * inf oneshot\n"
    "cuda 2 * 262144 lamport 0 256\n"
    "cuda 2 * 1048576 lamport\n"
    "cuda 2 * inf oneshot_db\n"
    "cuda 3 * 262144 lamport 0 256\n"
    "cuda 3 * 1048576 oneshot_db 0 1024\n"
    "cuda 3 * inf twoshot 0 1024\n"
    "cuda 4 * 262144 lamport 0 256\n"
    "cuda 4 * 2097152 oneshot_db 0 1024\n"
    "cuda 4 * inf twoshot 0 1024\n"
    "cuda * * 65536 lamport 0 256\n"
    "cuda * * 1048576 oneshot_db 0 1024\n"
    "cuda * * inf twoshot 0 1024\n"
    /* all_gather / reduce_scatter (sizes as nccl-tests count them): LL packets while small,
     * then the double-buffered pull (push for all_gather of 2 ranks), the copy engine for the
     * largest all_gathers; 2 and 4 ranks measured as processes under MPS
     * (bench/results/h200/coll/mps-ag-rs.txt). Every rank count's rows end with inf: the last
     * row of a group takes every larger size (reduce_scatter of 2 and 4 ranks once ran LL
     * packets up to 64 MiB, 14-19x slower than pull). */
    "all_gather cuda 1 * inf pull\n"
    "all_gather cuda 2 * 131072 lamport\n"
    "all_gather cuda 2 * 8388608 push\n"
    "all_gather cuda 2 * inf copy_engine\n"
    "all_gather cuda 4 * 262144 lamport\n"
    "all_gather cuda 4 * 33554432 pull\n"
    "all_gather cuda 4 * inf copy_engine\n"
    "all_gather cuda * * 524288 lamport\n"
    "all_gather cuda * * inf pull\n"
    "reduce_scatter cuda 1 * inf pull\n"
    "reduce_scatter cuda 2 * 131072 lamport\n"
    "reduce_scatter cuda 2 * inf pull\n"
    "reduce_scatter cuda 4 * 262144 lamport\n"
    "reduce_scatter cuda 4 * inf pull\n"
    "reduce_scatter cuda * * 524288 lamport\n"
    "reduce_scatter cuda * * inf pull\n"
    /* broadcast and all_to_all: LL packets while small (25-35% under pull at 2 and 4
     * processes), then pull or push, the copy engine from 16 MiB (bench/results/h200/coll/
     * mps-colls.txt; 8 ranks not measured: the 4-rank rows). reduce has one algorithm. */
    "broadcast cuda 1 * inf pull\n"
    "broadcast cuda * * 65536 lamport\n"
    "broadcast cuda * * 8388608 pull\n"
    "broadcast cuda * * inf copy_engine\n"
    "all_to_all cuda 1 * inf pull\n"
    "all_to_all cuda 2 * 65536 lamport\n"
    "all_to_all cuda 2 * 8388608 push\n"
    "all_to_all cuda 2 * inf copy_engine\n"
    "all_to_all cuda * * 262144 lamport\n"
    "all_to_all cuda * * 8388608 pull\n"
    "all_to_all cuda * * inf copy_engine\n"
    /* The GEMM operations, by the bytes the collective moves (the gathered A; the product).
     * CPU ranks: one thread both moves and multiplies, so there is nothing to overlap with and
     * one large GEMM beats n smaller ones (2-vCPU Xeon, bench/results/host). GPUs: kraken found
     * all_gather + cuBLAS ahead at per-rank M = 128-256 and overlap ahead from M = 512 on 8 GPUs
     * (about 32 MiB gathered at K = 4096); not yet measured on a node of ours. */
    "all_gather_matmul host * * inf sequential\n"
    "matmul_reduce_scatter host * * inf sequential\n"
    "all_gather_matmul cuda * * 33554432 sequential\n"
    "all_gather_matmul cuda * * inf overlap\n"
    "matmul_reduce_scatter cuda * * 33554432 sequential\n"
    "matmul_reduce_scatter cuda * * inf overlap\n"
    /* all_reduce_rmsnorm, by x's bytes (core runs one-shot where two-shot would leave a rank
     * without a row). CPU ranks: the norm is work, and two-shot shares it out, for a copy of
     * its peers' results whose cost depends on the machine: bf16 at 2 ranks, two-shot 4-12%
     * ahead of one-shot at 64-256 KiB on a 2-vCPU Xeon but 3-16% behind it up to 512 KiB on a
     * 2-vCPU AMD EPYC (1.4-2x when a vCPU is stolen: two-shot meets its peer three times to
     * one-shot's two), and ahead on both from 1-2 MiB; one-shot up to 512 KiB loses at most
     * 12% (the Xeon at 64 KiB) where two-shot lost 2x (bench/results/host/rmsnorm); fp32 rows
     * cost so little to normalise that two-shot's copy of its peers' results costs more than
     * the rows it saves up to 2 MiB (Xeon: one-shot ahead by 15-50%), while above one-shot's
     * reading of every rank's rows costs more (4-17% behind two-shot and the chain at 4-64
     * MiB); fp16, converted with F16C, the same up to the same element count. GPUs (H200,
     * bench/results/h200/norm): one rank, the fused one-shot; ranks sharing the GPU (2 and 8
     * thread ranks), the chain of the tuned all_reduce and the local pass was as fast or faster
     * at every shape (every rank's one-shot reads all ranks' rows on the one GPU), but for the
     * fused lamport with a thread a pack: 0.79-1.00x of the chain at 1-32 rows of bf16 x 4096
     * with 2 and 4 ranks sharing an H100, 1.0-1.6x from 128 rows (bench/results/h100/run31;
     * the transport declines it for longer rows, where the chain runs). 8 ranks, with a row
     * shared by a thread-block cluster: lamport 0.86-0.92x of the chain at 1 and 8 rows of
     * bf16 x 4096, 1.45x from 32 rows, and behind it at 8192 (thread ranks and MPS processes
     * sharing an H100, bench/results/h100/run66); re-tune on a real node. CPU ranks, 2 of
     * them: since the rows' results go past the caches where a call writes more than twice the
     * L2 (host_rmsnorm.c), the one-shot is ahead of two-shot from 4 MiB at every dtype on a
     * 2-vCPU Xeon (fp32 0.70-0.79x, fp16 0.75-0.90x, bf16 0.81-0.96x; bench/results/host/stream).
     * bf16 from 4 MiB runs two-shot all the same: on a 2-vCPU AMD EPYC it was 0.73-0.88x of
     * one-shot in every one of eight turns, quiet or noisy, and one-shot there was 0.96-1.19x
     * the chain, two-shot 0.80-0.93x; on the Xeon two-shot stayed at 0.86-1.06x the chain
     * (bench/results/host/rmsnorm). More ranks share two-shot's work among more cores and keep
     * the rows above. */
    "all_reduce_rmsnorm host 2 fp32 inf oneshot\n"
    "all_reduce_rmsnorm host 2 fp16 inf oneshot\n"
    "all_reduce_rmsnorm host 2 bf16 524288 oneshot\n"
    "all_reduce_rmsnorm host 2 bf16 inf twoshot\n"
    "all_reduce_rmsnorm host * fp32 2097152 oneshot\n"
    "all_reduce_rmsnorm host * fp32 inf twoshot\n"
    "all_reduce_rmsnorm host * fp16 1048576 oneshot\n"
    "all_reduce_rmsnorm host * fp16 inf twoshot\n"
    "all_reduce_rmsnorm host * * 32768 oneshot\n"
    "all_reduce_rmsnorm host * * inf twoshot\n"
    "all_reduce_rmsnorm cuda 1 * inf oneshot\n"
    "all_reduce_rmsnorm cuda 2 * 262144 lamport\n"
    "all_reduce_rmsnorm cuda 2 * inf sequential\n"
    "all_reduce_rmsnorm cuda 3 * 262144 lamport\n"
    "all_reduce_rmsnorm cuda 3 * inf sequential\n"
    "all_reduce_rmsnorm cuda 4 * 262144 lamport\n"
    "all_reduce_rmsnorm cuda 4 * inf sequential\n"
    "all_reduce_rmsnorm cuda 8 * 65536 lamport\n"
    "all_reduce_rmsnorm cuda 8 * inf sequential\n"
    "all_reduce_rmsnorm cuda * * inf sequential\n"
    /* all_reduce_rmsnorm on a node of one GPU a rank (class nvlink): the fused lamport is
     * all_reduce's lamport with the norm in registers, the same round trip and bytes as the
     * chain's all_reduce there without its second kernel and pass over the rows, so it runs
     * wherever all_reduce's class-nvlink rows run lamport (docs/gpu-tuning-model.md); beyond,
     * the chain on those rows (not yet measured on such a node: scripts/multi-gpu). */
    "all_reduce_rmsnorm cuda:nvlink 1 * inf oneshot\n"
    "all_reduce_rmsnorm cuda:nvlink 2 * 1048576 lamport\n"
    "all_reduce_rmsnorm cuda:nvlink 2 * inf sequential\n"
    "all_reduce_rmsnorm cuda:nvlink 3 * 1048576 lamport\n"
    "all_reduce_rmsnorm cuda:nvlink 3 * inf sequential\n"
    "all_reduce_rmsnorm cuda:nvlink 4 * 1048576 lamport\n"
    "all_reduce_rmsnorm cuda:nvlink 4 * inf sequential\n"
    "all_reduce_rmsnorm cuda:nvlink 5 * 524288 lamport\n"
    "all_reduce_rmsnorm cuda:nvlink 5 * inf sequential\n"
    "all_reduce_rmsnorm cuda:nvlink * * 262144 lamport\n"
    "all_reduce_rmsnorm cuda:nvlink * * inf sequential\n"
    /* reduce_scatter_rmsnorm, by x's bytes (every rank's rows). CPU ranks: the fused pull
     * (one pass over each row, no scratch; bench/results/host/rmsnorm) at every size: with the
     * rows' results past the caches where a call writes more than twice the L2, fp32 and fp16
     * from 4 MiB are 0.77-0.88x the chain (2 ranks, 2-vCPU Xeon, bench/results/host/stream),
     * where they were 1.1-1.5x before; at parity below (0.9-1.1; the fusion shares no norm
     * work out, it saves only the sum's write and read); bf16 0.82-0.95. GPUs: the chain; the
     * fused kernel (the one-shot norm kernel over this rank's block) was 0.89-1.18x of it at 1-32
     * rows per rank and up to 2.3x slower from 128 with ranks sharing an H200
     * (bench/results/h200/norm, run 7); to be measured again on a node of several GPUs. */
    "reduce_scatter_rmsnorm host * * inf pull\n"
    "reduce_scatter_rmsnorm cuda * * inf sequential\n"
    /* Communicators spanning nodes. CPU ranks (2 and 3 network-namespace nodes x 2 ranks
     * of one 2-vCPU Xeon, MPI over veth links, bench/results/host/netns): MPI alone while
     * small, the hierarchical path once the node-local steps save more than they cost;
     * fp32 all_reduce of 2 nodes gained nothing from it there. GPUs: hierarchical (NCCL's
     * inter-node rings carry 1/L of the data), not yet measured on nodes of ours. */
    "host *x* * 262144 engine\n"
    "host *x* * inf hierarchical\n"
    "host 2x* fp32 inf engine\n"
    "all_gather host *x* * inf hierarchical\n"
    "reduce_scatter host *x* * 262144 engine\n"
    "reduce_scatter host *x* * inf hierarchical\n"
    "reduce_scatter host 2x* * 4194304 engine\n"
    "reduce_scatter host 2x* * inf hierarchical\n"
    "cuda *x* * inf hierarchical\n"
    "all_gather cuda *x* * inf hierarchical\n"
    "reduce_scatter cuda *x* * inf hierarchical\n";

typedef struct {
  size_t max_bytes;
  int line; /* the row's line: of two rows with the same max_bytes, the one listed first applies */
  symcoll__tune_entry_t e;
} row_t;

static int cmp_row(const void *a, const void *b) {
  const row_t *x = a, *y = b;
  if (x->max_bytes != y->max_bytes) return x->max_bytes < y->max_bytes ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line);
}

/* The algorithm a collective falls back on where nothing else is chosen. */
static symcoll_algo_t fallback(symcoll_comm_t comm, symcoll_coll_t coll) {
  if (comm->hier && !symcoll__coll_desc(coll)->fused) return SYMCOLL_ALGO_HIERARCHICAL;
  return symcoll__coll_desc(coll)->fallback;
}

#define MAX_ROWS 64

/* One parsed line: [collective] backend[:class] nranks dtype max_bytes algo [blocks threads round]. */
typedef struct {
  int coll;
  char backend[48], nr[16], dt[16];
  row_t row;
} line_t;

/* Parses one line (comments cut): 1 a row, 0 blank, -1 a syntax error. */
static int parse_line(char *buf, line_t *l) {
  char *hash = strchr(buf, '#');
  if (hash) *hash = 0;
  /* An optional leading collective; rows of 0.2 tables have none and mean all_reduce. */
  char first[32], mb[32], algo[32];
  int skip = 0;
  if (sscanf(buf, "%31s%n", first, &skip) <= 0) return 0;
  const char *rest = buf;
  l->coll = SYMCOLL_COLL_ALL_REDUCE;
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
    if (!strcmp(first, symcoll_coll_name((symcoll_coll_t)c))) l->coll = c, rest = buf + skip;
  int blocks = 0, threads = 0;
  unsigned long long round = 0;
  if (sscanf(rest, "%47s %15s %15s %31s %31s %d %d %llu", l->backend, l->nr, l->dt, mb, algo, &blocks, &threads,
             &round) < 5)
    return -1;
  symcoll_algo_t a = SYMCOLL_NUM_ALGOS;
  for (int i = 1; i < SYMCOLL_NUM_ALGOS; i++)
    if (!strcmp(algo, symcoll_algo_name((symcoll_algo_t)i))) a = (symcoll_algo_t)i;
  if (a == SYMCOLL_NUM_ALGOS || !symcoll__algo_of((symcoll_coll_t)l->coll, a) || blocks < 0 || threads < 0 ||
      threads > 1024 || threads % 32 || round % 256)
    return -1;
  size_t max_bytes = SIZE_MAX;
  if (strcmp(mb, "inf") != 0) {
    char *end;
    max_bytes = strtoull(mb, &end, 10);
    if (*end) return -1;
  }
  l->row = (row_t){.max_bytes = max_bytes, .e = {a, blocks, threads, (size_t)round}};
  return 1;
}

/* What a row is matched against. A communicator spanning nodes takes rows of its node-local
 * communicator's backend and class whose nranks field is "NxL" (nodes x ranks per node,
 * either may be *). */
typedef struct {
  const char *backend, *cls;
  int nranks, nodes, local_nranks;
  bool spans_nodes;
} machine_t;

/* How specific a row is for this communicator (naming its class: 2, its rank count: 1), or
 * -1 if the row is not for it. */
static int row_score(const machine_t *m, line_t *l) {
  char *colon = strchr(l->backend, ':'); /* backend, or backend:class (host:avx2) */
  const bool has_class = colon != NULL;
  if (colon) *colon = 0;
  if (strcmp(l->backend, m->backend) != 0) return -1;
  if (has_class && (!m->cls || strcmp(colon + 1, m->cls) != 0)) return -1;
  char *x = strchr(l->nr, 'x');
  if ((x != NULL) != m->spans_nodes) return -1;
  bool is_exact;
  if (x) {
    *x = 0;
    const bool nodes_exact = strcmp(l->nr, "*") != 0, local_exact = strcmp(x + 1, "*") != 0;
    if ((nodes_exact && atoi(l->nr) != m->nodes) || (local_exact && atoi(x + 1) != m->local_nranks)) return -1;
    is_exact = nodes_exact || local_exact;
  } else {
    is_exact = strcmp(l->nr, "*") != 0;
    if (is_exact && atoi(l->nr) != m->nranks) return -1;
  }
  return (has_class ? 2 : 0) + (is_exact ? 1 : 0);
}

int symcoll__tune_parse(symcoll_comm_t comm, const char *text, int *line_p) {
  row_t(*rows)[SYMCOLL_NUM_DTYPES][MAX_ROWS] =
      malloc(sizeof(row_t) * SYMCOLL_NUM_COLL_KINDS * SYMCOLL_NUM_DTYPES * MAX_ROWS);
  if (!rows) return -1;
  int nrows[SYMCOLL_NUM_COLL_KINDS][SYMCOLL_NUM_DTYPES] = {{0}};
  int used = 0, line = 0;
  const symcoll_comm_t on_node = symcoll_comm_local(comm);
  const machine_t m = {.backend = on_node->tp->name,
                       .cls = on_node->tp->tune_class ? on_node->tp->tune_class(on_node) : NULL,
                       .nranks = comm->nranks,
                       .nodes = symcoll_comm_nnodes(comm),
                       .local_nranks = on_node->nranks,
                       .spans_nodes = comm->hier != NULL};
  /* The most specific rows win: for each collective and dtype, only rows naming this machine
   * class (then: naming our nranks) are used, if there are any. Pass 0 finds the best score,
   * pass 1 keeps the rows that have it. */
  int best[SYMCOLL_NUM_COLL_KINDS][SYMCOLL_NUM_DTYPES];
  memset(best, -1, sizeof best);
  for (int pass = 0; pass < 2; pass++) {
    const char *p = text;
    line = 0;
    while (p && *p) {
      const char *nl = strchr(p, '\n');
      size_t len = nl ? (size_t)(nl - p) : strlen(p);
      char buf[256];
      line++;
      snprintf(buf, sizeof buf, "%.*s", (int)(len < 255 ? len : 255), p);
      p = nl ? nl + 1 : NULL;
      line_t l;
      const int k = parse_line(buf, &l);
      if (k < 0) goto syntax;
      const int score = k ? row_score(&m, &l) : -1;
      if (score < 0) continue;
      for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++) {
        if (strcmp(l.dt, "*") != 0 && strcmp(l.dt, symcoll_dtype_name((symcoll_dtype_t)d)) != 0) continue;
        if (pass == 0) {
          if (score > best[l.coll][d]) best[l.coll][d] = score;
          continue;
        }
        if (score != best[l.coll][d] || nrows[l.coll][d] >= MAX_ROWS) continue;
        l.row.line = line;
        rows[l.coll][d][nrows[l.coll][d]++] = l.row;
        used++;
      }
    }
  }
  bool open_warned[SYMCOLL_NUM_COLL_KINDS] = {false};
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
    for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++) {
      int nr = nrows[c][d];
      if (nr == 0) continue;
      qsort(rows[c][d], (size_t)nr, sizeof(row_t), cmp_row);
      if (rows[c][d][nr - 1].max_bytes != SIZE_MAX && !open_warned[c]) {
        open_warned[c] = true;
        SYMCOLL_WARN(SYMCOLL_SUBSYS_TUNE,
                     "tuning rows of %s (%s, %d ranks) end at %zu bytes with no inf row: larger calls take that "
                     "row's %s",
                     symcoll_coll_name((symcoll_coll_t)c), symcoll_dtype_name((symcoll_dtype_t)d), comm->nranks,
                     rows[c][d][nr - 1].max_bytes, symcoll_algo_name(rows[c][d][nr - 1].e.algo));
      }
      for (int b = 0; b < SYMCOLL_TUNE_BUCKETS; b++) {
        size_t top = (size_t)1 << b;
        int i = 0;
        while (i < nr - 1 && rows[c][d][i].max_bytes < top) i++;
        comm->tune[c][d].bucket[b] = rows[c][d][i].e;
      }
    }
  free(rows);
  return used;
syntax:
  free(rows);
  if (line_p) *line_p = line;
  return -1;
}

void symcoll__tune_drop_algo(symcoll_comm_t comm, symcoll_algo_t algo) {
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
    for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++) {
      symcoll__tune_entry_t below = {fallback(comm, (symcoll_coll_t)c), 0, 0, 0};
      for (int b = 0; b < SYMCOLL_TUNE_BUCKETS; b++) {
        symcoll__tune_entry_t *e = &comm->tune[c][d].bucket[b];
        if (e->algo == algo)
          *e = below;
        else
          below = *e;
      }
    }
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 1 << 16);
  if (buf && fread(buf, 1, (1 << 16) - 1, f) == 0 && ferror(f)) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

const char *symcoll__tune_builtin(void) {
  return builtin_table;
}

void symcoll__tune_init(symcoll_comm_t comm) {
  for (int c = 0; c < SYMCOLL_NUM_COLL_KINDS; c++)
    for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++)
      for (int b = 0; b < SYMCOLL_TUNE_BUCKETS; b++)
        comm->tune[c][d].bucket[b] = (symcoll__tune_entry_t){fallback(comm, (symcoll_coll_t)c), 0, 0, 0};
  symcoll__tune_parse(comm, builtin_table, NULL);
  char path[512];
  const char *file = symcoll__env_str("SYMCOLL_TUNE_FILE", NULL);
  if (!file && getenv("HOME")) {
    snprintf(path, sizeof path, "%s/.cache/symcoll/tune.txt", getenv("HOME"));
    file = path;
  }
  char *text = file ? read_file(file) : NULL;
  if (text) {
    int line = 0;
    int n = symcoll__tune_parse(comm, text, &line);
    if (n < 0)
      SYMCOLL_WARN(SYMCOLL_SUBSYS_TUNE, "%s:%d: syntax error; table ignored", file, line);
    else
      SYMCOLL_INFO(SYMCOLL_SUBSYS_TUNE, "%s: %d rows for %s with %d ranks", file, n, comm->tp->name, comm->nranks);
  } else if (file && getenv("SYMCOLL_TUNE_FILE")) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_TUNE, "cannot read SYMCOLL_TUNE_FILE=%s: %m", file);
  }
  free(text);
}
