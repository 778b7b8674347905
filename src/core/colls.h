/* What each collective is: one row per collective (colls.c). Included through internal.h. */
#ifndef SYMCOLL_COLLS_H
#define SYMCOLL_COLLS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifndef SYMCOLL_HIDDEN
#define SYMCOLL_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Where send and recv lie when a call is in place (NCCL's rules). */
typedef enum {
  SYMCOLL__IN_PLACE_SAME,         /* send == recv (all_reduce) */
  SYMCOLL__IN_PLACE_SEND_IN_RECV, /* send is this rank's block of recv (all_gather) */
  SYMCOLL__IN_PLACE_RECV_IN_SEND, /* recv is this rank's block of send (reduce_scatter) */
} symcoll__in_place_t;

/* Collectives with a root: which of the root's buffers only it uses (NCCL's rules). */
typedef enum {
  SYMCOLL__ROOT_NONE,
  SYMCOLL__ROOT_SENDS,    /* broadcast: send is read on the root only (others may pass NULL) */
  SYMCOLL__ROOT_RECEIVES, /* reduce: recv is written on the root only (others may pass NULL) */
} symcoll__root_t;

#define SYMCOLL__ALGO_BIT(a) (1u << (unsigned)(a))

typedef struct {
  bool fused;    /* fused with computation, its own entry point (matmul.c, norm.c); the rest are plain */
  bool gemm;     /* fused with a GEMM: runs wherever the transport has a GEMM library */
  bool takes_op; /* a reduction (else op is ignored and taken as SUM, so signatures agree) */
  /* Plain collectives: the buffer holds every rank's block (count x nranks elements), else
   * one block (count). */
  bool send_all, recv_all;
  bool moves_all; /* the call's size class: every rank's block (count x nranks) or one */
  /* Core looks for recv in symmetric memory (a transport may store into peers' outputs, or
   * read a reduction's input there in place); the lookup is skipped for the others. */
  bool finds_recv;
  symcoll__in_place_t in_place;
  symcoll__root_t root;
  uint32_t algos;          /* SYMCOLL__ALGO_BIT of each algorithm on one node */
  symcoll_algo_t fallback; /* where nothing else is chosen, or the choice is not available */
  int busbw_factor;        /* bus bandwidth = algbw x busbw_factor x (n - 1) / n (nccl-tests)... */
  bool busbw_whole;        /* ...or algbw x busbw_factor (broadcast, reduce: nccl-tests) */
} symcoll__coll_desc_t;

/* The row of `coll`, or NULL if it is out of range (inline: on every call's path). */
extern SYMCOLL_HIDDEN const symcoll__coll_desc_t symcoll__coll_rows[];
static inline const symcoll__coll_desc_t *symcoll__coll_desc(symcoll_coll_t coll) {
  return (unsigned)coll < SYMCOLL_NUM_COLL_KINDS ? &symcoll__coll_rows[coll] : NULL;
}
/* Bytes a call's size bucket is taken from (see symcoll__tune_t). */
SYMCOLL_HIDDEN size_t symcoll__coll_bytes(symcoll_coll_t coll, size_t count, size_t esize, int nranks);
/* Whether `algo` is one of the collective's algorithms (not whether this comm can run it). */
SYMCOLL_HIDDEN bool symcoll__algo_of(symcoll_coll_t coll, symcoll_algo_t algo);
/* The algorithms of `coll`, by name, comma-separated into buf (for messages). */
SYMCOLL_HIDDEN const char *symcoll__algo_list(symcoll_coll_t coll, char *buf, size_t n);

#endif /* SYMCOLL_COLLS_H */
