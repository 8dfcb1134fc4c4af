/* SPDX-License-Identifier: MIT */
/*
 * The seed's API (the first mscclpp: one buffer per connection, a device
 * connection struct with put / signal / wait, and a proxy the application
 * launches and stops), kept working on top of port channels.
 *
 *   mscclppCommInitRank(&comm, nranks, rank, "10.0.0.1:50000");
 *   mscclppDevConn conns[N];
 *   for each peer p: mscclppConnect(comm, &conns[i], p, buf, bytes, flag, tag, mscclppTransportP2P, NULL);
 *   mscclppConnectionSetup(comm);   // every rank: builds connections and port channels
 *   mscclppProxyLaunch(comm);
 *   kernel<<<...>>>(conns...);      // mscclppDevConnPut / Signal / Wait
 *   mscclppProxyStop(comm);
 *   mscclppCommDestroy(comm);       // frees what setup built
 *
 * Offsets in put are into the local buffer (source) and the peer's buffer
 * of the same connection (destination), as in the seed. The registrations
 * setup makes live until mscclppCommDestroy; a buffer from mscclppMemAlloc
 * (host memory shared between processes) can only be freed after them, so
 * there: mscclppCommDestroy (releases them, then refuses: memory is still
 * allocated), mscclppMemFree, mscclppCommDestroy again. Buffers from
 * cudaMalloc are freed after mscclppCommDestroy, as in the seed.
 *
 * This header is opt-in: mscclpp/mscclpp.h does not include it, so that
 * programs written for the current API see one name per operation.
 *
 * mscclppProxyStop(comm) and the proxy service's mscclppProxyStop(proxy)
 * share a name: with this header, C code picks by argument type (_Generic)
 * and C++ by overloading; the communicator version is also
 * mscclppCommProxyStop (mscclpp/port_channel.h).
 */
#ifndef MSCCLPP_SEED_H_
#define MSCCLPP_SEED_H_

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/comm.h"
#include "mscclpp/connection.h"
#include "mscclpp/memory.h"
#include "mscclpp/port_channel.h"
#include "mscclpp/port_channel_device.h"
#include "mscclpp/proxy.h"

/* The seed's transport names. P2P: GPUs of one host (CudaIpc), or the host
 * backend without a GPU (mscclppTransportAuto picks). */
#define mscclppTransportP2P mscclppTransportAuto
#define mscclppTransportSHM mscclppTransportHostShm
#define mscclppTransportIB mscclppTransportNet

/* What a kernel gets for one connection (copy it by value). Filled by
 * mscclppConnectionSetup. */
typedef struct {
  mscclppPortChannelDeviceHandle port; /* put/signal/flush through the proxy; wait on signals from the peer */
  void* localBuff;                     /* this rank's buffer, as kernels address it */
  void* remoteBuff;                    /* the peer's buffer, mapped (kernels may load/store it) */
  uint64_t* localFlag;                 /* as given to mscclppConnect (the seed's flag word; signals use semaphores) */
  uint64_t buffSize;
  int tag;
  int remoteRank;
} mscclppDevConn;
typedef mscclppDevConn mscclppDevConn_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Declare a connection to `remoteRank` over `localBuff` (buffSize bytes:
 * device memory, or host memory from mscclppMemAlloc) with `tag`; *devConn
 * is filled by mscclppConnectionSetup and must stay valid until then.
 * ibDev must be NULL: the network transport (transportType Net, or Auto
 * between hosts) takes its provider and NIC from MSCCLPP_NET_PROVIDER and
 * MSCCLPP_NET_IFNAME, not per connection.
 * Errors: mscclppInvalidArgument (NULL comm/devConn/localBuff, buffSize 0,
 * remoteRank out of range), mscclppInvalidUsage (ibDev given). */
MSCCLPP_API mscclppResult_t mscclppConnect(mscclppComm_t comm, mscclppDevConn* devConn, int remoteRank,
                                           void* localBuff, size_t buffSize, uint64_t* localFlag, int tag,
                                           mscclppTransport_t transportType, const char* ibDev);

/* Build every declared connection: register the buffers, connect, build a
 * port channel per connection, fill the devConns. Every rank calls it once,
 * after its mscclppConnect calls (pairs are set up in an order all ranks
 * agree on, so the declaration order does not matter). Errors of
 * mscclppMemoryRegister, mscclppConnectionCreate and
 * mscclppPortChannelCreate; mscclppInvalidUsage when called twice. */
MSCCLPP_API mscclppResult_t mscclppConnectionSetup(mscclppComm_t comm);

/* The seed's spelling of mscclppBootstrapAllGather (mscclpp/comm.h), kept
 * for programs written against the seed: bytesPerRank is an int, and a
 * negative one is refused (mscclppInvalidArgument). */
MSCCLPP_API mscclppResult_t mscclppBootStrapAllGather(mscclppComm_t comm, void* data, int bytesPerRank);

/* Start the communicator's proxy (mscclppCommProxyStart). */
MSCCLPP_API mscclppResult_t mscclppProxyLaunch(mscclppComm_t comm);

#ifdef __cplusplus
}
/* Stop the communicator's proxy (mscclppCommProxyStop). */
static inline mscclppResult_t mscclppProxyStop(mscclppComm_t comm) { return mscclppCommProxyStop(comm); }
#else
#define mscclppProxyStop(x) \
  _Generic((x), mscclppComm_t: mscclppCommProxyStop, default: mscclppProxyStop)(x)
#endif

/* ---- device side ------------------------------------------------------------------- */

/* Copy size bytes from localBuff + srcOffset to the peer's buffer +
 * dstOffset (through the proxy). */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppDevConnPut(const mscclppDevConn* c, uint64_t dstOffset,
                                                        uint64_t srcOffset, uint64_t size) {
  return mscclppPortChannelDevicePut(&c->port, c->port.dst, dstOffset, c->port.src, srcOffset, size);
}

/* Tell the peer that the puts before are visible. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppDevConnSignal(const mscclppDevConn* c) {
  return mscclppPortChannelDeviceSignal(&c->port);
}

MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppDevConnPutWithSignal(const mscclppDevConn* c, uint64_t dstOffset,
                                                                  uint64_t srcOffset, uint64_t size) {
  return mscclppPortChannelDevicePutWithSignal(&c->port, c->port.dst, dstOffset, c->port.src, srcOffset, size);
}

/* Everything pushed before is complete at the peer. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppDevConnFlush(const mscclppDevConn* c) {
  return mscclppPortChannelDeviceFlush(&c->port);
}

/* Wait for one signal of the peer. */
MSCCLPP_DEVICE_INLINE mscclppResult_t mscclppDevConnWait(const mscclppDevConn* c) {
  return mscclppPortChannelDeviceWait(&c->port);
}

#endif /* MSCCLPP_SEED_H_ */
