/* SPDX-License-Identifier: MIT */
/* Encoding and parsing of memory records. Layout in record.h. */
#include "memory/record.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/bytes.h"
#include "core/util.h"
#include "mscclpp/memory.h"

#define HEADER_BYTES 87 /* up to the host name */
#define MAC_BYTES 8
#define CUDA_IPC_BODY (MSCCLPP_GPU_IPC_HANDLE_BYTES + 16)
#define NET_BODY 20

static size_t boundedLen(const char* s, size_t max) {
  size_t n = 0;
  while (n < max && s[n] != '\0') n++;
  return n;
}

static size_t hostNameLen(const struct mscclppMemRecord* rec) {
  return boundedLen(rec->hostName, MSCCLPP_HOST_NAME_MAX - 1);
}
static size_t serverLen(const struct mscclppMemRecord* rec) {
  return boundedLen(rec->fd.server, MSCCLPP_FD_SERVER_NAME_MAX - 1);
}
static size_t fdBody(const struct mscclppMemRecord* rec) { return 1 + serverLen(rec) + 8 + 16 + 8 + 8; }

size_t mscclppMemRecordSize(const struct mscclppMemRecord* rec) {
  size_t n = HEADER_BYTES + hostNameLen(rec);
  if (rec->hasCudaIpc) n += 4 + CUDA_IPC_BODY;
  if (rec->hasFd) n += 4 + fdBody(rec);
  if (rec->hasNet) n += 4 + NET_BODY;
  return n + MAC_BYTES;
}

size_t mscclppMemRecordEncode(const struct mscclppMemRecord* rec, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                              uint8_t* buf, size_t cap) {
  size_t total = mscclppMemRecordSize(rec);
  if (buf == NULL || cap < total) return total;
  memset(buf, 0, total);
  mscclppPutLE32(buf + 0, MSCCLPP_MEM_RECORD_MAGIC);
  mscclppPutLE16(buf + 4, MSCCLPP_MEM_RECORD_VERSION);
  mscclppPutLE16(buf + 6, 0);
  mscclppPutLE32(buf + 8, (uint32_t)total);
  mscclppPutLE32(buf + 12, 0);
  mscclppPutLE64(buf + 16, rec->memId);
  mscclppPutLE32(buf + 24, (uint32_t)rec->ownerRank);
  mscclppPutLE32(buf + 28, rec->ownerPid);
  mscclppPutLE64(buf + 32, rec->processToken);
  mscclppPutLE64(buf + 40, rec->hostHash);
  mscclppPutLE32(buf + 48, rec->kind);
  mscclppPutLE32(buf + 52, rec->transports);
  mscclppPutLE64(buf + 56, rec->addr);
  mscclppPutLE64(buf + 64, rec->devAddr);
  mscclppPutLE64(buf + 72, rec->size);
  mscclppPutLE32(buf + 80, (uint32_t)rec->device);
  mscclppPutLE16(buf + 84, (uint16_t)((rec->hasCudaIpc ? 1 : 0) + (rec->hasFd ? 1 : 0) + (rec->hasNet ? 1 : 0)));
  size_t hn = hostNameLen(rec);
  buf[86] = (uint8_t)hn;
  memcpy(buf + 87, rec->hostName, hn);
  uint8_t* p = buf + HEADER_BYTES + hn;
  if (rec->hasCudaIpc) {
    mscclppPutLE16(p, MSCCLPP_MEM_SECTION_CUDA_IPC);
    mscclppPutLE16(p + 2, CUDA_IPC_BODY);
    p += 4;
    memcpy(p, rec->cudaIpc.handle, MSCCLPP_GPU_IPC_HANDLE_BYTES);
    mscclppPutLE64(p + MSCCLPP_GPU_IPC_HANDLE_BYTES, rec->cudaIpc.offset);
    mscclppPutLE64(p + MSCCLPP_GPU_IPC_HANDLE_BYTES + 8, rec->cudaIpc.allocSize);
    p += CUDA_IPC_BODY;
  }
  if (rec->hasFd) {
    size_t sn = serverLen(rec);
    mscclppPutLE16(p, MSCCLPP_MEM_SECTION_FD);
    mscclppPutLE16(p + 2, (uint16_t)fdBody(rec));
    p += 4;
    *p++ = (uint8_t)sn;
    memcpy(p, rec->fd.server, sn);
    p += sn;
    mscclppPutLE64(p, rec->fd.exportId);
    memcpy(p + 8, rec->fd.token, MSCCLPP_FD_TOKEN_BYTES);
    mscclppPutLE64(p + 24, rec->fd.offset);
    mscclppPutLE64(p + 32, rec->fd.mapSize);
    p += 40;
  }
  if (rec->hasNet) {
    mscclppPutLE16(p, MSCCLPP_MEM_SECTION_NET);
    mscclppPutLE16(p + 2, NET_BODY);
    mscclppPutLE64(p + 4, rec->net.key);
    mscclppPutLE64(p + 12, rec->net.addr);
    mscclppPutLE32(p + 20, rec->net.flags);
    p += 4 + NET_BODY;
  }
  mscclppPutLE64(p, mscclppSipHash(secret, buf, total - MAC_BYTES));
  return total;
}

