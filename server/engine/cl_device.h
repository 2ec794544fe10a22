/*
 * cl_device.h - finding and describing an OpenCL device.
 *
 * A device spec names the device to use:
 *   NULL, "" or "auto"  the first GPU of any platform, else the first other
 *                       device (PoCL's CPU device on a machine without GPU)
 *   "gpu", "cpu"        the first device of that type
 *   "P:D"               device D of platform P (indices as `tallyd
 *                       --list-devices` prints them)
 *   anything else       the first device whose "platform / device" name
 *                       contains the text, ignoring case
 * ("host", the C backend, is handled by engine.c before OpenCL is asked.)
 *
 * Threading: any thread; OpenCL's platform and device queries are
 * thread-safe.
 */
#ifndef TALLY_CL_DEVICE_H
#define TALLY_CL_DEVICE_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "errors.h"

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    char name[256]; /* "Portable Computing Language / pthread-..." */
    cl_device_type type;
    cl_uint compute_units;
    size_t max_wg;        /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    uint64_t max_alloc;   /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    uint64_t cache_bytes; /* CL_DEVICE_GLOBAL_MEM_CACHE_SIZE */
    bool unified;         /* host and device share memory */
    bool fp64;
} eng_cl_device;

/* Opens the device `spec` names and creates a context on it. Returns
 * ENG_E_NO_DEVICE with a message when there is no OpenCL platform, no
 * device, or none that matches; *none_at_all is set when OpenCL has no
 * platform or device whatsoever (so "auto" may fall back to the host).
 * Release with eng_cl_device_close(). */
eng_err eng_cl_device_open(const char *spec, eng_cl_device *dev,
                           bool *none_at_all, char *msg, size_t msglen);

void eng_cl_device_close(eng_cl_device *dev);

/* The bytes of cache this device's own cores can count on. A CPU device
 * reports its socket's whole last-level cache, which every core of the
 * host shares (480 MiB on a 2-vCPU machine here), so for a CPU it is that
 * figure or 16 MiB a compute unit, whichever is smaller; for other
 * devices, the reported cache. Measured: BENCHMARKS.md, issues 11 and 27. */
uint64_t eng_cl_cache_share(const eng_cl_device *dev);

/* The longest single device spec. */
#define ENG_SPEC_LEN 64

/* Expands a device list into single specs for eng_cl_device_open() (or
 * "host"): comma-separated entries, each a spec as above or "all",
 * "gpu:all", "cpu:all" for every OpenCL device (of that type) as "P:D";
 * "all" without any OpenCL device is the host. Returns how many (at most
 * max), or -1 with a message when an entry is empty or too long, names no
 * device ("gpu:all" without a GPU), or there are too many. */
int eng_cl_expand(const char *spec, char (*out)[ENG_SPEC_LEN], int max,
                  char *msg, size_t msglen);

/* Prints every platform and device with its "P:D" index; returns the number
 * of devices. */
int eng_cl_list(FILE *f);

/* "CL_OUT_OF_RESOURCES" for -5, etc.; static storage. */
const char *eng_cl_strerror(cl_int err);

#endif
