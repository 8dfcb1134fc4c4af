/* SPDX-License-Identifier: MIT */
/* mscclpp-perf: the vocabulary of collectives, types and operations, and the flags. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf.h"

/* ---- collectives ---------------------------------------------------------- */


const struct collInfo colls[C_COUNT] = {
    [C_ALLREDUCE] = {"allreduce", "mscclppAllReduce", 1, 0, 1},
    [C_ALLGATHER] = {"allgather", "mscclppAllGather", 0, 0, 1},
    [C_REDUCESCATTER] = {"reducescatter", "mscclppReduceScatter", 1, 0, 1},
    [C_BROADCAST] = {"broadcast", "mscclppBroadcast", 0, 1, 1},
    [C_REDUCE] = {"reduce", "mscclppReduce", 1, 1, 1},
    [C_ALLTOALL] = {"alltoall", "mscclppAllToAll", 0, 0, 1},
    [C_SENDRECV] = {"sendrecv", "mscclppSend/mscclppRecv (group)", 0, 0, 0},
    [C_ALLTOALLV] = {"alltoallv", "mscclppAllToAllv", 0, 0, 0},
};

/* Bus bandwidth = algorithm bandwidth * this (nccl-tests' PERFORMANCE.md). */
double busFactor(enum coll c, int n) {
  switch (c) {
    case C_ALLREDUCE:
      return 2.0 * (n - 1) / n;
    case C_ALLGATHER:
    case C_REDUCESCATTER:
    case C_ALLTOALL:
    case C_ALLTOALLV: /* as if the counts were even */
      return (double)(n - 1) / n;
    default:
      return 1.0;
  }
}

/* ---- types ------------------------------------------------------------------ */


const struct typeInfo types[mscclppNumTypes] = {
    [mscclppInt8] = {{"int8", "char", NULL}},
    [mscclppUint8] = {{"uint8", NULL, NULL}},
    [mscclppInt32] = {{"int32", "int", NULL}},
    [mscclppUint32] = {{"uint32", NULL, NULL}},
    [mscclppInt64] = {{"int64", NULL, NULL}},
    [mscclppUint64] = {{"uint64", NULL, NULL}},
    [mscclppFloat16] = {{"half", "float16", "fp16"}},
    [mscclppFloat32] = {{"float", "float32", "fp32"}},
    [mscclppFloat64] = {{"double", "float64", "fp64"}},
    [mscclppBfloat16] = {{"bfloat16", "bf16", NULL}},
    [mscclppFloat8e4m3] = {{"f8e4m3", "fp8e4m3", "e4m3"}},
    [mscclppFloat8e5m2] = {{"f8e5m2", "fp8e5m2", "e5m2"}},
};

const char* typeName(int t) { return types[t].names[0]; }

const char* const opNames[mscclppNumOps] = {"sum", "prod", "max", "min", "avg"};


/* ---- options ---------------------------------------------------------------- */


/* The rank (and local rank) the launcher gave, before the communicator
 * exists: for device selection and to print usage errors once. -1: none. */
