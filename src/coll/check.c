/* SPDX-License-Identifier: MIT */
/*
 * MSCCLPP_CHECK_CALLS=1: before each collective call, every rank's
 * fingerprint of it (collective, count, type, operator, root, and the
 * call's number on the communicator) goes to rank 0 over the bootstrap,
 * which answers every rank with all of them and who did not come in time
 * (mscclppBootstrapGatherCheck). Each rank compares them itself, so every
 * rank fails a mismatched call with the same message, naming the ranks and
 * their calls, instead of hanging or computing garbage; a rank that does
 * not come is named with its last call. The calls then still agree in
 * number, and the communicator goes on.
 *
 * This makes every collective wait for every rank's host (the exception to
 * docs/DESIGN.md's "no call waits for a peer's host", which is what a
 * check across ranks needs): a debugging aid, off by default.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/error.h"
#include "core/log.h"

#define PRINT_MAGIC 0x4b434843u /* "CHCK" */

/* One rank's call, as it travels. */
struct callPrint {
  uint32_t magic;
  uint32_t kind;
  uint32_t type;
  uint32_t op;
  int32_t root;
  uint32_t pad;
  uint64_t count;
  uint64_t seq;
};

struct mscclppCollCheck {
  struct callPrint* last; /* every rank's last checked call (seq 0: none yet) */
};

static int reduces(uint32_t kind) {
  return kind == MSCCLPP_COLL_ALLREDUCE || kind == MSCCLPP_COLL_REDUCESCATTER || kind == MSCCLPP_COLL_REDUCE;
}
static int rooted(uint32_t kind) { return kind == MSCCLPP_COLL_BROADCAST || kind == MSCCLPP_COLL_REDUCE; }

/* "allreduce #5 (count 1024, float32, sum)". */
static void describe(const struct callPrint* p, char* out, size_t len) {
  int n = snprintf(out, len, "%s #%" PRIu64 " (count %" PRIu64 ", %s", mscclppCollKindName((mscclppCollKind)p->kind),
                   p->seq, p->count, mscclppDataTypeName((mscclppDataType_t)p->type));
  if (n < 0 || (size_t)n >= len) return;
  if (reduces(p->kind)) n += snprintf(out + n, len - (size_t)n, ", %s", mscclppRedOpName((mscclppRedOp_t)p->op));
  if ((size_t)n < len && rooted(p->kind)) n += snprintf(out + n, len - (size_t)n, ", root %d", p->root);
  if ((size_t)n < len) snprintf(out + n, len - (size_t)n, ")");
}

/* "ranks 0, 2-3" of the ranks r with sel[r] (appended to out). */
static void appendRanks(char* out, size_t len, const uint8_t* sel, int n) {
  size_t o = strlen(out);
  int count = 0;
  for (int r = 0; r < n; r++) count += sel[r] != 0;
  o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s", count == 1 ? "rank " : "ranks ");
  int first = 1;
  for (int r = 0; r < n && o < len; r++) {
    if (!sel[r]) continue;
    int e = r;
    while (e + 1 < n && sel[e + 1]) e++;
    if (e == r)
      o += (size_t)snprintf(out + o, len - o, "%s%d", first ? "" : ", ", r);
    else
      o += (size_t)snprintf(out + o, len - o, "%s%d-%d", first ? "" : ", ", r, e);
    first = 0;
    r = e;
  }
}

static int samePrint(const struct callPrint* a, const struct callPrint* b) {
  return a->kind == b->kind && a->type == b->type && a->count == b->count && a->seq == b->seq &&
         (!reduces(a->kind) || a->op == b->op) && (!rooted(a->kind) || a->root == b->root);
}

/* What differs between the present ranks' calls, in words. */
static const char* whatDiffers(const struct callPrint* all, const uint8_t* present, int n) {
  const struct callPrint* ref = NULL;
  unsigned diff = 0;
  for (int r = 0; r < n; r++) {
    if (!present[r]) continue;
    if (ref == NULL) {
      ref = &all[r];
      continue;
    }
    const struct callPrint* p = &all[r];
    if (p->seq != ref->seq) diff |= 1;
    if (p->kind != ref->kind) diff |= 2;
    if (p->kind == ref->kind && p->count != ref->count) diff |= 4;
    if (p->kind == ref->kind && p->type != ref->type) diff |= 8;
    if (p->kind == ref->kind && reduces(p->kind) && p->op != ref->op) diff |= 16;
    if (p->kind == ref->kind && rooted(p->kind) && p->root != ref->root) diff |= 32;
  }
  if (diff & 1) return "the ranks have made different numbers of collective calls";
  if (diff & 2) return "the ranks called different collectives";
  if (diff & 4) return "the ranks passed different counts";
  if (diff & 8) return "the ranks passed different types";
  if (diff & 16) return "the ranks passed different operators";
  if (diff & 32) return "the ranks passed different roots";
  return "";
}

