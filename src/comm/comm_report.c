/* SPDX-License-Identifier: MIT */
/*
 * A communicator's details in the hang report (core/report.h): the source
 * its record calls while a report is written, from a signal handler or the
 * thread whose wait failed. It prints
 *   - the notes of the abort object's wait board (mscclpp/device.h,
 *     mscclppWaitNote): every device-side wait of the communicator's
 *     kernels (or of host-backend threads playing them) that has lasted
 *     10 ms or timed out, with its peer, semaphore, value waited for and
 *     seen, and call; a semaphore's peer and channel come from the channel
 *     context, and where the host can read its inbound counter, the
 *     signals arrived so far are read now rather than taken from the note;
 *   - the port channels' proxy: its FIFO and first pending triggers
 *     (channel/port_channel.c).
 * Everything is read with loads, without locks: the abort object and the
 * channel context are published with release stores when they are made,
 * and the communicator detaches this source (waiting for writers in
 * flight) before it destroys either.
 */
#include <stdint.h>

#include "channel/channel.h"
#include "comm/comm.h"
#include "core/report.h"
#include "gpu/abort.h"
#include "mscclpp/device.h"

static const char* noteKindName(uint32_t kind) {
  switch (kind) {
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_PUSH: return "fifo-push";
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_SYNC: return "fifo-sync";
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_FLUSH: return "fifo-flush";
    case MSCCLPP_DEVICE_ERROR_TIMEOUT_SEMAPHORE: return "semaphore";
    case MSCCLPP_WAIT_NOTE_FLAG: return "flag";
    default: return "unknown";
  }
}

/* One note as a devwait line (core/report.h). */
static void reportNote(const struct mscclppReportRecord* rec, const mscclppWaitNote* n, uint64_t state,
                       const struct mscclppChannelContext* channels, int hostClock) {
  const uint32_t kind = __atomic_load_n(&n->kind, __ATOMIC_RELAXED);
  const uint32_t sem = __atomic_load_n(&n->sem, __ATOMIC_RELAXED);
  const uint32_t where = __atomic_load_n(&n->where, __ATOMIC_RELAXED);
  int64_t peer = __atomic_load_n(&n->peer, __ATOMIC_RELAXED) == MSCCLPP_WAIT_PEER_UNKNOWN
                     ? -1
                     : (int64_t)__atomic_load_n(&n->peer, __ATOMIC_RELAXED);
  uint64_t has = __atomic_load_n(&n->observed, __ATOMIC_RELAXED);
  const uint64_t call = __atomic_load_n(&n->call, __ATOMIC_RELAXED);
  struct mscclppChannelSemInfo info = {-1, 0, 0, NULL};
  const int known = mscclppChannelSemLookup(channels, sem, &info);
  if (known) {
    if (peer < 0) peer = info.peer;
    /* a live wait: what has arrived by now (a timed-out one keeps what it saw) */
    if (info.inboundHost != NULL && state == MSCCLPP_WAIT_NOTE_WAITING)
      has = __atomic_load_n(info.inboundHost, __ATOMIC_RELAXED);
  }
  struct mscclppReportLine l;
  mscclppReportLineStart(&l, rec);
  mscclppReportLineStr(&l, "devwait", noteKindName(kind));
  mscclppReportLineStr(&l, "state", state == MSCCLPP_WAIT_NOTE_TIMEDOUT ? "timedout" : "waiting");
  if (peer >= 0) mscclppReportLineI(&l, "peer", peer);
  if (sem != 0) {
    mscclppReportLineU(&l, "sem", sem);
    mscclppReportLineStr(&l, "chan", known ? mscclppChannelKindName(info.kind) : "?");
  }
  mscclppReportLineU(&l, "expect", __atomic_load_n(&n->expected, __ATOMIC_RELAXED));
  if (has != MSCCLPP_WAIT_OBSERVED_UNKNOWN) mscclppReportLineU(&l, "has", has);
  if (call != 0) mscclppReportLineCall(&l, "call", rec, call);
  if (hostClock) { /* the waiter's clock is this one (a GPU's %globaltimer is not) */
    const uint64_t since = __atomic_load_n(&n->sinceNs, __ATOMIC_RELAXED), now = mscclppHostClockNs();
    mscclppReportLineU(&l, "waited_ms", now > since ? (now - since) / 1000000u : 0);
  }
  if (hostClock) {
    mscclppReportLineU(&l, "thread", where);
  } else {
    mscclppReportLineU(&l, "block", where >> 16);
    mscclppReportLineU(&l, "thread", where & 0xffffu);
  }
  mscclppReportLineEmit(&l);
}

/* The source (core/report.h, mscclppReportSource); arg is the communicator. */
static void reportDetails(void* arg, const struct mscclppReportRecord* rec) {
  const struct mscclppComm* comm = (const struct mscclppComm*)arg;
  const struct mscclppAbort* abort = __atomic_load_n(&comm->abort, __ATOMIC_ACQUIRE);
  const struct mscclppChannelContext* channels = __atomic_load_n(&comm->channels, __ATOMIC_ACQUIRE);
  if (abort != NULL) {
    const mscclppWaitNote* board = mscclppAbortWaitBoard(abort);
    for (uint32_t i = 0; i < MSCCLPP_WAIT_BOARD_NOTES; i++) {
      const uint64_t state = __atomic_load_n(&board[i].state, __ATOMIC_ACQUIRE);
      if (state == MSCCLPP_WAIT_NOTE_WAITING || state == MSCCLPP_WAIT_NOTE_TIMEDOUT)
        reportNote(rec, &board[i], state, channels, abort->device < 0);
    }
  }
  mscclppChannelReportProxy(channels, rec);
}

void mscclppCommReportAttach(struct mscclppComm* comm) { mscclppReportAttach(comm->report, reportDetails, comm); }

void mscclppCommReportDetach(struct mscclppComm* comm) { mscclppReportDetach(comm->report); }
