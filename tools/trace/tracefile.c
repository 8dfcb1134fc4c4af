/* SPDX-License-Identifier: MIT */
/* Reading a trace in the library's layout, one line at a time (trace.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "trace.h"

#define META_PREFIX "{\"otherData\":"
#define EVENTS_LINE "\"traceEvents\":["
#define END_LINE "]}"

static int fault(const struct traceFile* t, long line, const char* fmt, va_list ap) {
  char why[512];
  vsnprintf(why, sizeof(why), fmt, ap);
  if (line > 0)
    fprintf(stderr, PROG ": %s:%ld: %s\n", t->path, line, why);
  else
    fprintf(stderr, PROG ": %s: %s\n", t->path, why);
  return -1;
}

int traceFault(const struct traceFile* t, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fault(t, t->lineNo, fmt, ap);
  va_end(ap);
  return -1;
}

int traceMetaFault(const struct traceFile* t, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fault(t, 1, fmt, ap);
  va_end(ap);
  return -1;
}

/* The next line without its end of line in t->line; its length, or -1 at
 * the end of the file (or a read error, reported). */
static ssize_t readLine(struct traceFile* t) {
  errno = 0;
  ssize_t n = getline(&t->line, &t->cap, t->f);
  if (n < 0) {
    if (ferror(t->f)) return traceFault(t, "read error: %s", strerror(errno)), -2;
    return -1;
  }
  t->lineNo++;
  if (n > 0 && t->line[n - 1] == '\n') t->line[--n] = '\0';
  if (n > 0 && t->line[n - 1] == '\r') t->line[--n] = '\0';
  return n;
}

void traceWriteMicros(FILE* f, int64_t ns) {
  uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
  fprintf(f, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", a / 1000, (unsigned)(a % 1000));
}

int traceParseMicros(const char* text, int64_t* ns) {
  const char* p = text;
  int neg = *p == '-';
  if (neg) p++;
  uint64_t whole = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; p++, digits++) {
    if (digits >= 15) return -1; /* more than int64 ns can hold */
    whole = whole * 10 + (uint64_t)(*p - '0');
  }
  if (digits == 0) return -1;
  uint64_t frac = 0;
  int decimals = 0;
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++, decimals++) {
      if (decimals >= 3) return -1;
      frac = frac * 10 + (uint64_t)(*p - '0');
    }
    if (decimals == 0) return -1;
  }
  if (*p != '\0') return -1;
  for (; decimals < 3; decimals++) frac *= 10;
  int64_t v = (int64_t)(whole * 1000 + frac);
  *ns = neg ? -v : v;
  return 0;
}

static int needInt(const struct traceFile* t, const struct jsonNode* obj, const char* key, const char* where,
                   int64_t* v) {
  if (jsonGetInt(obj, key, v) != 0) return traceFault(t, "%s has no integer \"%s\"", where, key);
  return 0;
}

