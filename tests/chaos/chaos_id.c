/* SPDX-License-Identifier: MIT */
/*
 * Unique ids as hex text (chaos.h), the form in which the trial's
 * processes pass them on: the same for every API's id, whose bytes each
 * ops table hands over.
 */
#include <stdio.h>
#include <string.h>

#include "chaos.h"

void chaosIdToHex(const void* id, size_t n, char hex[CHAOS_ID_CHARS]) {
  const unsigned char* b = (const unsigned char*)id;
  for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
}

int chaosIdFromHex(const char* hex, void* id, size_t n, char* why, size_t len) {
  char* b = (char*)id;
  if (strlen(hex) != 2 * n) {
    snprintf(why, len, "a unique id of %zu hex digits", strlen(hex));
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned v = 0;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
      snprintf(why, len, "the unique id is not hex");
      return -1;
    }
    b[i] = (char)v;
  }
  return 0;
}