void envRanks(int* rank, int* localRank) {
  static const char* const rankVars[] = {"MSCCLPP_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"};
  static const char* const localVars[] = {"MSCCLPP_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                          "LOCAL_RANK"};
  *rank = -1;
  *localRank = -1;
  for (size_t i = 0; i < sizeof(rankVars) / sizeof(rankVars[0]); i++) {
    const char* r = getenv(rankVars[i]);
    if (r == NULL) continue;
    *rank = atoi(r);
    const char* l = getenv(localVars[i]);
    if (l != NULL) *localRank = atoi(l);
    return;
  }
}

int quiet; /* not rank 0: print no usage text */

void usage(FILE* f) {
  if (quiet) return;
  fprintf(f,
          "usage: " PROG " <collective> [flags]\n"
          "       " PROG " [<collective>] --plan <plan.json> [flags]\n"
          "  collective: allreduce allgather reducescatter broadcast reduce alltoall sendrecv alltoallv\n"
          "      --plan <plan.json>     time an execution plan (MSCCL++'s JSON format) beside the built-in\n"
          "                             algorithm of its collective, in the plan's in-place or out-of-place\n"
          "                             form: the two columns and their time ratio (plan / built-in); sizes\n"
          "                             outside the plan's range are N/A in its column\n"
          "  -b, --minbytes <size>      smallest size (default 32M); sizes take K, M, G (x1024)\n"
          "  -e, --maxbytes <size>      largest size (default 32M)\n"
          "  -i, --stepbytes <size>     add this between sizes (default 1M) unless -f is given\n"
          "  -f, --stepfactor <n>       multiply by n (an integer >= 2) between sizes\n"
          "  -n, --iters <n>            timed iterations (default 20)\n"
          "  -w, --warmup_iters <n>     untimed iterations first (default 1)\n"
          "  -c, --check <0/1>          check results (default 1)\n"
          "  -d, --datatype <type>      int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
          "                             f8e4m3 f8e5m2 (nccl-tests' names, printed in the type column;\n"
          "                             float16 float32 float64 fp8e4m3 fp8e5m2 accepted too), a\n"
          "                             comma-separated list, or all (default float)\n"
          "  -o, --op <op>              sum prod max min avg, a comma-separated list, or all (default sum)\n"
          "  -r, --root <rank>          root of broadcast and reduce (default 0)\n"
          "  -z, --blocking <0/1>       synchronize after every call (default 0)\n"
          "  -G, --cudagraph <n>        capture the -n calls in a CUDA graph and launch it n times\n"
          "  -a, --average <0/1/2/3>    time reported: 0 rank 0's, 1 average, 2 min, 3 max over ranks\n"
          "                             (default 1)\n"
          "  -J, --json <file>          also write the results as JSON (checked writable before the run)\n"
          "      --plot <file.png>      bus bandwidth and latency against size (needs gnuplot)\n"
          "      --offset <elements>    buffers start this many elements into their allocation\n"
          "      --seed <n>             seed of the checked inputs\n"
          "      --progress <seconds>   on stderr, a line on what is done after each size at least this\n"
          "                             long after the last line (default 5; 0: after every size)\n"
          "      --trace <path>         record a trace of the run (MSCCLPP_TRACE: one Chrome trace-event\n"
          "                             JSON file per rank; %%r the rank, %%p the pid, %%h the host), written\n"
          "                             when the run ends; mscclpp-trace merges and summarises them\n"
          "  -t, -g <1>                 accepted for nccl-tests scripts: one thread, one GPU per process\n"
          "  -h, --help\n"
          "Run one process per rank under a launcher: mscclpp-run -n 4 -- " PROG
          " allreduce -b 8 -e 128M -f 2\n"
          "(mscclpp-run --mps for several ranks on one GPU), mpirun, srun or torchrun.\n"
          "N/A in the in-place columns: the collective has no in-place form (sendrecv, alltoallv);\n"
          "alltoallv: each rank sends <size> in all, split among the ranks by counts that change every\n"
          "call (some 0), and receives as much.\n"
          "N/A in #wrong: -c 0, results not checked.\n");
}

/* --trace's template: not empty, and its folder, where it names no %r, %p
 * or %h, a writable folder (the files are written at the end of the run). */
static int checkTracePath(const char* path) {
  if (path[0] == '\0') {
    if (!quiet) fprintf(stderr, PROG ": --trace needs a file name (%%r is replaced by the rank)\n");
    return -1;
  }
  const char* slash = strrchr(path, '/');
  char dir[4096];
  snprintf(dir, sizeof(dir), "%.*s", slash == NULL ? 1 : slash == path ? 1 : (int)(slash - path),
           slash == NULL ? "." : path);
  struct stat st;
  if (strchr(dir, '%') == NULL && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0)) {
    if (!quiet) fprintf(stderr, PROG ": --trace %s: %s is not a folder this process can write\n", path, dir);
    return -1;
  }
  return 0;
}

static int parseSize(const char* flag, const char* s, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || s[0] == '-') goto fail_bad;
  unsigned long long mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1ull << 10;
      end++;
      break;
    case 'm':
    case 'M':
      mult = 1ull << 20;
      end++;
      break;
    case 'g':
    case 'G':
      mult = 1ull << 30;
      end++;
      break;
    default:
      break;
  }
  if (mult > 1 && *end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0') goto fail_bad;
  if (v > SIZE_MAX / mult) goto fail_bad;
  *out = (size_t)(v * mult);
  return 0;
fail_bad:
  if (!quiet) fprintf(stderr, PROG ": %s \"%s\" is not a size (a number with an optional K, M or G)\n", flag, s);
  return -1;
}

