/* SPDX-License-Identifier: MIT */
/*
 * `mscclpp-trace plot trace.json -o out.png [--from US] [--to US]`: a
 * trace's spans as a picture, through gnuplot (as mscclpp-perf --plot): one
 * row per track (a rank's thread, or a GPU block's track), one box per span
 * ("X" event), coloured by category. For a docs page or a report where
 * Perfetto cannot be opened; a merged trace gives every rank on one clock.
 *
 * --from/--to (microseconds from the trace's first span) cut a window, as a
 * sweep is long and its calls short; spans that overlap the window are
 * drawn, clipped to it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/gnuplot.h"
#include "trace.h"

#define PLOT_MAX_SPANS 200000 /* more is not a picture anyone reads */
#define PLOT_MAX_TRACKS 256
#define PLOT_NAME_BYTES 64

struct span {
  int64_t ts, dur; /* ns */
  int track, cat;
};

struct track {
  int64_t pid, tid;
  int index; /* in plot.tracks (draw sorts copies) */
  char name[PLOT_NAME_BYTES];
};

/* The categories the library writes, and their colours; others are grey. */
static const char* const catNames[] = {"coll", "p2p", "gpu", "proxy", "net", "bootstrap", "api", "tools"};
static const unsigned catColors[] = {0x1f77b4, 0x17becf, 0xd62728, 0x2ca02c, 0x9467bd, 0xff7f0e, 0x8c564b, 0x7f7f7f};
#define NCATS ((int)(sizeof(catNames) / sizeof(catNames[0])))

struct plot {
  struct span* spans;
  size_t nspans, capSpans;
  struct track tracks[PLOT_MAX_TRACKS];
  int ntracks;
  char procName[PLOT_MAX_TRACKS][PLOT_NAME_BYTES]; /* by pid, where pid < PLOT_MAX_TRACKS */
  int catSeen[NCATS + 1];
  int64_t first; /* the earliest span's start */
  size_t dropped;
};

static int catOf(const char* cat) {
  for (int i = 0; cat != NULL && i < NCATS; i++)
    if (strcmp(cat, catNames[i]) == 0) return i;
  return NCATS;
}

static int trackOf(struct plot* p, int64_t pid, int64_t tid) {
  for (int i = 0; i < p->ntracks; i++)
    if (p->tracks[i].pid == pid && p->tracks[i].tid == tid) return i;
  if (p->ntracks == PLOT_MAX_TRACKS) return -1;
  struct track* t = &p->tracks[p->ntracks];
  t->pid = pid;
  t->tid = tid;
  snprintf(t->name, sizeof(t->name), "pid %" PRId64 " tid %" PRId64, pid, tid);
  return p->ntracks++;
}

/* A metadata event: names of processes and threads. */
static void readMeta(struct plot* p, const struct jsonNode* ev) {
  const char* what = jsonGetString(ev, "name");
  const struct jsonNode* args = jsonGet(ev, "args");
  const char* name = args != NULL ? jsonGetString(args, "name") : NULL;
  int64_t pid = 0, tid = 0;
  if (what == NULL || name == NULL || jsonGetInt(ev, "pid", &pid) != 0) return;
  if (strcmp(what, "process_name") == 0 && pid >= 0 && pid < PLOT_MAX_TRACKS) {
    snprintf(p->procName[pid], sizeof(p->procName[pid]), "%s", name);
  } else if (strcmp(what, "thread_name") == 0 && jsonGetInt(ev, "tid", &tid) == 0) {
    int t = trackOf(p, pid, tid);
    if (t >= 0) snprintf(p->tracks[t].name, sizeof(p->tracks[t].name), "%s", name);
  }
}

