/* mscclpp: everything a host program includes. Device-side headers
 * (FIFO push, semaphores, channels) are included separately by kernels. */
#ifndef MSCCLPP_MSCCLPP_H_
#define MSCCLPP_MSCCLPP_H_

#include "mscclpp/core.h"
#include "mscclpp/comm.h"

#endif /* MSCCLPP_MSCCLPP_H_ */
