/* SPDX-License-Identifier: MIT */
/*
 * `mscclpp-trace summary trace.json...`: the collectives of a trace as
 * nccl-tests prints them, per collective and size.
 *
 * A call is one (communicator, sequence number): the "coll" spans of every
 * rank the files hold (a merged trace, or the ranks' own files) for that
 * call are one call, and its time is its slowest rank's span, from the call
 * to its return (on a GPU: its enqueueing; the kernels' blocks are the
 * "gpu" spans). Rows group the calls of one collective, size, type,
 * operator and root; time is their mean, algbw size / time, and busbw
 * algbw times nccl-tests' factor for the collective (PERFORMANCE.md); the
 * minimum, median and maximum follow (a first call that connects, or a
 * checked call, weighs on the mean, not on the median).
 * Only the calls of the communicator the first file names are counted,
 * unless --all-comms (a hierarchical allreduce's steps on its child
 * communicators are calls of their own).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define NAME_MAX_BYTES 32

struct group {
  char coll[NAME_MAX_BYTES], type[NAME_MAX_BYTES], op[NAME_MAX_BYTES];
  int64_t nranks, size, count, root;
  int64_t calls;
  double sumUs, minUs, maxUs, medianUs;
  double* us; /* every call's time (printTable) */
};

struct call {
  uint64_t comm, seq; /* seq 0: an empty slot */
  int group;
  int64_t durNs; /* the slowest rank's so far */
};

