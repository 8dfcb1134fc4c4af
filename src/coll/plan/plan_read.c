/* SPDX-License-Identifier: MIT */
/*
 * Typed reading of a jansson document for the plan loader (plan_read.h):
 * every field checked for presence, type and range, and every error worded
 * with the JSON path and the value it found.
 */
#ifdef MSCCLPP_HAVE_JANSSON

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coll/plan/plan_read.h"
#include "core/error.h"
#include "core/log.h"

/* Report the plan's first error: "execution plan <source>: <text>". */
mscclppResult_t mscclppPlanReadFail(struct reader* rd, mscclppResult_t code, const char* fmt, ...) {
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  rd->failed = 1;
  if (rd->quiet) return mscclppErrQuiet(code, MSCCLPP_LOG_COLL, "execution plan %s: %s", rd->source, text);
  return mscclppErr(code, MSCCLPP_LOG_COLL, "execution plan %s: %s", rd->source, text);
}

/* A JSON value in words, for messages: "\"abc\"", "3.5", "true", "an array". */
const char* mscclppPlanReadDescribe(const json_t* v, char* buf, size_t len) {
  if (v == NULL) return "nothing";
  switch (json_typeof(v)) {
    case JSON_STRING: {
      const char* s = json_string_value(v);
      size_t n = strlen(s);
      if (n > 40)
        snprintf(buf, len, "\"%.40s...\"", s);
      else
        snprintf(buf, len, "\"%s\"", s);
      return buf;
    }
    case JSON_INTEGER:
    case JSON_REAL:
      snprintf(buf, len, "%.17g", json_number_value(v));
      return buf;
    case JSON_TRUE:
      return "true";
    case JSON_FALSE:
      return "false";
    case JSON_NULL:
      return "null";
    case JSON_OBJECT:
      return "an object";
    case JSON_ARRAY:
      return "an array";
  }
  return "a value";
}

/* A JSON path for messages; a path too long for its buffer is cut (it
 * only names the place). vsnprintf, so that the compiler does not count the
 * bytes of every path it could build. */
void mscclppPlanReadPath(char* out, size_t len, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, len, fmt, ap);
  va_end(ap);
}

/* "at.key", or "key" at the top. */
void mscclppPlanReadJoin(char* out, size_t len, const char* at, const char* key) {
  if (at[0] == '\0')
    mscclppPlanReadPath(out, len, "%s", key);
  else
    mscclppPlanReadPath(out, len, "%s.%s", at, key);
}

/* obj[key]: *out NULL when absent and not required. */
mscclppResult_t mscclppPlanReadField(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                     int required, json_t** out) {
  *out = json_object_get(obj, key);
  if (*out == NULL && required) {
    char p[320];
    mscclppPlanReadJoin(p, sizeof(p), at, key);
    return FAIL(rd, "%s is missing", p);
  }
  return mscclppSuccess;
}

/* A whole number in [lo, hi] at path p (a JSON number: integers arrive as doubles). */
mscclppResult_t mscclppPlanReadWhole(struct reader* rd, const json_t* v, const char* p, double lo, double hi,
                                     uint64_t* out) {
  char b[64];
  if (!json_is_number(v))
    return FAIL(rd, "%s must be a whole number from %.0f to %.0f, got %s", p, lo, hi,
                mscclppPlanReadDescribe(v, b, sizeof(b)));
  double d = json_number_value(v);
  if (d != floor(d) || d < lo || d > hi)
    return FAIL(rd, "%s must be a whole number from %.0f to %.0f, got %s", p, lo, hi,
                mscclppPlanReadDescribe(v, b, sizeof(b)));
  *out = d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
  return mscclppSuccess;
}

/* obj[key] as a whole number in [lo, hi]; `def` when absent and optional. */
mscclppResult_t mscclppPlanReadWholeField(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                          int required, uint64_t def, double lo, double hi, uint64_t* out) {
  json_t* v;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadField(rd, obj, at, key, required, &v));
  if (v == NULL) {
    *out = def;
    return mscclppSuccess;
  }
  char p[320];
  mscclppPlanReadJoin(p, sizeof(p), at, key);
  return mscclppPlanReadWhole(rd, v, p, lo, hi, out);
}

