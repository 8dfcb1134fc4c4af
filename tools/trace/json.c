/* SPDX-License-Identifier: MIT */
/* A strict JSON parser into an arena, and a compact writer (json.h). */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES ((size_t)64 << 10)

struct jsonBlock {
  struct jsonBlock* next;
  size_t used, cap;
  _Alignas(16) char data[];
};

void jsonArenaReset(struct jsonArena* a) {
  while (a->blocks != NULL) {
    struct jsonBlock* b = a->blocks;
    a->blocks = b->next;
    free(b);
  }
}

static void* arenaAlloc(struct jsonArena* a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  struct jsonBlock* b = a->blocks;
  if (b == NULL || b->cap - b->used < n) {
    size_t cap = n > BLOCK_BYTES ? n : BLOCK_BYTES;
    b = (struct jsonBlock*)malloc(sizeof(*b) + cap);
    if (b == NULL) return NULL;
    b->used = 0;
    b->cap = cap;
    b->next = a->blocks;
    a->blocks = b;
  }
  void* p = b->data + b->used;
  b->used += n;
  return p;
}

struct parser {
  struct jsonArena* a;
  const char* s;
  size_t n, i;
  char* why;
  size_t whyLen;
  int failed;
};

__attribute__((format(printf, 2, 3))) static struct jsonNode* fail(struct parser* p, const char* fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, p->whyLen, fmt, ap);
    va_end(ap);
    p->failed = 1;
  }
  return NULL;
}