int traceOpen(struct traceFile* t, const char* path) {
  memset(t, 0, sizeof(*t));
  t->path = path;
  t->f = fopen(path, "r");
  if (t->f == NULL) return traceFault(t, "cannot open: %s", strerror(errno));
  ssize_t n = readLine(t);
  if (n < 0) return n == -1 ? traceFault(t, "the file is empty, not a trace") : -1;
  const size_t pre = strlen(META_PREFIX);
  if ((size_t)n <= pre + 1 || memcmp(t->line, META_PREFIX, pre) != 0 || t->line[n - 1] != ',')
    return traceFault(t, "not an mscclpp trace: the first line must be %s{...}, (MSCCLPP_TRACE writes it)",
                      META_PREFIX);
  char why[256];
  size_t col = 0;
  struct jsonNode* meta = NULL;
  if (jsonParse(&t->metaArena, t->line + pre, (size_t)n - pre - 1, &meta, why, sizeof(why), &col) != 0)
    return traceFault(t, "%s (column %zu)", why, col + pre);
  if (meta->type != JSON_OBJECT) return traceFault(t, "otherData is not an object");
  const char* format = jsonGetString(meta, "format");
  int64_t version = 0;
  if (format == NULL || strcmp(format, "mscclpp-trace") != 0 || jsonGetInt(meta, "version", &version) != 0)
    return traceFault(t, "not an mscclpp trace: otherData lacks \"format\":\"mscclpp-trace\" and a version");
  if (version != 1) return traceFault(t, "trace format version %" PRId64 "; this tool reads version 1", version);
  if (needInt(t, meta, "rank", "otherData", &t->rank) || needInt(t, meta, "nranks", "otherData", &t->nranks) ||
      needInt(t, meta, "clock_offset_ns", "otherData", &t->clockOffsetNs))
    return -1;
  if ((t->comm = jsonGetString(meta, "comm")) == NULL) return traceFault(t, "otherData has no \"comm\" string");
  int64_t merged = 0;
  t->merged = jsonGetInt(meta, "merged", &merged) == 0 && merged != 0;
  t->meta = meta;
  n = readLine(t);
  if (n < 0) return n == -1 ? traceFault(t, "the file ends after its first line") : -1;
  if (strcmp(t->line, EVENTS_LINE) != 0) return traceFault(t, "expected the line %s", EVENTS_LINE);
  return 0;
}

int traceNext(struct traceFile* t, const struct jsonNode** ev, const char** ph, int64_t* tsNs) {
  if (t->ended) return 0;
  ssize_t n = readLine(t);
  if (n == -2) return -1;
  if (n == -1) return traceFault(t, "the file ends here, before its closing %s (cut short?)", END_LINE);
  if (strcmp(t->line, END_LINE) == 0) {
    if (!t->last && t->lineNo > 3) return traceFault(t, "a ',' after the last event");
    t->ended = 1;
    while ((n = readLine(t)) >= 0)
      if (n > 0) return traceFault(t, "text after the closing %s", END_LINE);
    return n == -2 ? -1 : 0;
  }
  if (t->last) return traceFault(t, "an event after the last one (the line before has no ',')");
  if (n > 0 && t->line[n - 1] == ',')
    t->line[--n] = '\0';
  else
    t->last = 1;
  jsonArenaReset(&t->arena);
  char why[256];
  size_t col = 0;
  struct jsonNode* e = NULL;
  if (jsonParse(&t->arena, t->line, (size_t)n, &e, why, sizeof(why), &col) != 0)
    return traceFault(t, "%s (column %zu)", why, col);
  if (e->type != JSON_OBJECT) return traceFault(t, "an event is an object, this is not");
  const char* p = jsonGetString(e, "ph");
  int64_t v;
  if (p == NULL || jsonGetString(e, "name") == NULL) return traceFault(t, "an event without \"ph\" and \"name\"");
  if (needInt(t, e, "pid", "the event", &v) || needInt(t, e, "tid", "the event", &v)) return -1;
  *tsNs = 0;
  if (strcmp(p, "X") == 0 || strcmp(p, "i") == 0) {
    const struct jsonNode* ts = jsonGet(e, "ts");
    if (ts == NULL || ts->type != JSON_NUMBER || traceParseMicros(ts->text, tsNs) != 0)
      return traceFault(t, "\"ts\" must be microseconds with at most 3 decimals");
    const struct jsonNode* dur = jsonGet(e, "dur");
    int64_t d;
    if (p[0] == 'X' && (dur == NULL || dur->type != JSON_NUMBER || traceParseMicros(dur->text, &d) != 0 || d < 0))
      return traceFault(t, "a span (\"X\") needs \"dur\": microseconds >= 0 with at most 3 decimals");
  } else if (strcmp(p, "M") != 0) {
    return traceFault(t, "unknown phase \"%s\" (the library writes X, i and M)", p);
  }
  *ev = e;
  *ph = p;
  return 1;
}

void traceClose(struct traceFile* t) {
  if (t->f != NULL) fclose(t->f);
  t->f = NULL;
  free(t->line);
  t->line = NULL;
  jsonArenaReset(&t->arena);
  jsonArenaReset(&t->metaArena);
}
