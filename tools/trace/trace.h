/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-trace's parts (tools/trace/):
 *   main.c       the commands and their flags
 *   json.c       one line's JSON: a strict parser and a writer (json.h)
 *   tracefile.c  reading a trace in the layout the library writes
 *   merge.c      `merge`: the ranks' files on one clock, in one file
 *   summary.c    `summary`: per-collective, per-size time and bandwidth
 *
 * The layout (src/core/trace.c writes it; merge writes it too):
 *   line 1      {"otherData":{...},          the file's metadata
 *   line 2      "traceEvents":[
 *   lines 3..   one event object per line, each but the last followed by ','
 *   last line   ]}
 * which is one JSON document, and which this tool reads one line at a time:
 * anything else is refused with the file, the line and the reason.
 */
#ifndef MSCCLPP_TOOLS_TRACE_TRACE_H_
#define MSCCLPP_TOOLS_TRACE_TRACE_H_

#include <stdint.h>
#include <stdio.h>

#include "json.h"

#define PROG "mscclpp-trace"

/* One trace file being read. */
struct traceFile {
  const char* path;
  FILE* f;
  char* line;
  size_t cap;
  long lineNo;
  struct jsonArena metaArena;
  const struct jsonNode* meta; /* otherData (lives until traceClose) */
  int64_t rank, nranks;
  const char* comm;
  int64_t clockOffsetNs;
  int merged;
  struct jsonArena arena; /* the current event's line */
  int last;               /* the previous event had no ',' after it: "]}" comes next */
  int ended;
};

/* Open `path` and read its header (lines 1 and 2). 0, or -1 after printing
 * why to stderr. */
int traceOpen(struct traceFile* t, const char* path);
/* The next event in *ev, its "ph" in *ph, and for events with a time ("X",
 * "i") that time in ns in *tsNs (0 for the others). 1: an event; 0: the end
 * of the trace, whole; -1: after printing why (file:line: reason). *ev lives
 * until the next call. */
int traceNext(struct traceFile* t, const struct jsonNode** ev, const char** ph, int64_t* tsNs);
void traceClose(struct traceFile* t);
/* Report a fault of the current line of t (stderr); returns -1. */
int traceFault(const struct traceFile* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report a fault of its metadata (line 1); returns -1. */
int traceMetaFault(const struct traceFile* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Microseconds as the trace writes them (3 decimals) from ns; and back:
 * 0 and *ns when `text` is a plain decimal with at most 3 decimals. */
void traceWriteMicros(FILE* f, int64_t ns);
int traceParseMicros(const char* text, int64_t* ns);

int traceMerge(int nfiles, char** files, const char* out);
int traceSummary(int nfiles, char** files, int allComms);

#endif /* MSCCLPP_TOOLS_TRACE_TRACE_H_ */
