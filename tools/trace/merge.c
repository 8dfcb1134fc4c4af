/* SPDX-License-Identifier: MIT */
/*
 * `mscclpp-trace merge rank*.json -o job.json`: one timeline for the job.
 *
 * Each rank's times are its own CLOCK_MONOTONIC; its file says the offset
 * to rank 0's clock that the bootstrap measured at init (otherData's
 * clock_offset_ns), which merge adds to every "ts". Events keep their pid
 * (rank + 1: one process group per rank in Perfetto, which gives pid 0 a
 * meaning of its own) and tid (a thread, or a GPU block's track). Every file is read whole first, so that a malformed
 * one is refused before anything is written; then the files, each sorted,
 * are merged by time in one pass (a heap of the files' next events).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

/* A file's next event, waiting to be written. */
struct head {
  struct traceFile t;
  const struct jsonNode* ev;
  const char* ph;
  int64_t ts; /* aligned; INT64_MIN for metadata ("M"), which goes first */
  int live;
};

static int advance(struct head* h) {
  int r = traceNext(&h->t, &h->ev, &h->ph, &h->ts);
  if (r < 0) return -1;
  h->live = r;
  if (r == 1) h->ts = h->ph[0] == 'M' ? INT64_MIN : h->ts + h->t.clockOffsetNs;
  return 0;
}

/* An event with its "ts" moved to the job's clock. */
static void writeEvent(FILE* out, const struct head* h) {
  fputc('{', out);
  for (const struct jsonNode* m = h->ev->child; m != NULL; m = m->next) {
    if (m != h->ev->child) fputc(',', out);
    jsonWriteString(out, m->key, strlen(m->key));
    fputc(':', out);
    if (strcmp(m->key, "ts") == 0 && h->ph[0] != 'M')
      traceWriteMicros(out, h->ts);
    else
      jsonWrite(out, m);
  }
  fputc('}', out);
}

/* Check every file through and count its events; 0 or -1 (printed). */
static int checkAll(int n, char** files, int64_t* events, int64_t* dropped, int64_t* maxRtt) {
  const char* comm0 = NULL;
  char* comm0Copy = NULL;
  int64_t nranks0 = 0;
  int* seen = NULL;
  int res = 0;
  *events = *dropped = *maxRtt = 0;
  for (int i = 0; i < n && res == 0; i++) {
    struct traceFile t;
    if (traceOpen(&t, files[i]) != 0) {
      traceClose(&t);
      res = -1;
      break;
    }
    int64_t v = 0;
    if (t.merged) {
      res = traceMetaFault(&t, "already a merged trace; merge the ranks' own files");
    } else if (i == 0) {
      comm0 = comm0Copy = strdup(t.comm);
      nranks0 = t.nranks;
      seen = (int*)calloc(nranks0 > 0 ? (size_t)nranks0 : 1, sizeof(int));
      if (comm0Copy == NULL || seen == NULL) res = traceMetaFault(&t, "out of memory");
    } else if (strcmp(t.comm, comm0) != 0 || t.nranks != nranks0) {
      res = traceMetaFault(&t, "communicator %s of %" PRId64 " ranks, but %s traced %s of %" PRId64
                       " ranks: the files are not of one job",
                       t.comm, t.nranks, files[0], comm0, nranks0);
    }
    if (res == 0 && (t.rank < 0 || t.rank >= nranks0))
      res = traceMetaFault(&t, "rank %" PRId64 " is not one of the job's %" PRId64 " ranks", t.rank, nranks0);
    if (res == 0 && seen[t.rank]++)
      res = traceMetaFault(&t, "a second file of rank %" PRId64, t.rank);
    if (res == 0 && jsonGetInt(t.meta, "clock_synced", &v) == 0 && v == 0 && t.rank != 0)
      fprintf(stderr, PROG ": %s: its clock offset was not measured; its times are left as they are\n", files[i]);
    if (res == 0 && jsonGetInt(t.meta, "dropped", &v) == 0) *dropped += v;
    if (res == 0 && jsonGetInt(t.meta, "clock_rtt_ns", &v) == 0 && v > *maxRtt) *maxRtt = v;
    const struct jsonNode* ev;
    const char* ph;
    int64_t ts;
    int r;
    while (res == 0 && (r = traceNext(&t, &ev, &ph, &ts)) != 0) {
      if (r < 0)
        res = -1;
      else if (ph[0] != 'M')
        (*events)++;
    }
    traceClose(&t);
  }
  free(comm0Copy);
  free(seen);
  return res;
}

