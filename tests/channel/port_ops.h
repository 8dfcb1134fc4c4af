/* SPDX-License-Identifier: MIT */
/*
 * The port-channel operations the channel workers run, shared by the host
 * backend (channel_worker.c: CPU threads play the kernels) and the GPU
 * (channel_worker_gpu.cu: one kernel per operation) through the device
 * headers, which compile for both: a put of `size` bytes from offset srcOff
 * of the channel's source to offset dstOff of its destination, made visible
 * by a signal. The caller then waits for the peer's matching signal and
 * checks the bytes that arrived.
 */
#ifndef MSCCLPP_TESTS_PORT_OPS_H_
#define MSCCLPP_TESTS_PORT_OPS_H_

#include <stdint.h>

#include "mscclpp/port_channel_device.h"

/* PORT_PUT_FLUSH_SIGNAL_POLL: the partner's signal is received by polling;
 * PORT_PUT_FLUSH_SIGNAL: the same operation, received by a wait. */
enum {
  PORT_PUT_SIGNAL,
  PORT_PUT_WITH_SIGNAL,
  PORT_PUT_WITH_SIGNAL_FLUSH,
  PORT_PUT_FLUSH_SIGNAL_POLL,
  PORT_OPS,
  PORT_PUT_FLUSH_SIGNAL = PORT_OPS
};
static const char* const portOpName[PORT_OPS + 1] = {"port put+signal", "port putWithSignal",
                                                     "port putWithSignalAndFlush", "port put+flush+signal/poll",
                                                     "port put+flush+signal"};

/* Operation `op` on handle h, without the wait; stops at the first call
 * that fails and returns its status. */
MSCCLPP_DEVICE_INLINE mscclppResult_t portOpIssue(const mscclppPortChannelDeviceHandle* h, int op, uint64_t srcOff,
                                                  uint64_t dstOff, uint64_t size) {
  mscclppResult_t r;
  switch (op) {
    case PORT_PUT_SIGNAL:
      r = mscclppPortChannelDevicePut(h, h->dst, dstOff, h->src, srcOff, size);
      if (r == mscclppSuccess) r = mscclppPortChannelDeviceSignal(h);
      return r;
    case PORT_PUT_WITH_SIGNAL: return mscclppPortChannelDevicePutWithSignal(h, h->dst, dstOff, h->src, srcOff, size);
    case PORT_PUT_WITH_SIGNAL_FLUSH:
      return mscclppPortChannelDevicePutWithSignalAndFlush(h, h->dst, dstOff, h->src, srcOff, size);
    default: /* PORT_PUT_FLUSH_SIGNAL_POLL, PORT_PUT_FLUSH_SIGNAL */
      r = mscclppPortChannelDevicePut(h, h->dst, dstOff, h->src, srcOff, size);
      if (r == mscclppSuccess) r = mscclppPortChannelDeviceFlush(h);
      if (r == mscclppSuccess) r = mscclppPortChannelDeviceSignal(h);
      return r;
  }
}

#ifndef __CUDACC__
#include <sched.h>

#include "core/util.h"
#include "harness.h"

/* Host backend: operation `op`, then the wait for the peer's signal:
 * mscclppPortChannelDeviceWait, or for PORT_PUT_FLUSH_SIGNAL_POLL polling
 * for at most pollSeconds. */
static inline void portOpRun(const mscclppPortChannelDeviceHandle* h, int op, uint64_t srcOff, uint64_t dstOff,
                             uint64_t size, double pollSeconds) {
  CHECK_RES(portOpIssue(h, op, srcOff, dstOff, size), mscclppSuccess);
  if (op == PORT_PUT_FLUSH_SIGNAL_POLL) {
    mscclppDeadline dl = mscclppDeadlineIn(pollSeconds);
    int got = 0;
    while (!(got = mscclppPortChannelDevicePoll(h)) && !mscclppDeadlinePassed(dl)) sched_yield();
    CHECK(got);
  } else {
    CHECK_RES(mscclppPortChannelDeviceWait(h), mscclppSuccess);
  }
}
#endif

#endif /* MSCCLPP_TESTS_PORT_OPS_H_ */
