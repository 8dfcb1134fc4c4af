/* SPDX-License-Identifier: MIT */
/* mscclpp-perf: the table, -J's JSON and --plot's PNG. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/gnuplot.h"

#include "perf.h"

/* ---- output ----------------------------------------------------------------- */

static void fmtTime(double us, char* buf, size_t len) {
  if (us >= 10000.0) snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0) snprintf(buf, len, "%7.1f", us);
  else snprintf(buf, len, "%7.2f", us);
}

void printRow(const struct ctx* c, const struct row* r) {
  char root[16];
  snprintf(root, sizeof(root), "%d", colls[c->o.coll].rooted ? r->root : -1);
  printf("%12zu  %12zu  %8s  %6s  %6s", r->bytes, r->count, typeName(r->type),
         colls[c->o.coll].reduces ? opNames[r->op] : "none", root);
  for (int p = 0; p < 2; p++) {
    const struct meas* m = &r->m[p];
    if (!m->valid) {
      printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    char t[32], w[32];
    fmtTime(m->us, t, sizeof(t));
    if (m->wrong < 0) snprintf(w, sizeof(w), "N/A");
    else snprintf(w, sizeof(w), "%" PRId64, m->wrong);
    printf("  %7s  %6.2f  %6.2f  %5s", t, m->algbw, m->busbw, w);
  }
  if (c->o.plan != NULL) { /* the plan's time over the built-in algorithm's */
    if (r->m[0].valid && r->m[1].valid && r->m[0].us > 0) printf("  %6.2f", r->m[1].us / r->m[0].us);
    else printf("  %6s", "N/A");
  }
  printf("\n");
  fflush(stdout);
}

static void jsonString(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

int writeJson(const struct ctx* c, const struct rankInfo* info, double avgBus, int64_t totalWrong) {
  const struct opts* o = &c->o;
  FILE* f = fopen(o->jsonPath, "w");
  if (f == NULL) {
    fprintf(stderr, PROG ": -J %s: cannot write the results: %s\n", o->jsonPath, strerror(errno));
    return -1;
  }
  int version = 0;
  (void)mscclppGetVersion(&version);
  fprintf(f, "{\n  \"tool\": \"mscclpp-perf\",\n  \"version\": %d,\n  \"collective\": \"%s\",\n", version,
          colls[o->coll].name);
  fprintf(f, "  \"nranks\": %d,\n  \"backend\": \"%s\",\n", c->nranks, c->gpu ? "gpu" : "host");
  if (o->plan != NULL) {
    fprintf(f, "  \"plan\": {\"name\": ");
    jsonString(f, o->planInfo.name);
    fprintf(f, ", \"file\": ");
    jsonString(f, o->planPath);
    fprintf(f, ", \"inplace\": %s},\n", o->planInfo.inplace ? "true" : "false");
  }
  fprintf(f,
          "  \"config\": {\"minBytes\": %zu, \"maxBytes\": %zu, \"stepBytes\": %zu, \"stepFactor\": %zu, "
          "\"iters\": %d, \"warmupIters\": %d, \"check\": %d, \"blocking\": %d, \"cudaGraphLaunches\": %d, "
          "\"average\": %d, \"root\": %d, \"offsetElements\": %zu},\n",
          o->minBytes, o->maxBytes, o->stepBytes, o->stepFactor, o->iters, o->warmup, o->check, o->blocking,
          o->graphLaunches, o->average, o->root, o->offsetElems);
  fprintf(f, "  \"ranks\": [");
  for (int r = 0; r < c->nranks; r++) {
    fprintf(f, "%s\n    {\"rank\": %d, \"pid\": %d, \"host\": ", r ? "," : "", r, info[r].pid);
    jsonString(f, info[r].host);
    fprintf(f, ", \"device\": %d, \"description\": ", info[r].device);
    jsonString(f, info[r].desc);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"results\": [");
  for (size_t i = 0; i < c->nrows; i++) {
    const struct row* r = &c->rows[i];
    fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d", i ? "," : "",
            r->bytes, r->count, typeName(r->type), colls[o->coll].reduces ? opNames[r->op] : "none",
            colls[o->coll].rooted ? r->root : -1);
    for (int p = 0; p < 2; p++) {
      const struct meas* m = &r->m[p];
      fprintf(f, ", \"%s\": ", o->plan != NULL ? (p == 0 ? "builtin" : "plan") : p == 0 ? "outOfPlace" : "inPlace");
      if (!m->valid) {
        fprintf(f, "null");
        continue;
      }
      fprintf(f, "{\"time_us\": %.3f, \"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, \"wrong\": ", m->us, m->algbw,
              m->busbw);
      if (m->wrong < 0) fprintf(f, "null}");
      else fprintf(f, "%" PRId64 "}", m->wrong);
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"avgBusBandwidth_GBps\": %.4f,\n  \"wrong\": ", avgBus);
  if (o->check) fprintf(f, "%" PRId64 "\n}\n", totalWrong);
  else fprintf(f, "null\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, PROG ": -J %s: cannot write the results: %s\n", o->jsonPath, strerror(errno));
    return -1;
  }
  return 0;
}

/* --plot: 1 drawn, 0 skipped (gnuplot missing, said on stderr), -1 failed. */
int writePlot(const struct ctx* c) {
  const struct opts* o = &c->o;
  char gnuplot[4096];
  if (!toolFindInPath("gnuplot", gnuplot, sizeof(gnuplot))) {
    fprintf(stderr, PROG ": --plot %s: gnuplot is not in PATH (apt-get install gnuplot-nox); no plot drawn\n",
            o->plotPath);
    return 0;
  }
  char dataPath[] = "/tmp/mscclpp-perf-data-XXXXXX";
  char scriptPath[] = "/tmp/mscclpp-perf-plot-XXXXXX";
  int df = mkstemp(dataPath);
  if (df < 0) {
    fprintf(stderr, PROG ": --plot: mkstemp: %s\n", strerror(errno));
    return -1;
  }
  int sf = mkstemp(scriptPath);
  if (sf < 0) {
    fprintf(stderr, PROG ": --plot: mkstemp: %s\n", strerror(errno));
    close(df);
    unlink(dataPath);
    return -1;
  }
  FILE* d = fdopen(df, "w");
  FILE* s = fdopen(sf, "w");
  if (d == NULL || s == NULL) {
    fprintf(stderr, PROG ": --plot: fdopen: %s\n", strerror(errno));
    if (d) fclose(d);
    else close(df);
    if (s) fclose(s);
    else close(sf);
    unlink(dataPath);
    unlink(scriptPath);
    return -1;
  }
  /* one data block per (type, op), rows of non-zero size (log axis) */
  int nseries = 0;
  char titles[mscclppNumTypes * mscclppNumOps][48];
  for (size_t i = 0; i < c->nrows;) {
    size_t j = i;
    int any = 0;
    for (; j < c->nrows && c->rows[j].type == c->rows[i].type && c->rows[j].op == c->rows[i].op; j++) {
      const struct row* r = &c->rows[j];
      if (r->bytes == 0) continue;
      any = 1;
      fprintf(d, "%zu %.6f %.6f %.6f %.6f\n", r->bytes, r->m[0].us, r->m[0].busbw, r->m[1].valid ? r->m[1].us : 0,
              r->m[1].valid ? r->m[1].busbw : 0);
    }
    if (any && nseries < mscclppNumTypes * mscclppNumOps) {
      snprintf(titles[nseries], sizeof(titles[nseries]), "%s%s%s", typeName(c->rows[i].type),
               colls[o->coll].reduces ? " " : "", colls[o->coll].reduces ? opNames[c->rows[i].op] : "");
      nseries++;
      fprintf(d, "\n\n");
    }
    i = j;
  }
  fclose(d);
  int inPlace = colls[o->coll].inPlace;
  fprintf(s, "set terminal png size 1400,560\nset output ");
  toolGnuplotQuoted(s, o->plotPath);
  fprintf(s,
          "\nset multiplot layout 1,2 title 'mscclpp-perf %s, %d ranks (%s)'\n"
          "set logscale x 2\nset format x '%%.0b%%BB'\nset xlabel 'size (bytes)'\nset grid\nset key left top\n"
          "set ylabel 'bus bandwidth (GB/s)'\n",
          colls[o->coll].name, c->nranks, c->gpu ? "GPU" : "host backend");
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) fprintf(s, "set logscale y 10\nset ylabel 'time (us)'\n");
    int col = pass == 0 ? 3 : 2;
    fprintf(s, "plot ");
    if (nseries == 0) fprintf(s, "1/0 notitle");
    for (int k = 0; k < nseries; k++) {
      fprintf(s, "%s", k ? ", " : "");
      toolGnuplotQuoted(s, dataPath);
      fprintf(s, " index %d using 1:%d with linespoints title '%s out-of-place'", k, col, titles[k]);
      if (inPlace) {
        fprintf(s, ", ");
        toolGnuplotQuoted(s, dataPath);
        fprintf(s, " index %d using 1:%d with linespoints dashtype 2 title '%s in-place'", k, col + 2, titles[k]);
      }
    }
    fprintf(s, "\n");
  }
  fprintf(s, "unset multiplot\n");
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
    rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 1 : -1;
    if (rc < 0) fprintf(stderr, PROG ": --plot %s: gnuplot failed (status %d)\n", o->plotPath, st);
  } else {
    fprintf(stderr, PROG ": --plot: fork: %s\n", strerror(errno));
  }
  unlink(dataPath);
  unlink(scriptPath);
  return rc;
}


