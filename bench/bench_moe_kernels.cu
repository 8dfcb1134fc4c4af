/* SPDX-License-Identifier: MIT */
/*
 * The device side of bench_moe (bench_moe.c says what the step is): the
 * router, the pack, the stand-in expert, the un-permute with its exact
 * check, and the check of what a dispatch delivered. Linked into bench_moe
 * (bench/CMakeLists.txt: <name>_kernels.cu).
 *
 * Everything a rank sends is a function of (seed, step, rank, token): the
 * tokens' values of (rank, token, element), the routing of (seed, step,
 * rank, token). So a rank can recompute on its GPU what any peer sent it,
 * and the combined result is known in closed form: the expert doubles a
 * row and the combine adds the token's TOPK rows with weight 1, so
 * out = 2 * TOPK * x, exactly (x is a multiple of 1/64 in [-2, 2]: every
 * partial sum is exact in float, and 16x in bfloat16).
 *
 * Rows are ordered by (expert, token) in the packed buffer: destination d's
 * block holds its experts' rows in expert order, each expert's tokens in
 * token order (as an MoE layer groups them for its expert GEMMs), so the
 * order is the same wherever it is computed.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#define MOE_EXPERTS 32 /* one warp of the router's block per expert */
#define MOE_TOPK 8
#define ROUTE_THREADS 1024

static __device__ __forceinline__ uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Element e of rank r's token t: a multiple of 1/64 in [-127/64, 127/64]
 * (8 significant bits: exact in bfloat16, and 16x it too). */
static __device__ __forceinline__ float tokenValue(int r, uint32_t t, uint32_t e) {
  uint64_t h = mix64(((uint64_t)(uint32_t)r << 48) ^ ((uint64_t)t << 24) ^ e ^ 0x70c3ull);
  return (float)((int)(h % 255u) - 127) / 64.0f;
}

/* The TOPK distinct experts of rank r's token t at `step`: a bit per expert. */
static __device__ __forceinline__ uint32_t routeMask(uint64_t seed, uint64_t step, int r, uint32_t t) {
  uint64_t h = mix64(seed ^ mix64(step * 0x100000001b3ull ^ ((uint64_t)(uint32_t)r << 40) ^ t));
  uint32_t m = 0;
  int used = 0;
  while (__popc(m) < MOE_TOPK) {
    if (used == 12) { /* 12 draws of 5 bits per hash */
      h = mix64(h);
      used = 0;
    }
    m |= 1u << ((h >> (5 * used)) & 31u);
    used++;
  }
  return m;
}

/* ---- tokens ------------------------------------------------------------------------ */

__global__ void initTokensKernel(__nv_bfloat16* tok, int rank, uint32_t tokens, uint32_t hidden) {
  const uint64_t n = (uint64_t)tokens * hidden;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    tok[i] = __float2bfloat16_rn(tokenValue(rank, (uint32_t)(i / hidden), (uint32_t)(i % hidden)));
}

extern "C" cudaError_t benchMoeInitTokens(void* tok, int rank, uint32_t tokens, uint32_t hidden, cudaStream_t s) {
  initTokensKernel<<<1024, 256, 0, s>>>((__nv_bfloat16*)tok, rank, tokens, hidden);
  return cudaGetLastError();
}

/* ---- the router -------------------------------------------------------------------- */

/* One block of ROUTE_THREADS (32 warps: warp w counts expert w). The step
 * is *step + 1 when `advance` (then stored back: each step routes anew,
 * graph replays included), else *step (a peer's routing of the current
 * step, for the checks). Writes, for rank r's tokens:
 *   pos[t * TOPK + j]  the packed row of the token's j-th expert (in
 *                      expert order),
 *   rowTok[row]        the token of a packed row (NULL: not written),
 *   sendcounts[d], sdispls[d]  in elements (rows * hidden), for every rank
 *                      d, experts spread evenly (rank d holds experts
 *                      d * E/k .. (d+1) * E/k - 1).
 * Shared memory: a mask per token (tokens * 4 bytes). */
