/* SPDX-License-Identifier: MIT */
/*
 * The JSON of one line: a strict parser (RFC 8259 values, nesting at most
 * JSON_MAX_DEPTH deep) into a tree that lives in an arena, and the writer
 * that puts a tree back as compact JSON. mscclpp-trace parses a trace one
 * line at a time (tracefile.c), so every tree is small and freed with its
 * line.
 */
#ifndef MSCCLPP_TOOLS_TRACE_JSON_H_
#define MSCCLPP_TOOLS_TRACE_JSON_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

enum jsonType { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct jsonNode {
  enum jsonType type;
  const char* text; /* STRING: the unescaped bytes (NUL-terminated); NUMBER: its text as written */
  size_t len;
  const char* key;  /* a member of an object: its name (unescaped) */
  struct jsonNode* child; /* ARRAY, OBJECT: the first element or member */
  struct jsonNode* next;  /* the next element or member of the parent */
};

/* Nodes and strings of the trees parsed since the last jsonArenaReset. */
struct jsonArena {
  struct jsonBlock* blocks;
};
void jsonArenaReset(struct jsonArena* a);

/* Parse text[0..len) as exactly one JSON value (white space around it
 * allowed). 0 and *out on success; -1 with a message and the 1-based column
 * of the fault in why/col otherwise (also when out of memory). */
int jsonParse(struct jsonArena* a, const char* text, size_t len, struct jsonNode** out, char* why, size_t whyLen,
              size_t* col);

/* The member `key` of an object, or NULL. */
const struct jsonNode* jsonGet(const struct jsonNode* obj, const char* key);
/* A number member as an integer: 0 when it is one (an integer in range), -1 otherwise. */
int jsonGetInt(const struct jsonNode* obj, const char* key, int64_t* v);
/* A string member's text, or NULL. */
const char* jsonGetString(const struct jsonNode* obj, const char* key);

/* Write v as compact JSON. */
void jsonWrite(FILE* f, const struct jsonNode* v);
/* Write s as a JSON string. */
void jsonWriteString(FILE* f, const char* s, size_t len);

#endif /* MSCCLPP_TOOLS_TRACE_JSON_H_ */