/* Gather and (rank 0) print who runs where. */
int printHeader(struct ctx* c, struct rankInfo** infoOut) {
  const struct opts* o = &c->o;
  struct rankInfo* info = calloc((size_t)c->nranks, sizeof(*info));
  if (info == NULL) {
    fprintf(stderr, PROG ": out of memory\n");
    return -1;
  }
  struct rankInfo* me = &info[c->rank];
  me->pid = (int32_t)getpid();
  me->device = c->device;
  if (gethostname(me->host, sizeof(me->host)) != 0) snprintf(me->host, sizeof(me->host), "?");
  me->host[sizeof(me->host) - 1] = '\0';
  if (c->gpu) {
    if (mscclppGetDeviceDescription(c->device, me->desc, sizeof(me->desc)) != mscclppSuccess)
      snprintf(me->desc, sizeof(me->desc), "device %d", c->device);
  } else {
    snprintf(me->desc, sizeof(me->desc), "host backend (no GPU)");
  }
  mscclppResult_t res = mscclppBootstrapAllGather(c->comm, info, sizeof(*info));
  if (res != mscclppSuccess) {
    free(info);
    callFailed(c, "mscclppBootstrapAllGather", res);
    return -1;
  }
  *infoOut = info;
  if (c->rank != 0) return 0;
  int version = 0;
  (void)mscclppGetVersion(&version);
  printf("# mscclpp-perf %s: mscclpp %d.%d.%d, %d ranks, %s\n", colls[o->coll].name, version / 10000,
         version / 100 % 100, version % 100, c->nranks, c->gpu ? "GPU" : "host backend");
  if (o->stepFactor > 1)
    printf("# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d validation: %d graph: %d "
           "blocking: %d average: %d\n",
           o->minBytes, o->maxBytes, o->stepFactor, o->warmup, o->iters, o->check, o->graphLaunches, o->blocking,
           o->average);
  else
    printf("# minBytes %zu maxBytes %zu step: %zu(bytes) warmup iters: %d iters: %d validation: %d graph: %d "
           "blocking: %d average: %d\n",
           o->minBytes, o->maxBytes, o->stepBytes, o->warmup, o->iters, o->check, o->graphLaunches, o->blocking,
           o->average);
  const char* algo = getenv("MSCCLPP_ALGO");
  if (algo != NULL && algo[0] != '\0') printf("# MSCCLPP_ALGO=%s\n", algo);
  const char* trace = getenv("MSCCLPP_TRACE");
  if (trace != NULL && trace[0] != '\0')
    printf("# MSCCLPP_TRACE=%s (one file per rank, written when the run ends)\n", trace);
  printf("#\n# Using devices\n");
  for (int r = 0; r < c->nranks; r++)
    printf("#  Rank %2d Pid %7d on %10s device %2d %s\n", r, info[r].pid, info[r].host, info[r].device, info[r].desc);
  if (!colls[o->coll].inPlace)
    printf("# in-place columns N/A: %s has no in-place form%s\n", colls[o->coll].name,
           o->coll == C_SENDRECV    ? " (a send and a receive on one buffer race)"
           : o->coll == C_ALLTOALLV ? " (mscclppAllToAllv refuses it)"
                                    : "");
  if (o->coll == C_ALLTOALLV)
    printf("# alltoallv: each rank sends size bytes in all, split by counts that change every call (a cycle of %d "
           "sets from --seed%s), and receives as much\n",
           c->a2avNsets, o->graphLaunches > 0 ? "; a graph's launches repeat its calls' sets" : "");
  if (!o->check) printf("# #wrong N/A: -c 0, results not checked\n");
  if (o->plan != NULL) {
    const mscclppPlanInfo* pi = &o->planInfo;
    printf("# plan %s (%s): %s, %s, %s, %d thread blocks of %d threads, messages of %llu to %llu bytes\n", pi->name,
           o->planPath, pi->collective, pi->protocol, pi->inplace ? "in-place" : "out-of-place", pi->threadblocks,
           pi->threadsPerBlock, (unsigned long long)pi->minMessageBytes, (unsigned long long)pi->maxMessageBytes);
    printf("# columns: the built-in algorithm, then the plan, both %s; ratio = the plan's time / the built-in's "
           "(MSCCLPP_CACHE_DIR ignored)\n#\n",
           pi->inplace ? "in place" : "out of place");
    printf("# %58s built-in %27s plan\n", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s  %6s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "ratio");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s  %6s\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "");
    fflush(stdout);
    return 0;
  }
  printf("#\n");
  printf("# %58s out-of-place %23s in-place\n", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "size", "count", "type", "redop",
         "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
  return 0;
}
