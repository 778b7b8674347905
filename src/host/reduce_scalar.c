/* The reduce loops without the vectoriser (-fno-tree-vectorize): the reference build. */
#define SYMCOLL_REDUCE_TABLE symcoll__reduce_scalar
#define SYMCOLL_REDUCE_NAME "scalar"
#include "reduce_loops.h"
