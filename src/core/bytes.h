/* SPDX-License-Identifier: MIT */
/* Little-endian field access for wire formats (bootstrap messages, memory
 * records, endpoints, fd-server messages): every byte we put on a socket or
 * parse from one goes through these. */
#ifndef MSCCLPP_SRC_CORE_BYTES_H_
#define MSCCLPP_SRC_CORE_BYTES_H_

#include <stdint.h>

static inline void mscclppPutLE16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void mscclppPutLE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void mscclppPutLE64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t mscclppGetLE16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t mscclppGetLE32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static inline uint64_t mscclppGetLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

#endif /* MSCCLPP_SRC_CORE_BYTES_H_ */
