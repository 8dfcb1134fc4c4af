/* SPDX-License-Identifier: MIT */
/*
 * libfabric, opened with dlopen the first time the network transport is
 * wanted: the exported functions it uses, in one table. The rest of its ABI
 * is reached through the objects' ops tables (ofi_abi.h).
 */
#ifndef MSCCLPP_SRC_TRANSPORT_NET_OFI_LOADER_H_
#define MSCCLPP_SRC_TRANSPORT_NET_OFI_LOADER_H_

#include <stdint.h>

#include "transport/net/ofi_abi.h"

struct mscclppOfiLib {
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags, const struct ofi_info* hints,
                 struct ofi_info** info);
  void (*freeinfo)(struct ofi_info* info);
  struct ofi_info* (*dupinfo)(const struct ofi_info* info);
  int (*fabric)(struct ofi_fabric_attr* attr, struct ofi_fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
  uint32_t (*version)(void);
};

/* The loaded table, or NULL when libfabric could not be loaded
 * (mscclppNetLibError says why). Loads on the first call. */
const struct mscclppOfiLib* mscclppOfi(void);

/* The API version to ask for: the vendored layout's, at most what the
 * library runs. Only once mscclppOfi() is not NULL. */
uint32_t mscclppOfiApiVersion(void);

#endif /* MSCCLPP_SRC_TRANSPORT_NET_OFI_LOADER_H_ */
