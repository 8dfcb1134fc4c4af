/* SPDX-License-Identifier: MIT */
/* How many ranks of a communicator run on this rank's GPU (comm.h). */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/gpu.h"
#include "gpu/gpu_ipc.h"

int mscclppGpuShareCount(const struct mscclppGpuIdent* all, int n, int me) {
  if (me < 0 || me >= n || !all[me].known) return 1;
  int same = 0;
  for (int r = 0; r < n; r++) same += all[r].known && memcmp(all[r].uuid, all[me].uuid, sizeof(all[me].uuid)) == 0;
  return same;
}

mscclppResult_t mscclppCommGpuShare(struct mscclppComm* comm, int* share) {
  struct mscclppGpuIdent me;
  memset(&me, 0, sizeof(me));
  /* every rank reaches the gather below, whatever it learns here (a rank
   * that returned early would leave the others waiting in it) */
  int dev = -1;
  if (mscclppGpuIpcAvailable() && mscclppGpuIpcCurrentDevice(&dev) == mscclppSuccess) {
    if (mscclppGpuUuid(dev, me.uuid) == mscclppSuccess)
      me.known = 1;
    else
      /* the gpu layer logged why at WARN; this says what follows from it */
      MSCCLPP_INFO(MSCCLPP_LOG_GPU,
                   "rank %d: the UUID of device %d is unknown (reason logged above): its kernels are sized as if no "
                   "other rank shared it",
                   comm->rank, dev);
  }
  struct mscclppGpuIdent* all = (struct mscclppGpuIdent*)calloc((size_t)comm->nranks, sizeof(*all));
  if (all == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_INIT, "out of memory");
  all[comm->rank] = me;
  mscclppResult_t res = mscclppBootstrapAllGather(comm, all, sizeof(*all));
  int same = res == mscclppSuccess ? mscclppGpuShareCount(all, comm->nranks, comm->rank) : 1;
  free(all);
  MSCCLPP_RETURN_ON_ERROR(res);
  *share = same > comm->deviceShare ? same : comm->deviceShare;
  return mscclppSuccess;
}

void mscclppCommSetDeviceShare(struct mscclppComm* comm, int share) {
  if (share > comm->deviceShare) comm->deviceShare = share;
}
