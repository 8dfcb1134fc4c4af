/* SPDX-License-Identifier: MIT */
/* The codec of the small floating-point types (rules: fpconv.h). */
#include "core/fpconv.h"

#include <math.h>
#include <string.h>

static uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

static float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/* The magnitude code (exponent | mantissa, no sign) of the finite, non-NaN
 * float whose bits without sign are `absBits`, in a format with `mb`
 * mantissa bits and exponent bias `bias`, rounded to nearest-even
 * (subnormals included). The caller clamps codes past the format's largest
 * finite value. */
static uint32_t floatToSmall(uint32_t absBits, int mb, int bias) {
  uint32_t e = absBits >> 23, m = absBits & 0x7fffffu;
  if (e == 0) return 0; /* float subnormals: far below half the smallest subnormal of every target */
  int et = (int)e - 127 + bias;
  uint32_t code, rem, shift;
  if (et >= 1) {
    shift = (uint32_t)(23 - mb);
    code = ((uint32_t)et << mb) | (m >> shift);
    rem = m & ((1u << shift) - 1u);
  } else {
    shift = (uint32_t)(23 - mb + 1 - et);
    if (shift > 25) return 0;
    uint32_t m24 = m | 0x800000u;
    code = m24 >> shift;
    rem = m24 & ((1u << shift) - 1u);
  }
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (code & 1u))) code++; /* a carry moves into the exponent: still right */
  return code;
}

/* The value of a finite magnitude code (see floatToSmall). */
static float smallToFloat(uint32_t code, int mb, int bias, float subnormalUnit) {
  uint32_t e = code >> mb, m = code & ((1u << mb) - 1u);
  if (e == 0) return (float)m * subnormalUnit;
  return bitsFloat((uint32_t)((int)e - bias + 127) << 23 | m << (23 - mb));
}

float mscclppHalfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, code = h & 0x7fffu;
  if ((code >> 10) == 0x1f) /* infinity, or NaN (made quiet) */
    return bitsFloat(sign | 0x7f800000u | (code & 0x3ffu) << 13 | ((code & 0x3ffu) ? 0x400000u : 0));
  float v = smallToFloat(code, 10, 15, 0x1p-24f);
  return sign ? -v : v;
}

uint16_t mscclppFloatToHalf(float f) {
  uint32_t u = floatBits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fffu;
  uint32_t code = a == 0x7f800000u ? 0x7c00u : floatToSmall(a, 10, 15);
  if (code > 0x7c00u) code = 0x7c00u; /* overflow rounds to infinity */
  return (uint16_t)(sign | code);
}

float mscclppBf16ToFloat(uint16_t h) { return bitsFloat((uint32_t)h << 16); }

uint16_t mscclppFloatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* carries reach infinity when they must */
}

float mscclppFp8e4m3ToFloat(uint8_t x) {
  uint32_t code = x & 0x7fu;
  if (code == 0x7fu) return bitsFloat(0x7fc00000u);
  float v = smallToFloat(code, 3, 7, 0x1p-9f);
  return (x & 0x80u) ? -v : v;
}

uint8_t mscclppFloatToFp8e4m3(float f) {
  uint32_t u = floatBits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fu;
  uint32_t code = a == 0x7f800000u ? 0x7eu : floatToSmall(a, 3, 7);
  if (code > 0x7eu) code = 0x7eu; /* saturate to 448 */
  return (uint8_t)(sign | code);
}

float mscclppFp8e5m2ToFloat(uint8_t x) {
  uint32_t sign = (uint32_t)(x & 0x80u) << 24, code = x & 0x7fu;
  if ((code >> 2) == 0x1f) return bitsFloat(sign | 0x7f800000u | ((code & 3u) ? 0x400000u : 0));
  float v = smallToFloat(code, 2, 15, 0x1p-16f);
  return sign ? -v : v;
}

uint8_t mscclppFloatToFp8e5m2(float f) {
  uint32_t u = floatBits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fu;
  uint32_t code = a == 0x7f800000u ? 0x7bu : floatToSmall(a, 2, 15);
  if (code > 0x7bu) code = 0x7bu; /* saturate to 57344 */
  return (uint8_t)(sign | code);
}

int mscclppFloatEncode(mscclppDataType_t t, double v, void* dst) {
  switch (t) {
    case mscclppFloat64:
      memcpy(dst, &v, 8);
      return 0;
    case mscclppFloat32: {
      float f = (float)v;
      memcpy(dst, &f, 4);
      return 0;
    }
    case mscclppFloat16:
    case mscclppBfloat16: {
      uint16_t h = t == mscclppFloat16 ? mscclppFloatToHalf((float)v) : mscclppFloatToBf16((float)v);
      memcpy(dst, &h, 2);
      return 0;
    }
    case mscclppFloat8e4m3:
      *(uint8_t*)dst = mscclppFloatToFp8e4m3((float)v);
      return 0;
    case mscclppFloat8e5m2:
      *(uint8_t*)dst = mscclppFloatToFp8e5m2((float)v);
      return 0;
    default:
      return -1;
  }
}

double mscclppFloatDecode(mscclppDataType_t t, const void* src) {
  switch (t) {
    case mscclppFloat64: {
      double d;
      memcpy(&d, src, 8);
      return d;
    }
    case mscclppFloat32: {
      float f;
      memcpy(&f, src, 4);
      return f;
    }
    case mscclppFloat16:
    case mscclppBfloat16: {
      uint16_t h;
      memcpy(&h, src, 2);
      return t == mscclppFloat16 ? mscclppHalfToFloat(h) : mscclppBf16ToFloat(h);
    }
    case mscclppFloat8e4m3:
      return mscclppFp8e4m3ToFloat(*(const uint8_t*)src);
    case mscclppFloat8e5m2:
      return mscclppFp8e5m2ToFloat(*(const uint8_t*)src);
    default:
      return (double)NAN;
  }
}
