/* SPDX-License-Identifier: MIT */
/* Signals as remote CQ data: the sender's signal table and the receiver's
 * handler. See signal_cq.h. */
#include "transport/net/signal_cq.h"

#include <stddef.h>

#include "core/error.h"
#include "core/log.h"
#include "transport/net/link.h"

int mscclppNetSigFind(struct mscclppNetSigTable* t, uint64_t addr) {
  if (t->n > 0 && t->addrs[t->last] == addr) return (int)t->last;
  for (uint32_t i = 0; i < t->n; i++)
    if (t->addrs[i] == addr) {
      t->last = i;
      return (int)i;
    }
  return -1;
}

void mscclppNetSigMark(struct mscclppNetOp* o, struct mscclppNetLink* l, int index, uint64_t sigValue) {
  o->flags |= MSCCLPP_NET_OP_CQ_DATA;
  o->cqData = mscclppNetCqData(MSCCLPP_NET_TAG_SIGNAL, l->eng.peerId, (uint32_t)index << 8 | (uint32_t)(sigValue & 0xffu));
  o->fence = mscclppNetSignalModeOf(l->eng.net) == MSCCLPP_NET_SIGNAL_FENCED;
}

mscclppResult_t mscclppNetSigAddLocked(struct mscclppNetLink* l, uint64_t addr, int* index) {
  struct mscclppNetSigTable* t = &l->sig;
  struct mscclppNet* net = l->eng.net;
  *index = -1;
  if (!mscclppNetHasCqSignals(net) || t->n >= MSCCLPP_NET_SIG_SLOTS) return mscclppSuccess;
  struct mscclppNetOp* o = mscclppNetOpGetLocked(net);
  if (o == NULL) return mscclppSystemError;
  uint32_t i = t->n++;
  t->addrs[i] = addr;
  t->last = i;
  o->nc = &l->eng;
  o->what = "inline write";
  mscclppNetOpInject(o, &addr, sizeof(addr),
                     l->peerCtrlAddr + offsetof(struct mscclppNetCtrl, sigAddr) + (uint64_t)i * sizeof(uint64_t),
                     l->peerCtrlKey);
  if (mscclppNetSignalModeOf(net) == MSCCLPP_NET_SIGNAL_FENCED) o->flags |= MSCCLPP_NET_OP_DELIVERY;
  *index = (int)i;
  return mscclppNetSubmitLocked(net, o);
}

void mscclppNetSignalReceivedLocked(struct mscclppNetConn* nc, uint32_t payload) {
  if (nc->error != mscclppSuccess || nc->removed) return;
  struct mscclppNetLink* l = mscclppNetLinkOf(nc);
  uint32_t index = (payload >> 8) & 0xffu, low = payload & 0xffu;
  uint64_t addr = index < MSCCLPP_NET_SIG_SLOTS ? __atomic_load_n(&l->ctrl->sigAddr[index], __ATOMIC_ACQUIRE) : 0;
  const struct mscclppRegisteredMemory* m =
      addr != 0 && addr % 8 == 0 ? mscclppNetFindLocalLocked(nc->net, addr, sizeof(uint64_t)) : NULL;
  if (m == NULL || !m->hostAccessible) {
    mscclppNetConnFailLocked(nc,
                             "rank %d signalled rank %d through table entry %u, address 0x%llx: not an aligned word "
                             "of host memory registered for Net",
                             nc->peerRank, nc->rank, index, (unsigned long long)addr);
    return;
  }
  uint64_t* w = (uint64_t*)(uintptr_t)addr;
  uint64_t next = __atomic_load_n(w, __ATOMIC_RELAXED) + 1; /* only this connection's signals change the word */
  if ((next & 0xffu) != low) {
    mscclppNetConnFailLocked(nc,
                             "rank %d signalled rank %d out of sequence (table entry %u at 0x%llx: value byte 0x%02x "
                             "where 0x%02x was due)",
                             nc->peerRank, nc->rank, index, (unsigned long long)addr, low, (unsigned)(next & 0xffu));
    return;
  }
  __atomic_store_n(w, next, __ATOMIC_RELEASE);
}