struct table {
  struct group* groups;
  int ngroups, capGroups;
  struct call* calls; /* open addressing by (comm, seq) */
  size_t ncalls, capCalls;
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static struct call* findCall(struct table* t, uint64_t comm, uint64_t seq, int* isNew) {
  if ((t->ncalls + 1) * 2 > t->capCalls) {
    size_t cap = t->capCalls ? t->capCalls * 2 : 1024;
    struct call* c = (struct call*)calloc(cap, sizeof(*c));
    if (c == NULL) return NULL;
    for (size_t i = 0; i < t->capCalls; i++) {
      if (t->calls[i].seq == 0) continue;
      size_t j = mix(t->calls[i].comm ^ mix(t->calls[i].seq)) & (cap - 1);
      while (c[j].seq != 0) j = (j + 1) & (cap - 1);
      c[j] = t->calls[i];
    }
    free(t->calls);
    t->calls = c;
    t->capCalls = cap;
  }
  size_t j = mix(comm ^ mix(seq)) & (t->capCalls - 1);
  while (t->calls[j].seq != 0 && !(t->calls[j].comm == comm && t->calls[j].seq == seq)) j = (j + 1) & (t->capCalls - 1);
  *isNew = t->calls[j].seq == 0;
  if (*isNew) {
    t->calls[j].comm = comm;
    t->calls[j].seq = seq;
    t->ncalls++;
  }
  return &t->calls[j];
}

static int findGroup(struct table* t, const struct group* g) {
  for (int i = 0; i < t->ngroups; i++) {
    const struct group* h = &t->groups[i];
    if (strcmp(h->coll, g->coll) == 0 && strcmp(h->type, g->type) == 0 && strcmp(h->op, g->op) == 0 &&
        h->nranks == g->nranks && h->size == g->size && h->count == g->count && h->root == g->root)
      return i;
  }
  if (t->ngroups == t->capGroups) {
    int cap = t->capGroups ? t->capGroups * 2 : 64;
    struct group* p = (struct group*)realloc(t->groups, (size_t)cap * sizeof(*p));
    if (p == NULL) return -1;
    t->groups = p;
    t->capGroups = cap;
  }
  t->groups[t->ngroups] = *g;
  t->groups[t->ngroups].us = NULL;
  return t->ngroups++;
}

static double busFactor(const char* coll, int64_t n) {
  if (n <= 0) return 1.0;
  if (strcmp(coll, "allreduce") == 0) return 2.0 * (double)(n - 1) / (double)n;
  if (strcmp(coll, "allgather") == 0 || strcmp(coll, "reducescatter") == 0 || strcmp(coll, "alltoall") == 0)
    return (double)(n - 1) / (double)n;
  return 1.0;
}

static void copyName(char* dst, const char* src) { snprintf(dst, NAME_MAX_BYTES, "%s", src != NULL ? src : "-"); }

/* One "coll" span into the table. 0, or -1 (reported). */
static int addSpan(struct traceFile* f, struct table* t, const struct jsonNode* ev, uint64_t mainComm, int allComms) {
  const struct jsonNode* args = jsonGet(ev, "args");
  const char* comm = jsonGetString(args, "comm");
  int64_t seq, size, nranks, dur;
  if (args == NULL || comm == NULL || jsonGetInt(args, "seq", &seq) != 0 || jsonGetInt(args, "size", &size) != 0 ||
      jsonGetInt(args, "nranks", &nranks) != 0 || seq <= 0)
    return traceFault(f, "a collective's span without its arguments (comm, seq >= 1, size, nranks)");
  char* end = NULL;
  uint64_t commId = strtoull(comm, &end, 16);
  if (end == comm || *end != '\0') return traceFault(f, "\"comm\" is not a hex number: %s", comm);
  if (!allComms && commId != mainComm) return 0;
  (void)traceParseMicros(jsonGet(ev, "dur")->text, &dur); /* checked by traceNext */
  int isNew = 0;
  struct call* c = findCall(t, commId, (uint64_t)seq, &isNew);
  if (c == NULL) return traceFault(f, "out of memory");
  if (isNew) {
    struct group g;
    memset(&g, 0, sizeof(g));
    copyName(g.coll, jsonGetString(ev, "name"));
    copyName(g.type, jsonGetString(args, "type"));
    copyName(g.op, jsonGetString(args, "op"));
    g.nranks = nranks;
    g.size = size;
    g.count = -1;
    g.root = -1;
    (void)jsonGetInt(args, "count", &g.count);
    /* as nccl-tests prints them: a root only where there is one, an
     * operator only where something is reduced */
    if (strcmp(g.coll, "broadcast") == 0 || strcmp(g.coll, "reduce") == 0) (void)jsonGetInt(args, "root", &g.root);
    if (strcmp(g.coll, "allgather") == 0 || strcmp(g.coll, "broadcast") == 0 || strcmp(g.coll, "alltoall") == 0)
      copyName(g.op, NULL);
    if ((c->group = findGroup(t, &g)) < 0) return traceFault(f, "out of memory");
    c->durNs = dur;
  } else if (dur > c->durNs) {
    c->durNs = dur;
  }
  return 0;
}

static int byRow(const void* a, const void* b) {
  const struct group* x = (const struct group*)a;
  const struct group* y = (const struct group*)b;
  int c = strcmp(x->coll, y->coll);
  if (c != 0) return c;
  if (x->nranks != y->nranks) return x->nranks < y->nranks ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  if ((c = strcmp(x->type, y->type)) != 0) return c;
  if ((c = strcmp(x->op, y->op)) != 0) return c;
  return x->root < y->root ? -1 : x->root > y->root;
}

static int byValue(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* 0, or -1 out of memory (reported). */
static int printTable(struct table* t, int nfiles, const char* mainComm, int allComms) {
  size_t* n = (size_t*)calloc((size_t)t->ngroups + 1, sizeof(size_t));
  if (n == NULL) return fprintf(stderr, PROG ": out of memory\n"), -1;
  for (size_t i = 0; i < t->capCalls; i++)
    if (t->calls[i].seq != 0) n[t->calls[i].group]++;
  int res = 0;
  for (int i = 0; i < t->ngroups && res == 0; i++)
    if ((t->groups[i].us = (double*)malloc((n[i] + 1) * sizeof(double))) == NULL) res = -1;
  free(n);
  if (res != 0) return fprintf(stderr, PROG ": out of memory\n"), -1;
  for (size_t i = 0; i < t->capCalls; i++) {
    const struct call* c = &t->calls[i];
    if (c->seq == 0) continue;
    struct group* g = &t->groups[c->group];
    double us = (double)c->durNs / 1e3;
    g->us[g->calls++] = us;
    g->sumUs += us;
  }
  for (int i = 0; i < t->ngroups; i++) {
    struct group* g = &t->groups[i];
    qsort(g->us, (size_t)g->calls, sizeof(double), byValue);
    g->minUs = g->us[0];
    g->maxUs = g->us[g->calls - 1];
    g->medianUs = g->calls % 2 ? g->us[g->calls / 2] : (g->us[g->calls / 2 - 1] + g->us[g->calls / 2]) / 2;
  }
  qsort(t->groups, (size_t)t->ngroups, sizeof(*t->groups), byRow);
  printf("# mscclpp-trace summary: %d file%s, %zu calls of %s%s\n", nfiles, nfiles == 1 ? "" : "s", t->ncalls,
         allComms ? "every communicator" : "communicator ", allComms ? "" : mainComm);
  printf("# a call's time: its slowest rank's, from the call to its return; time: the mean over the calls\n");
  const char* last = "";
  int64_t lastN = -1;
  for (int i = 0; i < t->ngroups; i++) {
    const struct group* g = &t->groups[i];
    if (strcmp(g->coll, last) != 0 || g->nranks != lastN) {
      printf("#\n# %s, %" PRId64 " ranks\n", g->coll, g->nranks);
      printf("# %10s  %12s  %8s  %6s  %6s  %6s  %9s  %7s  %7s  %9s  %9s  %9s\n", "size", "count", "type", "redop",
             "root", "calls", "time", "algbw", "busbw", "min", "median", "max");
      printf("# %10s  %12s  %8s  %6s  %6s  %6s  %9s  %7s  %7s  %9s  %9s  %9s\n", "(B)", "(elements)", "", "", "", "",
             "(us)", "(GB/s)", "(GB/s)", "(us)", "(us)", "(us)");
      last = g->coll;
      lastN = g->nranks;
    }
    double us = g->calls > 0 ? g->sumUs / (double)g->calls : 0;
    double algbw = us > 0 ? (double)g->size / (us * 1e3) : 0;
    char count[24] = "-", root[24] = "-";
    if (g->count >= 0) snprintf(count, sizeof(count), "%" PRId64, g->count);
    if (g->root >= 0) snprintf(root, sizeof(root), "%" PRId64, g->root);
    printf("  %10" PRId64 "  %12s  %8s  %6s  %6s  %6" PRId64 "  %9.2f  %7.2f  %7.2f  %9.2f  %9.2f  %9.2f\n", g->size,
           count, g->type, g->op, root, g->calls, us, algbw, algbw * busFactor(g->coll, g->nranks), g->minUs,
           g->medianUs, g->maxUs);
  }
  return 0;
}

int traceSummary(int nfiles, char** files, int allComms) {
  struct table t;
  memset(&t, 0, sizeof(t));
  uint64_t mainComm = 0;
  char mainText[40] = "";
  int res = 0;
  for (int i = 0; i < nfiles && res == 0; i++) {
    struct traceFile f;
    if (traceOpen(&f, files[i]) != 0) {
      traceClose(&f);
      res = -1;
      break;
    }
    if (i == 0) {
      char* end = NULL;
      mainComm = strtoull(f.comm, &end, 16);
      snprintf(mainText, sizeof(mainText), "%s", f.comm);
      if (end == f.comm || *end != '\0') res = traceFault(&f, "otherData's \"comm\" is not a hex number");
    }
    const struct jsonNode* ev;
    const char* ph;
    int64_t ts;
    int r;
    while (res == 0 && (r = traceNext(&f, &ev, &ph, &ts)) != 0) {
      if (r < 0) {
        res = -1;
        break;
      }
      const char* cat = jsonGetString(ev, "cat");
      if (ph[0] == 'X' && cat != NULL && strcmp(cat, "coll") == 0) res = addSpan(&f, &t, ev, mainComm, allComms);
    }
    traceClose(&f);
  }
  if (res == 0) res = printTable(&t, nfiles, mainText, allComms);
  for (int i = 0; i < t.ngroups; i++) free(t.groups[i].us);
  free(t.groups);
  free(t.calls);
  return res == 0 ? 0 : 1;
}
