/*
 * GPU collectives, checked exactly, in real processes sharing the GPU(s):
 *   mscclpp-run -n N --mps -- coll_gpu_worker [maxBytes] [graph[=REPLAYS]]
 * Every collective x type x operator x placement (out of place, in place,
 * odd element offsets) x count (1, primes, ... up to maxBytes), output
 * poisoned before each call, inputs fresh per call. Inputs are small
 * integers chosen so that the exact result is representable in every type
 * (sum: 0..2, or 0..1 for fp8 e5m2; prod: 1..2; max/min: 0..6; avg: the same
 * value on every rank for floating types), so results compare bitwise.
 * "graph": also capture each collective once in a CUDA graph and replay it
 * 1000 times (graph=REPLAYS: that many), checking after the last replay
 * (inputs unchanged). The GPU collectives over port channels run the same
 * checks: tests/collgpu/run_port.sh.
 * Exit 77 without a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mscclpp/coll.h"
#include "mscclpp/comm.h"

#define CUDA_OK(x)                                                                             \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static int rank_, nranks_;
static int replays_ = 1000;

/* An exact small non-negative integer in the bits of `type`. */
static void encode(mscclppDataType_t type, uint64_t v, uint8_t* out) {
  int M = 0, bias = 0, bytes = (int)mscclppDataTypeSize(type);
  switch (type) {
    case mscclppFloat32: {
      float f = (float)v;
      memcpy(out, &f, 4);
      return;
    }
    case mscclppFloat64: {
      double d = (double)v;
      memcpy(out, &d, 8);
      return;
    }
    case mscclppFloat16: M = 10, bias = 15; break;
    case mscclppBfloat16: M = 7, bias = 127; break;
    case mscclppFloat8e4m3: M = 3, bias = 7; break;
    case mscclppFloat8e5m2: M = 2, bias = 15; break;
    default:
      memcpy(out, &v, (size_t)bytes); /* little-endian truncation: wrap-around */
      return;
  }
  uint64_t bits = 0;
  if (v != 0) {
    int e = 63 - __builtin_clzll(v);
    uint64_t mant = e <= M ? (v - (1ull << e)) << (M - e) : (v >> (e - M)) - (1ull << M);
    bits = ((uint64_t)(e + bias) << M) | mant;
  }
  memcpy(out, &bits, (size_t)bytes);
}

static int isFloat(mscclppDataType_t t) {
  return t == mscclppFloat16 || t == mscclppFloat32 || t == mscclppFloat64 || t == mscclppBfloat16 ||
         t == mscclppFloat8e4m3 || t == mscclppFloat8e5m2;
}

static uint64_t value(mscclppDataType_t t, mscclppRedOp_t op, int r, uint64_t i) {
  switch (op) {
    case mscclppProd: return 1 + (i + (uint64_t)r) % 2;
    case mscclppMax:
    case mscclppMin: return (i * 5 + (uint64_t)r * 3) % 7;
    case mscclppAvg: return isFloat(t) ? i % 3 : (i + (uint64_t)r) % 3;
    default: return t == mscclppFloat8e5m2 ? (i + (uint64_t)r) % 2 : (i + 2 * (uint64_t)r) % 3;
  }
}

