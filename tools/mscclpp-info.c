/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-info: what this build of mscclpp is and what it finds here.
 *
 *   mscclpp-info                      version, build options, GPUs, network providers
 *   mscclpp-info --params             every MSCCLPP_* parameter: current value, default, help
 *   mscclpp-info --params --markdown  the same table in Markdown (README's table is this)
 *   mscclpp-info --plans [DIR]        the execution plans of DIR (default MSCCLPP_CACHE_DIR):
 *                                     what each is, or why it does not load
 *
 * Build options come from CMake as compile definitions (tools/CMakeLists.txt).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/core.h"
#include "mscclpp/plan.h"

#ifdef MSCCLPP_HAVE_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#endif

#ifndef MSCCLPP_BUILD_TYPE
#define MSCCLPP_BUILD_TYPE "unknown"
#endif
#ifndef MSCCLPP_BUILD_SANITIZE
#define MSCCLPP_BUILD_SANITIZE ""
#endif
#ifndef MSCCLPP_BUILD_CUDA_ARCH
#define MSCCLPP_BUILD_CUDA_ARCH ""
#endif
#ifndef MSCCLPP_BUILD_CUDA_VERSION
#define MSCCLPP_BUILD_CUDA_VERSION ""
#endif
#ifndef MSCCLPP_BUILD_COMPILER
#define MSCCLPP_BUILD_COMPILER "unknown"
#endif

static void usage(FILE* f) {
  fprintf(f,
          "usage: mscclpp-info [--params [--markdown] | --plans [DIR]]\n"
          "  (no option)  version, build options, GPUs and the network providers libfabric finds\n"
          "  --params     every MSCCLPP_* environment parameter: current value, default, help\n"
          "  --markdown   with --params: a Markdown table of the defaults (README's table)\n"
          "  --plans      the execution plans (*.json) of DIR, default MSCCLPP_CACHE_DIR: what each is, or\n"
          "               why it does not load (exit status 1 when one does not)\n");
}

/* ---- --params ---------------------------------------------------------------- */

/* Write s with '|' escaped, for a Markdown table cell. */
static void markdownCell(const char* s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

static int printParams(int markdown) {
  int n = mscclppParamCount();
  if (markdown) {
    printf("| Variable | Type | Default | Meaning |\n");
    printf("| --- | --- | --- | --- |\n");
  }
  for (int i = 0; i < n; i++) {
    mscclppParamInfo info;
    if (mscclppParamGetInfo(i, &info) != mscclppSuccess) {
      if (!mscclppLastErrorShown()) /* else the library's WARN line said it */
        fprintf(stderr, "mscclpp-info: cannot read parameter %d: %s\n", i, mscclppGetLastError());
      return 1;
    }
    if (markdown) {
      printf("| `%s` | %s | ", info.name, info.type);
      if (info.defaultValue[0] == '\0') {
        printf("(empty)");
      } else {
        printf("`");
        markdownCell(info.defaultValue);
        printf("`");
      }
      printf(" | ");
      markdownCell(info.help);
      printf(" |\n");
    } else {
      const char* env = getenv(info.name);
      const char* value = env != NULL ? env : info.defaultValue;
      int set = env != NULL;
      printf("%s=%s%s  (%s, default \"%s\")\n    %s\n", info.name, value, set ? "" : "  [default]", info.type,
             info.defaultValue, info.help);
    }
  }
  return 0;
}

/* ---- network providers --------------------------------------------------------- */

#ifdef MSCCLPP_HAVE_LIBFABRIC
static const char* provName(const struct fi_info* i) {
  return i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
}
static const char* fabricName(const struct fi_info* i) {
  return i->fabric_attr && i->fabric_attr->name ? i->fabric_attr->name : "?";
}
static const char* domainName(const struct fi_info* i) {
  return i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "?";
}

/* 1 when an entry before `i` in `all` has the same provider (and domain,
 * and fabric, as asked). */
static int seenBefore(const struct fi_info* all, const struct fi_info* i, int byDomain, int byFabric) {
  for (const struct fi_info* j = all; j != i; j = j->next)
    if (strcmp(provName(i), provName(j)) == 0 && (!byDomain || strcmp(domainName(i), domainName(j)) == 0) &&
        (!byFabric || strcmp(fabricName(i), fabricName(j)) == 0))
      return 1;
  return 0;
}

static void append(char* buf, size_t size, const char* text) {
  size_t used = strlen(buf);
  if (used + 1 < size) snprintf(buf + used, size - used, "%s", text);
}

/* One line per provider: endpoint types, whether it offers RMA (what the
 * network transport needs), and its domains with their fabrics. */
static void printProviders(void) {
  uint32_t v = fi_version();
  printf("network (libfabric %u.%u, built against %d.%d):\n", FI_MAJOR(v), FI_MINOR(v), FI_MAJOR_VERSION,
         FI_MINOR_VERSION);
  struct fi_info* all = NULL;
  int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, NULL, &all);
  if (ret != 0) {
    printf("  fi_getinfo failed: %s (%d)\n", fi_strerror(-ret), ret);
    return;
  }
  if (all == NULL) printf("  (no provider)\n");
  else printf("  %-14s %-14s %-4s %s\n", "provider", "endpoints", "RMA", "domains (fabrics)");
  for (struct fi_info* i = all; i != NULL; i = i->next) {
    if (seenBefore(all, i, 0, 0)) continue;
    int rma = 0, types[4] = {0, 0, 0, 0};
    char domains[1024] = "";
    for (struct fi_info* j = i; j != NULL; j = j->next) {
      if (strcmp(provName(i), provName(j)) != 0) continue;
      if ((j->caps & FI_RMA) != 0) rma = 1;
      enum fi_ep_type t = j->ep_attr ? j->ep_attr->type : FI_EP_UNSPEC;
      types[t == FI_EP_MSG ? 0 : t == FI_EP_DGRAM ? 1 : t == FI_EP_RDM ? 2 : 3] = 1;
      if (seenBefore(all, j, 1, 0)) continue; /* this domain is listed already */
      append(domains, sizeof(domains), domains[0] ? ", " : "");
      append(domains, sizeof(domains), domainName(j));
      append(domains, sizeof(domains), " (");
      int first = 1;
      for (struct fi_info* k = j; k != NULL; k = k->next) {
        if (strcmp(provName(k), provName(j)) != 0 || strcmp(domainName(k), domainName(j)) != 0 ||
            seenBefore(all, k, 1, 1))
          continue;
        append(domains, sizeof(domains), first ? "" : " ");
        append(domains, sizeof(domains), fabricName(k));
        first = 0;
      }
      append(domains, sizeof(domains), ")");
    }
    char eps[32] = "";
    static const char* const typeNames[4] = {"msg", "dgram", "rdm", "other"};
    for (int t = 0; t < 4; t++)
      if (types[t]) {
        append(eps, sizeof(eps), eps[0] ? "," : "");
        append(eps, sizeof(eps), typeNames[t]);
      }
    printf("  %-14s %-14s %-4s %s\n", provName(i), eps, rma ? "yes" : "no", domains);
  }
  fi_freeinfo(all);
}
#else
static void printProviders(void) { printf("network: libfabric not built in (install libfabric-dev and rebuild)\n"); }
#endif

/* What the network transport itself (libfabric loaded with dlopen, as the
 * library does) would open with this environment's MSCCLPP_NET_PROVIDER and
 * MSCCLPP_NET_IFNAME. */
static void printNetChoice(void) {
  if (mscclppParamsCheck() != mscclppSuccess) {
    printf("network transport: the parameters do not parse: %s\n", mscclppGetLastError());
    return;
  }
  const char* provider = getenv("MSCCLPP_NET_PROVIDER");
  const char* ifname = getenv("MSCCLPP_NET_IFNAME");
  char text[1024];
  mscclppResult_t res = mscclppGetNetDescription(text, sizeof(text));
  printf("network transport (MSCCLPP_NET_PROVIDER='%s', MSCCLPP_NET_IFNAME='%s'): %s%s\n", provider ? provider : "",
         ifname ? ifname : "", res == mscclppSuccess ? "would use " : "unavailable: ", text);
}

/* ---- the default report --------------------------------------------------------- */

static void printGpus(void) {
  int n = 0;
  if (mscclppGetDeviceCount(&n) != mscclppSuccess) n = 0;
#ifdef MSCCLPP_HAVE_CUDA
  printf("GPUs: %d\n", n);
  if (n == 0) printf("  (no usable CUDA device or driver; the host backend is used)\n");
#else
  printf("GPUs: none (built without CUDA)\n");
#endif
  for (int d = 0; d < n; d++) {
    char desc[512];
    if (mscclppGetDeviceDescription(d, desc, sizeof(desc)) == mscclppSuccess)
      printf("  %d: %s\n", d, desc);
    else
      printf("  %d: cannot describe: %s\n", d, mscclppGetLastError());
  }
}

static void printReport(void) {
  int version = 0;
  mscclppGetVersion(&version);
  printf("mscclpp %d.%d.%d (MSCCLPP_VERSION %d)\n", version / 10000, version / 100 % 100, version % 100, version);
  printf("build: %s, compiler %s, sanitizers %s\n", MSCCLPP_BUILD_TYPE, MSCCLPP_BUILD_COMPILER,
         MSCCLPP_BUILD_SANITIZE[0] ? MSCCLPP_BUILD_SANITIZE : "none");
#ifdef MSCCLPP_HAVE_CUDA
  printf("CUDA: on (CUDA %s, architectures %s)\n", MSCCLPP_BUILD_CUDA_VERSION, MSCCLPP_BUILD_CUDA_ARCH);
#else
  printf("CUDA: off (host backend only)\n");
#endif
#ifdef MSCCLPP_HAVE_LIBFABRIC
  printf("libfabric: on\n");
#else
  printf("libfabric: off\n");
#endif
  printGpus();
  printProviders();
  printNetChoice();
}

/* ---- --plans ------------------------------------------------------------------ */

static int byName(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

/* The plans of dir, one line each. 0: all load; 1: one does not; 2: no directory. */
static int printPlans(const char* dir, const char* from) {
  DIR* d = opendir(dir);
  if (d == NULL) {
    fprintf(stderr, "mscclpp-info: cannot read directory %s (%s): %s\n", dir, from, strerror(errno));
    return 2;
  }
  char* names[4096];
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL && n < 4096;) {
    size_t len = strlen(e->d_name);
    if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0 && e->d_name[0] != '.') names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof(char*), byName);
  printf("execution plans in %s (%s): %d\n", dir, from, n);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    mscclppPlan_t plan = NULL;
    mscclppPlanInfo info = MSCCLPP_PLAN_INFO_INITIALIZER;
    if (mscclppPlanLoadFile(path, &plan) != mscclppSuccess || mscclppPlanGetInfo(plan, &info) != mscclppSuccess) {
      const char* why = mscclppGetLastError();
      const char* cut = strstr(why, path); /* the message starts "execution plan <path>: " */
      if (cut != NULL && strncmp(cut + strlen(path), ": ", 2) == 0) why = cut + strlen(path) + 2;
      printf("  %-32s INVALID: %s\n", names[i], why);
      bad++;
    } else {
      printf("  %-32s ok: %s, %s for %d ranks, %s, %s, %d thread blocks x %d threads, messages of %llu to %llu "
             "bytes\n",
             names[i], info.name, info.collective, info.nranks, info.protocol,
             info.inplace ? "in-place" : "out-of-place", info.threadblocks, info.threadsPerBlock,
             (unsigned long long)info.minMessageBytes, (unsigned long long)info.maxMessageBytes);
    }
    if (plan != NULL) mscclppPlanDestroy(plan);
    free(names[i]);
  }
  if (bad) printf("%d of %d plans do not load\n", bad, n);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  int params = 0, markdown = 0, plans = 0;
  const char* planDir = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--plans") == 0) {
      plans = 1;
      if (i + 1 < argc && argv[i + 1][0] != '-') planDir = argv[++i];
    } else if (strcmp(argv[i], "--params") == 0) {
      params = 1;
    } else if (strcmp(argv[i], "--markdown") == 0) {
      markdown = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "mscclpp-info: unknown option \"%s\"\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (markdown && !params) {
    fprintf(stderr, "mscclpp-info: --markdown goes with --params\n");
    return 2;
  }
  if (params) return printParams(markdown);
  if (plans) {
    /* each plan's line says why it does not load: the library's own warning
     * would say it again (unless the user asked for its log) */
    setenv("MSCCLPP_DEBUG", "NONE", 0);
    if (planDir != NULL) return printPlans(planDir, "given");
    const char* cache = getenv("MSCCLPP_CACHE_DIR");
    if (cache == NULL || cache[0] == '\0') {
      fprintf(stderr, "mscclpp-info: --plans: MSCCLPP_CACHE_DIR is not set; name a directory (--plans DIR)\n");
      return 2;
    }
    return printPlans(cache, "MSCCLPP_CACHE_DIR");
  }
  printReport();
  return 0;
}
