/* SPDX-License-Identifier: MIT */
/*
 * The 128-bit trigger: what a GPU thread pushes into a FIFO and a proxy
 * thread executes. One layout shared by the device, the host backend and the
 * proxy; MSCCLPP_TRIGGER_LAYOUT_VERSION changes whenever it changes.
 *
 *   word 0:  bits  0..31  srcOffset    bytes into the source memory
 *            bits 32..62  size         bytes to move
 *            bit  63      commit       see below
 *   word 1:  bits  0..31  dstOffset    bytes into the destination memory
 *            bits 32..40  srcMemoryId  index of a registered memory
 *            bits 41..49  dstMemoryId  index of a registered memory
 *            bits 50..57  semaphoreId  index of a registered semaphore
 *            bits 58..62  op           operation, see MSCCLPP_TRIGGER_OP_*
 *            bit  63      commit       same value as word 0's
 *
 * INLINE triggers (op has MSCCLPP_TRIGGER_INLINE) carry up to 8 bytes of
 * data instead of a source, for small puts the proxy can write without a
 * copy engine (mscclppTriggerPackInline):
 *   word 0:  bits  0..62  data bits 0..62
 *   word 1:  bits  0..31  dstOffset
 *            bit  32      data bit 63
 *            bits 33..35  size - 1 (1..8 bytes; data's low bytes, little endian)
 *            bit  36      stored: the pusher has already stored the bytes at
 *                         the destination through a mapping (CUDA IPC), with
 *                         release order before the trigger; the proxy writes
 *                         them again only if its own writes through the
 *                         connection could have overtaken that store
 *                         (mscclppTriggerInlineStored)
 *            bits 37..40  zero
 *            bits 41..63  as above (dstMemoryId, semaphoreId, op, commit)
 *
 * Limits (a field outside them is rejected: mscclppTriggerEncode returns
 * mscclppInvalidArgument naming the field on the host; a kernel's push
 * returns mscclppInvalidArgument and records MSCCLPP_DEVICE_ERROR_INVALID_
 * TRIGGER with the field number, in release builds too):
 *   size       < 2^31 bytes (2 GiB - 1): larger transfers are split
 *   offsets    < 2^32 bytes (4 GiB) into a memory
 *   memories   512 per proxy service (ids 0..511)
 *   semaphores 256 per proxy service (ids 0..255)
 *   op         a nonzero combination of DATA|FLAG|SYNC, or of INLINE|FLAG|SYNC,
 *              or a user op 16..31
 *
 * Commit bit. Slots are zeroed when the FIFO is created and never cleared.
 * The pusher sets bit 63 of BOTH words to 1 ^ lap, where lap = (position /
 * fifoSize) & 1; the proxy, expecting position p, knows from ONE 16-byte load
 * that the slot is fresh when both bits equal 1 ^ ((p / fifoSize) & 1). A
 * stale slot (previous lap, or zero) has the other value; a torn read (the
 * two words from different laps) has two different values and is read again.
 * Users build triggers from fields; the commit bits are the FIFO's business.
 */
#ifndef MSCCLPP_TRIGGER_H_
#define MSCCLPP_TRIGGER_H_

#include <stdint.h>

#include "mscclpp/device.h"

#define MSCCLPP_TRIGGER_LAYOUT_VERSION 3

#define MSCCLPP_TRIGGER_BITS_OFFSET 32
#define MSCCLPP_TRIGGER_BITS_SIZE 31
#define MSCCLPP_TRIGGER_BITS_MEMORY_ID 9
#define MSCCLPP_TRIGGER_BITS_SEMAPHORE_ID 8
#define MSCCLPP_TRIGGER_BITS_OP 5
#define MSCCLPP_TRIGGER_BITS_COMMIT 1

MSCCLPP_STATIC_ASSERT(MSCCLPP_TRIGGER_BITS_OFFSET + MSCCLPP_TRIGGER_BITS_SIZE + MSCCLPP_TRIGGER_BITS_COMMIT == 64,
                      "trigger word 0 must be exactly 64 bits");
