/* The MPI engine lives in libsymcoll_mpi (src/engine/mpi.c), so that libsymcoll never needs
 * MPI: opened here at run time, from SYMCOLL_MPI_LIB, else beside libsymcoll, else the
 * loader's search. It stays loaded: MPI may not be initialised twice in a process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib;

static void *load(void) {
  char path[4096];
  const char *names[3] = {symcoll__env_str("SYMCOLL_MPI_LIB", NULL), NULL, "libsymcoll_mpi.so"};
  Dl_info info;
  if (dladdr((void *)symcoll_comm_create_job, &info) && info.dli_fname) {
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (slash) {
      snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libsymcoll_mpi.so");
      names[1] = path;
    }
  }
  void *h = NULL;
  for (int i = 0; i < 3 && !h; i++)
    if (names[i]) h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL); /* MPI's own plugins need GLOBAL */
  if (!h)
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "MPI engine: cannot open libsymcoll_mpi.so (%s); build symcoll with MPI or set "
                 "SYMCOLL_MPI_LIB",
                 dlerror());
  return h;
}

symcoll_status_t symcoll__mpi_engine_load(const symcoll__engine_env_t *env, const void *mpi_comm,
                                          symcoll__engine_t *out) {
  pthread_mutex_lock(&lib_lock);
  if (!lib) lib = load();
  void *h = lib;
  pthread_mutex_unlock(&lib_lock);
  if (!h) return SYMCOLL_ERR_UNSUPPORTED;
  symcoll__mpi_open_fn open = (symcoll__mpi_open_fn)(uintptr_t)dlsym(h, SYMCOLL_MPI_OPEN);
  if (!open) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "MPI engine: %s not in libsymcoll_mpi", SYMCOLL_MPI_OPEN);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  return open(env, mpi_comm, out);
}
