/* SPDX-License-Identifier: MIT */
/*
 * A bootstrap of some of another bootstrap's ranks, made without a root and
 * without the excluded ranks' help (bootstrap.h, mscclppBootstrapShrink).
 *
 * Why no root: the parent's root served one rendezvous and is gone, and
 * the process that ran it (rank 0) may be the one that died. But every
 * rank learnt every peer's listener address at the parent's rendezvous,
 * and the parent's connections between survivors still work after a loss:
 * only the policy "once a rank is lost, every operation fails" stops them.
 * The shrink talks over the parent with operations that fail only when a
 * peer they need is lost (struct mscclppBsOp's `survivors`).
 *
 * The protocol, on each member (a parent rank not in its exclusion list):
 *  1. start the child: a new listener on the parent's interface, a progress
 *     thread, and a secret derived from the parent's secret and the
 *     exclusion list, so that members that agree authenticate each other at
 *     once; pick a random call id;
 *  2. send a REQ (call id, list) to every other member, then serve records
 *     from anyone, in the order they arrive, until every other member has
 *     answered this call: a REQ is answered with a RESP (this rank's list
 *     and new listener) when its sender is a member, else with EXCLUDED; a
 *     RESP, EXCLUDED or ABORT counts only when it echoes this call's id;
 *  3. a RESP that names another list, an EXCLUDED or an ABORT fails the
 *     shrink; so does a member lost. A rank that fails answers the latest
 *     REQ of each rank it has read with ABORT and its reason, and sends
 *     every member an ABORT for "any call": a member that has not read
 *     its REQ yet cannot name it;
 *  4. the rank table: member i's new listener, in parent-rank order; the
 *     session mixes every member's call id; then the new bootstrap's
 *     monitor connection to its rank 0 (the lowest member) and a first
 *     barrier, as after a rendezvous.
 *
 * Why echoes: all shrinks of a parent share one tag, so that members whose
 * lists differ read each other's records and say so; records of a failed
 * call (a RESP, an ABORT) may then still be queued when the next call
 * starts. A record that answers a call names it, so an answer to an older
 * call is dropped; an old REQ gets an answer its sender drops in turn. An
 * ABORT for any call cannot be told from an old one: it fails the shrink
 * only if its sender starts no newer call (a REQ) within GRACE_SECONDS,
 * which a member that retries at once does.
 * Every wait ends: a member M waits for a RESP from each other member R;
 * R answers M's REQ once it reads it (in its own call, with ABORT when its
 * call fails, or in its next one), or R is lost, or the timeout. A rank
 * that calls while the members exclude it is answered EXCLUDED if its REQ
 * reaches them before they finish; else it waits until they destroy the
 * parent (its wait then fails: the member left) or the timeout. Each member
 * sends two small records per other member, which suits jobs of up to
 * thousands of ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap_state.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

/* Every shrink record's tag, in the collective tag space: negative, so that
 * it never meets an allgather's or a barrier's (0 and up). */
#define SHRINK_TAG (-1)
#define GRACE_SECONDS 1.0

