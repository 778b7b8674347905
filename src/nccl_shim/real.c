/*
 * Loading the real NCCL at run time. The candidates, in order: $SYMCOLL_NCCL_REAL_LIB;
 * "libnccl.so.2" as the loader finds it; every libnccl.so.2 in LD_LIBRARY_PATH; the path the
 * build found (SYMCOLL_NCCL_SHIM_REAL_PATH); the usual install places. A candidate that is the
 * shim itself (dlopen("libnccl.so.2") gives the shim back when it is loaded under that name,
 * by LD_PRELOAD or from the library path) is skipped: its ncclGetVersion lies in our own
 * object (dladdr), or it exports symcoll_nccl_shim_version (another copy of the shim).
 * RTLD_DEEPBIND: the real library binds its own symbols first, never the shim's ncclXxx.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_rt.h"

static shim_real_t real;
static const shim_real_t *real_p;
static char real_why[512] = "not loaded yet";
static char real_path_buf[PATH_MAX];

static bool is_shim(void *h) {
  if (dlsym(h, "symcoll_nccl_shim_version")) return true;
  void *fn = dlsym(h, "ncclGetVersion");
  Dl_info theirs, ours;
  if (!fn || !dladdr(fn, &theirs)) return true; /* not an NCCL at all */
  if (!dladdr((void *)&shim_real, &ours)) return false;
  return theirs.dli_fbase == ours.dli_fbase;
}

static bool real_preloaded; /* the program had loaded it before: see SHIM_FOREIGN_COMM */

static void *try_open(const char *name, char *tried, size_t tried_size) {
  if (!name || !*name) return NULL;
  void *pre = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  const bool loaded_before = pre && !is_shim(pre);
  if (pre) dlclose(pre);
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  size_t used = strlen(tried);
  if (!h) {
    snprintf(tried + used, tried_size - used, "%s%s: %s", used ? "; " : "", name, dlerror());
    return NULL;
  }
  if (is_shim(h)) {
    snprintf(tried + used, tried_size - used, "%s%s: the shim itself", used ? "; " : "", name);
    dlclose(h);
    return NULL;
  }
  real_preloaded = loaded_before;
  return h;
}

static void load_once(void) {
  char tried[sizeof real_why] = "";
  void *h = try_open(getenv("SYMCOLL_NCCL_REAL_LIB"), tried, sizeof tried);
  if (!h) h = try_open("libnccl.so.2", tried, sizeof tried);
  const char *llp = getenv("LD_LIBRARY_PATH");
  if (!h && llp) {
    char *dirs = strdup(llp), *save = NULL;
    for (char *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d && !h; d = strtok_r(NULL, ":", &save)) {
      char p[PATH_MAX];
      snprintf(p, sizeof p, "%s/libnccl.so.2", d);
      h = try_open(p, tried, sizeof tried);
    }
    free(dirs);
  }
  static const char *const known[] = {
#ifdef SYMCOLL_NCCL_SHIM_REAL_PATH
      SYMCOLL_NCCL_SHIM_REAL_PATH,
#endif
      "/usr/local/cuda/lib/libnccl.so.2",
      "/usr/local/cuda/lib64/libnccl.so.2",
      "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
      "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
      "/usr/local/lib/libnccl.so.2"};
  for (size_t i = 0; !h && i < sizeof known / sizeof known[0]; i++) h = try_open(known[i], tried, sizeof tried);
  if (!h) {
    snprintf(real_why, sizeof real_why, "no real NCCL library could be opened (set SYMCOLL_NCCL_REAL_LIB): %s", tried);
    return;
  }
#define SHIM_REAL_SYM(name) real.name = (__typeof__(real.name))dlsym(h, "nccl" #name);
  SHIM_REAL_LIST(SHIM_REAL_SYM)
#undef SHIM_REAL_SYM
  real.ResetDebugInit = (void (*)(void))dlsym(h, "ncclResetDebugInit");
  real.CommRevoke = (__typeof__(real.CommRevoke))dlsym(h, "ncclCommRevoke");
  real.DevCommCreate = (__typeof__(real.DevCommCreate))dlsym(h, "ncclDevCommCreate");
  real.DevCommDestroy = (__typeof__(real.DevCommDestroy))dlsym(h, "ncclDevCommDestroy");
  real.TeamWorld = (__typeof__(real.TeamWorld))dlsym(h, "ncclTeamWorld");
  real.TeamLsa = (__typeof__(real.TeamLsa))dlsym(h, "ncclTeamLsa");
  real.TeamRail = (__typeof__(real.TeamRail))dlsym(h, "ncclTeamRail");
  real.TeamRankToWorld = (__typeof__(real.TeamRankToWorld))dlsym(h, "ncclTeamRankToWorld");
  real.TeamRankToLsa = (__typeof__(real.TeamRankToLsa))dlsym(h, "ncclTeamRankToLsa");
  real.GinBarrierCreateRequirement =
      (__typeof__(real.GinBarrierCreateRequirement))dlsym(h, "ncclGinBarrierCreateRequirement");
  real.LsaBarrierCreateRequirement =
      (__typeof__(real.LsaBarrierCreateRequirement))dlsym(h, "ncclLsaBarrierCreateRequirement");
  real.LLA2ACalcSlots = (__typeof__(real.LLA2ACalcSlots))dlsym(h, "ncclLLA2ACalcSlots");
  real.LLA2ACreateRequirement = (__typeof__(real.LLA2ACreateRequirement))dlsym(h, "ncclLLA2ACreateRequirement");
  /* What every forwarded path needs. */
  if (!real.GetVersion || !real.GetUniqueId || !real.CommInitRank || !real.CommInitAll || !real.CommDestroy ||
      !real.CommAbort || !real.GetErrorString || !real.GroupStart || !real.GroupEnd) {
    snprintf(real_why, sizeof real_why, "the real NCCL lacks functions the shim needs");
    dlclose(h);
    return;
  }
  Dl_info info;
  if (dladdr((void *)real.GetVersion, &info) && info.dli_fname)
    snprintf(real_path_buf, sizeof real_path_buf, "%s", info.dli_fname);
  int v = 0;
  real.GetVersion(&v);
  SHIM_INFO("the real NCCL: %s (version %d)%s", real_path_buf, v,
            real_preloaded ? "; the program loaded it first, so its own calls to NCCL's API reach the shim, "
                             "which hands them back"
                           : "");
  real_why[0] = '\0';
  real_p = &real;
}

const shim_real_t *shim_real(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load_once);
  return real_p;
}

const char *shim_real_why(void) {
  shim_real();
  return real_why;
}

const char *shim_real_path(void) {
  shim_real();
  return real_path_buf;
}
