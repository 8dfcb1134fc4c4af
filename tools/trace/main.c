/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-trace: read the traces MSCCLPP_TRACE writes (one per rank).
 *
 *   mscclpp-trace merge rank*.json -o job.json
 *       the ranks' files on rank 0's clock, in one trace (Perfetto opens it:
 *       a process per rank, a track per thread and per GPU block)
 *   mscclpp-trace summary [--all-comms] trace.json...
 *       per collective and size: calls, time, algbw and busbw (nccl-tests'
 *       columns), from a merged trace or the ranks' own files
 *
 * Exit status: 0, 1 when a file cannot be read (the message names the file,
 * the line and what is wrong with it), 2 for bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "trace.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: " PROG " merge FILE... -o OUT      merge the ranks' traces onto one clock\n"
          "       " PROG " summary [--all-comms] FILE...\n"
          "                                         time and bandwidth per collective and size\n"
          "FILEs are what MSCCLPP_TRACE=<path with %%r> wrote (one per rank), or a merged trace for summary.\n");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(stdout);
    return 0;
  }
  char* files[argc];
  int n = 0;
  if (strcmp(argv[1], "merge") == 0) {
    const char* out = NULL;
    for (int i = 2; i < argc; i++) {
      if (strcmp(argv[i], "-o") == 0) {
        if (i + 1 == argc || out != NULL) {
          fprintf(stderr, PROG " merge: -o takes one output file, once\n");
          return 2;
        }
        out = argv[++i];
      } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
        fprintf(stderr, PROG " merge: unknown option %s\n", argv[i]);
        return 2;
      } else {
        files[n++] = argv[i];
      }
    }
    if (out == NULL || n == 0) {
      fprintf(stderr, PROG " merge: needs the ranks' files and -o OUT\n");
      usage(stderr);
      return 2;
    }
    for (int i = 0; i < n; i++)
      if (strcmp(files[i], out) == 0) {
        fprintf(stderr, PROG " merge: %s is both an input and the output\n", out);
        return 2;
      }
    return traceMerge(n, files, out);
  }
  if (strcmp(argv[1], "summary") == 0) {
    int all = 0;
    for (int i = 2; i < argc; i++) {
      if (strcmp(argv[i], "--all-comms") == 0) {
        all = 1;
      } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
        fprintf(stderr, PROG " summary: unknown option %s\n", argv[i]);
        return 2;
      } else {
        files[n++] = argv[i];
      }
    }
    if (n == 0) {
      fprintf(stderr, PROG " summary: needs a trace file\n");
      usage(stderr);
      return 2;
    }
    return traceSummary(n, files, all);
  }
  fprintf(stderr, PROG ": unknown command \"%s\"\n", argv[1]);
  usage(stderr);
  return 2;
}
