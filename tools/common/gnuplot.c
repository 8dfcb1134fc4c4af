/* SPDX-License-Identifier: MIT */
#include "gnuplot.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int toolFindInPath(const char* name, char* buf, size_t len) {
  const char* path = getenv("PATH");
  if (path == NULL) return 0;
  while (*path) {
    const char* end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    int w = snprintf(buf, len, "%.*s/%s", (int)n, n ? path : ".", name);
    if (w > 0 && (size_t)w < len && access(buf, X_OK) == 0) return 1;
    path += n + (end != NULL);
  }
  return 0;
}

void toolGnuplotQuoted(FILE* f, const char* s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}
