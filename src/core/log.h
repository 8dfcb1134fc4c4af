/* SPDX-License-Identifier: MIT */
/*
 * Logging. MSCCLPP_DEBUG picks the level, MSCCLPP_DEBUG_SUBSYS the
 * subsystems, MSCCLPP_DEBUG_FILE the destination. The level and subsystem are
 * checked before any formatting, so a disabled log line costs two loads.
 *
 * A line reads: "host:pid:tid [rank] MSCCLPP WARN BOOTSTRAP file.c:123 text".
 * The rank is per thread (mscclppLogSetRank), -1 until known.
 */
#ifndef MSCCLPP_SRC_CORE_LOG_H_
#define MSCCLPP_SRC_CORE_LOG_H_

#include <stdatomic.h>
#include <stdint.h>

struct mscclppParams;

enum { MSCCLPP_LOG_LEVEL_NONE = 0, MSCCLPP_LOG_LEVEL_WARN = 1, MSCCLPP_LOG_LEVEL_INFO = 2, MSCCLPP_LOG_LEVEL_TRACE = 3 };

/* Subsystems, one bit each. */
enum {
  MSCCLPP_LOG_INIT = 1u << 0,
  MSCCLPP_LOG_BOOTSTRAP = 1u << 1,
  MSCCLPP_LOG_GPU = 1u << 2,
  MSCCLPP_LOG_MEM = 1u << 3,
  MSCCLPP_LOG_TRANSPORT = 1u << 4,
  MSCCLPP_LOG_PROXY = 1u << 5,
  MSCCLPP_LOG_CHANNEL = 1u << 6,
  MSCCLPP_LOG_COLL = 1u << 7,
  MSCCLPP_LOG_NET = 1u << 8,
  MSCCLPP_LOG_NCCL = 1u << 9,
  MSCCLPP_LOG_TOOLS = 1u << 10,
  MSCCLPP_LOG_ENV = 1u << 11,
  MSCCLPP_LOG_ALL = (1u << 12) - 1
};

extern atomic_int mscclppLogLevelState;     /* -1 until configured */
extern atomic_uint mscclppLogSubsysState;

/* Configure from the environment the first time; later calls do nothing. */
void mscclppLogInitOnce(void);

/* (Re)configure from a parameter snapshot; called when a communicator is
 * created. Unknown level or subsystem names are reported once at WARN. */
void mscclppLogConfigure(const struct mscclppParams* params);

/* The rank shown in log lines written by the calling thread. */
void mscclppLogSetRank(int rank);

/* 1 when log lines go to stderr, 0 when to MSCCLPP_DEBUG_FILE. */
int mscclppLogToStderr(void);

void mscclppLogPrint(int level, unsigned subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

static inline int mscclppLogEnabled(int level, unsigned subsys) {
  int cur = atomic_load_explicit(&mscclppLogLevelState, memory_order_relaxed);
  if (cur < 0) {
    mscclppLogInitOnce();
    cur = atomic_load_explicit(&mscclppLogLevelState, memory_order_relaxed);
  }
  return level <= cur && (atomic_load_explicit(&mscclppLogSubsysState, memory_order_relaxed) & subsys) != 0;
}

#define MSCCLPP_LOG(level, subsys, ...)                                          \
  do {                                                                           \
    if (mscclppLogEnabled((level), (subsys)))                                    \
      mscclppLogPrint((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);       \
  } while (0)

#define MSCCLPP_WARN(subsys, ...) MSCCLPP_LOG(MSCCLPP_LOG_LEVEL_WARN, (subsys), __VA_ARGS__)
#define MSCCLPP_INFO(subsys, ...) MSCCLPP_LOG(MSCCLPP_LOG_LEVEL_INFO, (subsys), __VA_ARGS__)
#define MSCCLPP_TRACE(subsys, ...) MSCCLPP_LOG(MSCCLPP_LOG_LEVEL_TRACE, (subsys), __VA_ARGS__)

#endif /* MSCCLPP_SRC_CORE_LOG_H_ */
