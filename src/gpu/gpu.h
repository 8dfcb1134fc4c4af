/*
 * The gpu layer: everything that touches the CUDA runtime, plus what stands
 * in for it on the host backend. Functions here work (and report "no GPU")
 * in a build without CUDA and on a machine without a driver.
 */
#ifndef MSCCLPP_SRC_GPU_GPU_H_
#define MSCCLPP_SRC_GPU_GPU_H_

#include <stddef.h>

#include "mscclpp/core.h"

/* Number of usable CUDA devices: 0 without CUDA support, driver or device.
 * Never fails. */
int mscclppGpuDeviceCount(void);

/* One line describing device `dev`: name, compute capability, SM count,
 * memory, PCI bus id, NUMA node. mscclppInvalidArgument for a bad index. */
mscclppResult_t mscclppGpuDescribe(int dev, char* buf, size_t len);

/* PCI bus id of `dev` in sysfs form ("0000:3b:00.0"). */
mscclppResult_t mscclppGpuPciBusId(int dev, char* buf, size_t len);

/* NUMA node of a PCI device from /sys/bus/pci/devices/<busId>/numa_node.
 * *node = -1 when the platform does not say (VMs report -1): that is "no
 * binding", not an error. */
mscclppResult_t mscclppPciNumaNode(const char* busId, int* node);

/* NUMA node of CUDA device `dev` (-1 when unknown). */
mscclppResult_t mscclppGpuNumaNode(int dev, int* node);

/* Bind the calling thread to the CPUs of NUMA node `node` (from
 * /sys/devices/system/node/node<N>/cpulist). node -1 does nothing and logs at
 * INFO. No libnuma needed. */
mscclppResult_t mscclppCpuBindNumaNode(int node);

#endif /* MSCCLPP_SRC_GPU_GPU_H_ */
