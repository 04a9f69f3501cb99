// page-locking microbenchmark: where does the time of making fresh page-locked memory go?
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define HP ((size_t)2 << 20)
int main() {
  cudaFree(0);
  size_t sizes[] = {HP, (size_t)64 << 20};
  for (int si = 0; si < 2; ++si) {
    size_t b = sizes[si];
    for (int rep = 0; rep < 4; ++rep) {
      double t0 = now(); void *p; cudaHostAlloc(&p, b, cudaHostAllocPortable); double t1 = now(); cudaFreeHost(p); double t2 = now();
      printf("%3zu MiB hostalloc %.3f ms free %.3f ms\n", b >> 20, 1e3*(t1-t0), 1e3*(t2-t1));
      t0 = now(); void *q = aligned_alloc(HP, b); madvise(q, b, MADV_HUGEPAGE); cudaHostRegister(q, b, cudaHostRegisterPortable); t1 = now();
      cudaHostUnregister(q); free(q); t2 = now();
      printf("%3zu MiB register-fresh %.3f ms unreg+free %.3f ms\n", b >> 20, 1e3*(t1-t0), 1e3*(t2-t1));
      t0 = now(); q = aligned_alloc(HP, b); madvise(q, b, MADV_HUGEPAGE); memset(q, 0, b); t1 = now(); cudaHostRegister(q, b, cudaHostRegisterPortable); t2 = now();
      cudaHostUnregister(q); free(q);
      printf("%3zu MiB touch %.3f ms then register %.3f ms\n", b >> 20, 1e3*(t1-t0), 1e3*(t2-t1));
      t0 = now(); q = mmap(NULL, b, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE, -1, 0); t1 = now(); cudaHostRegister(q, b, cudaHostRegisterPortable); t2 = now();
      cudaHostUnregister(q); munmap(q, b);
      printf("%3zu MiB mmap-populate %.3f ms then register %.3f ms\n", b >> 20, 1e3*(t1-t0), 1e3*(t2-t1));
      // 8 separate 8 MiB registrations (a ring made slot by slot)
      if (b > HP) { t0 = now(); void *s[8]; for (int k = 0; k < 8; ++k) { s[k] = aligned_alloc(HP, b/8); madvise(s[k], b/8, MADV_HUGEPAGE); cudaHostRegister(s[k], b/8, cudaHostRegisterPortable);} t1 = now();
        for (int k = 0; k < 8; ++k) { cudaHostUnregister(s[k]); free(s[k]); }
        printf("%3zu MiB as 8 slots register-fresh %.3f ms (%.3f per slot)\n", b >> 20, 1e3*(t1-t0), 1e3*(t1-t0)/8); }
    }
  }
  // stream create, malloc small, free
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now(); cudaStream_t s; cudaStreamCreate(&s); double t1 = now(); void *d; cudaMalloc(&d, 131072); double t2 = now(); cudaFree(d); double t3 = now(); cudaStreamDestroy(s); double t4 = now();
    printf("streamcreate %.3f ms malloc128K %.3f ms free %.3f ms streamdestroy %.3f ms\n", 1e3*(t1-t0), 1e3*(t2-t1), 1e3*(t3-t2), 1e3*(t4-t3));
  }
  printf("THP: "); fflush(stdout); system("cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag");
  return 0;
}
