/* SPDX-License-Identifier: MIT */
/* Job descriptions: from a unique id, an "ip:port" string, or a launcher's
 * environment; and the host identity used to group ranks by host. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "core/error.h"
#include "core/log.h"
#include "core/util.h"

static mscclppResult_t checkRankRange(int rank, int nranks, const char* rankName, const char* sizeName) {
  if (nranks <= 0 || nranks > MSCCLPP_BS_MAX_RANKS)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "%s=%d is outside [1, %d]", sizeName, nranks,
                      MSCCLPP_BS_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "%s=%d is outside [0, %s=%d)", rankName, rank,
                      sizeName, nranks);
  return mscclppSuccess;
}

mscclppResult_t mscclppBootstrapJobFromId(const uint8_t id[MSCCLPP_BS_ID_BYTES], int rank, int nranks,
                                          struct mscclppBootstrapJob* job) {
  MSCCLPP_RETURN_ON_ERROR(checkRankRange(rank, nranks, "rank", "nranks"));
  struct mscclppBsId parsed;
  mscclppBsWhy why;
  if (mscclppBootstrapParseId(id, MSCCLPP_BS_ID_BYTES, &parsed, &why) != mscclppSuccess)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "invalid unique id: %s", why.text);
  memset(job, 0, sizeof(*job));
  job->rank = rank;
  job->nranks = nranks;
  mscclppSocketAddrFromWire(&parsed.root, &job->root);
  job->startRoot = 0;
  memcpy(job->secret, parsed.secret, sizeof(job->secret));
  mscclppSocketAddrToText(&job->root, job->rootText, sizeof(job->rootText));
  job->envLocalRank = -1;
  job->source = "unique id";
  return mscclppSuccess;
}

void mscclppBootstrapDeriveSecret(const char* rootText, uint8_t secret[MSCCLPP_BS_SECRET_BYTES]) {
  static const uint8_t k0[16] = {'m', 's', 'c', 'c', 'l', 'p', 'p', '-', 'd', 'e', 'r', 'i', 'v', 'e', '-', '0'};
  static const uint8_t k1[16] = {'m', 's', 'c', 'c', 'l', 'p', 'p', '-', 'd', 'e', 'r', 'i', 'v', 'e', '-', '1'};
  uint64_t a = mscclppSipHash(k0, rootText, strlen(rootText));
  uint64_t b = mscclppSipHash(k1, rootText, strlen(rootText));
  for (int i = 0; i < 8; i++) {
    secret[i] = (uint8_t)(a >> (8 * i));
    secret[8 + i] = (uint8_t)(b >> (8 * i));
  }
}

mscclppResult_t mscclppBootstrapJobFromAddress(const struct mscclppParams* params, const char* ipPort, int rank,
                                               int nranks, struct mscclppBootstrapJob* job) {
  if (ipPort == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "the root address (ip:port) is NULL");
  MSCCLPP_RETURN_ON_ERROR(checkRankRange(rank, nranks, "rank", "nranks"));
  if (strlen(ipPort) >= MSCCLPP_SOCKET_HOST_MAX)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "the root address is %zu bytes long (at most %d)",
                      strlen(ipPort), MSCCLPP_SOCKET_HOST_MAX - 1);
  int family;
  MSCCLPP_RETURN_ON_ERROR(mscclppSocketParseFamily(params->socketFamily, &family));
  struct mscclppBootstrapJob j;
  memset(&j, 0, sizeof(j));
  int numeric = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppSocketResolve(ipPort, family, &j.root, &numeric));
  j.rank = rank;
  j.nranks = nranks;
  j.startRoot = rank == 0;
  /* A literal address is bound as given. A host name may resolve differently
   * on rank 0 itself (e.g. to 127.0.1.1), so rank 0 listens on every
   * address of the family instead. */
  if (numeric)
    j.rootBind = j.root;
  else
    mscclppSocketAddrWildcard(&j.root, &j.rootBind);
  if (params->commSecret[0] != '\0') {
    if (mscclppHexDecode(params->commSecret, j.secret, sizeof(j.secret)) != mscclppSuccess)
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP,
                        "MSCCLPP_COMM_SECRET must be %d hex digits; got %zu characters", 2 * MSCCLPP_BS_SECRET_BYTES,
                        strlen(params->commSecret));
  } else {
    mscclppBootstrapDeriveSecret(ipPort, j.secret);
  }
  snprintf(j.rootText, sizeof(j.rootText), "%s", ipPort);
  j.envLocalRank = -1;
  j.source = "ip:port";
  *job = j;
  return mscclppSuccess;
}

/* A strict decimal integer environment variable; *present = 0 when unset. */
static mscclppResult_t envInt(const char* name, int* present, int* value) {
  const char* text = getenv(name);
  *present = text != NULL;
  if (text == NULL) return mscclppSuccess;
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < INT_MIN || v > INT_MAX)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "%s=\"%s\" is not an integer", name, text);
  *value = (int)v;
  return mscclppSuccess;
}