/* The message of a failed check into out. */
static void explain(const struct mscclppComm* comm, const struct mscclppCollCheck* ck, const struct callPrint* all,
                    const uint8_t* present, const struct callPrint* mine, char* out, size_t len) {
  const int n = comm->nranks;
  char call[160];
  describe(mine, call, sizeof(call));
  snprintf(out, len, "MSCCLPP_CHECK_CALLS: call %s on communicator 0x%016" PRIx64 ": ", call, comm->id);
  uint8_t* sel = (uint8_t*)calloc((size_t)n, 1);
  uint8_t* done = (uint8_t*)calloc((size_t)n, 1);
  if (sel == NULL || done == NULL) {
    free(sel);
    free(done);
    return;
  }
  int groups = 0, absent = 0;
  for (int r = 0; r < n; r++) absent += !present[r];
  /* the ranks that came, grouped by call */
  for (int r = 0; r < n && strlen(out) + 64 < len; r++) {
    if (!present[r] || done[r]) continue;
    memset(sel, 0, (size_t)n);
    for (int q = r; q < n; q++)
      if (present[q] && !done[q] && samePrint(&all[q], &all[r])) sel[q] = done[q] = 1;
    size_t o = strlen(out);
    snprintf(out + o, len - o, "%s", groups++ ? "; " : "");
    appendRanks(out, len, sel, n);
    describe(&all[r], call, sizeof(call));
    o = strlen(out);
    snprintf(out + o, len - o, " called %s", call);
  }
  if (absent > 0 && strlen(out) + 64 < len) {
    for (int r = 0; r < n; r++) sel[r] = !present[r];
    size_t o = strlen(out);
    snprintf(out + o, len - o, "%s", groups ? "; " : "");
    appendRanks(out, len, sel, n);
    o = strlen(out);
    snprintf(out + o, len - o, " did not call within %g s", comm->params.timeout / 2);
    if (absent == 1) {
      int r = 0;
      while (present[r]) r++;
      o = strlen(out);
      if (ck->last[r].seq == 0) {
        snprintf(out + o, len - o, " (it has made no collective call on this communicator)");
      } else {
        describe(&ck->last[r], call, sizeof(call));
        snprintf(out + o, len - o, " (its last call was %s, which every rank made)", call);
      }
    }
  }
  const char* differs = whatDiffers(all, present, n);
  size_t o = strlen(out);
  if (differs[0] != '\0' && o < len) snprintf(out + o, len - o, ": %s", differs);
  free(sel);
  free(done);
}

static mscclppResult_t checkOf(struct mscclppComm* comm, struct mscclppCollState* st, struct mscclppCollCheck** out) {
  if (st->check == NULL) {
    struct mscclppCollCheck* ck = (struct mscclppCollCheck*)calloc(1, sizeof(*ck));
    if (ck != NULL) ck->last = (struct callPrint*)calloc((size_t)comm->nranks, sizeof(*ck->last));
    if (ck == NULL || ck->last == NULL) {
      free(ck);
      return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "MSCCLPP_CHECK_CALLS: out of memory");
    }
    st->check = ck;
  }
  *out = st->check;
  return mscclppSuccess;
}

void mscclppCollCheckRelease(struct mscclppCollCheck* ck) {
  if (ck == NULL) return;
  free(ck->last);
  free(ck);
}

mscclppResult_t mscclppCollCheckCall(struct mscclppComm* comm, const struct mscclppCollArgs* a) {
  if (comm->nranks == 1) return mscclppSuccess;
  struct mscclppCollState* st = NULL;
  struct mscclppCollCheck* ck = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppCollStateOf(comm, &st));
  MSCCLPP_RETURN_ON_ERROR(checkOf(comm, st, &ck));
  struct callPrint mine = {PRINT_MAGIC, (uint32_t)a->kind, (uint32_t)a->type, (uint32_t)a->op, a->root, 0,
                           (uint64_t)a->count, ++st->checkSeq};
  const int n = comm->nranks;
  struct callPrint* all = (struct callPrint*)calloc((size_t)n, sizeof(*all));
  uint8_t* present = (uint8_t*)calloc((size_t)n, 1);
  if (all == NULL || present == NULL) {
    free(all);
    free(present);
    return mscclppErr(mscclppSystemError, MSCCLPP_LOG_COLL, "MSCCLPP_CHECK_CALLS: out of memory");
  }
  mscclppResult_t res =
      mscclppBootstrapGatherCheck(comm->bootstrap, &mine, sizeof(mine), comm->params.timeout / 2, all, present);
  if (res != mscclppSuccess) {
    char call[160];
    describe(&mine, call, sizeof(call));
    res = mscclppErrWrap(res, MSCCLPP_LOG_COLL, "MSCCLPP_CHECK_CALLS: the check of call %s", call);
  } else {
    int ok = 1;
    for (int r = 0; r < n; r++) {
      if (present[r] && all[r].magic != PRINT_MAGIC) present[r] = 0; /* not a fingerprint: counted as absent */
      ok &= present[r] && samePrint(&all[r], &mine);
    }
    if (ok) {
      memcpy(ck->last, all, (size_t)n * sizeof(*all));
    } else {
      char why[900];
      explain(comm, ck, all, present, &mine, why, sizeof(why));
      res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_COLL, "%s", why);
    }
  }
  free(all);
  free(present);
  return res;
}
