/*
 * Environment knobs: every SYMCOLL_* variable the library reads is declared once, in
 * SYMCOLL_ENV_MAP (internal.h), with its type, default, range and unit. Values are parsed
 * strictly: a value that is not of the knob's type, or out of its range, is reported once per
 * process in a WARN naming the variable, the value given and the value taken instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

typedef struct {
  const char *name;
  int type;
  const char *dflt;
  long long min, max;
  const char *choices; /* ENUM and LIST: '|'-separated names */
  const char *help;
} knob_t;

static const knob_t knobs[] = {
#define SYMCOLL__ENV_ROW(name, type, dflt, min, max, choices, help) \
  {#name, SYMCOLL_ENV_##type, dflt, min, max, choices, help},
    SYMCOLL_ENV_MAP(SYMCOLL__ENV_ROW)
#undef SYMCOLL__ENV_ROW
};
#define NKNOBS ((int)(sizeof knobs / sizeof knobs[0]))
static atomic_int warned[NKNOBS];

static int knob_index(const char *name) {
  for (int i = 0; i < NKNOBS; i++)
    if (!strcmp(knobs[i].name, name)) return i;
  return -1;
}

static void warn_once(int k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_once(int k, const char *fmt, ...) {
  if (atomic_exchange(&warned[k], 1)) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* No symcoll__log_init here: the log reads its own knobs through this file. */
  SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "%s", msg);
}

/* Index of `v` among the '|'-separated names, case-insensitive; -1 if absent. */
static int choice_index(const char *choices, const char *v, size_t len) {
  int i = 0;
  for (const char *p = choices; p && *p; i++) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == len && !strncasecmp(p, v, len)) return i;
    p = bar ? bar + 1 : NULL;
  }
  return -1;
}

/* Parses an integer with the unit suffixes the knob's type allows; false if malformed. */
static bool parse_number(int type, const char *s, long long *v_p, const char **why_p) {
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s) {
    *why_p = "not a whole number";
    return false;
  }
  if (errno == ERANGE) {
    *why_p = "too large";
    return false;
  }
  long long mult = 1;
  if (*end) {
    static const struct {
      int type;
      const char *suffix;
      long long mult;
    } units[] = {
        {SYMCOLL_ENV_MS, "ms", 1},
        {SYMCOLL_ENV_MS, "s", 1000},
        {SYMCOLL_ENV_MS, "min", 60000},
        {SYMCOLL_ENV_BYTES, "K", 1ll << 10},
        {SYMCOLL_ENV_BYTES, "KiB", 1ll << 10},
        {SYMCOLL_ENV_BYTES, "M", 1ll << 20},
        {SYMCOLL_ENV_BYTES, "MiB", 1ll << 20},
        {SYMCOLL_ENV_BYTES, "G", 1ll << 30},
        {SYMCOLL_ENV_BYTES, "GiB", 1ll << 30},
    };
    mult = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (units[i].type == type && !strcasecmp(end, units[i].suffix)) mult = units[i].mult;
    if (!mult) {
      *why_p = type == SYMCOLL_ENV_MS      ? "not a whole number of milliseconds (units: ms, s, min)"
               : type == SYMCOLL_ENV_BYTES ? "not a whole number of bytes (units: K, M, G)"
                                           : "not a whole number";
      return false;
    }
    if (v > LLONG_MAX / mult || v < LLONG_MIN / mult) {
      *why_p = "too large";
      return false;
    }
  }
  *v_p = v * mult;
  return true;
}

long long symcoll__env_int(const char *name) {
  int k = knob_index(name);
  if (k < 0) return 0;
  const knob_t *kb = &knobs[k];
  long long dflt = 0;
  const char *why = NULL;
  parse_number(kb->type, kb->dflt, &dflt, &why);
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  if (kb->type == SYMCOLL_ENV_BOOL) {
    int i = choice_index("0|1|off|on|no|yes|false|true", s, strlen(s));
    if (i >= 0) return i & 1;
    warn_once(k, "%s=%s is not 0 or 1; using %lld", name, s, dflt);
    return dflt;
  }
  long long v;
  if (!parse_number(kb->type, s, &v, &why)) {
    warn_once(k, "%s=%s is %s; using the default %lld", name, s, why, dflt);
    return dflt;
  }
  const char *unit = kb->type == SYMCOLL_ENV_MS ? " ms" : kb->type == SYMCOLL_ENV_BYTES ? " bytes" : "";
  if (v < kb->min) {
    warn_once(k, "%s=%s is below the smallest allowed value %lld%s; using the default %lld", name, s, kb->min, unit,
              dflt);
    return dflt;
  }
  if (v > kb->max) {
    warn_once(k, "%s=%s is above the largest allowed value %lld%s; using %lld", name, s, kb->max, unit, kb->max);
    return kb->max;
  }
  return v;
}

int symcoll__env_choice(const char *name) {
  int k = knob_index(name);
  if (k < 0) return 0;
  const knob_t *kb = &knobs[k];
  const char *s = getenv(name);
  int dflt = choice_index(kb->choices, kb->dflt, strlen(kb->dflt));
  if (!s || !*s) return dflt;
  int i = choice_index(kb->choices, s, strlen(s));
  if (i < 0) warn_once(k, "%s=%s is not one of %s; using %s", name, s, kb->choices, kb->dflt);
  return i < 0 ? dflt : i;
}

unsigned symcoll__env_list(const char *name, unsigned all) {
  int k = knob_index(name);
  if (k < 0) return all;
  const knob_t *kb = &knobs[k];
  const char *s = getenv(name);
  if (!s || !*s) s = kb->dflt;
  unsigned mask = 0;
  for (const char *p = s; *p;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    int i = choice_index(kb->choices, p, n);
    if (n == 3 && !strncasecmp(p, "ALL", 3))
      mask = all;
    else if (i >= 0)
      mask |= 1u << i;
    else
      warn_once(k, "%s=%s: '%.*s' is not one of %s|ALL; ignored", name, s, (int)n, p, kb->choices);
    p = comma ? comma + 1 : p + n;
  }
  return mask;
}

void symcoll__env_warn(const char *name, const char *fmt, ...) {
  int k = knob_index(name);
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (k >= 0) warn_once(k, "%s", msg);
}

const char *symcoll__env_str(const char *name, const char *dflt) {
  const char *s = getenv(name);
  return (s && *s) ? s : dflt;
}

void symcoll_env_foreach(void (*fn)(const char *, const char *, const char *, void *), void *arg) {
  if (!fn) return;
  for (int i = 0; i < NKNOBS; i++) fn(knobs[i].name, knobs[i].dflt, knobs[i].help, arg);
}