static const struct {
  const char* launcher;
  const char* rankVar;
  const char* sizeVar;
  const char* localVar;
} envSources[] = {
    /* named by its variables: mscclpp-run sets them, and so may a user by hand */
    {"MSCCLPP_RANK/MSCCLPP_NRANKS", "MSCCLPP_RANK", "MSCCLPP_NRANKS", "MSCCLPP_LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

mscclppResult_t mscclppBootstrapJobFromEnv(const struct mscclppParams* params, struct mscclppBootstrapJob* job) {
  int found = -1, rank = -1, nranks = -1, localRank = -1;
  for (size_t i = 0; i < sizeof(envSources) / sizeof(envSources[0]) && found < 0; i++) {
    int hasRank, hasSize, hasLocal;
    MSCCLPP_RETURN_ON_ERROR(envInt(envSources[i].rankVar, &hasRank, &rank));
    if (!hasRank) continue;
    MSCCLPP_RETURN_ON_ERROR(envInt(envSources[i].sizeVar, &hasSize, &nranks));
    if (!hasSize)
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP, "%s is set but %s is not", envSources[i].rankVar,
                        envSources[i].sizeVar);
    MSCCLPP_RETURN_ON_ERROR(envInt(envSources[i].localVar, &hasLocal, &localRank));
    if (!hasLocal) localRank = -1;
    MSCCLPP_RETURN_ON_ERROR(checkRankRange(rank, nranks, envSources[i].rankVar, envSources[i].sizeVar));
    found = (int)i;
  }
  if (found < 0)
    return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP,
                      "no rank in the environment: set MSCCLPP_RANK and MSCCLPP_NRANKS (mscclpp-run does), or run "
                      "under Open MPI (OMPI_COMM_WORLD_RANK), Slurm (SLURM_PROCID) or torchrun (RANK, WORLD_SIZE)");
  char rootText[MSCCLPP_SOCKET_HOST_MAX + 16];
  const char* addrSource;
  if (params->commId[0] != '\0') {
    snprintf(rootText, sizeof(rootText), "%s", params->commId);
    addrSource = "MSCCLPP_COMM_ID";
  } else {
    const char* addr = getenv("MASTER_ADDR");
    const char* port = getenv("MASTER_PORT");
    if (addr == NULL || port == NULL || *addr == '\0' || *port == '\0')
      return mscclppErr(mscclppInvalidUsage, MSCCLPP_LOG_BOOTSTRAP,
                        "no root address in the environment (ranks from %s): set MSCCLPP_COMM_ID=ip:port, or "
                        "MASTER_ADDR and MASTER_PORT",
                        envSources[found].launcher);
    int bare6 = strchr(addr, ':') != NULL && addr[0] != '[';
    int n = snprintf(rootText, sizeof(rootText), bare6 ? "[%s]:%s" : "%s:%s", addr, port);
    if (n < 0 || (size_t)n >= sizeof(rootText))
      return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "MASTER_ADDR is too long");
    addrSource = "MASTER_ADDR:MASTER_PORT";
  }
  /* A malformed address is decided here, where the message can name the
   * variable it came from; a name that does not resolve is told by the
   * resolver, and this context is added to the error text. */
  char host[MSCCLPP_SOCKET_HOST_MAX];
  uint16_t port;
  mscclppBsWhy why;
  if (mscclppSocketParseHostPort(rootText, host, sizeof(host), &port, &why) != mscclppSuccess)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_BOOTSTRAP, "malformed address in %s: %s", addrSource,
                      why.text);
  struct mscclppBootstrapJob j;
  mscclppResult_t res = mscclppBootstrapJobFromAddress(params, rootText, rank, nranks, &j);
  if (res != mscclppSuccess) return mscclppErrWrap(res, MSCCLPP_LOG_BOOTSTRAP, "%s=\"%s\"", addrSource, rootText);
  j.envLocalRank = localRank;
  j.source = envSources[found].launcher;
  *job = j;
  return mscclppSuccess;
}

void mscclppBootstrapHostIdentity(const struct mscclppParams* params, char* text, size_t textLen, uint64_t* hash) {
  static const uint8_t key[16] = {'m', 's', 'c', 'c', 'l', 'p', 'p', '-', 'h', 'o', 's', 't', '-', 'i', 'd', '0'};
  char id[MSCCLPP_PARAM_STR_MAX + 96];
  if (params->hostId[0] != '\0') {
    snprintf(id, sizeof(id), "%s", params->hostId);
  } else {
    char host[256];
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown-host");
    host[sizeof(host) - 1] = '\0';
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0)
      snprintf(id, sizeof(id), "%s:netns-%llu", host, (unsigned long long)st.st_ino);
    else
      snprintf(id, sizeof(id), "%s", host);
  }
  if (text != NULL && textLen > 0) snprintf(text, textLen, "%s", id);
  *hash = mscclppSipHash(key, id, strlen(id));
}
