/* SPDX-License-Identifier: MIT */
#include "core/params.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

#define MSCCLPP_PARAM_INFO(f, env, type, def, help) {env, #type, def, help},
static const struct {
  const char* name;
  const char* type;
  const char* def;
  const char* help;
} paramTable[] = {MSCCLPP_PARAM_TABLE(MSCCLPP_PARAM_INFO)};

#define PARAM_COUNT ((int)(sizeof(paramTable) / sizeof(paramTable[0])))

int mscclppParamCount(void) { return PARAM_COUNT; }

static const char* typeName(const char* t) {
  if (strcmp(t, "INT") == 0) return "int";
  if (strcmp(t, "FLOAT") == 0) return "float";
  return "string";
}

mscclppResult_t mscclppParamGetInfo(int index, mscclppParamInfo* info) {
  if (info == NULL)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "mscclppParamGetInfo: info is NULL");
  if (index < 0 || index >= PARAM_COUNT)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "mscclppParamGetInfo: index %d not in [0, %d)", index,
                      PARAM_COUNT);
  info->name = paramTable[index].name;
  info->type = typeName(paramTable[index].type);
  info->defaultValue = paramTable[index].def;
  info->help = paramTable[index].help;
  return mscclppSuccess;
}

mscclppResult_t mscclppParamsCheck(void) {
  struct mscclppParams params;
  return mscclppParamsLoad(&params);
}

const char* mscclppParamValueText(const char* name) {
  const char* v = getenv(name);
  if (v != NULL) return v;
  for (int i = 0; i < PARAM_COUNT; i++)
    if (strcmp(paramTable[i].name, name) == 0) return paramTable[i].def;
  return "";
}

static mscclppResult_t parseInt(const char* env, const char* text, int64_t* out) {
  char* end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0')
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "%s=\"%s\" is not an integer", env, text);
  *out = (int64_t)v;
  return mscclppSuccess;
}

static mscclppResult_t parseFloat(const char* env, const char* text, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0')
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "%s=\"%s\" is not a number", env, text);
  *out = v;
  return mscclppSuccess;
}

static mscclppResult_t parseStr(const char* env, const char* text, char* out) {
  size_t n = strlen(text);
  if (n >= MSCCLPP_PARAM_STR_MAX)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "%s is %zu bytes long; at most %d are accepted", env,
                      n, MSCCLPP_PARAM_STR_MAX - 1);
  memcpy(out, text, n + 1);
  return mscclppSuccess;
}

#define PARSE_INT(env, text, field) parseInt(env, text, &(field))
#define PARSE_FLOAT(env, text, field) parseFloat(env, text, &(field))
#define PARSE_STR(env, text, field) parseStr(env, text, (field))

#define MSCCLPP_PARAM_LOAD(f, env, type, def, help)                   \
  do {                                                                 \
    const char* text_ = getenv(env);                                   \
    if (text_ == NULL) text_ = def;                                    \
    mscclppResult_t r_ = PARSE_##type(env, text_, tmp.f);              \
    if (r_ != mscclppSuccess) return r_;                               \
  } while (0);

mscclppResult_t mscclppParamsLoad(struct mscclppParams* params) {
  if (params == NULL) return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "mscclppParamsLoad: params is NULL");
  struct mscclppParams tmp;
  memset(&tmp, 0, sizeof(tmp));
  MSCCLPP_PARAM_TABLE(MSCCLPP_PARAM_LOAD)
  if (tmp.timeout <= 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "MSCCLPP_TIMEOUT=%g must be > 0 seconds", tmp.timeout);
  if (tmp.fifoSize < 2 || (tmp.fifoSize & (tmp.fifoSize - 1)) != 0 || tmp.fifoSize > (1 << 24))
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV,
                      "MSCCLPP_FIFO_SIZE=%lld must be a power of two in [2, 16777216]", (long long)tmp.fifoSize);
  if (tmp.proxyBackoffUs < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV, "MSCCLPP_PROXY_BACKOFF_US=%lld must be >= 0",
                      (long long)tmp.proxyBackoffUs);
  if (tmp.collP2pZeroCopyMin < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV,
                      "MSCCLPP_COLL_P2P_ZERO_COPY_MIN=%lld must be >= 0 bytes (0: every size may go zero-copy)",
                      (long long)tmp.collP2pZeroCopyMin);
  if (tmp.collP2pLlMax < 0)
    return mscclppErr(mscclppInvalidArgument, MSCCLPP_LOG_ENV,
                      "MSCCLPP_COLL_P2P_LL_MAX=%lld must be >= 0 bytes (0: no send/recv as LL packets)",
                      (long long)tmp.collP2pLlMax);
  *params = tmp;
  return mscclppSuccess;
}
