/* SPDX-License-Identifier: MIT */
/* mscclpp: everything a host program includes. The device-side headers
 * (FIFO push, semaphores, port/memory channels, packets) come with the host
 * headers that hand out their handles, and compile in kernels (nvcc) and in
 * host-backend C code alike. The seed's API (mscclppConnect, mscclppDevConn,
 * mscclppBootStrapAllGather, ...) is opt-in: include mscclpp/seed.h. */
#ifndef MSCCLPP_MSCCLPP_H_
#define MSCCLPP_MSCCLPP_H_

#include "mscclpp/core.h"
#include "mscclpp/comm.h"
#include "mscclpp/abort.h"
#include "mscclpp/trigger.h"
#include "mscclpp/fifo.h"
#include "mscclpp/proxy.h"
#include "mscclpp/semaphore.h"
#include "mscclpp/memory.h"
#include "mscclpp/connection.h"
#include "mscclpp/port_channel.h"
#include "mscclpp/memory_channel.h"
#include "mscclpp/coll.h"
#include "mscclpp/plan.h"

#endif /* MSCCLPP_MSCCLPP_H_ */