/* "3, 5, 9" (and ", ... (12 in all)"): the ranks a record shows. */
static void listText(const int32_t* shown, uint32_t n, char* buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  if (n == 0) {
    snprintf(buf, len, "none");
    return;
  }
  for (uint32_t i = 0; i < n && i < MSCCLPP_BS_SHRINK_SHOWN && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", shown[i]);
  if (n > MSCCLPP_BS_SHRINK_SHOWN && at < len) snprintf(buf + at, len - at, ", ... (%u in all)", n);
}

struct shrinkRun {
  struct mscclppBootstrap* parent;
  struct mscclppBsOp op;
  int* memberIndex;     /* [parent nranks] new rank, or -1 for an excluded rank */
  uint64_t* latestReq;  /* [parent nranks] call id of the last REQ read from each rank in this call, or 0 */
  uint64_t* graceEnd;   /* [parent nranks] ns: a member's ABORT for any call counts then, or 0 */
  int graceRank;        /* the first member in grace, and its ABORT's reason */
  char graceWhy[MSCCLPP_BS_SHRINK_TEXT + 1];
  struct mscclppBsShrink mine; /* this rank's RESP */
};

/* Send `what` answering call `echo` to parent rank `to` (text for ABORT).
 * The receiver may be gone: a rank known gone is skipped, and a failure
 * is only logged. */
static void answer(struct shrinkRun* s, int to, uint32_t what, uint64_t echo, const char* text) {
  pthread_mutex_lock(&s->parent->lock);
  int alive = s->parent->peerState[to] == PEER_ALIVE;
  pthread_mutex_unlock(&s->parent->lock);
  if (!alive) return;
  struct mscclppBsShrink rec = s->mine;
  rec.what = what;
  rec.echo = echo;
  if (what != MSCCLPP_BS_SHRINK_RESP) memset(&rec.info, 0, sizeof(rec.info));
  snprintf(rec.text, sizeof(rec.text), "%s", text);
  uint8_t buf[MSCCLPP_BS_SHRINK_BYTES];
  mscclppBootstrapEncodeShrink(&rec, buf);
  char op[80];
  snprintf(op, sizeof(op), "shrink: answering rank %d", to);
  struct mscclppBsOp o = s->op;
  o.name = op;
  (void)mscclppBsSendMsg(s->parent, to, MSCCLPP_BS_FLAG_COLL, SHRINK_TAG, buf, sizeof(buf), &o);
}

/* A REQ of rank p read: a member gets this rank's RESP, an excluded rank
 * EXCLUDED. */
static void serveReq(struct shrinkRun* s, int p, const struct mscclppBsShrink* r) {
  s->latestReq[p] = r->from;
  answer(s, p, s->memberIndex[p] >= 0 ? MSCCLPP_BS_SHRINK_RESP : MSCCLPP_BS_SHRINK_EXCLUDED, r->from, "");
}

/* The REQs already queued (never waits): served; other records dropped. */
static void serveQueued(struct shrinkRun* s) {
  struct mscclppBootstrap* p = s->parent;
  for (int q = 0; q < p->nranks; q++) {
    if (q == p->rank) continue;
    uint8_t buf[MSCCLPP_BS_SHRINK_BYTES];
    while (mscclppBsTakeQueued(p, q, MSCCLPP_BS_FLAG_COLL, SHRINK_TAG, buf, sizeof(buf))) {
      struct mscclppBsShrink r;
      if (mscclppBootstrapParseShrink(buf, sizeof(buf), &r, NULL) == mscclppSuccess && r.what == MSCCLPP_BS_SHRINK_REQ)
        serveReq(s, q, &r);
    }
  }
}

/* Fail the shrink on this rank: every rank whose request it has read hears
 * why (ABORT). The reason is the caller's last error already (logged where
 * it was decided). */
static mscclppResult_t giveUp(struct shrinkRun* s, mscclppResult_t res) {
  char text[MSCCLPP_BS_SHRINK_TEXT + 1];
  snprintf(text, sizeof(text), "%s", mscclppGetLastError());
  struct mscclppBootstrap* p = s->parent;
  /* REQs that have arrived meanwhile are answered ABORT too */
  for (int q = 0; q < p->nranks; q++) {
    if (q == p->rank) continue;
    uint8_t buf[MSCCLPP_BS_SHRINK_BYTES];
    while (mscclppBsTakeQueued(p, q, MSCCLPP_BS_FLAG_COLL, SHRINK_TAG, buf, sizeof(buf))) {
      struct mscclppBsShrink r;
      if (mscclppBootstrapParseShrink(buf, sizeof(buf), &r, NULL) == mscclppSuccess && r.what == MSCCLPP_BS_SHRINK_REQ)
        s->latestReq[q] = r.from;
    }
    if (s->latestReq[q] != 0) answer(s, q, MSCCLPP_BS_SHRINK_ABORT, s->latestReq[q], text);
    if (s->memberIndex[q] >= 0) answer(s, q, MSCCLPP_BS_SHRINK_ABORT, MSCCLPP_BS_SHRINK_ANY, text);
  }
  /* the caller's last error: the reason, not a failed answer's */
  return mscclppErrAgain(res, MSCCLPP_LOG_BOOTSTRAP, "%s", text);
}

/* A record from rank p that answers this call (r->echo is this call's id):
 * a member's RESP into *info (0 returned), or the failure it says. */
static mscclppResult_t takeAnswer(struct shrinkRun* s, int p, const struct mscclppBsShrink* r) {
  struct mscclppBootstrap* bs = s->parent;
  char mineText[160], theirs[160];
  listText(s->mine.shown, s->mine.nexcluded, mineText, sizeof(mineText));
  listText(r->shown, r->nexcluded, theirs, sizeof(theirs));
  if (r->what == MSCCLPP_BS_SHRINK_ABORT)
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "shrink: rank %d gave it up: %s", p, r->text);
  if (r->what == MSCCLPP_BS_SHRINK_EXCLUDED)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP,
                      "shrink: rank %d excludes this rank (%d): it excludes ranks %s, this rank excludes %s; every "
                      "member must pass the same list",
                      p, bs->rank, theirs, mineText);
  if (r->parentNranks != bs->nranks || r->nexcluded != s->mine.nexcluded || r->excludedHash != s->mine.excludedHash)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP,
                      "shrink: rank %d excludes ranks %s, this rank (%d) excludes %s: every member must pass the same "
                      "list",
                      p, theirs, bs->rank, mineText);
  if (r->info.rank != s->memberIndex[p])
    return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                      "shrink: rank %d calls itself new rank %d, this rank expected %d", p, r->info.rank,
                      s->memberIndex[p]);
  return mscclppSuccess;
}