static int parseInt(const char* flag, const char* s, long lo, long hi, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    if (!quiet) fprintf(stderr, PROG ": %s \"%s\" is not an integer in %ld..%ld\n", flag, s, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* -f: an integer factor >= 2 (1 is accepted: it means "add -i's bytes",
 * nccl-tests' reading of -f 1 too). */
static int parseFactor(const char* s, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < 1 || v > SIZE_MAX) {
    if (!quiet)
      fprintf(stderr,
              PROG ": -f \"%s\" is not a step factor: sizes are multiplied by a whole number >= 2 (use -i <size> "
                   "to add a fixed step instead)\n",
              s);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

/* An output file the run will write at its end (-J, --plot), checked before
 * the run so that a bad path does not cost the whole benchmark: it must be
 * writable if it exists, and its folder a writable folder if not. Nothing is
 * created. (access() says yes to root for any mode bits and for a regular
 * file named as the folder, so the type is checked by stat.) */
static int checkOutputPath(const char* flag, const char* path) {
  if (path[0] == '\0') {
    if (!quiet) fprintf(stderr, PROG ": %s needs a file name\n", flag);
    return -1;
  }
  if (access(path, F_OK) == 0) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (!quiet) fprintf(stderr, PROG ": %s %s: is a directory; the results need a file name\n", flag, path);
      return -1;
    }
    if (access(path, W_OK) != 0) {
      if (!quiet) fprintf(stderr, PROG ": %s %s: cannot write: %s\n", flag, path, strerror(errno));
      return -1;
    }
    return 0;
  }
  char dir[4096];
  const char* slash = strrchr(path, '/');
  if (slash == NULL) snprintf(dir, sizeof(dir), ".");
  else if (slash == path) snprintf(dir, sizeof(dir), "/");
  else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
  struct stat st;
  if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) errno = ENOTDIR;
  else if (access(dir, W_OK) == 0) return 0;
  if (!quiet) fprintf(stderr, PROG ": %s %s: cannot create the file in %s: %s\n", flag, path, dir, strerror(errno));
  return -1;
}

/* Does entry `idx` of the -d / -o vocabulary spell s[0..len)? */
static int typeMatches(int idx, const char* s, size_t len) {
  for (int k = 0; k < 3; k++)
    if (types[idx].names[k] != NULL && strlen(types[idx].names[k]) == len && strncmp(types[idx].names[k], s, len) == 0)
      return 1;
  return 0;
}
static int opMatches(int idx, const char* s, size_t len) {
  return strlen(opNames[idx]) == len && strncmp(opNames[idx], s, len) == 0;
}

/* -d / -o: "all" (the n entries in order) or a comma-separated list of
 * names, each matched by `matches`; duplicates are kept once. `what` and
 * `vocabulary` make the error message. */
static int parseList(const char* flag, const char* arg, int n, int (*matches)(int, const char*, size_t),
                     const char* what, const char* vocabulary, int* list, int* count) {
  if (strcmp(arg, "all") == 0) {
    for (int i = 0; i < n; i++) list[i] = i;
    *count = n;
    return 0;
  }
  *count = 0;
  for (const char* s = arg; *s;) {
    size_t len = strcspn(s, ",");
    int found = -1;
    for (int i = 0; i < n && found < 0; i++)
      if (matches(i, s, len)) found = i;
    if (found < 0) {
      if (!quiet)
        fprintf(stderr, PROG ": %s \"%.*s\" is not %s (%s, a comma-separated list, or all)\n", flag, (int)len, s, what,
                vocabulary);
      return -1;
    }
    int dup = 0;
    for (int i = 0; i < *count; i++) dup |= list[i] == found;
    if (!dup) list[(*count)++] = found;
    s += len + (s[len] == ',');
  }
  if (*count == 0) {
    if (!quiet) fprintf(stderr, PROG ": %s needs %s\n", flag, what);
    return -1;
  }
  return 0;
}

static int parseType(const char* arg, struct opts* o) {
  return parseList("-d", arg, mscclppNumTypes, typeMatches, "a type",
                   "int8 uint8 int32 uint32 int64 uint64 half float16 bfloat16 float float32 double float64 f8e4m3 "
                   "fp8e4m3 f8e5m2 fp8e5m2",
                   o->typeList, &o->ntypes);
}

static int parseOp(const char* arg, struct opts* o) {
  return parseList("-o", arg, mscclppNumOps, opMatches, "an operation", "sum prod max min avg", o->opList, &o->nops);
}

enum { OPT_PLOT = 256, OPT_INJECT, OPT_OFFSET, OPT_SEED, OPT_PROGRESS, OPT_TRACE, OPT_PLAN };

/* --plan: load the plan; its collective is the run's (a collective named
 * too must be the same). */
static int loadPlan(struct opts* o, int collGiven) {
  mscclppResult_t res = mscclppPlanLoadFile(o->planPath, &o->plan);
  if (res != mscclppSuccess) {
    if (!quiet) fprintf(stderr, PROG ": --plan %s: %s\n", o->planPath, mscclppGetLastError());
    return -1;
  }
  o->planInfo = (mscclppPlanInfo)MSCCLPP_PLAN_INFO_INITIALIZER;
  (void)mscclppPlanGetInfo(o->plan, &o->planInfo);
  int c;
  for (c = 0; c < C_COUNT; c++)
    if (strcmp(o->planInfo.collective, colls[c].name) == 0) break;
  if (collGiven && c != (int)o->coll) {
    if (!quiet)
      fprintf(stderr, PROG ": --plan %s is a plan for %s, not %s\n", o->planPath, o->planInfo.collective,
              colls[o->coll].name);
    return -1;
  }
  o->coll = (enum coll)c;
  return 0;
}

/* 0: parsed; 1: help printed (or --selftest passed); -1: bad usage
 * (printed); -2: --selftest failed. */
int parseArgs(int argc, char** argv, struct opts* o) {
  memset(o, 0, sizeof(*o));
  o->minBytes = o->maxBytes = 32u << 20;
  o->stepBytes = 1u << 20;
  o->stepFactor = 1;
  o->iters = 20;
  o->warmup = 1;
  o->check = 1;
  o->average = 1;
  o->typeList[0] = mscclppFloat32;
  o->ntypes = 1;
  o->opList[0] = mscclppSum;
  o->nops = 1;
  o->seed = UINT64_C(0x6d7363636c707066);
  o->progressSec = 5;
  if (argc < 2) {
    usage(stderr);
    return -1;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(stdout);
    return 1;
  }
  if (strcmp(argv[1], "--selftest") == 0) return selfTest() == 0 ? 1 : -2;
  int c;
  for (c = 0; c < C_COUNT; c++)
    if (strcmp(argv[1], colls[c].name) == 0) break;
  const int collGiven = c < C_COUNT;
  if (!collGiven && strcmp(argv[1], "--plan") == 0) {
    c = C_ALLREDUCE; /* the plan's, once loaded */
  } else if (c == C_COUNT) {
    if (!quiet)
      fprintf(stderr,
              PROG ": \"%s\" is not a collective (allreduce allgather reducescatter broadcast reduce alltoall "
                   "sendrecv alltoallv)\n",
              argv[1]);
    return -1;
  }
  o->coll = (enum coll)c;
  static const struct option longOpts[] = {
      {"minbytes", required_argument, NULL, 'b'},   {"maxbytes", required_argument, NULL, 'e'},
      {"stepbytes", required_argument, NULL, 'i'},  {"stepfactor", required_argument, NULL, 'f'},
      {"iters", required_argument, NULL, 'n'},      {"warmup_iters", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},         {"root", required_argument, NULL, 'r'},
      {"blocking", required_argument, NULL, 'z'},   {"cudagraph", required_argument, NULL, 'G'},
      {"average", required_argument, NULL, 'a'},    {"json", required_argument, NULL, 'J'},
      {"nthreads", required_argument, NULL, 't'},   {"ngpus", required_argument, NULL, 'g'},
      {"plot", required_argument, NULL, OPT_PLOT},  {"inject-error", no_argument, NULL, OPT_INJECT},
      {"offset", required_argument, NULL, OPT_OFFSET}, {"seed", required_argument, NULL, OPT_SEED},
      {"progress", required_argument, NULL, OPT_PROGRESS}, {"trace", required_argument, NULL, OPT_TRACE},
      {"plan", required_argument, NULL, OPT_PLAN},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  optind = collGiven ? 2 : 1;
  opterr = !quiet;
  int ch, one;
  size_t factor;
  while ((ch = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:r:z:G:a:J:t:g:h", longOpts, NULL)) != -1) {
    switch (ch) {
      case 'b':
        if (parseSize("-b", optarg, &o->minBytes)) return -1;
        break;
      case 'e':
        if (parseSize("-e", optarg, &o->maxBytes)) return -1;
        break;
      case 'i':
        if (parseSize("-i", optarg, &o->stepBytes)) return -1;
        o->stepFactor = 1;
        break;
      case 'f':
        if (parseFactor(optarg, &factor)) return -1;
        o->stepFactor = factor;
        break;
      case 'n':
        if (parseInt("-n", optarg, 1, INT_MAX, &o->iters)) return -1;
        break;
      case 'w':
        if (parseInt("-w", optarg, 0, INT_MAX, &o->warmup)) return -1;
        break;
      case 'c':
        if (parseInt("-c", optarg, 0, 1, &o->check)) return -1;
        break;
      case 'd':
        if (parseType(optarg, o)) return -1;
        break;
      case 'o':
        if (parseOp(optarg, o)) return -1;
        break;
      case 'r':
        if (parseInt("-r", optarg, 0, INT_MAX, &o->root)) return -1;
        break;
      case 'z':
        if (parseInt("-z", optarg, 0, 1, &o->blocking)) return -1;
        break;
      case 'G':
        if (parseInt("-G", optarg, 0, INT_MAX, &o->graphLaunches)) return -1;
        break;
      case 'a':
        if (parseInt("-a", optarg, 0, 3, &o->average)) return -1;
        break;
      case 'J':
        o->jsonPath = optarg;
        break;
      case 't':
      case 'g':
        if (parseInt(ch == 't' ? "-t" : "-g", optarg, 1, 1, &one)) {
          if (!quiet)
            fprintf(stderr, PROG ": one process per rank: run more ranks with the launcher instead of -%c\n", ch);
          return -1;
        }
        break;
      case OPT_PLOT:
        o->plotPath = optarg;
        break;
      case OPT_INJECT:
        o->injectError = 1;
        break;
      case OPT_OFFSET:
        if (parseSize("--offset", optarg, &o->offsetElems)) return -1;
        if (o->offsetElems > MAX_OFFSET_ELEMS) {
          if (!quiet) fprintf(stderr, PROG ": --offset %zu is more than %d elements\n", o->offsetElems, MAX_OFFSET_ELEMS);
          return -1;
        }
        break;
      case OPT_PROGRESS:
        if (parseInt("--progress", optarg, 0, INT_MAX, &o->progressSec)) return -1;
        break;
      case OPT_TRACE:
        o->tracePath = optarg;
        break;
      case OPT_PLAN:
        o->planPath = optarg;
        break;
      case OPT_SEED: {
        char* end = NULL;
        errno = 0;
        o->seed = strtoull(optarg, &end, 0);
        if (errno != 0 || end == optarg || *end != '\0') {
          if (!quiet) fprintf(stderr, PROG ": --seed \"%s\" is not a number\n", optarg);
          return -1;
        }
        break;
      }
      case 'h':
        usage(stdout);
        return 1;
      default:
        usage(stderr);
        return -1;
    }
  }
  if (optind < argc) {
    if (!quiet) fprintf(stderr, PROG ": unexpected argument \"%s\"\n", argv[optind]);
    return -1;
  }
  if (o->minBytes > o->maxBytes) {
    if (!quiet) fprintf(stderr, PROG ": -b %zu is larger than -e %zu\n", o->minBytes, o->maxBytes);
    return -1;
  }
  if (o->jsonPath != NULL && checkOutputPath("-J", o->jsonPath)) return -1;
  if (o->plotPath != NULL && checkOutputPath("--plot", o->plotPath)) return -1;
  if (o->tracePath != NULL && checkTracePath(o->tracePath)) return -1;
  if (o->injectError && !o->check) {
    if (!quiet) fprintf(stderr, PROG ": --inject-error needs -c 1\n");
    return -1;
  }
  if (o->planPath != NULL) {
    if (o->plotPath != NULL) {
      if (!quiet) fprintf(stderr, PROG ": --plot does not go with --plan\n");
      return -1;
    }
    if (loadPlan(o, collGiven)) return -1;
  }
  return 0;
}