/* A min-heap of file indices by their next event's time. */
static int earlier(const struct head* h, int a, int b) { return h[a].ts < h[b].ts || (h[a].ts == h[b].ts && a < b); }

static void siftDown(const struct head* h, int* heap, int size, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < size && earlier(h, heap[l], heap[m])) m = l;
    if (r < size && earlier(h, heap[r], heap[m])) m = r;
    if (m == i) return;
    int tmp = heap[i];
    heap[i] = heap[m];
    heap[m] = tmp;
    i = m;
  }
}

int traceMerge(int n, char** files, const char* outPath) {
  if (n <= 0) return 2;
  int64_t events, dropped, maxRtt;
  if (checkAll(n, files, &events, &dropped, &maxRtt) != 0) return 1;
  struct head* h = (struct head*)calloc((size_t)n, sizeof(*h));
  if (h == NULL) {
    fprintf(stderr, PROG ": out of memory for %d files\n", n);
    return 1;
  }
  int res = 0;
  for (int i = 0; i < n && res == 0; i++)
    if (traceOpen(&h[i].t, files[i]) != 0 || advance(&h[i]) != 0) res = -1;
  FILE* out = res == 0 ? fopen(outPath, "w") : NULL;
  if (res == 0 && out == NULL) {
    fprintf(stderr, PROG ": cannot create %s: %s\n", outPath, strerror(errno));
    res = -1;
  }
  if (res == 0) {
    fprintf(out,
            "{\"otherData\":{\"format\":\"mscclpp-trace\",\"version\":1,\"merged\":1,\"rank\":-1,"
            "\"nranks\":%" PRId64 ",\"comm\":",
            h[0].t.nranks);
    jsonWriteString(out, h[0].t.comm, strlen(h[0].t.comm));
    fprintf(out,
            ",\"files\":%d,\"clock\":\"rank 0's CLOCK_MONOTONIC\",\"clock_synced\":1,\"clock_offset_ns\":0,"
            "\"clock_rtt_ns\":%" PRId64 ",\"events\":%" PRId64 ",\"dropped\":%" PRId64 "},\n\"traceEvents\":[",
            n, maxRtt, events, dropped);
  }
  int* heap = (int*)malloc((size_t)n * sizeof(int));
  int size = 0;
  if (res == 0 && heap == NULL) {
    fprintf(stderr, PROG ": out of memory for %d files\n", n);
    res = -1;
  }
  for (int i = 0; res == 0 && i < n; i++)
    if (h[i].live) heap[size++] = i;
  for (int i = size / 2 - 1; res == 0 && i >= 0; i--) siftDown(h, heap, size, i);
  int first = 1;
  while (res == 0 && size > 0) {
    struct head* e = &h[heap[0]];
    fputs(first ? "\n" : ",\n", out);
    first = 0;
    writeEvent(out, e);
    if (advance(e) != 0) res = -1; /* it read whole a moment ago: changed since? */
    if (!e->live) heap[0] = heap[--size];
    siftDown(h, heap, size, 0);
  }
  free(heap);
  if (out != NULL) {
    fputs("\n]}\n", out);
    int bad = ferror(out);
    if (fclose(out) != 0) bad = 1;
    if (bad) {
      fprintf(stderr, PROG ": writing %s failed\n", outPath);
      res = -1;
    }
    if (res != 0) remove(outPath);
  }
  for (int i = 0; i < n; i++) traceClose(&h[i].t);
  free(h);
  if (res == 0) printf(PROG ": %d ranks, %" PRId64 " events merged into %s\n", n, events, outPath);
  return res == 0 ? 0 : 1;
}