__global__ void __launch_bounds__(ROUTE_THREADS)
    routeKernel(uint64_t* step, int advance, uint64_t seed, int r, int nranks, uint32_t tokens, uint32_t hidden,
                int32_t* pos, int32_t* rowTok, size_t* sendcounts, size_t* sdispls) {
  extern __shared__ uint32_t smask[];
  __shared__ uint32_t total[MOE_EXPERTS], base[MOE_EXPERTS];
  __shared__ uint64_t st;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (threadIdx.x == 0) st = *step + (advance ? 1 : 0);
  __syncthreads();
  for (uint32_t t = threadIdx.x; t < tokens; t += blockDim.x) smask[t] = routeMask(seed, st, r, t);
  __syncthreads();
  /* warp w: how many tokens chose expert w */
  uint32_t n = 0;
  for (uint32_t t0 = 0; t0 < tokens; t0 += 32) {
    const uint32_t t = t0 + lane;
    n += __popc(__ballot_sync(0xffffffffu, t < tokens && ((smask[t] >> w) & 1u)));
  }
  if (lane == 0) total[w] = n;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t at = 0;
    for (int e = 0; e < MOE_EXPERTS; e++) {
      base[e] = at;
      at += total[e];
    }
    const int per = MOE_EXPERTS / nranks;
    for (int d = 0; d < nranks; d++) {
      uint64_t rows = 0;
      for (int e = d * per; e < (d + 1) * per; e++) rows += total[e];
      sendcounts[d] = (size_t)(rows * hidden);
      sdispls[d] = (size_t)((uint64_t)base[d * per] * hidden);
    }
    if (advance) *step = st;
  }
  __syncthreads();
  /* warp w: the rows of expert w, in token order */
  uint32_t row = base[w];
  const uint32_t lt = (1u << lane) - 1u;
  for (uint32_t t0 = 0; t0 < tokens; t0 += 32) {
    const uint32_t t = t0 + lane;
    const uint32_t m = t < tokens ? smask[t] : 0u;
    const int mine = (m >> w) & 1u;
    const uint32_t b = __ballot_sync(0xffffffffu, mine);
    if (mine) {
      const uint32_t at = row + __popc(b & lt);
      pos[(size_t)t * MOE_TOPK + __popc(m & ((1u << w) - 1u))] = (int32_t)at;
      if (rowTok != NULL) rowTok[at] = (int32_t)t;
    }
    row += __popc(b);
  }
}

extern "C" cudaError_t benchMoeRoute(uint64_t* step, int advance, uint64_t seed, int rank, int nranks, uint32_t tokens,
                                     uint32_t hidden, int32_t* pos, int32_t* rowTok, size_t* sendcounts,
                                     size_t* sdispls, cudaStream_t s) {
  const size_t smem = (size_t)tokens * sizeof(uint32_t);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(routeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
  }
  routeKernel<<<1, ROUTE_THREADS, smem, s>>>(step, advance, seed, rank, nranks, tokens, hidden, pos, rowTok, sendcounts,
                                             sdispls);
  return cudaGetLastError();
}

/* ---- pack, expert, un-permute ------------------------------------------------------- */

/* Each token read once and written to its TOPK rows (16 bytes per thread). */
__global__ void packKernel(const uint4* __restrict__ tok, const int32_t* __restrict__ pos, uint4* __restrict__ send,
                           uint32_t tokens, uint32_t vecs) {
  const uint64_t n = (uint64_t)tokens * vecs;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t t = (uint32_t)(i / vecs), c = (uint32_t)(i % vecs);
    const uint4 v = __ldcs(tok + i);
#pragma unroll
    for (int j = 0; j < MOE_TOPK; j++) __stcs(send + (uint64_t)pos[(size_t)t * MOE_TOPK + j] * vecs + c, v);
  }
}

/* The grid of the element-wise kernels: 4 blocks of 256 per SM, asked once
 * (the benchmark uses one device). */
static int gridFor(void) {
  static int grid = 0;
  if (grid == 0) {
    int dev = 0, nsm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || nsm <= 0)
      nsm = 132;
    grid = nsm * 4;
  }
  return grid;
}

extern "C" cudaError_t benchMoePack(const void* tok, const int32_t* pos, void* send, uint32_t tokens, uint32_t hidden,
                                    cudaStream_t s) {
  packKernel<<<gridFor(), 256, 0, s>>>((const uint4*)tok, pos, (uint4*)send, tokens, hidden / 8);
  return cudaGetLastError();
}

/* The stand-in expert: every received element doubled, in place. The
 * number of elements is the received total on the device (recvcounts and
 * rdispls of the dispatch, written by its kernel) or `hostTotal` when
 * they are NULL; at most `cap`. */
__global__ void scaleKernel(uint4* buf, const size_t* recvcounts, const size_t* rdispls, int nranks, uint64_t hostTotal,
                            uint64_t cap) {
  uint64_t total = recvcounts != NULL ? rdispls[nranks - 1] + recvcounts[nranks - 1] : hostTotal;
  if (total > cap) total = cap;
  const uint64_t nv = total / 8;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += (uint64_t)gridDim.x * blockDim.x) {
    uint4 v = __ldcs(buf + i);
    __nv_bfloat162* h = (__nv_bfloat162*)&v;
#pragma unroll
    for (int j = 0; j < 4; j++) h[j] = __hmul2(h[j], __float2bfloat162_rn(2.0f));
    __stcs(buf + i, v);
  }
}

extern "C" cudaError_t benchMoeScale(void* buf, const size_t* recvcounts, const size_t* rdispls, int nranks,
                                     uint64_t hostTotal, uint64_t cap, cudaStream_t s) {
  scaleKernel<<<gridFor(), 256, 0, s>>>((uint4*)buf, recvcounts, rdispls, nranks, hostTotal, cap);
  return cudaGetLastError();
}

/* err[0]: mismatches; err[1]: the first one's code + 1 (its element
 * index, or a count's), for the message. */