static uint64_t reduced(mscclppDataType_t t, mscclppRedOp_t op, uint64_t i) {
  uint64_t acc = value(t, op, 0, i);
  for (int r = 1; r < nranks_; r++) {
    uint64_t v = value(t, op, r, i);
    switch (op) {
      case mscclppProd: acc *= v; break;
      case mscclppMax: acc = v > acc ? v : acc; break;
      case mscclppMin: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op == mscclppAvg) acc /= (uint64_t)nranks_;
  return acc;
}

static const int kinds = 7; /* allreduce allgather reducescatter broadcast reduce alltoall sendrecv */
static const char* kindName[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
                                 "sendrecv"};

/* One checked call; placement 0 out of place, 1 in place, 2 odd offsets. */
static int runOne(mscclppComm_t comm, cudaStream_t s, int kind, mscclppDataType_t t, mscclppRedOp_t op, size_t count,
                  int placement, int graph) {
  const size_t ts = mscclppDataTypeSize(t), k = (size_t)nranks_;
  size_t inElems = count, outElems = count;
  if (kind == 1) outElems *= k;
  if (kind == 2 || kind == 5) inElems *= k;
  if (kind == 5) outElems *= k;
  const int root = nranks_ - 1;
  size_t pad = placement == 2 ? 3 : 0;
  size_t maxElems = inElems > outElems ? inElems : outElems; /* in place, one buffer holds both */
  size_t allocIn = (inElems + pad + 1) * ts, allocOut = (maxElems + pad + 1) * ts;
  uint8_t *din = NULL, *dout = NULL;
  CUDA_OK(cudaMalloc((void**)&din, allocIn));
  CUDA_OK(cudaMalloc((void**)&dout, allocOut));
  uint8_t* hin = malloc(inElems * ts);
  uint8_t* hexp = malloc(outElems * ts);
  uint8_t* hout = malloc(outElems * ts);
  for (size_t i = 0; i < inElems; i++) encode(t, value(t, op, rank_, i), hin + i * ts);
  /* expected output */
  int checkOut = 1;
  for (size_t i = 0; i < outElems; i++) {
    uint64_t v = 0;
    switch (kind) {
      case 0: case 4: v = reduced(t, op, i); break;
      case 1: v = value(t, op, (int)(i / count), i % count); break;
      case 2: v = reduced(t, op, (size_t)rank_ * count + i); break;
      case 3: v = value(t, op, root, i); break;
      case 5: v = value(t, op, (int)(i / count), (size_t)rank_ * count + i % count); break;
      case 6: v = value(t, op, (rank_ - 1 + nranks_) % nranks_, i); break;
    }
    encode(t, v, hexp + i * ts);
  }
  if (kind == 4 && rank_ != root) checkOut = 0;
  /* everything on the collective's stream: a non-blocking stream does not
   * wait for the legacy stream's work */
  CUDA_OK(cudaMemsetAsync(dout, 0xA5, allocOut, s));
  CUDA_OK(cudaMemsetAsync(din, 0x5A, allocIn, s));
  uint8_t* send = din + (placement == 2 ? ts : 0);
  uint8_t* recv = dout + (placement == 2 ? 3 * ts : 0);
  if (placement == 1) { /* in place */
    switch (kind) {
      case 1: send = recv + (size_t)rank_ * count * ts; break;
      case 2: send = recv; recv = send + (size_t)rank_ * count * ts; break;
      default: send = recv; break;
    }
  }
  CUDA_OK(cudaMemcpyAsync(send, hin, inElems * ts, cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t res = mscclppSuccess;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  if (graph) CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  switch (kind) {
    case 0: res = mscclppAllReduce(send, recv, count, t, op, comm, s); break;
    case 1: res = mscclppAllGather(send, recv, count, t, comm, s); break;
    case 2: res = mscclppReduceScatter(send, recv, count, t, op, comm, s); break;
    case 3: res = mscclppBroadcast(send, recv, count, t, root, comm, s); break;
    case 4: res = mscclppReduce(send, recv, count, t, op, root, comm, s); break;
    case 5: res = mscclppAllToAll(send, recv, count, t, comm, s); break;
    case 6:
      mscclppGroupStart();
      mscclppSend(send, count, t, (rank_ + 1) % nranks_, comm, s);
      mscclppRecv(recv, count, t, (rank_ - 1 + nranks_) % nranks_, comm, s);
      res = mscclppGroupEnd();
      break;
  }
  if (graph) {
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < replays_ && res == mscclppSuccess; i++) CUDA_OK(cudaGraphLaunch(ge, s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  mscclppResult_t async = mscclppSuccess;
  mscclppCommGetAsyncError(comm, &async);
  int bad = 0;
  if (res != mscclppSuccess || async != mscclppSuccess) {
    fprintf(stderr, "rank %d: %s %s %s count %zu placement %d: result %d async %d: %s\n", rank_, kindName[kind],
            mscclppDataTypeName(t), mscclppRedOpName(op), count, placement, (int)res, (int)async,
            mscclppGetLastError());
    bad = 1;
  } else if (checkOut) {
    CUDA_OK(cudaMemcpy(hout, recv, outElems * ts, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < outElems && !bad; i++)
      if (memcmp(hout + i * ts, hexp + i * ts, ts) != 0) {
        uint64_t got = 0, want = 0;
        memcpy(&got, hout + i * ts, ts);
        memcpy(&want, hexp + i * ts, ts);
        fprintf(stderr, "rank %d: %s %s %s count %zu placement %d graph %d: element %zu is 0x%llx, expected 0x%llx\n",
                rank_, kindName[kind], mscclppDataTypeName(t), mscclppRedOpName(op), count, placement, graph, i,
                (unsigned long long)got, (unsigned long long)want);
        bad = 1;
      }
  }
  if (ge != NULL) cudaGraphExecDestroy(ge);
  if (g != NULL) cudaGraphDestroy(g);
  free(hin);
  free(hexp);
  free(hout);
  /* peers may still map these: free only after everyone is done with them */
  mscclppBootstrapBarrier(comm);
  CUDA_OK(cudaFree(din));
  CUDA_OK(cudaFree(dout));
  return bad;
}

int main(int argc, char** argv) {
  size_t maxBytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (16u << 20);
  int graph = argc > 2 && strncmp(argv[2], "graph", 5) == 0;
  if (graph && argv[2][5] == '=') replays_ = atoi(argv[2] + 6);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) harnessSkip("no GPU");
  const char* lr = getenv("MSCCLPP_LOCAL_RANK");
  CUDA_OK(cudaSetDevice((lr ? atoi(lr) : 0) % ndev));
  mscclppComm_t comm;
  CHECK_RES(mscclppCommInitFromEnv(&comm), mscclppSuccess);
  mscclppCommRank(comm, &rank_);
  mscclppCommSize(comm, &nranks_);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t counts[] = {1, 3, 17, 1031, 65537, 262147, (size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20};
  int failures = 0, calls = 0;
  for (int kind = 0; kind < kinds; kind++) {
    int reduces = kind == 0 || kind == 2 || kind == 4;
    for (int t = 0; t < mscclppNumTypes; t++) {
      for (int op = 0; op < (reduces ? mscclppNumOps : 1); op++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
          size_t count = counts[c];
          size_t ts = mscclppDataTypeSize((mscclppDataType_t)t);
          size_t scale = (kind == 1 || kind == 2 || kind == 5) ? (size_t)nranks_ : 1;
          if (count * ts * scale > maxBytes) continue;
          /* large counts: float32 and int8 with sum and max only, to keep the run short */
          if (count > 65537 && ((t != mscclppFloat32 && t != mscclppInt8) || (op != mscclppSum && op != mscclppMax)))
            continue;
          for (int placement = 0; placement < 3; placement++) {
            if (placement == 1 && (kind == 5 || kind == 6)) continue;
            failures += runOne(comm, s, kind, (mscclppDataType_t)t, (mscclppRedOp_t)op, count, placement, 0);
            calls++;
          }
        }
      }
    }
  }
  if (graph)
    for (int kind = 0; kind < kinds; kind++) {
      failures += runOne(comm, s, kind, mscclppFloat32, mscclppSum, 1031, 0, 1);
      failures += runOne(comm, s, kind, mscclppBfloat16, mscclppSum, (size_t)1 << 20, 0, 1);
      calls += 2;
    }
  int localN = 0;
  mscclppCommLocalSize(comm, &localN);
  printf("rank %d (%d of %d ranks on its host): %d checked calls, %d wrong\n", rank_, localN, nranks_, calls,
         failures);
  CHECK(failures == 0);
  cudaStreamDestroy(s);
  CHECK_RES(mscclppCommDestroy(comm), mscclppSuccess);
  harnessFinish(); /* (no RUN here: it counts CHECKs only inside RUN) */
  return harnessFailures_ ? 1 : 0;
}