MSCCLPP_STATIC_ASSERT(MSCCLPP_TRIGGER_BITS_OFFSET + 2 * MSCCLPP_TRIGGER_BITS_MEMORY_ID +
                              MSCCLPP_TRIGGER_BITS_SEMAPHORE_ID + MSCCLPP_TRIGGER_BITS_OP +
                              MSCCLPP_TRIGGER_BITS_COMMIT ==
                          64,
                      "trigger word 1 must be exactly 64 bits");

/* Largest values of each field. */
#define MSCCLPP_TRIGGER_MAX_SIZE ((1ull << MSCCLPP_TRIGGER_BITS_SIZE) - 1)
#define MSCCLPP_TRIGGER_MAX_OFFSET ((1ull << MSCCLPP_TRIGGER_BITS_OFFSET) - 1)
#define MSCCLPP_TRIGGER_MAX_MEMORIES (1u << MSCCLPP_TRIGGER_BITS_MEMORY_ID)
#define MSCCLPP_TRIGGER_MAX_SEMAPHORES (1u << MSCCLPP_TRIGGER_BITS_SEMAPHORE_ID)

/* Operations. DATA, FLAG and SYNC are bits that combine (put + signal +
 * flush in one trigger, executed in that order); user ops are values. */
#define MSCCLPP_TRIGGER_DATA 0x1u /* copy size bytes src+srcOffset -> dst+dstOffset */
#define MSCCLPP_TRIGGER_FLAG 0x2u /* signal semaphoreId, after the data */
#define MSCCLPP_TRIGGER_SYNC 0x4u /* complete everything before (flush) */
#define MSCCLPP_TRIGGER_INLINE 0x8u /* write the trigger's own 1..8 data bytes to dst+dstOffset (not with DATA) */
#define MSCCLPP_TRIGGER_BUILTIN_MASK 0xfu
/* DATA|INLINE combinations are rejected. */
#define MSCCLPP_TRIGGER_OP_USER_FIRST 16u /* 16..31: handed to the FIFO's handler */
#define MSCCLPP_TRIGGER_OP_USER_LAST 31u

/* One trigger as it sits in a FIFO slot. */
typedef struct {
  uint64_t value[2];
} __attribute__((aligned(16))) mscclppTrigger;

MSCCLPP_STATIC_ASSERT(sizeof(mscclppTrigger) == 16, "a trigger is 128 bits");

/* A trigger's fields, unpacked. Wider than the packed fields so that an
 * out-of-range value can be expressed and rejected. */
typedef struct {
  uint32_t op;
  uint32_t srcMemoryId;
  uint32_t dstMemoryId;
  uint32_t semaphoreId;
  uint64_t srcOffset;
  uint64_t dstOffset;
  uint64_t size;
} mscclppTriggerFields;

/* Field numbers, as mscclppTriggerCheck returns them and the device error
 * word's detail carries them. */
#define MSCCLPP_TRIGGER_FIELD_OK 0
#define MSCCLPP_TRIGGER_FIELD_OP 1
#define MSCCLPP_TRIGGER_FIELD_SRC_MEMORY_ID 2
#define MSCCLPP_TRIGGER_FIELD_DST_MEMORY_ID 3
#define MSCCLPP_TRIGGER_FIELD_SRC_OFFSET 4
#define MSCCLPP_TRIGGER_FIELD_DST_OFFSET 5
#define MSCCLPP_TRIGGER_FIELD_SIZE 6
#define MSCCLPP_TRIGGER_FIELD_SEMAPHORE_ID 7

