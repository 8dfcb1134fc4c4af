/*
 * The four ways a test drives a port channel from the host side of its
 * device handle (tests/channel/channel_worker.c over CUDA IPC or shared
 * memory, tests/net/net_worker.c over the network): a put of `size` bytes
 * from offset srcOff of the channel's source to offset dstOff of its
 * destination, made visible by a signal, and this side's wait for the
 * peer's matching signal. The caller checks the bytes that arrived.
 */
#ifndef MSCCLPP_TESTS_PORT_OPS_H_
#define MSCCLPP_TESTS_PORT_OPS_H_

#include <sched.h>
#include <stdint.h>

#include "core/util.h"
#include "harness.h"
#include "mscclpp/port_channel_device.h"

enum { PORT_PUT_SIGNAL, PORT_PUT_WITH_SIGNAL, PORT_PUT_WITH_SIGNAL_FLUSH, PORT_PUT_FLUSH_SIGNAL_POLL, PORT_OPS };
static const char* const portOpName[PORT_OPS] = {"port put+signal", "port putWithSignal",
                                                 "port putWithSignalAndFlush", "port put+flush+signal/poll"};

/* Operation `op`, then the wait for the peer's signal: mscclppPortChannelDeviceWait,
 * or for PORT_PUT_FLUSH_SIGNAL_POLL polling for at most pollSeconds. */
static inline void portOpRun(const mscclppPortChannelDeviceHandle* h, int op, uint64_t srcOff, uint64_t dstOff,
                             uint64_t size, double pollSeconds) {
  switch (op) {
    case PORT_PUT_SIGNAL:
      CHECK_RES(mscclppPortChannelDevicePut(h, h->dst, dstOff, h->src, srcOff, size), mscclppSuccess);
      CHECK_RES(mscclppPortChannelDeviceSignal(h), mscclppSuccess);
      break;
    case PORT_PUT_WITH_SIGNAL:
      CHECK_RES(mscclppPortChannelDevicePutWithSignal(h, h->dst, dstOff, h->src, srcOff, size), mscclppSuccess);
      break;
    case PORT_PUT_WITH_SIGNAL_FLUSH:
      CHECK_RES(mscclppPortChannelDevicePutWithSignalAndFlush(h, h->dst, dstOff, h->src, srcOff, size),
                mscclppSuccess);
      break;
    default:
      CHECK_RES(mscclppPortChannelDevicePut(h, h->dst, dstOff, h->src, srcOff, size), mscclppSuccess);
      CHECK_RES(mscclppPortChannelDeviceFlush(h), mscclppSuccess);
      CHECK_RES(mscclppPortChannelDeviceSignal(h), mscclppSuccess);
      break;
  }
  if (op == PORT_PUT_FLUSH_SIGNAL_POLL) {
    mscclppDeadline dl = mscclppDeadlineIn(pollSeconds);
    int got = 0;
    while (!(got = mscclppPortChannelDevicePoll(h)) && !mscclppDeadlinePassed(dl)) sched_yield();
    CHECK(got);
  } else {
    CHECK_RES(mscclppPortChannelDeviceWait(h), mscclppSuccess);
  }
}

#endif /* MSCCLPP_TESTS_PORT_OPS_H_ */
