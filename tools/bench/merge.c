/* --merge: joins CSVs of one run (symcoll-bench's and bench/peers_torch.py's) into one table;
 * --plot: latency against size on log axes, one line per column (gnuplot, else matplotlib). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAXC 24
#define MAXR 64

typedef struct {
  int ncols;
  char names[MAXC][32];
  int nrows;
  double bytes[MAXR], elems[MAXR];
  char dtype[MAXR][8];
  double us[MAXR][MAXC]; /* NAN: missing */
  double wrong[MAXR];
} merged_t;

static int col_index(merged_t *m, const char *name) {
  for (int i = 0; i < m->ncols; i++)
    if (!strcmp(m->names[i], name)) return i;
  if (m->ncols == MAXC) return -1;
  snprintf(m->names[m->ncols], sizeof m->names[0], "%s", name);
  for (int r = 0; r < MAXR; r++) m->us[r][m->ncols] = NAN;
  return m->ncols++;
}

static int row_index(merged_t *m, double bytes, const char *dt) {
  for (int r = 0; r < m->nrows; r++)
    if (m->bytes[r] == bytes && !strcmp(m->dtype[r], dt)) return r;
  if (m->nrows == MAXR) return -1;
  int r = m->nrows++;
  m->bytes[r] = bytes;
  snprintf(m->dtype[r], sizeof m->dtype[0], "%s", dt);
  for (int c = 0; c < MAXC; c++) m->us[r][c] = NAN;
  return r;
}

static int split(char *line, char **f, int max) {
  int n = 0;
  line[strcspn(line, "\r\n")] = 0;
  for (char *p = line; n < max;) {
    f[n++] = p;
    char *comma = strchr(p, ',');
    if (!comma) break;
    *comma = 0;
    p = comma + 1;
  }
  return n;
}

static int read_csv(merged_t *m, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot read %s\n", path);
    return -1;
  }
  char line[4096], *h[64], *v[64];
  char header[4096];
  if (!fgets(header, sizeof header, f)) {
    fclose(f);
    return -1;
  }
  int nh = split(header, h, 64), map[64];
  for (int i = 0; i < nh; i++) {
    size_t len = strlen(h[i]);
    map[i] = len > 3 && !strcmp(h[i] + len - 3, "_us") ? (h[i][len - 3] = 0, col_index(m, h[i])) : -1;
  }
  while (fgets(line, sizeof line, f)) {
    int n = split(line, v, 64);
    if (n < 3) continue;
    int r = row_index(m, atof(v[0]), v[2]);
    if (r < 0) continue;
    m->elems[r] = atof(v[1]);
    for (int i = 0; i < n && i < nh; i++) {
      if (map[i] >= 0 && *v[i]) m->us[r][map[i]] = atof(v[i]);
      if (!strcmp(h[i], "wrong")) m->wrong[r] += atof(v[i]);
    }
  }
  fclose(f);
  return 0;
}

static int is_symcoll(const char *n) {
  static const char *const names[] = {"oneshot", "twoshot", "oneshot_db",  "lamport", "auto",
                                      "pull",    "push",    "copy_engine", "via_nccl"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strncmp(n, names[i], strlen(names[i]))) return 1;
  return !strncmp(n, "symcoll", 7);
}

