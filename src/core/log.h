/* Logging: levels, subsystems, WARN/INFO/TRACE and the refusal macros (log.c). Included through internal.h. */
#ifndef SYMCOLL_LOG_H
#define SYMCOLL_LOG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifndef SYMCOLL_HIDDEN
#define SYMCOLL_HIDDEN __attribute__((visibility("hidden")))
#endif

enum { SYMCOLL_LOG_NONE = 0, SYMCOLL_LOG_WARN = 1, SYMCOLL_LOG_INFO = 2, SYMCOLL_LOG_TRACE = 3 };
enum {
  SYMCOLL_SUBSYS_INIT = 1 << 0,
  SYMCOLL_SUBSYS_BOOT = 1 << 1,
  SYMCOLL_SUBSYS_MEM = 1 << 2,
  SYMCOLL_SUBSYS_COLL = 1 << 3,
  SYMCOLL_SUBSYS_TUNE = 1 << 4,
  SYMCOLL_SUBSYS_ALL = 0xff
};
extern SYMCOLL_HIDDEN int symcoll__log_level;
extern SYMCOLL_HIDDEN int symcoll__log_subsys;
SYMCOLL_HIDDEN void symcoll__log_init(void);
SYMCOLL_HIDDEN void symcoll__log_write(int level, int subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Formats only when the level and subsystem are enabled. */
#define SYMCOLL_LOG(level, subsys, ...)                                       \
  do {                                                                        \
    if (symcoll__log_level >= (level) && (symcoll__log_subsys & (subsys)))    \
      symcoll__log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
/* Warnings are formatted whatever the level: the message is kept for symcoll_last_error(). */
SYMCOLL_HIDDEN void symcoll__log_warn(int subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define SYMCOLL_WARN(subsys, ...) symcoll__log_warn((subsys), __FILE__, __LINE__, __VA_ARGS__)
#define SYMCOLL_INFO(subsys, ...) SYMCOLL_LOG(SYMCOLL_LOG_INFO, subsys, __VA_ARGS__)
#define SYMCOLL_TRACE(subsys, ...) SYMCOLL_LOG(SYMCOLL_LOG_TRACE, subsys, __VA_ARGS__)

/* Propagates a failing status, leaving one trace line per level (" -> status"). */
#define SYMCOLL_CHECK(call)                                                   \
  do {                                                                        \
    symcoll_status_t symcoll__s = (call);                                     \
    if (symcoll__s != SYMCOLL_OK) {                                           \
      SYMCOLL_INFO(SYMCOLL_SUBSYS_ALL, "-> %d (%s)", (int)symcoll__s, #call); \
      return symcoll__s;                                                      \
    }                                                                         \
  } while (0)
/* Same, jumping to a cleanup label with `status` set. */
#define SYMCOLL_CHECK_GOTO(call, status, label)                             \
  do {                                                                      \
    (status) = (call);                                                      \
    if ((status) != SYMCOLL_OK) {                                           \
      SYMCOLL_INFO(SYMCOLL_SUBSYS_ALL, "-> %d (%s)", (int)(status), #call); \
      goto label;                                                           \
    }                                                                       \
  } while (0)
/* Wraps a syscall returning -1 on error: logs call text and errno once. */
#define SYMCOLL_SYSCALL_GOTO(call, status, label)               \
  do {                                                          \
    if ((call) == -1) {                                         \
      SYMCOLL_WARN(SYMCOLL_SUBSYS_ALL, "%s failed: %m", #call); \
      (status) = SYMCOLL_ERR_SYSTEM;                            \
      goto label;                                               \
    }                                                           \
  } while (0)

/* Refuses a call's argument: the WARN names what was wrong, nothing is written. */
#define SYMCOLL_REFUSE(...)                         \
  do {                                              \
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, __VA_ARGS__); \
    return SYMCOLL_ERR_INVALID_ARGUMENT;            \
  } while (0)

/* A collective kind an entry (a transport's, an engine's) has no code for: UNSUPPORTED, with a
 * WARN naming both, never another collective. Switches over symcoll_coll_t list every kind
 * and have no default, so a kind added to the enum fails to build until each place says. */
#define SYMCOLL_NO_ENTRY(where, coll)                                                             \
  (SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s has no entry for %s", (where), symcoll_coll_name(coll)), \
   SYMCOLL_ERR_UNSUPPORTED)

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static inline bool symcoll__overlap(const void *a, size_t an, const void *b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + bn && y < x + an;
}

#endif /* SYMCOLL_LOG_H */