static mscclppResult_t refuse(char* why, size_t whyLen, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static mscclppResult_t refuse(char* why, size_t whyLen, const char* fmt, ...) {
  if (why != NULL && whyLen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whyLen, fmt, ap);
    va_end(ap);
  }
  return mscclppInvalidArgument;
}

static int printable(const uint8_t* s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] > 0x7e) return 0;
  return 1;
}

/* a + b <= limit without overflow */
static int fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

mscclppResult_t mscclppMemRecordDecode(const uint8_t* buf, size_t len, const uint8_t secret[MSCCLPP_SECRET_BYTES],
                                       struct mscclppMemRecord* out, char* why, size_t whyLen) {
  if (buf == NULL) return refuse(why, whyLen, "no record (NULL buffer)");
  if (len < 12) return refuse(why, whyLen, "record truncated: %zu bytes, a header alone takes 12", len);
  uint32_t magic = mscclppGetLE32(buf);
  if (magic != MSCCLPP_MEM_RECORD_MAGIC)
    return refuse(why, whyLen, "not a memory record (magic 0x%08x, expected 0x%08x)", magic, MSCCLPP_MEM_RECORD_MAGIC);
  uint16_t version = mscclppGetLE16(buf + 4);
  if (version != MSCCLPP_MEM_RECORD_VERSION)
    return refuse(why, whyLen, "memory record version %u; this library reads version %u", version,
                  MSCCLPP_MEM_RECORD_VERSION);
  uint32_t total = mscclppGetLE32(buf + 8);
  if (total != len)
    return refuse(why, whyLen, "memory record length mismatch: it says %u bytes, %zu were given%s", total, len,
                  len < total ? " (truncated)" : "");
  if (len < HEADER_BYTES + MAC_BYTES || len > MSCCLPP_MEM_RECORD_MAX)
    return refuse(why, whyLen, "memory record of %zu bytes: a record has %d to %d bytes", len,
                  HEADER_BYTES + MAC_BYTES, MSCCLPP_MEM_RECORD_MAX);
  uint64_t mac = mscclppGetLE64(buf + len - MAC_BYTES);
  if ((mscclppSipHash(secret, buf, len - MAC_BYTES) ^ mac) != 0)
    return refuse(why, whyLen,
                  "memory record fails authentication: it was made by another job (another secret) or altered");
  /* Authenticated: the bytes are what a rank of this job wrote. The checks
   * below still hold the parser to its bounds. */
  if (mscclppGetLE16(buf + 6) != 0 || mscclppGetLE32(buf + 12) != 0)
    return refuse(why, whyLen, "memory record has unknown flags 0x%04x / 0x%08x", mscclppGetLE16(buf + 6), mscclppGetLE32(buf + 12));
  struct mscclppMemRecord rec;
  memset(&rec, 0, sizeof(rec));
  rec.memId = mscclppGetLE64(buf + 16);
  rec.ownerRank = (int32_t)mscclppGetLE32(buf + 24);
  rec.ownerPid = mscclppGetLE32(buf + 28);
  rec.processToken = mscclppGetLE64(buf + 32);
  rec.hostHash = mscclppGetLE64(buf + 40);
  rec.kind = mscclppGetLE32(buf + 48);
  rec.transports = mscclppGetLE32(buf + 52);
  rec.addr = mscclppGetLE64(buf + 56);
  rec.devAddr = mscclppGetLE64(buf + 64);
  rec.size = mscclppGetLE64(buf + 72);
  rec.device = (int32_t)mscclppGetLE32(buf + 80);
  unsigned sections = mscclppGetLE16(buf + 84);
  size_t hn = buf[86];
  if (rec.ownerRank < 0) return refuse(why, whyLen, "memory record names owner rank %d", (int)rec.ownerRank);
  if (rec.kind < mscclppMemKindHost || rec.kind > mscclppMemKindDeviceCuMem)
    return refuse(why, whyLen, "memory record has unknown kind %u", rec.kind);
  const uint32_t known = mscclppTransportCudaIpc | mscclppTransportHostShm | mscclppTransportNet;
  if (rec.transports == 0 || (rec.transports & ~known) != 0)
    return refuse(why, whyLen, "memory record has transport mask 0x%x (known bits 0x%x)", rec.transports, known);
  if (rec.size == 0 || !fits(rec.addr, rec.size, UINT64_MAX))
    return refuse(why, whyLen, "memory record has size %llu at address 0x%llx", (unsigned long long)rec.size,
                  (unsigned long long)rec.addr);
  if (hn >= MSCCLPP_HOST_NAME_MAX || HEADER_BYTES + hn > len - MAC_BYTES || !printable(buf + HEADER_BYTES, hn))
    return refuse(why, whyLen, "memory record has a bad host name (length %zu)", hn);
  memcpy(rec.hostName, buf + HEADER_BYTES, hn);
  size_t pos = HEADER_BYTES + hn;
  const size_t end = len - MAC_BYTES;
  for (unsigned i = 0; i < sections; i++) {
    if (end - pos < 4) return refuse(why, whyLen, "memory record truncated in section %u of %u", i + 1, sections);
    unsigned type = mscclppGetLE16(buf + pos);
    size_t slen = mscclppGetLE16(buf + pos + 2);
    pos += 4;
    if (slen > end - pos)
      return refuse(why, whyLen, "memory record section %u says %zu bytes, %zu remain", type, slen, end - pos);
    const uint8_t* b = buf + pos;
    if (type == MSCCLPP_MEM_SECTION_CUDA_IPC) {
      if (rec.hasCudaIpc) return refuse(why, whyLen, "memory record has two CUDA IPC sections");
      if (slen != CUDA_IPC_BODY)
        return refuse(why, whyLen, "memory record's CUDA IPC section has %zu bytes, expected %d", slen,
                      CUDA_IPC_BODY);
      rec.hasCudaIpc = 1;
      memcpy(rec.cudaIpc.handle, b, MSCCLPP_GPU_IPC_HANDLE_BYTES);
      rec.cudaIpc.offset = mscclppGetLE64(b + MSCCLPP_GPU_IPC_HANDLE_BYTES);
      rec.cudaIpc.allocSize = mscclppGetLE64(b + MSCCLPP_GPU_IPC_HANDLE_BYTES + 8);
      if (!fits(rec.cudaIpc.offset, rec.size, rec.cudaIpc.allocSize))
        return refuse(why, whyLen, "memory record: offset %llu + size %llu beyond the allocation of %llu bytes",
                      (unsigned long long)rec.cudaIpc.offset, (unsigned long long)rec.size,
                      (unsigned long long)rec.cudaIpc.allocSize);
    } else if (type == MSCCLPP_MEM_SECTION_FD) {
      if (rec.hasFd) return refuse(why, whyLen, "memory record has two FD sections");
      if (slen < 1) return refuse(why, whyLen, "memory record's FD section is empty");
      size_t sn = b[0];
      if (sn == 0 || sn >= MSCCLPP_FD_SERVER_NAME_MAX || slen != 1 + sn + 40 || !printable(b + 1, sn))
        return refuse(why, whyLen, "memory record's FD section is malformed (name length %zu, section %zu bytes)", sn,
                      slen);
      rec.hasFd = 1;
      memcpy(rec.fd.server, b + 1, sn);
      const uint8_t* q = b + 1 + sn;
      rec.fd.exportId = mscclppGetLE64(q);
      memcpy(rec.fd.token, q + 8, MSCCLPP_FD_TOKEN_BYTES);
      rec.fd.offset = mscclppGetLE64(q + 24);
      rec.fd.mapSize = mscclppGetLE64(q + 32);
      if (!fits(rec.fd.offset, rec.size, rec.fd.mapSize))
        return refuse(why, whyLen, "memory record: offset %llu + size %llu beyond the mapping of %llu bytes",
                      (unsigned long long)rec.fd.offset, (unsigned long long)rec.size,
                      (unsigned long long)rec.fd.mapSize);
    } else if (type == MSCCLPP_MEM_SECTION_NET) {
      if (rec.hasNet) return refuse(why, whyLen, "memory record has two NET sections");
      if (slen != NET_BODY)
        return refuse(why, whyLen, "memory record's NET section has %zu bytes, expected %d", slen, NET_BODY);
      rec.hasNet = 1;
      rec.net.key = mscclppGetLE64(b);
      rec.net.addr = mscclppGetLE64(b + 8);
      rec.net.flags = mscclppGetLE32(b + 16);
      if ((rec.net.flags & ~MSCCLPP_MEM_NET_STAGED) != 0)
        return refuse(why, whyLen, "memory record's NET section has unknown flags 0x%x", rec.net.flags);
      if (!fits(rec.net.addr, rec.size, UINT64_MAX))
        return refuse(why, whyLen, "memory record's NET address 0x%llx + size %llu wraps",
                      (unsigned long long)rec.net.addr, (unsigned long long)rec.size);
    }
    pos += slen; /* unknown types are skipped */
  }
  if (pos != end)
    return refuse(why, whyLen, "memory record has %zu stray bytes after its %u sections", end - pos, sections);
  *out = rec;
  return mscclppSuccess;
}