int bench_merge(int nfiles, char **files, const char *out_csv, const char *plot, const char *title) {
  merged_t *m = calloc(1, sizeof *m);
  for (int i = 0; i < nfiles; i++)
    if (read_csv(m, files[i]) != 0) return 1;
  /* The baseline of a row: the first of these peers measured in that row. */
  int bases[3], nb = 0;
  const char *baselines[] = {"nccl", "torch_nccl", "mpi"};
  for (size_t b = 0; b < 3; b++)
    for (int c = 0; c < m->ncols; c++)
      if (!strcmp(m->names[c], baselines[b])) bases[nb++] = c;
  printf("%12s %10s %5s", "bytes", "elements", "dtype");
  for (int c = 0; c < m->ncols; c++) printf(" %13s", m->names[c]);
  printf(" %7s %8s %s\n", "#wrong", "speedup", "best");
  FILE *out = out_csv ? fopen(out_csv, "w") : NULL;
  if (out) {
    fprintf(out, "bytes,elements,dtype");
    for (int c = 0; c < m->ncols; c++) fprintf(out, ",%s_us", m->names[c]);
    fprintf(out, ",wrong,speedup,best\n");
  }
  for (int r = 0; r < m->nrows; r++) {
    int best = -1, best_sc = -1;
    printf("%12.0f %10.0f %5s", m->bytes[r], m->elems[r], m->dtype[r]);
    for (int c = 0; c < m->ncols; c++) {
      double u = m->us[r][c];
      if (isnan(u))
        printf(" %13s", "n/a");
      else
        printf(" %13.2f", u);
      if (isnan(u)) continue;
      if (best < 0 || u < m->us[r][best]) best = c;
      if (is_symcoll(m->names[c]) && (best_sc < 0 || u < m->us[r][best_sc])) best_sc = c;
    }
    int base = -1;
    for (int b = 0; b < nb && base < 0; b++)
      if (!isnan(m->us[r][bases[b]])) base = bases[b];
    char speed[16] = "-";
    if (base >= 0 && best_sc >= 0) snprintf(speed, sizeof speed, "%.3f", m->us[r][base] / m->us[r][best_sc]);
    printf(" %7.0f %8s %s\n", m->wrong[r], speed, best >= 0 ? m->names[best] : "-");
    if (out) {
      fprintf(out, "%.0f,%.0f,%s", m->bytes[r], m->elems[r], m->dtype[r]);
      for (int c = 0; c < m->ncols; c++)
        if (isnan(m->us[r][c]))
          fprintf(out, ",");
        else
          fprintf(out, ",%.3f", m->us[r][c]);
      fprintf(out, ",%.0f,%s,%s\n", m->wrong[r], speed, best >= 0 ? m->names[best] : "-");
    }
  }
  if (out) fclose(out);
  free(m);
  if (plot && out_csv) return bench_plot(out_csv, plot, title ? title : "symcoll-bench (merged)");
  return 0;
}

int bench_plot(const char *csv, const char *png, const char *title) {
  FILE *f = fopen(csv, "r");
  char header[4096], *h[64];
  if (!f || !fgets(header, sizeof header, f)) {
    if (f) fclose(f);
    return 1;
  }
  fclose(f);
  int nh = split(header, h, 64);
  char script[8192];
  int n = snprintf(script, sizeof script,
                   "set terminal pngcairo noenhanced size 1000,640\nset output '%s'\nset datafile separator ','\n"
                   "set title \"%s\"\nset logscale xy\nset xlabel 'size (bytes, as nccl-tests counts it)'\n"
                   "set ylabel 'latency per call (us)'\nset key top left\nset grid\nplot ",
                   png, title ? title : "symcoll-bench");
  int first = 1;
  for (int i = 0; i < nh; i++) {
    size_t len = strlen(h[i]);
    if (len > 3 && !strcmp(h[i] + len - 3, "_us")) {
      n += snprintf(script + n, sizeof script - (size_t)n, "%s'%s' using 1:%d with linespoints title '%.*s'",
                    first ? "" : ", ", csv, i + 1, (int)len - 3, h[i]);
      first = 0;
    }
  }
  snprintf(script + n, sizeof script - (size_t)n, "\n");
  FILE *g = popen("gnuplot 2>/dev/null", "w");
  if (g) {
    fputs(script, g);
    if (pclose(g) == 0) {
      fprintf(stderr, "[bench] plot written to %s\n", png);
      return 0;
    }
  }
  fprintf(stderr, "[bench] gnuplot not available: no plot (install gnuplot-nox)\n");
  return 0;
}