/* The child's secret: only ranks of the parent can compute it, and it
 * differs for every exclusion list (successive children of one list differ
 * by their session). */
static void childSecret(const struct mscclppBootstrap* p, uint64_t excludedHash, uint8_t out[MSCCLPP_BS_SECRET_BYTES]) {
  uint8_t in[24];
  memcpy(in, "mscclpp-shrink-", 15);
  for (int half = 0; half < 2; half++) {
    in[15] = (uint8_t)half;
    mscclppPutLE64(in + 16, excludedHash);
    mscclppPutLE64(out + 8 * half, mscclppSipHash(p->secret, in, sizeof(in)));
  }
}

/* Steps 2-3 (top of this file): every other member's RESP to this call,
 * into infos[] and ids[] (by new rank). */
static mscclppResult_t agree(struct shrinkRun* s, const int* members, int m, int me,
                             struct mscclppBsRankInfo* infos, uint8_t* ids, uint8_t* mustLive) {
  struct mscclppBootstrap* p = s->parent;
  uint64_t myId = s->mine.from;
  /* a member this rank knows gone cannot be waited for: say so first */
  for (int i = 0; i < m; i++) {
    pthread_mutex_lock(&p->lock);
    int state = p->peerState[members[i]];
    pthread_mutex_unlock(&p->lock);
    if (state != PEER_ALIVE)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP,
                        "shrink: rank %d %s, but it is not in the exclusion list", members[i],
                        state == PEER_LOST ? "was lost" : "has left (destroyed its communicator)");
  }
  struct mscclppBsShrink req = s->mine;
  req.what = MSCCLPP_BS_SHRINK_REQ;
  req.echo = 0;
  memset(&req.info, 0, sizeof(req.info));
  uint8_t buf[MSCCLPP_BS_SHRINK_BYTES];
  mscclppBootstrapEncodeShrink(&req, buf);
  for (int i = 0; i < m; i++) {
    if (i == me) continue;
    char op[80];
    snprintf(op, sizeof(op), "shrink: asking rank %d", members[i]);
    struct mscclppBsOp o = s->op;
    o.name = op;
    MSCCLPP_RETURN_ON_ERROR(mscclppBsSendMsg(p, members[i], MSCCLPP_BS_FLAG_COLL, SHRINK_TAG, buf, sizeof(buf), &o));
    mustLive[members[i]] = 1; /* until it has answered */
  }
  for (int left = m - 1; left > 0;) {
    int from = -1;
    struct mscclppBsOp o = s->op;
    o.name = "shrink: waiting for the other members' answers";
    uint64_t soonest = 0;
    for (int q = 0; q < p->nranks; q++)
      if (mustLive[q] && s->graceEnd[q] != 0 && (soonest == 0 || s->graceEnd[q] < soonest)) soonest = s->graceEnd[q];
    if (soonest != 0) {
      uint64_t now = mscclppTimeNs();
      o.deadline = mscclppDeadlineMin(o.deadline, mscclppDeadlineIn(soonest > now ? (double)(soonest - now) * 1e-9 : 0));
      o.quietTimeout = 1;
    }
    mscclppResult_t res = mscclppBsRecvAny(p, MSCCLPP_BS_FLAG_COLL, SHRINK_TAG, mustLive, buf, sizeof(buf), &o, &from);
    if (res == mscclppTimeout && soonest != 0) {
      for (int q = 0; q < p->nranks; q++)
        if (mustLive[q] && s->graceEnd[q] != 0 && s->graceEnd[q] <= mscclppTimeNs())
          return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP,
                            "shrink: rank %d gave it up before it answered this rank: %s", q,
                            q == s->graceRank ? s->graceWhy : "(see its log)");
      if (mscclppDeadlinePassed(s->op.deadline))
        return mscclppErr(mscclppTimeout, MSCCLPP_LOG_BOOTSTRAP, "%s timed out after %g s (MSCCLPP_TIMEOUT)", o.name,
                          p->timeout);
      continue;
    }
    MSCCLPP_RETURN_ON_ERROR(res);
    struct mscclppBsShrink r;
    mscclppBsWhy why;
    if (mscclppBootstrapParseShrink(buf, sizeof(buf), &r, &why) != mscclppSuccess)
      return mscclppErr(mscclppRemoteError, MSCCLPP_LOG_BOOTSTRAP, "shrink: invalid record from rank %d: %s", from,
                        why.text);
    if (r.what == MSCCLPP_BS_SHRINK_REQ) {
      s->graceEnd[from] = 0; /* it has started a newer call */
      serveReq(s, from, &r);
      continue;
    }
    if (r.echo == MSCCLPP_BS_SHRINK_ANY) {
      if (mustLive[from] && s->graceEnd[from] == 0) {
        s->graceEnd[from] = mscclppTimeNs() + (uint64_t)(GRACE_SECONDS * 1e9);
        if (s->graceRank < 0) {
          s->graceRank = from;
          snprintf(s->graceWhy, sizeof(s->graceWhy), "%s", r.text);
        }
      }
      continue;
    }
    /* answers to older calls, and a member's second answer, are dropped */
    int idx = s->memberIndex[from];
    if (r.echo != myId || (r.what == MSCCLPP_BS_SHRINK_RESP && (idx < 0 || !mustLive[from]))) continue;
    MSCCLPP_RETURN_ON_ERROR(takeAnswer(s, from, &r));
    infos[idx] = r.info;
    mscclppPutLE64(ids + 8 * (size_t)idx, r.from);
    mustLive[from] = 0;
    left--;
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppBootstrapShrink(struct mscclppBootstrap* parent, const int* excluded, int nexcluded,
                                       const struct mscclppParams* params, const int* cancel,
                                       struct mscclppBootstrap** out) {
  const int n = parent->nranks;
  if (nexcluded < 0 || nexcluded >= n || (nexcluded > 0 && excluded == NULL))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "shrink: %d excluded ranks of %d", nexcluded, n);
  for (int i = 0; i < nexcluded; i++)
    if (excluded[i] < 0 || excluded[i] >= n || (i > 0 && excluded[i] <= excluded[i - 1]) ||
        excluded[i] == parent->rank)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP,
                        "shrink: the exclusion list must be ascending ranks of 0..%d other than this one (%d)", n - 1,
                        parent->rank);
  mscclppDeadline deadline = mscclppDeadlineIn(params->timeout);
  struct shrinkRun s;
  memset(&s, 0, sizeof(s));
  s.parent = parent;
  s.op = mscclppBsOpOf(parent, "shrink", deadline);
  s.op.survivors = 1;
  s.op.cancel = cancel;
  int* members = (int*)malloc((size_t)n * sizeof(int));
  int32_t* ex32 = (int32_t*)malloc((size_t)(nexcluded > 0 ? nexcluded : 1) * sizeof(int32_t));
  struct mscclppBsRankInfo* infos = (struct mscclppBsRankInfo*)calloc((size_t)n, sizeof(*infos));
  uint8_t* ids = (uint8_t*)calloc((size_t)n, 8);
  uint8_t* mustLive = (uint8_t*)calloc((size_t)n, 1);
  s.memberIndex = (int*)malloc((size_t)n * sizeof(int));
  s.latestReq = (uint64_t*)calloc((size_t)n, sizeof(uint64_t));
  s.graceEnd = (uint64_t*)calloc((size_t)n, sizeof(uint64_t));
  s.graceRank = -1;
  struct mscclppBootstrap* child = NULL;
  mscclppResult_t res = mscclppSuccess;
  if (members == NULL || ex32 == NULL || infos == NULL || ids == NULL || mustLive == NULL || s.memberIndex == NULL ||
      s.latestReq == NULL || s.graceEnd == NULL) {
    res = mscclppErr(mscclppSystemError, MSCCLPP_LOG_BOOTSTRAP, "shrink: out of memory for %d ranks", n);
    goto done;
  }
  int m = 0, me = -1;
  for (int r = 0, k = 0; r < n; r++) {
    s.memberIndex[r] = -1;
    if (k < nexcluded && excluded[k] == r) {
      k++;
      continue;
    }
    if (r == parent->rank) me = m;
    s.memberIndex[r] = m;
    members[m++] = r;
  }
  for (int i = 0; i < nexcluded; i++) ex32[i] = excluded[i];

  struct mscclppBsShrink* mine = &s.mine;
  mine->what = MSCCLPP_BS_SHRINK_RESP;
  mine->nexcluded = (uint32_t)nexcluded;
  mine->excludedHash = mscclppBootstrapExcludedHash(parent->secret, ex32, nexcluded);
  mine->parentNranks = n;
  for (int i = 0; i < MSCCLPP_BS_SHRINK_SHOWN; i++) mine->shown[i] = i < nexcluded ? ex32[i] : -1;
  while (res == mscclppSuccess && mine->from == 0) res = mscclppRandomBytes(&mine->from, sizeof(mine->from));

  /* 1. the child, listening on the parent's interface */
  uint8_t secret[MSCCLPP_BS_SECRET_BYTES];
  childSecret(parent, mine->excludedHash, secret);
  if (res == mscclppSuccess) res = mscclppBsAlloc(me, m, params, secret, &child);
  if (res == mscclppSuccess) {
    union mscclppSocketAddr addr = parent->listenAddr;
    mscclppSocketAddrSetPort(&addr, 0);
    res = mscclppBsStart(child, &addr);
  }
  if (res == mscclppSuccess) {
    mine->info.rank = me;
    mine->info.pid = (uint32_t)getpid();
    mine->info.hostHash = parent->peers[parent->rank].hostHash;
    mscclppSocketAddrToWire(&child->listenAddr, &mine->info.addr);
    infos[me] = mine->info;
    mscclppPutLE64(ids + 8 * (size_t)me, mine->from);
    MSCCLPP_INFO(MSCCLPP_LOG_BOOTSTRAP, "rank %d: shrink: %d of %d ranks stay, this one as rank %d", parent->rank, m, n,
                 me);
    res = agree(&s, members, m, me, infos, ids, mustLive);
  }
  if (res != mscclppSuccess) {
    (void)giveUp(&s, res);
    goto done;
  }
  /* late requests of excluded ranks: EXCLUDED now rather than a wait */
  serveQueued(&s);

  /* 4. the table, the session, then as after a rendezvous */
  memcpy(child->peers, infos, (size_t)m * sizeof(*infos));
  pthread_mutex_lock(&child->lock);
  child->session = mscclppSipHash(secret, ids, 8 * (size_t)m);
  child->sessionKnown = 1;
  pthread_mutex_unlock(&child->lock);
  mscclppBsWakeProgress(child); /* members that connected early wait to be admitted */
  res = mscclppBsFinishJoin(child, deadline, -1);

done:
  free(members);
  free(ex32);
  free(infos);
  free(ids);
  free(mustLive);
  free(s.memberIndex);
  free(s.latestReq);
  free(s.graceEnd);
  if (res != mscclppSuccess) {
    if (child != NULL) child->creationFailed = 1;
    mscclppBootstrapDestroy(child);
    return res;
  }
  *out = child;
  return mscclppSuccess;
}