/* 1 when op is a valid operation. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppTriggerOpValid(uint32_t op) {
  return (op >= 1u && op <= MSCCLPP_TRIGGER_BUILTIN_MASK &&
          (op & (MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_INLINE)) != (MSCCLPP_TRIGGER_DATA | MSCCLPP_TRIGGER_INLINE)) ||
         (op >= MSCCLPP_TRIGGER_OP_USER_FIRST && op <= MSCCLPP_TRIGGER_OP_USER_LAST);
}

/* MSCCLPP_TRIGGER_FIELD_OK, or the number of the first field out of range. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppTriggerCheck(const mscclppTriggerFields* f) {
  if (!mscclppTriggerOpValid(f->op)) return MSCCLPP_TRIGGER_FIELD_OP;
  if (f->srcMemoryId >= MSCCLPP_TRIGGER_MAX_MEMORIES) return MSCCLPP_TRIGGER_FIELD_SRC_MEMORY_ID;
  if (f->dstMemoryId >= MSCCLPP_TRIGGER_MAX_MEMORIES) return MSCCLPP_TRIGGER_FIELD_DST_MEMORY_ID;
  if (f->srcOffset > MSCCLPP_TRIGGER_MAX_OFFSET) return MSCCLPP_TRIGGER_FIELD_SRC_OFFSET;
  if (f->dstOffset > MSCCLPP_TRIGGER_MAX_OFFSET) return MSCCLPP_TRIGGER_FIELD_DST_OFFSET;
  if (f->size > MSCCLPP_TRIGGER_MAX_SIZE) return MSCCLPP_TRIGGER_FIELD_SIZE;
  if (f->semaphoreId >= MSCCLPP_TRIGGER_MAX_SEMAPHORES) return MSCCLPP_TRIGGER_FIELD_SEMAPHORE_ID;
  return MSCCLPP_TRIGGER_FIELD_OK;
}

/* Pack checked fields (commit bits 0). Out-of-range bits are masked off:
 * call mscclppTriggerCheck (or mscclppTriggerEncode) first. */
MSCCLPP_HOST_DEVICE_INLINE mscclppTrigger mscclppTriggerPack(const mscclppTriggerFields* f) {
  mscclppTrigger t;
  t.value[0] = (f->srcOffset & MSCCLPP_TRIGGER_MAX_OFFSET) | (f->size & MSCCLPP_TRIGGER_MAX_SIZE) << 32;
  t.value[1] = (f->dstOffset & MSCCLPP_TRIGGER_MAX_OFFSET) |
               (uint64_t)(f->srcMemoryId & (MSCCLPP_TRIGGER_MAX_MEMORIES - 1)) << 32 |
               (uint64_t)(f->dstMemoryId & (MSCCLPP_TRIGGER_MAX_MEMORIES - 1)) << 41 |
               (uint64_t)(f->semaphoreId & (MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1)) << 50 |
               (uint64_t)(f->op & 0x1fu) << 58;
  return t;
}

MSCCLPP_HOST_DEVICE_INLINE void mscclppTriggerUnpack(const mscclppTrigger* t, mscclppTriggerFields* f) {
  f->srcOffset = t->value[0] & MSCCLPP_TRIGGER_MAX_OFFSET;
  f->size = (t->value[0] >> 32) & MSCCLPP_TRIGGER_MAX_SIZE;
  f->dstOffset = t->value[1] & MSCCLPP_TRIGGER_MAX_OFFSET;
  f->srcMemoryId = (uint32_t)(t->value[1] >> 32) & (MSCCLPP_TRIGGER_MAX_MEMORIES - 1);
  f->dstMemoryId = (uint32_t)(t->value[1] >> 41) & (MSCCLPP_TRIGGER_MAX_MEMORIES - 1);
  f->semaphoreId = (uint32_t)(t->value[1] >> 50) & (MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1);
  f->op = (uint32_t)(t->value[1] >> 58) & 0x1fu;
}

MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppTriggerOp(const mscclppTrigger* t) {
  return (uint32_t)(t->value[1] >> 58) & 0x1fu;
}

#define MSCCLPP_TRIGGER_COMMIT_BIT (1ull << 63)

/* Largest payload of an INLINE trigger. */
#define MSCCLPP_TRIGGER_INLINE_MAX 8u

/* Pack an INLINE trigger (commit bits 0): `size` (1..8) low bytes of `data`
 * for dst+dstOffset, with `op` = INLINE and optionally FLAG|SYNC. The
 * caller checks the ranges (dstMemoryId, dstOffset, semaphoreId, size) as
 * mscclppTriggerCheck would; out-of-range bits are masked off. */
MSCCLPP_HOST_DEVICE_INLINE mscclppTrigger mscclppTriggerPackInline(uint32_t op, uint32_t dstMemoryId,
                                                                  uint64_t dstOffset, uint32_t semaphoreId,
                                                                  uint64_t data, uint32_t size) {
  mscclppTrigger t;
  t.value[0] = data & ~MSCCLPP_TRIGGER_COMMIT_BIT;
  t.value[1] = (dstOffset & MSCCLPP_TRIGGER_MAX_OFFSET) | (data >> 63) << 32 | (uint64_t)((size - 1u) & 7u) << 33 |
               (uint64_t)(dstMemoryId & (MSCCLPP_TRIGGER_MAX_MEMORIES - 1)) << 41 |
               (uint64_t)(semaphoreId & (MSCCLPP_TRIGGER_MAX_SEMAPHORES - 1)) << 50 | (uint64_t)(op & 0x1fu) << 58;
  return t;
}

