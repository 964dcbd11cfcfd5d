/* A timing driver for CPFloat (https://github.com/north-numerical-computing/cpfloat), written
 * for benchmarks/bench_cpu.py.  It is ours, not CPFloat's: bench_cpu.py compiles it at benchmark
 * time against a CPFloat checkout given by the user (nothing of CPFloat is in this repository).
 *
 *   cpfloat_driver FILE N FORMAT ROUND REPEATS
 *
 * reads N doubles from FILE, rounds them REPEATS times with cpfloat() (FORMAT a CPFloat format
 * name such as "h", ROUND its rounding code: 1 nearest even, 4 towards zero, 5 stochastic) into
 * a preallocated array, and prints the best time in seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cpfloat_binary64.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s FILE N FORMAT ROUND REPEATS\n", argv[0]);
    return 2;
  }
  size_t n = strtoull(argv[2], NULL, 10);
  int repeats = atoi(argv[5]);
  double *x = malloc(n * sizeof(double)), *y = malloc(n * sizeof(double));
  FILE *f = fopen(argv[1], "rb");
  if (!x || !y || !f || fread(x, sizeof(double), n, f) != n) {
    fprintf(stderr, "cannot read %zu doubles from %s\n", n, argv[1]);
    return 1;
  }
  fclose(f);
  optstruct *opts = init_optstruct();
  strncpy(opts->format, argv[3], sizeof(opts->format) - 1);
  cpfloat_populate_optstruct_from_format(opts);
  opts->round = atoi(argv[4]);
  if (cpfloat_validate_optstruct(opts) != 0) {
    fprintf(stderr, "invalid CPFloat options\n");
    return 1;
  }
  double best = 1e300;
  for (int r = 0; r < repeats; r++) {
    double t0 = now();
    cpfloat(y, x, n, opts);
    double t = now() - t0;
    if (t < best) best = t;
  }
  printf("%.9f\n", best);
  free_optstruct(opts);
  free(x);
  free(y);
  return 0;
}