static int readSpan(struct plot* p, const struct traceFile* f, const struct jsonNode* ev, int64_t ts) {
  int64_t pid = 0, tid = 0, dur = 0;
  const struct jsonNode* d = jsonGet(ev, "dur");
  if (jsonGetInt(ev, "pid", &pid) != 0 || jsonGetInt(ev, "tid", &tid) != 0 || d == NULL ||
      traceParseMicros(d->text, &dur) != 0)
    return traceFault(f, "a span without an integer pid and tid and a \"dur\"");
  int t = trackOf(p, pid, tid);
  if (t < 0 || p->nspans == PLOT_MAX_SPANS) {
    p->dropped++;
    return 0;
  }
  if (p->nspans == p->capSpans) {
    size_t cap = p->capSpans ? 2 * p->capSpans : 4096;
    struct span* n = (struct span*)realloc(p->spans, cap * sizeof(*n));
    if (n == NULL) {
      fprintf(stderr, PROG " plot: out of memory after %zu spans\n", p->nspans);
      return -1;
    }
    p->spans = n;
    p->capSpans = cap;
  }
  struct span* s = &p->spans[p->nspans++];
  s->ts = ts;
  s->dur = dur;
  s->track = t;
  s->cat = catOf(jsonGetString(ev, "cat"));
  if (p->nspans == 1 || ts < p->first) p->first = ts;
  return 0;
}