/* The payload of an INLINE trigger: its bytes (little endian in *data,
 * bytes above size zero) and size (1..8). The other fields unpack with
 * mscclppTriggerUnpack (its srcOffset, size and srcMemoryId are then
 * meaningless). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppTriggerUnpackInline(const mscclppTrigger* t, uint64_t* data, uint32_t* size) {
  uint32_t n = (uint32_t)((t->value[1] >> 33) & 7u) + 1u;
  uint64_t d = (t->value[0] & ~MSCCLPP_TRIGGER_COMMIT_BIT) | ((t->value[1] >> 32) & 1u) << 63;
  *data = n == 8u ? d : d & ((1ull << (8u * n)) - 1u);
  *size = n;
}

/* Bit 36 of an INLINE trigger's word 1: the pusher stored the bytes itself. */
#define MSCCLPP_TRIGGER_INLINE_STORED_BIT (1ull << 36)

/* Mark an INLINE trigger as stored (see the layout above). */
MSCCLPP_HOST_DEVICE_INLINE mscclppTrigger mscclppTriggerInlineMarkStored(mscclppTrigger t) {
  t.value[1] |= MSCCLPP_TRIGGER_INLINE_STORED_BIT;
  return t;
}

/* 1 when an INLINE trigger says the pusher stored its bytes itself. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppTriggerInlineStored(const mscclppTrigger* t) {
  return (t->value[1] & MSCCLPP_TRIGGER_INLINE_STORED_BIT) != 0;
}

/* The value of field number `field` (for messages). */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppTriggerFieldValue(const mscclppTriggerFields* f, int field) {
  switch (field) {
    case MSCCLPP_TRIGGER_FIELD_OP: return f->op;
    case MSCCLPP_TRIGGER_FIELD_SRC_MEMORY_ID: return f->srcMemoryId;
    case MSCCLPP_TRIGGER_FIELD_DST_MEMORY_ID: return f->dstMemoryId;
    case MSCCLPP_TRIGGER_FIELD_SRC_OFFSET: return f->srcOffset;
    case MSCCLPP_TRIGGER_FIELD_DST_OFFSET: return f->dstOffset;
    case MSCCLPP_TRIGGER_FIELD_SIZE: return f->size;
    case MSCCLPP_TRIGGER_FIELD_SEMAPHORE_ID: return f->semaphoreId;
    default: return 0;
  }
}

/* "size", "op", ... for a MSCCLPP_TRIGGER_FIELD_* number; "?" otherwise
 * (host only). */
static inline const char* mscclppTriggerFieldName(int field) {
  switch (field) {
    case MSCCLPP_TRIGGER_FIELD_OP: return "op";
    case MSCCLPP_TRIGGER_FIELD_SRC_MEMORY_ID: return "srcMemoryId";
    case MSCCLPP_TRIGGER_FIELD_DST_MEMORY_ID: return "dstMemoryId";
    case MSCCLPP_TRIGGER_FIELD_SRC_OFFSET: return "srcOffset";
    case MSCCLPP_TRIGGER_FIELD_DST_OFFSET: return "dstOffset";
    case MSCCLPP_TRIGGER_FIELD_SIZE: return "size";
    case MSCCLPP_TRIGGER_FIELD_SEMAPHORE_ID: return "semaphoreId";
    default: return "?";
  }
}

#ifdef __cplusplus
extern "C" {
#endif

/* Check and pack `fields` into *trigger (commit bits 0). Returns
 * mscclppInvalidArgument, naming the field, its value and its limit, when a
 * field is out of range or an argument is NULL; *trigger is then untouched. */
MSCCLPP_API mscclppResult_t mscclppTriggerEncode(const mscclppTriggerFields* fields, mscclppTrigger* trigger);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_TRIGGER_H_ */
