/* SPDX-License-Identifier: MIT */
/*
 * Test helpers for the memory and transport layers without a communicator:
 *   - an in-process "bootstrap" joining several ranks of one process (each a
 *     struct loopRank, used from any thread), with the bootstrap's
 *     semantics: tagged messages of exact sizes, in order per (peer, tag),
 *     a receive bounded by a timeout;
 *   - a memory-context configuration for a rank.
 */
#ifndef MSCCLPP_TESTS_MEMORY_LOOPBACK_H_
#define MSCCLPP_TESTS_MEMORY_LOOPBACK_H_

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "memory/memory.h"

struct loopMsg {
  int from, to, tag;
  size_t size;
  struct loopMsg* next;
  unsigned char data[];
};

struct loopback {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct loopMsg* head;
  double timeoutSec;
};

struct loopRank {
  struct loopback* lb;
  int rank;
};

static inline void loopInit(struct loopback* lb, double timeoutSec) {
  pthread_mutex_init(&lb->mu, NULL);
  pthread_cond_init(&lb->cv, NULL);
  lb->head = NULL;
  lb->timeoutSec = timeoutSec;
}

/* Frees messages nobody received; returns how many there were. */
static inline int loopFini(struct loopback* lb) {
  int left = 0;
  while (lb->head != NULL) {
    struct loopMsg* m = lb->head;
    lb->head = m->next;
    free(m);
    left++;
  }
  pthread_cond_destroy(&lb->cv);
  pthread_mutex_destroy(&lb->mu);
  return left;
}

static inline mscclppResult_t loopSend(void* ctx, int peer, int tag, const void* data, size_t size) {
  struct loopRank* r = (struct loopRank*)ctx;
  struct loopMsg* m = (struct loopMsg*)malloc(sizeof(*m) + size);
  if (m == NULL) return mscclppErr(mscclppSystemError, MSCCLPP_LOG_ALL, "loopback: out of memory");
  m->from = r->rank;
  m->to = peer;
  m->tag = tag;
  m->size = size;
  m->next = NULL;
  if (size) memcpy(m->data, data, size);
  pthread_mutex_lock(&r->lb->mu);
  struct loopMsg** tail = &r->lb->head;
  while (*tail != NULL) tail = &(*tail)->next;
  *tail = m;
  pthread_cond_broadcast(&r->lb->cv);
  pthread_mutex_unlock(&r->lb->mu);
  return mscclppSuccess;
}

static inline mscclppResult_t loopRecv(void* ctx, int peer, int tag, void* data, size_t size) {
  struct loopRank* r = (struct loopRank*)ctx;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)r->lb->timeoutSec;
  pthread_mutex_lock(&r->lb->mu);
  for (;;) {
    for (struct loopMsg** p = &r->lb->head; *p != NULL; p = &(*p)->next) {
      struct loopMsg* m = *p;
      if (m->from == peer && m->to == r->rank && m->tag == tag) {
        *p = m->next;
        pthread_mutex_unlock(&r->lb->mu);
        mscclppResult_t res = mscclppSuccess;
        if (m->size != size)
          res = mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_ALL, "loopback: message of %zu bytes, %zu expected",
                           m->size, size);
        else if (size)
          memcpy(data, m->data, size);
        free(m);
        return res;
      }
    }
    if (pthread_cond_timedwait(&r->lb->cv, &r->lb->mu, &until) == ETIMEDOUT) {
      pthread_mutex_unlock(&r->lb->mu);
      return mscclppErr(mscclppTimeout, MSCCLPP_LOG_ALL, "loopback: rank %d waited for rank %d tag %d", r->rank,
                        peer, tag);
    }
  }
}

static const uint8_t testSecret[MSCCLPP_SECRET_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* A configuration for rank r->rank on host "testhost" (hash 0x1234). */
static inline struct mscclppMemConfig loopConfig(struct loopRank* r) {
  struct mscclppMemConfig cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.rank = r->rank;
  memcpy(cfg.secret, testSecret, sizeof(testSecret));
  cfg.hostHash = 0x1234;
  strcpy(cfg.hostName, "testhost");
  cfg.timeoutSec = 10;
  cfg.bootstrap.ctx = r;
  cfg.bootstrap.send = loopSend;
  cfg.bootstrap.recv = loopRecv;
  return cfg;
}

#endif /* MSCCLPP_TESTS_MEMORY_LOOPBACK_H_ */
