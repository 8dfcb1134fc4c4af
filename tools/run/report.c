/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-run --report: parse the ranks' hang reports and diagnose (report.h).
 *
 * A diagnosis, per communicator: S is the highest call number any rank
 * issued. Ranks that issued S but different collectives: "ranks 0-2 are in
 * allreduce #57, rank 3 in allgather #57: the ranks called different
 * collectives". A rank whose last call is below S: "rank 3 never entered
 * allreduce #57 (its last call was broadcast #56, completed)". A rank of
 * the communicator with no report: named. Then what each rank waits for,
 * its host's wait and its kernels' (the wait board's notes), with the
 * peer's own last call: "rank 2 waits in allreduce #57 for a data signal
 * from rank 3 on semaphore 5 (expected 58, has 57) for 2001 ms; rank 3's
 * last call was broadcast #56 (completed)". Then each rank's proxy with
 * triggers pending.
 */
#include "run/report.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "mscclpp-report: "
#define MAX_COMMS 8 /* per rank */

#define MAX_DEVWAITS 8 /* per communicator and rank: distinct device waits kept */
#define MAX_TRIGGERS 4

/* A device-side wait (a devwait line). */
struct devWait {
  char what[16], state[16], chan[16], callKind[32];
  int peer; /* -1: unknown */
  uint64_t sem, expect, has, call, waitedMs;
  int hasKnown;
};

struct trigger {
  uint64_t pos, chan, bytes;
  int peer;
  char op[32];
};

struct commState {
  uint64_t id;
  int rank, nranks;
  char kind[32];
  uint64_t issued, completed;
  char state[16];
  int hasWait;
  char waitWhat[16], waitChan[16];
  int waitPeer, waitHasKnown;
  uint64_t waitSem, waitExpect, waitHas, waitedMs;
  int ndev;
  struct devWait dev[MAX_DEVWAITS];
  int hasProxy, ntrig;
  char proxyState[16];
  uint64_t proxyTail, proxyPending;
  struct trigger trig[MAX_TRIGGERS];
  uint64_t erredCall; /* the call an error report (why=error) found in progress: it fails */
};

struct rankReports {
  int ncomms;
  struct commState comms[MAX_COMMS];
  int expected, answered;
  int inError; /* the rank's report being read is of an error (why=error) */
};

struct runReports {
  int nranks;
  int fresh;
  struct rankReports* r;
};

struct runReports* runReportsCreate(int nranks) {
  struct runReports* rr = calloc(1, sizeof(*rr));
  if (rr == NULL) return NULL;
  rr->r = calloc((size_t)nranks, sizeof(*rr->r));
  if (rr->r == NULL) {
    free(rr);
    return NULL;
  }
  rr->nranks = nranks;
  return rr;
}

void runReportsDestroy(struct runReports* rr) {
  if (rr == NULL) return;
  free(rr->r);
  free(rr);
}

/* The value of " key=" in line (up to the next space) into out; 0 when absent. */
static int field(const char* line, const char* key, char* out, size_t size) {
  char pat[32];
  snprintf(pat, sizeof(pat), " %s=", key);
  const char* p = strstr(line, pat);
  if (p == NULL) return 0;
  p += strlen(pat);
  size_t n = strcspn(p, " ");
  if (n >= size) n = size - 1;
  memcpy(out, p, n);
  out[n] = '\0';
  return 1;
}

static int fieldU(const char* line, const char* key, uint64_t* v) {
  char t[32];
  if (!field(line, key, t, sizeof(t))) return 0;
  char* end = NULL;
  *v = strtoull(t, &end, 0);
  return end != t;
}

static struct commState* commOf(struct rankReports* rk, uint64_t id) {
  for (int i = 0; i < rk->ncomms; i++)
    if (rk->comms[i].id == id) return &rk->comms[i];
  if (rk->ncomms == MAX_COMMS) return NULL;
  struct commState* c = &rk->comms[rk->ncomms++];
  memset(c, 0, sizeof(*c));
  c->id = id;
  return c;
}

int runReportsLine(struct runReports* rr, int rank, const char* text, size_t len) {
  if (rank < 0 || rank >= rr->nranks || len < sizeof(PREFIX) - 1 || strncmp(text, PREFIX, sizeof(PREFIX) - 1) != 0)
    return 0;
  char line[1024];
  line[0] = ' ';
  size_t n = len - (sizeof(PREFIX) - 1) < sizeof(line) - 2 ? len - (sizeof(PREFIX) - 1) : sizeof(line) - 2;
  memcpy(line + 1, text + sizeof(PREFIX) - 1, n); /* " pid=... key=value ...": every key follows a space */
  line[n + 1] = '\0';
  while (n > 0 && (line[n] == '\n' || line[n] == '\r')) line[n--] = '\0';
  struct rankReports* rk = &rr->r[rank];
  rr->fresh = 1;
  char why[16], t[32];
  if (field(line, "why", why, sizeof(why))) {
    rk->inError = strcmp(why, "error") == 0;
    /* a new report updates the last; a wait stays known while the call it
     * was in is the rank's last (a report on SIGUSR1 after a wait timed out
     * has none) */
    return strcmp(why, "signal") != 0 ? 2 : 1;
  }
  size_t l = strlen(line);
  if (l >= 4 && strcmp(line + l - 4, " end") == 0) {
    rk->answered = 1;
    return 3;
  }
  uint64_t id = 0;
  if (!fieldU(line, "comm", &id)) return 1;
  struct commState* c = commOf(rk, id);
  if (c == NULL) return 1;
  uint64_t v = 0;
  if (fieldU(line, "rank", &v)) c->rank = (int)v;
  if (field(line, "issued", t, sizeof(t))) {
    char* hash = strchr(t, '#');
    if (hash != NULL) {
      *hash = '\0';
      snprintf(c->kind, sizeof(c->kind), "%s", t);
      uint64_t issued = strtoull(hash + 1, NULL, 10);
      if (issued != c->issued) c->hasWait = c->ndev = 0; /* waits of an earlier call */
      c->issued = issued;
    }
    if (fieldU(line, "nranks", &v)) c->nranks = (int)v;
    if (fieldU(line, "completed", &v)) c->completed = v;
    field(line, "state", c->state, sizeof(c->state));
    if (rk->inError && strcmp(c->state, "in-call") == 0) c->erredCall = c->issued;
  } else if (field(line, "wait", c->waitWhat, sizeof(c->waitWhat))) {
    c->hasWait = 1;
    c->waitSem = 0;
    fieldU(line, "sem", &c->waitSem);
    if (!field(line, "chan", c->waitChan, sizeof(c->waitChan))) c->waitChan[0] = '\0';
    if (field(line, "peer", t, sizeof(t))) c->waitPeer = atoi(t);
    fieldU(line, "expect", &c->waitExpect);
    c->waitHasKnown = fieldU(line, "has", &c->waitHas);
    fieldU(line, "waited_ms", &c->waitedMs);
  } else if (field(line, "devwait", t, sizeof(t))) {
    struct devWait d;
    memset(&d, 0, sizeof(d));
    field(line, "devwait", d.what, sizeof(d.what));
    field(line, "state", d.state, sizeof(d.state));
    field(line, "chan", d.chan, sizeof(d.chan));
    d.peer = field(line, "peer", t, sizeof(t)) ? atoi(t) : -1;
    fieldU(line, "sem", &d.sem);
    fieldU(line, "expect", &d.expect);
    d.hasKnown = fieldU(line, "has", &d.has);
    fieldU(line, "waited_ms", &d.waitedMs);
    if (field(line, "call", t, sizeof(t))) {
      char* hash = strchr(t, '#');
      if (hash != NULL) {
        *hash = '\0';
        snprintf(d.callKind, sizeof(d.callKind), "%s", t);
        d.call = strtoull(hash + 1, NULL, 10);
      }
    }
    /* the same wait again (another report, or another block waiting for the
     * same): keep one, the latest */
    int i = 0;
    while (i < c->ndev && !(c->dev[i].peer == d.peer && c->dev[i].sem == d.sem && c->dev[i].expect == d.expect &&
                            strcmp(c->dev[i].what, d.what) == 0))
      i++;
    if (i < MAX_DEVWAITS) {
      c->dev[i] = d;
      if (i == c->ndev) c->ndev++;
    }
  } else if (field(line, "proxy", t, sizeof(t))) {
    c->hasProxy = 1;
    c->ntrig = 0;
    field(line, "state", c->proxyState, sizeof(c->proxyState));
    fieldU(line, "tail", &c->proxyTail);
    fieldU(line, "pending", &c->proxyPending);
  } else if (field(line, "trigger", t, sizeof(t))) {
    if (c->ntrig < MAX_TRIGGERS) {
      struct trigger* g = &c->trig[c->ntrig++];
      memset(g, 0, sizeof(*g));
      g->pos = strtoull(t, NULL, 10);
      field(line, "op", g->op, sizeof(g->op));
      fieldU(line, "chan", &g->chan);
      fieldU(line, "bytes", &g->bytes);
      g->peer = field(line, "peer", t, sizeof(t)) ? atoi(t) : -1;
    }
  }
  return 1;
}

void runReportsAsk(struct runReports* rr) {
  for (int r = 0; r < rr->nranks; r++) rr->r[r].expected = rr->r[r].answered = 0;
}

void runReportsExpect(struct runReports* rr, int rank) {
  if (rank >= 0 && rank < rr->nranks) rr->r[rank].expected = 1;
}

int runReportsAnswered(const struct runReports* rr) {
  for (int r = 0; r < rr->nranks; r++)
    if (rr->r[r].expected && !rr->r[r].answered) return 0;
  return 1;
}

int runReportsFresh(const struct runReports* rr) { return rr->fresh; }

/* "rank 3" / "ranks 0, 2-3" of sel[0..n) into out. */
static void rankList(const unsigned char* sel, int n, char* out, size_t size) {
  int count = 0;
  for (int r = 0; r < n; r++) count += sel[r] != 0;
  size_t o = (size_t)snprintf(out, size, "%s", count == 1 ? "rank " : "ranks ");
  int first = 1;
  for (int r = 0; r < n && o < size; r++) {
    if (!sel[r]) continue;
    int e = r;
    while (e + 1 < n && sel[e + 1]) e++;
    if (e == r)
      o += (size_t)snprintf(out + o, size - o, "%s%d", first ? "" : ", ", r);
    else
      o += (size_t)snprintf(out + o, size - o, "%s%d-%d", first ? "" : ", ", r, e);
    first = 0;
    r = e;
  }
}

/* Whether c's last call failed: its report says so, or an error report of
 * the rank was made while that call was in progress (the call returns the
 * error; a later report taken before it returned still says in-call). */
static int lastCallFailed(const struct commState* c) {
  return strcmp(c->state, "failed") == 0 ||
         (c->erredCall != 0 && c->erredCall == c->issued && c->completed != c->issued);
}

/* "; rank 3's last call was broadcast #56 (completed)" about `peer` for a
 * rank waiting in `kind` #seq, into out. */
static void peerCall(const struct commState* const* st, int peer, const char* kind, uint64_t seq, char* out,
                     size_t size) {
  out[0] = '\0';
  if (peer < 0) return;
  const struct commState* p = st[peer];
  const int failed = p != NULL && lastCallFailed(p);
  if (p == NULL) {
    snprintf(out, size, "; rank %d sent no report", peer);
  } else if (p->issued == 0) {
    snprintf(out, size, "; rank %d has made no call on this communicator", peer);
  } else if (p->issued == seq && strcmp(p->kind, kind) == 0 && p->completed != seq && !failed) {
    snprintf(out, size, "; rank %d is in %s #%" PRIu64 " too", peer, p->kind, p->issued);
  } else {
    const char* how = p->completed == p->issued ? "completed" : failed ? "failed" : "not completed";
    snprintf(out, size, "; rank %d's last call was %s #%" PRIu64 " (%s)", peer, p->kind, p->issued, how);
  }
}

/* " on semaphore 5" (and " of a port channel" when chan is given) */
static void semText(uint64_t sem, const char* chan, char* out, size_t size) {
  out[0] = '\0';
  if (sem == 0) return;
  size_t o = (size_t)snprintf(out, size, " on semaphore %" PRIu64, sem);
  if (chan != NULL && chan[0] != '\0' && o < size) snprintf(out + o, size - o, " of a %s channel", chan);
}

/* " (expected 58, has 57)" */
static void valueText(uint64_t expect, int hasKnown, uint64_t has, char* out, size_t size) {
  if (hasKnown)
    snprintf(out, size, " (expected %" PRIu64 ", has %" PRIu64 ")", expect, has);
  else
    snprintf(out, size, " (expected %" PRIu64 ")", expect);
}

static void describeHostWait(FILE* f, const char* prefix, int r, const struct commState* c,
                             const struct commState* const* st) {
  const int failed = strcmp(c->state, "failed") == 0;
  char sem[96], value[64], peer[160];
  semText(c->waitSem, NULL, sem, sizeof(sem));
  valueText(c->waitExpect, c->waitHasKnown, c->waitHas, value, sizeof(value));
  peerCall(st, c->waitPeer, c->kind, c->issued, peer, sizeof(peer));
  fprintf(f, "%s  rank %d %s in %s #%" PRIu64 " for a %s%ssignal from rank %d%s%s for %" PRIu64 " ms%s%s\n", prefix,
          r, failed ? "waited" : "waits", c->kind, c->issued, c->waitChan, c->waitChan[0] != '\0' ? " " : "",
          c->waitPeer, sem, value, c->waitedMs, failed ? ", then failed" : "", peer);
}

static void describeDevWait(FILE* f, const char* prefix, int r, const struct commState* c, const struct devWait* d,
                            const struct commState* const* st) {
  const int out = strcmp(d->state, "timedout") == 0;
  char call[64], sem[96], value[64], peer[160], ms[32];
  if (d->call != 0)
    snprintf(call, sizeof(call), " in %s #%" PRIu64, d->callKind, d->call);
  else
    call[0] = '\0';
  ms[0] = '\0';
  if (d->waitedMs > 0) snprintf(ms, sizeof(ms), " for %" PRIu64 " ms", d->waitedMs);
  /* the peer's own call, where the wait belongs to one */
  peer[0] = '\0';
  if (d->call != 0)
    peerCall(st, d->peer, d->callKind, d->call, peer, sizeof(peer));
  else if (c->issued != 0)
    peerCall(st, d->peer, c->kind, c->issued, peer, sizeof(peer));
  const char* verb = out ? "timed out waiting" : "waits";
  if (strcmp(d->what, "semaphore") == 0 || strcmp(d->what, "flag") == 0) {
    const int flag = strcmp(d->what, "flag") == 0;
    semText(d->sem, flag ? NULL : d->chan, sem, sizeof(sem));
    valueText(d->expect, d->hasKnown, d->has, value, sizeof(value));
    char from[32] = "";
    if (d->peer >= 0) snprintf(from, sizeof(from), " from rank %d", d->peer);
    fprintf(f, "%s  rank %d's kernel %s%s for a %s%s%s%s%s%s\n", prefix, r, verb, call, flag ? "flag" : "signal",
            from, sem, value, ms, peer);
  } else {
    const char* what = strcmp(d->what, "fifo-push") == 0   ? "a free FIFO slot for position"
                       : strcmp(d->what, "fifo-sync") == 0 ? "its proxy to take FIFO position"
                                                           : "its proxy to complete FIFO position";
    fprintf(f, "%s  rank %d's kernel %s%s for %s %" PRIu64 "%s\n", prefix, r, verb, call, what, d->expect, ms);
  }
}

static void describeProxy(FILE* f, const char* prefix, int r, const struct commState* c) {
  fprintf(f, "%s  rank %d's proxy (%s) has %" PRIu64 " trigger%s pending at FIFO position %" PRIu64 "%s", prefix, r,
          c->proxyState[0] != '\0' ? c->proxyState : "?", c->proxyPending, c->proxyPending == 1 ? "" : "s",
          c->proxyTail, c->ntrig > 0 ? ": " : "\n");
  for (int i = 0; i < c->ntrig; i++) {
    const struct trigger* g = &c->trig[i];
    fprintf(f, "%s%s", i > 0 ? ", " : "", g->op);
    if (g->bytes > 0) fprintf(f, " of %" PRIu64 " bytes", g->bytes);
    if (g->peer >= 0) fprintf(f, " to rank %d", g->peer);
    fprintf(f, " (channel %" PRIu64 ")", g->chan);
  }
  if (c->ntrig > 0) fprintf(f, "%s\n", (uint64_t)c->ntrig < c->proxyPending ? ", ..." : "");
}

static void diagnoseComm(struct runReports* rr, uint64_t id, FILE* f, const char* prefix) {
  /* the communicator's ranks, by their rank in it */
  int n = 0;
  for (int q = 0; q < rr->nranks; q++)
    for (int i = 0; i < rr->r[q].ncomms; i++)
      if (rr->r[q].comms[i].id == id && rr->r[q].comms[i].nranks > n) n = rr->r[q].comms[i].nranks;
  if (n <= 0 || n > 65536) return;
  const struct commState** st = calloc((size_t)n, sizeof(*st));
  unsigned char* sel = calloc((size_t)n, 1);
  unsigned char* done = calloc((size_t)n, 1);
  char* list = malloc(4096);
  if (st == NULL || sel == NULL || done == NULL || list == NULL) goto out_free;
  for (int q = 0; q < rr->nranks; q++)
    for (int i = 0; i < rr->r[q].ncomms; i++) {
      const struct commState* c = &rr->r[q].comms[i];
      if (c->id == id && c->rank >= 0 && c->rank < n) st[c->rank] = c;
    }
  uint64_t top = 0;
  for (int r = 0; r < n; r++)
    if (st[r] != NULL && st[r]->issued > top) top = st[r]->issued;
  /* the kind most ranks at `top` issued */
  const char* topKind = "?";
  int best = 0;
  for (int r = 0; r < n; r++) {
    if (st[r] == NULL || st[r]->issued != top) continue;
    int c = 0;
    for (int q = 0; q < n; q++) c += st[q] != NULL && st[q]->issued == top && strcmp(st[q]->kind, st[r]->kind) == 0;
    if (c > best) best = c, topKind = st[r]->kind;
  }
  fprintf(f, "%shang report of communicator 0x%016" PRIx64 " (%d ranks):\n", prefix, id, n);
  int problems = 0;
  /* who is in call #top, grouped by collective */
  int groups = 0;
  char line[8192];
  size_t o = 0;
  line[0] = '\0';
  for (int r = 0; r < n; r++) {
    if (st[r] == NULL || st[r]->issued != top || done[r]) continue;
    memset(sel, 0, (size_t)n);
    for (int q = r; q < n; q++)
      if (st[q] != NULL && st[q]->issued == top && !done[q] && strcmp(st[q]->kind, st[r]->kind) == 0)
        sel[q] = done[q] = 1;
    rankList(sel, n, list, 4096);
    int count = 0;
    for (int q = 0; q < n; q++) count += sel[q];
    if (o < sizeof(line))
      o += (size_t)snprintf(line + o, sizeof(line) - o, "%s%s%s %s #%" PRIu64, groups ? ", " : "", list,
                            groups ? " in" : count == 1 ? " is in" : " are in", st[r]->kind, top);
    groups++;
  }
  if (groups > 1) {
    fprintf(f, "%s  %s: the ranks called different collectives\n", prefix, line);
    problems++;
  }
  /* ranks behind */
  for (int r = 0; r < n; r++) {
    if (st[r] == NULL || st[r]->issued >= top) continue;
    problems++;
    if (st[r]->issued == 0) {
      fprintf(f, "%s  rank %d never entered %s #%" PRIu64 " (it has made no collective call on this communicator)\n",
              prefix, r, topKind, top);
    } else {
      const char* how = st[r]->completed == st[r]->issued ? "completed"
                        : lastCallFailed(st[r])             ? "failed"
                                                               : "not completed";
      fprintf(f, "%s  rank %d never entered %s #%" PRIu64 " (its last call was %s #%" PRIu64 ", %s)\n", prefix, r,
              topKind, top, st[r]->kind, st[r]->issued, how);
    }
  }
  memset(sel, 0, (size_t)n);
  int missing = 0;
  for (int r = 0; r < n; r++) missing += sel[r] = st[r] == NULL;
  if (missing > 0) {
    rankList(sel, n, list, 4096);
    fprintf(f, "%s  %s sent no report (exited, or does not catch SIGUSR1)\n", prefix, list);
    problems++;
  }
  if (problems == 0) {
    int idle = 1;
    for (int r = 0; r < n; r++) idle &= st[r]->completed == top;
    if (top == 0)
      fprintf(f, "%s  no rank has made a collective call on this communicator\n", prefix);
    else if (idle)
      fprintf(f, "%s  every rank has completed %s #%" PRIu64 ": no call is stuck\n", prefix, topKind, top);
    else
      fprintf(f, "%s  %s: the ranks' calls agree; see the waits\n", prefix, line);
  }
  for (int r = 0; r < n; r++) {
    if (st[r] == NULL) continue;
    if (st[r]->hasWait) describeHostWait(f, prefix, r, st[r], st);
    for (int i = 0; i < st[r]->ndev; i++) describeDevWait(f, prefix, r, st[r], &st[r]->dev[i], st);
    if (st[r]->hasProxy && (st[r]->proxyPending > 0 || strcmp(st[r]->proxyState, "stopped") == 0))
      describeProxy(f, prefix, r, st[r]);
  }
out_free:
  free(st);
  free(sel);
  free(done);
  free(list);
}

void runReportsDiagnose(struct runReports* rr, FILE* f, const char* prefix) {
  rr->fresh = 0;
  uint64_t seen[64];
  int nseen = 0;
  for (int q = 0; q < rr->nranks; q++)
    for (int i = 0; i < rr->r[q].ncomms; i++) {
      uint64_t id = rr->r[q].comms[i].id;
      int known = 0;
      for (int k = 0; k < nseen; k++) known |= seen[k] == id;
      if (known || nseen == 64) continue;
      seen[nseen++] = id;
      diagnoseComm(rr, id, f, prefix);
    }
  fflush(f);
}