static void skipSpace(struct parser* p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static struct jsonNode* newNode(struct parser* p, enum jsonType t) {
  struct jsonNode* v = (struct jsonNode*)arenaAlloc(p->a, sizeof(*v));
  if (v == NULL) return fail(p, "out of memory");
  memset(v, 0, sizeof(*v));
  v->type = t;
  return v;
}

static const char* describe(char c, char* buf, size_t len) {
  if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
    snprintf(buf, len, "'%c'", c);
  else
    snprintf(buf, len, "byte 0x%02x", (unsigned char)c);
  return buf;
}

/* One UTF-8 sequence at s[i..n): its length, or 0 when it is not one. */
static size_t utf8Length(const unsigned char* s, size_t i, size_t n) {
  unsigned c = s[i];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (n - i < len) return 0;
  unsigned cp = c & (0x7fu >> len);
  for (size_t k = 1; k < len; k++) {
    if ((s[i + k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

static int hex4(struct parser* p, unsigned* out) {
  if (p->n - p->i < 4) return -1;
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    char c = p->s[p->i + k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -1;
  }
  p->i += 4;
  *out = v;
  return 0;
}

static size_t putUtf8(char* o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A string at p->s[p->i] == '"': its unescaped bytes (never longer than
 * the escaped text), NUL-terminated. */
static const char* parseString(struct parser* p, size_t* lenOut) {
  size_t start = ++p->i, end = start;
  while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' && end + 1 < p->n ? 2 : 1;
  if (end >= p->n) return (const char*)fail(p, "a string is not closed");
  char* out = (char*)arenaAlloc(p->a, end - start + 1);
  if (out == NULL) return (const char*)fail(p, "out of memory");
  size_t o = 0;
  while (p->i < end) {
    unsigned char c = (unsigned char)p->s[p->i];
    if (c < 0x20) {
      p->i++;
      return (const char*)fail(p, "control byte 0x%02x inside a string", c);
    }
    if (c == '\\') {
      char e = p->s[++p->i];
      p->i++;
      switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
          unsigned cp;
          if (hex4(p, &cp) != 0) return (const char*)fail(p, "\\u is not followed by four hex digits");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            unsigned lo;
            if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
              return (const char*)fail(p, "a \\u high surrogate without its low half");
            p->i += 2;
            if (hex4(p, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
              return (const char*)fail(p, "a \\u high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return (const char*)fail(p, "a \\u low surrogate without its high half");
          }
          if (cp == 0) return (const char*)fail(p, "\\u0000 inside a string");
          o += putUtf8(out + o, cp);
          break;
        }
        default:
          return (const char*)fail(p, "unknown escape \\%c", (unsigned char)e >= 0x20 ? e : '?');
      }
      continue;
    }
    size_t len = utf8Length((const unsigned char*)p->s, p->i, end);
    if (len == 0) return (const char*)fail(p, "a string is not valid UTF-8");
    memcpy(out + o, p->s + p->i, len);
    o += len;
    p->i += len;
  }
  p->i = end + 1;
  out[o] = '\0';
  *lenOut = o;
  return out;
}

static int isDigit(char c) { return c >= '0' && c <= '9'; }

static struct jsonNode* parseNumber(struct parser* p) {
  size_t start = p->i;
  if (p->s[p->i] == '-') p->i++;
  if (p->i >= p->n || !isDigit(p->s[p->i])) return fail(p, "a number without digits");
  if (p->s[p->i] == '0')
    p->i++;
  else
    while (p->i < p->n && isDigit(p->s[p->i])) p->i++;
  if (p->i < p->n && p->s[p->i] == '.') {
    p->i++;
    if (p->i >= p->n || !isDigit(p->s[p->i])) return fail(p, "a number with no digit after its '.'");
    while (p->i < p->n && isDigit(p->s[p->i])) p->i++;
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (p->i >= p->n || !isDigit(p->s[p->i])) return fail(p, "a number with no digit in its exponent");
    while (p->i < p->n && isDigit(p->s[p->i])) p->i++;
  }
  struct jsonNode* v = newNode(p, JSON_NUMBER);
  if (v == NULL) return NULL;
  char* text = (char*)arenaAlloc(p->a, p->i - start + 1);
  if (text == NULL) return fail(p, "out of memory");
  memcpy(text, p->s + start, p->i - start);
  text[p->i - start] = '\0';
  v->text = text;
  v->len = p->i - start;
  return v;
}

static struct jsonNode* parseValue(struct parser* p, int depth);

static struct jsonNode* parseContainer(struct parser* p, int depth, int object) {
  if (depth >= JSON_MAX_DEPTH) return fail(p, "values nested more than %d deep", JSON_MAX_DEPTH);
  struct jsonNode* v = newNode(p, object ? JSON_OBJECT : JSON_ARRAY);
  if (v == NULL) return NULL;
  const char close = object ? '}' : ']';
  p->i++;
  skipSpace(p);
  if (p->i < p->n && p->s[p->i] == close) {
    p->i++;
    return v;
  }
  struct jsonNode** tail = &v->child;
  for (;;) {
    const char* key = NULL;
    if (object) {
      skipSpace(p);
      if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected a member name in quotes");
      size_t klen;
      if ((key = parseString(p, &klen)) == NULL) return NULL;
      skipSpace(p);
      if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "expected ':' after the member name \"%s\"", key);
      p->i++;
    }
    struct jsonNode* e = parseValue(p, depth + 1);
    if (e == NULL) return NULL;
    e->key = key;
    *tail = e;
    tail = &e->next;
    skipSpace(p);
    if (p->i >= p->n) return fail(p, "the line ends inside %s", object ? "an object" : "an array");
    char c = p->s[p->i++];
    if (c == close) return v;
    if (c != ',') {
      char d[16];
      return fail(p, "expected ',' or '%c', found %s", close, describe(c, d, sizeof(d)));
    }
  }
}

static struct jsonNode* literal(struct parser* p, const char* word, enum jsonType t) {
  size_t len = strlen(word);
  if (p->n - p->i < len || memcmp(p->s + p->i, word, len) != 0) return fail(p, "expected a value");
  p->i += len;
  return newNode(p, t);
}

static struct jsonNode* parseValue(struct parser* p, int depth) {
  skipSpace(p);
  if (p->i >= p->n) return fail(p, "expected a value, the line ends");
  char c = p->s[p->i];
  switch (c) {
    case '{':
      return parseContainer(p, depth, 1);
    case '[':
      return parseContainer(p, depth, 0);
    case '"': {
      struct jsonNode* v = newNode(p, JSON_STRING);
      if (v == NULL || (v->text = parseString(p, &v->len)) == NULL) return NULL;
      return v;
    }
    case 't':
      return literal(p, "true", JSON_TRUE);
    case 'f':
      return literal(p, "false", JSON_FALSE);
    case 'n':
      return literal(p, "null", JSON_NULL);
    default:
      if (c == '-' || isDigit(c)) return parseNumber(p);
      {
        char d[16];
        return fail(p, "expected a value, found %s", describe(c, d, sizeof(d)));
      }
  }
}

int jsonParse(struct jsonArena* a, const char* text, size_t len, struct jsonNode** out, char* why, size_t whyLen,
              size_t* col) {
  struct parser p = {a, text, len, 0, why, whyLen, 0};
  struct jsonNode* v = parseValue(&p, 0);
  if (v != NULL) {
    skipSpace(&p);
    if (p.i < p.n) v = fail(&p, "text after the value");
  }
  if (v == NULL) {
    *col = p.i + 1;
    return -1;
  }
  *out = v;
  return 0;
}

const struct jsonNode* jsonGet(const struct jsonNode* obj, const char* key) {
  if (obj == NULL || obj->type != JSON_OBJECT) return NULL;
  for (const struct jsonNode* m = obj->child; m != NULL; m = m->next)
    if (strcmp(m->key, key) == 0) return m;
  return NULL;
}

int jsonGetInt(const struct jsonNode* obj, const char* key, int64_t* v) {
  const struct jsonNode* m = jsonGet(obj, key);
  if (m == NULL || m->type != JSON_NUMBER || strpbrk(m->text, ".eE") != NULL) return -1;
  errno = 0;
  char* end = NULL;
  long long x = strtoll(m->text, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *v = (int64_t)x;
  return 0;
}

const char* jsonGetString(const struct jsonNode* obj, const char* key) {
  const struct jsonNode* m = jsonGet(obj, key);
  return m != NULL && m->type == JSON_STRING ? m->text : NULL;
}

void jsonWriteString(FILE* f, const char* s, size_t len) {
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void jsonWrite(FILE* f, const struct jsonNode* v) {
  switch (v->type) {
    case JSON_NULL:
      fputs("null", f);
      break;
    case JSON_FALSE:
      fputs("false", f);
      break;
    case JSON_TRUE:
      fputs("true", f);
      break;
    case JSON_NUMBER:
      fwrite(v->text, 1, v->len, f);
      break;
    case JSON_STRING:
      jsonWriteString(f, v->text, v->len);
      break;
    case JSON_ARRAY:
    case JSON_OBJECT:
      fputc(v->type == JSON_OBJECT ? '{' : '[', f);
      for (const struct jsonNode* e = v->child; e != NULL; e = e->next) {
        if (e != v->child) fputc(',', f);
        if (v->type == JSON_OBJECT) {
          jsonWriteString(f, e->key, strlen(e->key));
          fputc(':', f);
        }
        jsonWrite(f, e);
      }
      fputc(v->type == JSON_OBJECT ? '}' : ']', f);
      break;
  }
}
