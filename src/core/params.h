/* SPDX-License-Identifier: MIT */
/*
 * The one table of MSCCLPP_* parameters.
 *
 * Each row: X(field, "ENV_NAME", TYPE, "default", "help"). TYPE is INT
 * (int64_t), FLOAT (double) or STR (a copied string of < 256 bytes).
 * mscclppParamsLoad() fills a struct mscclppParams from the environment; a
 * communicator keeps its own copy, taken when it is created. README's table of
 * environment variables is generated from this table (mscclpp-info --params
 * --markdown), and a test checks that they agree.
 *
 * To add a parameter: add a row here. Nothing else.
 */
#ifndef MSCCLPP_SRC_CORE_PARAMS_H_
#define MSCCLPP_SRC_CORE_PARAMS_H_

#include <stdint.h>

#include "mscclpp/core.h"

#define MSCCLPP_PARAM_STR_MAX 256

/* clang-format off */
#define MSCCLPP_PARAM_TABLE(X) \
  X(debug,          "MSCCLPP_DEBUG",           STR,   "WARN", "Log level: NONE, WARN, INFO or TRACE (NCCL_DEBUG is read when this is unset)") \
  X(debugSubsys,    "MSCCLPP_DEBUG_SUBSYS",    STR,   "ALL",  "Comma list of subsystems to log (INIT,BOOTSTRAP,GPU,MEM,TRANSPORT,PROXY,CHANNEL,COLL,NET,NCCL,TOOLS,ENV or ALL); a leading ^ excludes the listed ones") \
  X(debugFile,      "MSCCLPP_DEBUG_FILE",      STR,   "",     "Write the log to this file instead of stderr; %h is replaced by the host name, %p by the pid") \
  X(timeout,        "MSCCLPP_TIMEOUT",         FLOAT, "30",   "Seconds any wait (bootstrap, FIFO, semaphore, proxy) may last before it fails with mscclppTimeout") \
  X(commId,         "MSCCLPP_COMM_ID",         STR,   "",     "Root address ip:port ([ipv6]:port) for communicators created from the environment") \
  X(commSecret,     "MSCCLPP_COMM_SECRET",     STR,   "",     "32 hex digits: the job secret for ip:port and environment initialisation (mscclpp-run sets a random one); when unset it is derived from the address, which proves the job but is not secret") \
  X(rank,           "MSCCLPP_RANK",            INT,   "-1",   "This process's rank, set by mscclpp-run; otherwise Open MPI, Slurm or torchrun variables are used") \
  X(nranks,         "MSCCLPP_NRANKS",          INT,   "-1",   "Number of ranks, set by mscclpp-run") \
  X(localRank,      "MSCCLPP_LOCAL_RANK",      INT,   "-1",   "Rank among the ranks of this host, set by mscclpp-run") \
  X(socketIfname,   "MSCCLPP_SOCKET_IFNAME",   STR,   "",     "Interfaces for bootstrap sockets: comma list of name prefixes; ^ excludes, = matches exactly (as NCCL_SOCKET_IFNAME)") \
  X(socketFamily,   "MSCCLPP_SOCKET_FAMILY",   STR,   "",     "AF_INET or AF_INET6 to force the bootstrap's address family; empty picks what the interface has") \
  X(hostId,         "MSCCLPP_HOSTID",          STR,   "",     "Overrides the host identity used to find ranks of the same host (default: host name and network namespace)") \
  X(fifoSize,       "MSCCLPP_FIFO_SIZE",       INT,   "16384", "Number of 16-byte trigger slots in each proxy FIFO (a power of two); fewer than a few thousand starve the proxy when many GPU threads push (bench/RESULTS.md)") \
  X(proxyBackoffUs, "MSCCLPP_PROXY_BACKOFF_US",INT,   "0",    "0: proxy threads busy-poll; N>0: an idle proxy thread sleeps up to N microseconds between polls") \
  X(numaBind,       "MSCCLPP_NUMA_BIND",       INT,   "1",    "1: bind proxy threads to the CPUs of the device's NUMA node (read from sysfs); 0: do not bind") \
  X(localNranks,    "MSCCLPP_LOCAL_NRANKS",    INT,   "-1",   "Number of ranks on this host, set by mscclpp-run") \
  X(bootstrapHandshakeTimeout, "MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT", FLOAT, "5", "Seconds a new bootstrap connection has to prove the job secret before the listener drops it (a silent client never delays the others)") \
  X(algo,           "MSCCLPP_ALGO",            STR,   "",     "Force collective algorithms: comma list of collective=algorithm (allreduce=packet, allreduce=rsag, allreduce=flat, allgather=packet, alltoall=direct, ...: mscclppCollAlgoNames lists them, see README), for experiments; empty lets the size/rank/host rule pick") \
  X(collScratchBytes, "MSCCLPP_COLL_SCRATCH_BYTES", INT, "8388608", "Bytes of scratch memory per peer that collectives stage data through (larger: fewer pipeline steps, more memory); the GPU backend uses it for send/recv (its packet slots get a quarter), the host backend caps it at 1 MiB") \
  X(collPacketBlocks, "MSCCLPP_COLL_PACKET_BLOCKS", INT, "0", "GPU backend, for tuning: blocks of the LL-packet kernels (allreduce, allgather, reduce-scatter, all-to-all) above 4 KiB per peer (0: the SMs divided by the ranks sharing the GPU; fewer only lowers bandwidth)") \
  X(collDirectBlocks, "MSCCLPP_COLL_DIRECT_BLOCKS", INT, "0", "GPU backend, for tuning: most blocks of a zero-copy (direct) collective kernel (0: as many as stay resident with every rank's blocks; one per 32 KiB of work)") \
  X(collPrepare,    "MSCCLPP_COLL_PREPARE",    INT,   "1",    "1: a communicator builds its collective state (scratch, channels, the export service) when it is made, so that no collective call waits for its peers; 0: at its first collective call, which then waits for every rank to reach it (any other value: on)") \
  X(collP2pZeroCopy, "MSCCLPP_COLL_P2P_ZERO_COPY", INT, "1", "GPU backend: 1 lets a send of at least MSCCLPP_COLL_P2P_ZERO_COPY_MIN bytes go zero-copy once its receiver maps the buffer (learned without waiting: the first call on a new buffer goes through the receiver's scratch), the receiver pulling straight from it; 0: every send through the receiver's scratch") \
  X(collP2pZeroCopyMin, "MSCCLPP_COLL_P2P_ZERO_COPY_MIN", INT, "67108864", "GPU backend: the smallest send that goes zero-copy (smaller ones go through the receiver's scratch pipeline, faster below this size on the H200: bench/RESULTS.md); never less than one chunk") \
  X(collP2pLlMax,   "MSCCLPP_COLL_P2P_LL_MAX", INT,   "65536", "GPU backend: sends and receives of at most this many bytes (values above 65536 act as 65536) travel as LL packets straight into the receiver's scratch, with no separate ready flag, at about the cost of a one-shot packet allreduce of their size; larger ones go through the scratch pipeline (or zero-copy); 0: none as packets. The ranks use the smallest of their values. Counts should match, as in NCCL: a receive posted larger than its send completes with the send's bytes while both are at most this, but one on each side of it waits until MSCCLPP_TIMEOUT (the default, one scratch chunk, keeps that case where it was)") \
  X(collPdl,        "MSCCLPP_COLL_PDL",        INT,   "1",    "GPU backend: 1 launches collective kernels with programmatic dependent launch (Hopper and later): a kernel is scheduled while the kernel before it on the stream finishes, and waits for that kernel's results before its first memory access; 0: plain stream order (any other value: on)") \
  X(netProvider,    "MSCCLPP_NET_PROVIDER",    STR,   "",     "libfabric provider for the network transport (verbs, efa, tcp;ofi_rxm, ...); empty picks the first with RMA") \
  X(netIfname,      "MSCCLPP_NET_IFNAME",      STR,   "",     "Network interfaces (domains) the network transport may use: comma list of prefixes; ^ excludes") \
  X(netSignal,      "MSCCLPP_NET_SIGNAL",      STR,   "auto", "How a small put's signal rides with its bytes over the network: auto (one message writing the bytes, then the semaphore, where the provider orders writes and takes two targets per message; else remote CQ data) or cq (always remote CQ data)") \
  X(ncclFallback,   "MSCCLPP_NCCL_FALLBACK",   STR,   "",     "Path of a real libnccl.so.2: the NCCL-compatible library forwards what it does not implement there") \
  X(ncclFallbackOps, "MSCCLPP_NCCL_FALLBACK_OPS", STR, "",     "Comma list of NCCL operations (allreduce,allgather,...) always forwarded to MSCCLPP_NCCL_FALLBACK") \
  X(trace,          "MSCCLPP_TRACE",           STR,   "",     "Write a Chrome trace-event JSON file per process (Perfetto opens it; mscclpp-trace merges and summarises them) to this path when its communicators are destroyed or it exits; %r is the rank, %p the pid, %h the host name; set it on every rank or none; empty: off") \
  X(traceEvents,    "MSCCLPP_TRACE_EVENTS",    INT,   "1048576", "Most events MSCCLPP_TRACE keeps per thread and session (128 bytes each: a ring of 1024 per thread, the rest spilled to an unnamed file in TMPDIR, else /tmp); later ones are counted as dropped") \
  X(checkCalls,     "MSCCLPP_CHECK_CALLS",     INT,   "0",    "For debugging: 1 makes every collective call first compare its collective, count, type, operator, root and call number with every rank's (through rank 0, over the bootstrap), failing a mismatch or a rank that does not call within half of MSCCLPP_TIMEOUT on every rank with mscclppInvalidUsage naming the ranks and their calls, instead of a hang; each call then waits for every rank") \
  X(cacheDir,       "MSCCLPP_CACHE_DIR",       STR,   "",     "Directory of execution plans (MSCCL++'s JSON format): every communicator registers its *.json plans when it is created, and a collective call whose collective, rank count, in-place form and size a plan matches runs that plan; plans for other rank counts are skipped, a file that does not load is a warning; empty: none") \
  X(planGpu,        "MSCCLPP_PLAN_GPU",        INT,   "1",    "1 (the default) runs execution plans on GPU communicators (the GPU executor); 0 (or any other value): GPU communicators take no plan (mscclppPlanExecute refuses, the built-in algorithms run)") \
  X(report,         "MSCCLPP_REPORT",          INT,   "0",    "1: print the hang report (each communicator's last call issued and completed, what its host and its kernels wait for: peer, semaphore, signals expected and arrived, call; and its proxy's queue) to stderr on SIGUSR1 (the handler is installed unless the application has one) and on every communicator error; mscclpp-run --report sets it and reads the reports. A wait that times out prints the report whatever this says")
/* clang-format on */

#define MSCCLPP_PARAM_FIELD_INT(f) int64_t f
#define MSCCLPP_PARAM_FIELD_FLOAT(f) double f
#define MSCCLPP_PARAM_FIELD_STR(f) char f[MSCCLPP_PARAM_STR_MAX]
#define MSCCLPP_PARAM_FIELD(f, env, type, def, help) MSCCLPP_PARAM_FIELD_##type(f);

struct mscclppParams {
  MSCCLPP_PARAM_TABLE(MSCCLPP_PARAM_FIELD)
};

/* Fill *params from the environment (defaults for unset variables).
 * Returns mscclppInvalidArgument, naming the variable and the bad value, when
 * a variable does not parse as its type or a string is too long. */
mscclppResult_t mscclppParamsLoad(struct mscclppParams* params);

/* Current text of parameter `name` from the environment, or its default. */
const char* mscclppParamValueText(const char* name);

#endif /* MSCCLPP_SRC_CORE_PARAMS_H_ */
