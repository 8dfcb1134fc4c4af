/* SPDX-License-Identifier: MIT */
/* A program outside the project, built against an installed mscclpp: it
 * uses only the public header and the shared library. */
#include <mscclpp/mscclpp.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  int version = 0;
  mscclppResult_t res = mscclppGetVersion(&version);
  if (res != mscclppSuccess || version != MSCCLPP_VERSION) {
    fprintf(stderr, "consumer: mscclppGetVersion returned %d, version %d (header says %d)\n", (int)res, version,
            MSCCLPP_VERSION);
    return 1;
  }
  const char* s = mscclppGetErrorString(mscclppTimeout);
  if (s == NULL || strcmp(s, "timeout") != 0) {
    fprintf(stderr, "consumer: mscclppGetErrorString(mscclppTimeout) = \"%s\"\n", s ? s : "(null)");
    return 1;
  }
  printf("consumer: mscclpp version %d, mscclppTimeout is \"%s\", %d parameters\n", version, s, mscclppParamCount());
  return 0;
}
