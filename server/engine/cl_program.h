/*
 * cl_program.h - the kernels of one device, built once and cached.
 *
 * kernels/scan.cl is embedded in the binary at build time and built once
 * per storage class for the device's layout; kernels/copy.cl once. Builds
 * happen on first use (or all at once by eng_engine_warmup()), never per
 * request: every later caller gets the cached cl_program.
 *
 * Threading: any thread may ask for a program; builds are serialised by the
 * cache's mutex. A cl_program may be shared across threads; the kernels made
 * from it may not (each stream creates its own).
 */
#ifndef TALLY_CL_PROGRAM_H
#define TALLY_CL_PROGRAM_H

#include <pthread.h>

#include "cl_device.h"
#include "dtype.h"

/* How the scan kernels are shaped for a device (see kernels/scan.cl). */
typedef struct {
    const char *name; /* "cpu" or "gpu" */
    unsigned wg;      /* work-group size */
    unsigned row_k;   /* elements per work-item in a row tile */
    unsigned col_w;   /* most columns per work-item */
    unsigned blk;     /* float-float flush interval */
    unsigned groups;  /* persistent work-groups (wg == 1); with wider ones
                       * the planner aims for 4 * groups tiles */
    unsigned pipe;    /* tiles in flight per rows_chained work-group */
    unsigned nt;      /* the compiler has non-temporal stores (TALLY_NT) */
    unsigned lazy;    /* testing: no inclusive prefixes (TALLY_LAZY) */
} eng_cl_layout;

/* The layout for a device from a spec: "cpu", "gpu", or NULL/""/"auto" to
 * choose by the device's type, optionally followed by comma-separated
 * overrides of the fields below ("cpu,row_k=64,col_w=16"; tests use small
 * tiles to chain many of them). Returns false for a spec it cannot parse
 * or values the kernels cannot take (row_k and col_w multiples of 8, wg a
 * power of two). wg is cut to the device's largest work-group, and on a
 * device that is not a CPU col_w to TALLY_CL_GPU_COL_W (private memory). */
#define TALLY_CL_GPU_COL_W 256
bool eng_cl_layout_for(const eng_cl_device *dev, const char *spec,
                       eng_cl_layout *out);

/* A launch's mode bits, as the scan kernels read them (passed to their
 * build as MODE_REVERSE, MODE_EXCLUSIVE and MODE_STREAM). */
#define ENG_CL_MODE_REVERSE 1u
#define ENG_CL_MODE_EXCLUSIVE 2u
#define ENG_CL_MODE_STREAM 4u

typedef struct {
    const eng_cl_device *dev;
    eng_cl_layout layout;
    pthread_mutex_t mu;
    cl_program scan[ENG_NSTORAGE + 1]; /* indexed by eng_storage */
    cl_program copy;
} eng_cl_programs;

void eng_cl_programs_init(eng_cl_programs *p, const eng_cl_device *dev,
                          const eng_cl_layout *layout);
void eng_cl_programs_free(eng_cl_programs *p);

/* The scan program for a storage class, built on first use. The program is
 * owned by the cache: do not release it. On a build failure returns
 * ENG_E_UNSUPPORTED (float64 on a device without it) or ENG_E_DEVICE,
 * with the start of the build log in msg. */
eng_err eng_cl_program_scan(eng_cl_programs *p, eng_storage st, cl_program *out,
                            char *msg, size_t msglen);

/* The copy program, likewise. */
eng_err eng_cl_program_copy(eng_cl_programs *p, cl_program *out, char *msg,
                            size_t msglen);

#endif
