/* SPDX-License-Identifier: MIT */
/* A program outside the project, built against the installed NCCL-compatible
 * library as an NCCL program would be: <nccl.h> and -lmscclpp_nccl. It must
 * start without LD_LIBRARY_PATH and load that library as libnccl.so.2. */
#include <nccl.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  ncclResult_t res = ncclGetVersion(&version);
  if (res != ncclSuccess || version != NCCL_VERSION_CODE) {
    fprintf(stderr, "consumer_nccl: ncclGetVersion returned %d, version %d (header says %d)\n", (int)res, version,
            NCCL_VERSION_CODE);
    return 1;
  }
  printf("consumer_nccl: NCCL API version %d, ncclInvalidUsage is \"%s\"\n", version,
         ncclGetErrorString(ncclInvalidUsage));
  return 0;
}
