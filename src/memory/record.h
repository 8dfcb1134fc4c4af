/* SPDX-License-Identifier: MIT */
/*
 * The serialized form of a registration: every byte a memory record puts on
 * the wire is encoded and parsed here. Pure functions (no I/O, no logging, no
 * allocation), so a fuzzer can drive the parser directly.
 *
 * Version 1, little-endian, explicit lengths:
 *    0 magic u32 "MSMR" | 4 version u16 | 6 flags u16 (0) | 8 total length u32
 *   12 zero u32 | 16 memory id u64 | 24 owner rank i32 | 28 owner pid u32
 *   32 process token u64 | 40 host hash u64 | 48 kind u32 | 52 transports u32
 *   56 address u64 | 64 device address u64 | 72 size u64 | 80 device i32
 *   84 section count u16 | 86 host name length u8 | 87 host name (no NUL)
 *   then sections: type u16, length u16, body
 *     1 CUDA IPC: handle (64) | offset in the allocation u64 | allocation size u64
 *     2 FD:       server name length u8 | name | export id u64 | token (16) |
 *                 offset in the mapping u64 | mapping size u64
 *     3 NET:      provider key u64 | RMA address of the first byte u64 (the
 *                 virtual address, or 0 where the provider addresses by offset) |
 *                 flags u32 (bit 0: staged - the owner's provider cannot reach
 *                 the memory; peers write through the connection's staging ring)
 *   last 8 bytes: SipHash-2-4 under the job secret of everything before.
 * Unknown section types are skipped (their length is explicit); a repeated
 * known section is refused.
 */
#ifndef MSCCLPP_SRC_MEMORY_RECORD_H_
#define MSCCLPP_SRC_MEMORY_RECORD_H_

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu_ipc.h"
#include "memory/fd_share.h"
#include "mscclpp/core.h"

#define MSCCLPP_MEM_RECORD_MAGIC 0x524d534du /* "MSMR" */
#define MSCCLPP_MEM_RECORD_VERSION 1
#define MSCCLPP_MEM_RECORD_MAX 1024 /* == MSCCLPP_MEMORY_RECORD_MAX_BYTES */
#define MSCCLPP_HOST_NAME_MAX 64   /* with its NUL */
#define MSCCLPP_SECRET_BYTES 16

enum { MSCCLPP_MEM_SECTION_CUDA_IPC = 1, MSCCLPP_MEM_SECTION_FD = 2, MSCCLPP_MEM_SECTION_NET = 3 };
#define MSCCLPP_MEM_NET_STAGED 1u

struct mscclppMemRecord {
  uint64_t memId;        /* unique within the owning process */
  int32_t ownerRank;
  uint32_t ownerPid;
  uint64_t processToken; /* random per process: with the pid, tells "this process" */
  uint64_t hostHash;
  char hostName[MSCCLPP_HOST_NAME_MAX]; /* printable, for messages */
  uint32_t kind;         /* mscclppMemKind_t */
  uint32_t transports;   /* mscclppTransport_t bits */
  uint64_t addr;         /* the owner's pointer */
  uint64_t devAddr;      /* the owner's kernels' pointer */
  uint64_t size;
  int32_t device;        /* owner's device, -1 for host kinds */
  int hasCudaIpc;
  struct {
    uint8_t handle[MSCCLPP_GPU_IPC_HANDLE_BYTES];
    uint64_t offset;     /* of addr in the allocation */
    uint64_t allocSize;
  } cudaIpc;
  int hasFd;
  struct {
    char server[MSCCLPP_FD_SERVER_NAME_MAX];
    uint64_t exportId;
    uint8_t token[MSCCLPP_FD_TOKEN_BYTES];
    uint64_t offset;     /* of addr in the mapping */
    uint64_t mapSize;
  } fd;
  int hasNet;            /* registered with the network transport's provider */
  struct {
    uint64_t key;        /* what peers pass to fi_write */
    uint64_t addr;       /* RMA address of the first byte */
    uint32_t flags;      /* MSCCLPP_MEM_NET_* */
  } net;
};

/* Bytes the encoding of `rec` takes. */
size_t mscclppMemRecordSize(const struct mscclppMemRecord* rec);

/* Encode into buf (cap bytes) and return the size; writes nothing and
 * returns the size when cap is too small. */
size_t mscclppMemRecordEncode(const struct mscclppMemRecord* rec, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                              uint8_t* buf, size_t cap);

/* Parse and authenticate len bytes. mscclppInvalidArgument with a sentence
 * naming the bad value in why (when not NULL); *rec is written only on
 * success. */
mscclppResult_t mscclppMemRecordDecode(const uint8_t* buf, size_t len, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                                       struct mscclppMemRecord* rec, char* why, size_t whyLen);

#endif /* MSCCLPP_SRC_MEMORY_RECORD_H_ */