static __device__ __forceinline__ void noteBad(unsigned long long* err, unsigned long long nbad,
                                               unsigned long long code) {
  atomicAdd(&err[0], nbad);
  atomicCAS(&err[1], 0ull, code + 1);
}

/* out[t] = sum of the token's TOPK combined rows, and each element
 * compared with 2 * TOPK * x (exact): the check of every step costs no
 * memory traffic (x is recomputed, not read). */
__global__ void unpermuteKernel(const uint4* __restrict__ comb, const int32_t* __restrict__ pos,
                                uint4* __restrict__ out, int rank, uint32_t tokens, uint32_t vecs,
                                unsigned long long* err) {
  const uint64_t n = (uint64_t)tokens * vecs;
  unsigned long long nbad = 0, first = 0;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t t = (uint32_t)(i / vecs), c = (uint32_t)(i % vecs);
    float acc[8];
#pragma unroll
    for (int u = 0; u < 8; u++) acc[u] = 0.0f;
#pragma unroll
    for (int j = 0; j < MOE_TOPK; j++) {
      uint4 v = __ldcs(comb + (uint64_t)pos[(size_t)t * MOE_TOPK + j] * vecs + c);
      const __nv_bfloat16* h = (const __nv_bfloat16*)&v;
#pragma unroll
      for (int u = 0; u < 8; u++) acc[u] += __bfloat162float(h[u]);
    }
    uint4 o;
    __nv_bfloat16* oh = (__nv_bfloat16*)&o;
#pragma unroll
    for (int u = 0; u < 8; u++) {
      oh[u] = __float2bfloat16_rn(acc[u]);
      const float want = 2.0f * MOE_TOPK * tokenValue(rank, t, c * 8 + u);
      if (acc[u] != want) {
        if (nbad++ == 0) first = i * 8 + u;
      }
    }
    __stcs(out + i, o);
  }
  if (nbad) noteBad(err, nbad, first);
}

extern "C" cudaError_t benchMoeUnpermute(const void* comb, const int32_t* pos, void* out, int rank, uint32_t tokens,
                                         uint32_t hidden, unsigned long long* err, cudaStream_t s) {
  unpermuteKernel<<<gridFor(), 256, 0, s>>>((const uint4*)comb, pos, (uint4*)out, rank, tokens, hidden / 8, err);
  return cudaGetLastError();
}

/* ---- what a dispatch delivered ------------------------------------------------------ */

/* Rank `me`'s block from rank `src` after the dispatch, before the expert:
 * peerCounts/peerDispls/peerRowTok are src's routing of this step,
 * recomputed here (benchMoeRoute with advance 0). Checks recvcounts[src]
 * (code 2^62 + src), rdispls[src] against the blocks before it (2^62 +
 * 64 + src), and every element of every row against the token it must be
 * (its element index). */
__global__ void checkDispatchKernel(const uint4* __restrict__ recv, const size_t* recvcounts, const size_t* rdispls,
                                    int me, int src, const size_t* peerCounts, const size_t* peerDispls,
                                    const int32_t* __restrict__ peerRowTok, uint32_t hidden, uint64_t capRows,
                                    unsigned long long* err) {
  const uint32_t vecs = hidden / 8;
  const uint64_t want = peerCounts[me];
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (recvcounts[src] != want) noteBad(err, 1, (1ull << 62) + (unsigned long long)src);
    const uint64_t before = src == 0 ? 0 : rdispls[src - 1] + recvcounts[src - 1];
    if (rdispls[src] != before) noteBad(err, 1, (1ull << 62) + 64 + (unsigned long long)src);
  }
  const uint64_t row0 = rdispls[src] / hidden, prow0 = peerDispls[me] / hidden;
  uint64_t rows = want / hidden;
  if (row0 >= capRows) return;
  if (rows > capRows - row0) rows = capRows - row0;
  const uint64_t n = rows * vecs;
  unsigned long long nbad = 0, first = 0;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t row = i / vecs;
    const uint32_t c = (uint32_t)(i % vecs);
    const uint32_t t = (uint32_t)peerRowTok[prow0 + row];
    uint4 v = recv[(row0 + row) * vecs + c];
    const __nv_bfloat16* h = (const __nv_bfloat16*)&v;
#pragma unroll
    for (int u = 0; u < 8; u++)
      if (__bfloat162float(h[u]) != tokenValue(src, t, c * 8 + u)) {
        if (nbad++ == 0) first = ((row0 + row) * vecs + c) * 8 + u;
      }
  }
  if (nbad) noteBad(err, nbad, first);
}

extern "C" cudaError_t benchMoeCheckDispatch(const void* recv, const size_t* recvcounts, const size_t* rdispls, int me,
                                             int src, const size_t* peerCounts, const size_t* peerDispls,
                                             const int32_t* peerRowTok, uint32_t hidden, uint64_t capRows,
                                             unsigned long long* err, cudaStream_t s) {
  checkDispatchKernel<<<gridFor(), 256, 0, s>>>((const uint4*)recv, recvcounts, rdispls, me, src, peerCounts,
                                                peerDispls, peerRowTok, hidden, capRows, err);
  return cudaGetLastError();
}