/* Tracks in pid order, then as they came (a rank's threads stay together). */
static int byPid(const void* a, const void* b) {
  const struct track* x = (const struct track*)a;
  const struct track* y = (const struct track*)b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* Longer spans first: the short ones inside them (a collective inside an
 * API call, a kernel's blocks) are drawn over them, not under. */
static int byDurationDown(const void* a, const void* b) {
  const struct span* x = (const struct span*)a;
  const struct span* y = (const struct span*)b;
  return (x->dur < y->dur) - (x->dur > y->dur);
}

static int draw(struct plot* p, const char* gnuplot, const char* out, const char* title, double fromUs, double toUs) {
  /* rows: tracks by pid; row labels "<process>: <thread>" */
  int order[PLOT_MAX_TRACKS];
  struct track sorted[PLOT_MAX_TRACKS];
  memcpy(sorted, p->tracks, (size_t)p->ntracks * sizeof(sorted[0]));
  for (int i = 0; i < p->ntracks; i++) sorted[i].index = i;
  qsort(sorted, (size_t)p->ntracks, sizeof(sorted[0]), byPid);
  for (int row = 0; row < p->ntracks; row++) order[sorted[row].index] = row;

  char dataPath[] = "/tmp/mscclpp-trace-data-XXXXXX";
  char scriptPath[] = "/tmp/mscclpp-trace-plot-XXXXXX";
  int df = mkstemp(dataPath);
  int sf = df >= 0 ? mkstemp(scriptPath) : -1;
  FILE* d = df >= 0 ? fdopen(df, "w") : NULL;
  FILE* s = sf >= 0 ? fdopen(sf, "w") : NULL;
  if (d == NULL || s == NULL) {
    fprintf(stderr, PROG " plot: temporary files in /tmp: %s\n", strerror(errno));
    if (d) fclose(d);
    else if (df >= 0) close(df);
    if (s) fclose(s);
    else if (sf >= 0) close(sf);
    if (df >= 0) unlink(dataPath);
    if (sf >= 0) unlink(scriptPath);
    return -1;
  }
  qsort(p->spans, p->nspans, sizeof(p->spans[0]), byDurationDown);
  size_t drawn = 0;
  double lastUs = fromUs;
  for (size_t i = 0; i < p->nspans; i++) {
    const struct span* sp = &p->spans[i];
    double a = (double)(sp->ts - p->first) / 1e3, b = a + (double)sp->dur / 1e3;
    if (b < fromUs || a > toUs) continue;
    if (a < fromUs) a = fromUs;
    if (b > toUs) b = toUs;
    if (b > lastUs) lastUs = b;
    double y = (double)order[sp->track];
    /* x y xlow xhigh ylow yhigh colour */
    fprintf(d, "%.3f %.1f %.3f %.3f %.2f %.2f %u\n", (a + b) / 2, y, a, b, y - 0.38, y + 0.38, catColors[sp->cat < NCATS ? sp->cat : 7]);
    p->catSeen[sp->cat] = 1;
    drawn++;
  }
  fclose(d);
  int height = 160 + 26 * p->ntracks;
  fprintf(s, "set terminal png size 1600,%d\nset output ", height < 400 ? 400 : height);
  toolGnuplotQuoted(s, out);
  fprintf(s, "\nset title ");
  toolGnuplotQuoted(s, title);
  fprintf(s, "\nset xlabel 'time (us) from the first span'\nset yrange [%d:-1]\nset ytics (", p->ntracks);
  for (int row = 0; row < p->ntracks; row++) {
    char label[2 * PLOT_NAME_BYTES + 4];
    const struct track* t = &sorted[row];
    const char* name = t->name;
    const char* proc = t->pid >= 0 && t->pid < PLOT_MAX_TRACKS ? p->procName[t->pid] : "";
    snprintf(label, sizeof(label), "%.24s: %.28s", proc[0] ? proc : "?", name);
    fprintf(s, "%s", row ? ", " : "");
    toolGnuplotQuoted(s, label);
    fprintf(s, " %d", row);
  }
  fprintf(s, ")\nset grid xtics\nset key outside right top\nset style fill solid 0.85 noborder\n");
  fprintf(s, "set xrange [%.3f:%.3f]\nplot ", fromUs, lastUs > fromUs ? lastUs : fromUs + 1);
  toolGnuplotQuoted(s, dataPath);
  fprintf(s, " using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable notitle");
  for (int c = 0; c <= NCATS; c++)
    if (p->catSeen[c])
      fprintf(s, ", NaN with boxes lc rgb '#%06x' title '%s'", catColors[c < NCATS ? c : 7], c < NCATS ? catNames[c] : "other");
  fprintf(s, "\n");
  fclose(s);
  int rc = -1;
  pid_t pid = fork();
  if (pid == 0) {
    execl(gnuplot, "gnuplot", scriptPath, (char*)NULL);
    _exit(127);
  }
  if (pid > 0) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
    if (rc < 0) fprintf(stderr, PROG " plot: gnuplot failed (status %d) drawing %s\n", st, out);
  } else {
    fprintf(stderr, PROG " plot: fork: %s\n", strerror(errno));
  }
  unlink(dataPath);
  unlink(scriptPath);
  if (rc == 0)
    printf(PROG " plot: %zu spans on %d tracks drawn into %s%s\n", drawn, p->ntracks, out,
           p->dropped ? " (some spans left out: too many)" : "");
  return rc;
}

int tracePlot(const char* file, const char* out, double fromUs, double toUs) {
  char gnuplot[4096];
  if (!toolFindInPath("gnuplot", gnuplot, sizeof(gnuplot))) {
    fprintf(stderr, PROG " plot: gnuplot is not in PATH (apt-get install gnuplot-nox); nothing drawn\n");
    return 3;
  }
  struct plot* p = (struct plot*)calloc(1, sizeof(*p));
  if (p == NULL) {
    fprintf(stderr, PROG " plot: out of memory\n");
    return 1;
  }
  struct traceFile f;
  int res = traceOpen(&f, file);
  const struct jsonNode* ev;
  const char* ph;
  int64_t ts;
  int r = 0;
  while (res == 0 && (r = traceNext(&f, &ev, &ph, &ts)) != 0) {
    if (r < 0) {
      res = -1;
    } else if (ph[0] == 'M') {
      readMeta(p, ev);
    } else if (ph[0] == 'X') {
      res = readSpan(p, &f, ev, ts);
    }
  }
  char title[160];
  if (res == 0)
    snprintf(title, sizeof(title), "%s: %" PRId64 " rank%s, communicator %s%s", file, f.nranks,
             f.nranks == 1 ? "" : "s", f.comm, f.merged ? " (merged)" : "");
  traceClose(&f);
  if (res == 0 && p->nspans == 0) {
    fprintf(stderr, PROG " plot: %s has no spans to draw\n", file);
    res = -1;
  }
  if (res == 0) res = draw(p, gnuplot, out, title, fromUs, toUs);
  free(p->spans);
  free(p);
  return res == 0 ? 0 : 1;
}