mscclppResult_t mscclppPlanReadU32(struct reader* rd, const json_t* obj, const char* at, const char* key, int required,
                                   uint32_t def, uint32_t lo, uint32_t hi, uint32_t* out) {
  uint64_t v = 0;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadWholeField(rd, obj, at, key, required, def, lo, hi, &v));
  *out = (uint32_t)v;
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanReadBool(struct reader* rd, const json_t* obj, const char* at, const char* key, int required,
                                    int def, int* out) {
  json_t* v;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadField(rd, obj, at, key, required, &v));
  if (v == NULL) {
    *out = def;
    return mscclppSuccess;
  }
  if (!json_is_boolean(v)) {
    char p[320], b[64];
    mscclppPlanReadJoin(p, sizeof(p), at, key);
    return FAIL(rd, "%s must be true or false, got %s", p, mscclppPlanReadDescribe(v, b, sizeof(b)));
  }
  *out = json_is_true(v);
  return mscclppSuccess;
}

/* obj[key] as a string (NULL when absent and optional). */
mscclppResult_t mscclppPlanReadString(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                      int required, const char** out) {
  json_t* v;
  *out = NULL;
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadField(rd, obj, at, key, required, &v));
  if (v == NULL) return mscclppSuccess;
  if (!json_is_string(v)) {
    char p[320], b[64];
    mscclppPlanReadJoin(p, sizeof(p), at, key);
    return FAIL(rd, "%s must be a string, got %s", p, mscclppPlanReadDescribe(v, b, sizeof(b)));
  }
  *out = json_string_value(v);
  return mscclppSuccess;
}

/* obj[key] as an array (NULL when absent and optional). */
mscclppResult_t mscclppPlanReadArray(struct reader* rd, const json_t* obj, const char* at, const char* key,
                                     int required, json_t** out) {
  MSCCLPP_RETURN_ON_ERROR(mscclppPlanReadField(rd, obj, at, key, required, out));
  if (*out != NULL && !json_is_array(*out)) {
    char p[320], b[64];
    mscclppPlanReadJoin(p, sizeof(p), at, key);
    return FAIL(rd, "%s must be an array, got %s", p, mscclppPlanReadDescribe(*out, b, sizeof(b)));
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppPlanReadObject(struct reader* rd, const json_t* v, const char* p) {
  if (json_is_object(v)) return mscclppSuccess;
  char b[64];
  return FAIL(rd, "%s must be an object, got %s", p, mscclppPlanReadDescribe(v, b, sizeof(b)));
}

const char* const mscclppPlanSpaceNames[MSCCLPP_PLAN_SPACES] = {"input", "output", "scratch"};

/* "i" / "o" / "s" at path p. */
mscclppResult_t mscclppPlanReadSpace(struct reader* rd, const char* s, const char* p, uint8_t* out) {
  if (strcmp(s, "i") == 0)
    *out = MSCCLPP_PLAN_INPUT;
  else if (strcmp(s, "o") == 0)
    *out = MSCCLPP_PLAN_OUTPUT;
  else if (strcmp(s, "s") == 0)
    *out = MSCCLPP_PLAN_SCRATCH;
  else
    return FAIL(rd, "%s \"%s\" is not a buffer type (\"i\", \"o\" or \"s\")", p, s);
  return mscclppSuccess;
}

/* "memory" / "port" / "none" at path p ("switch" refused, saying why). */
mscclppResult_t mscclppPlanReadChannelType(struct reader* rd, const char* s, const char* p, int allowNone,
                                           uint8_t* out) {
  if (strcmp(s, "memory") == 0)
    *out = MSCCLPP_PLAN_CHANNEL_MEMORY;
  else if (strcmp(s, "port") == 0)
    *out = MSCCLPP_PLAN_CHANNEL_PORT;
  else if (allowNone && strcmp(s, "none") == 0)
    *out = MSCCLPP_PLAN_CHANNEL_NONE;
  else if (strcmp(s, "switch") == 0)
    return FAIL(rd, "%s \"switch\": " MULTICAST_REFUSED, p);
  else
    return FAIL(rd, "%s \"%s\" is not a channel type (\"memory\" or \"port\"%s)", p, s,
                allowNone ? " or \"none\"" : "");
  return mscclppSuccess;
}

const char* mscclppPlanChannelTypeName(int t) {
  return t == MSCCLPP_PLAN_CHANNEL_MEMORY ? "memory" : t == MSCCLPP_PLAN_CHANNEL_PORT ? "port" : "none";
}

#endif /* MSCCLPP_HAVE_JANSSON */
