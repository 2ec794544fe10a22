/*
 * cl_device.c - platform and device enumeration through the ICD loader.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_device.h"

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

const char *eng_cl_strerror(cl_int err)
{
    switch (err) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
        return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_MAP_FAILURE: return "CL_MAP_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE_TYPE: return "CL_INVALID_DEVICE_TYPE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_HOST_PTR: return "CL_INVALID_HOST_PTR";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_PROGRAM: return "CL_INVALID_PROGRAM";
    case CL_INVALID_PROGRAM_EXECUTABLE: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL: return "CL_INVALID_KERNEL";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_DIMENSION: return "CL_INVALID_WORK_DIMENSION";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_OFFSET: return "CL_INVALID_GLOBAL_OFFSET";
    case CL_INVALID_EVENT_WAIT_LIST: return "CL_INVALID_EVENT_WAIT_LIST";
    case CL_INVALID_OPERATION: return "CL_INVALID_OPERATION";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)";
    default: return "unknown OpenCL error";
    }
}

static void describe(cl_platform_id p, cl_device_id d, char *buf, size_t len)
{
    char pname[128] = "?", dname[128] = "?";
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
    snprintf(buf, len, "%s / %s", pname, dname);
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay != '\0'; hay++) {
        size_t i = 0;
        while (i < n && hay[i] != '\0'
               && tolower((unsigned char)hay[i])
                      == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

/* Parses "P:D" into two indices. */
static bool parse_index(const char *s, unsigned long *p, unsigned long *d)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    *p = strtoul(s, &end, 10);
    if (errno != 0 || *end != ':' || !isdigit((unsigned char)end[1]))
        return false;
    *d = strtoul(end + 1, &end, 10);
    return errno == 0 && *end == '\0';
}

static eng_err fill(eng_cl_device *dev, cl_platform_id p, cl_device_id d,
                    char *msg, size_t msglen)
{
    cl_int err;
    memset(dev, 0, sizeof *dev);
    dev->platform = p;
    dev->device = d;
    describe(p, d, dev->name, sizeof dev->name);
    cl_bool unified = CL_FALSE;
    cl_ulong max_alloc = 0, cache = 0;
    cl_device_fp_config dbl = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof dev->type, &dev->type, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof dev->compute_units,
                    &dev->compute_units, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev->max_wg,
                    &dev->max_wg, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                    &max_alloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified,
                    NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache, &cache,
                    NULL);
    clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dbl, &dbl, NULL);
    dev->max_alloc = max_alloc;
    dev->cache_bytes = cache;
    dev->unified = unified == CL_TRUE;
    dev->fp64 = dbl != 0;
    if (dev->compute_units == 0)
        dev->compute_units = 1;

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                     (cl_context_properties)p, 0};
    dev->context = clCreateContext(props, 1, &d, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return eng_fail(msg, msglen, ENG_E_NO_DEVICE,
                        "cannot create an OpenCL context on %s: %s", dev->name,
                        eng_cl_strerror(err));
    return ENG_E_OK;
}

eng_err eng_cl_device_open(const char *spec, eng_cl_device *dev,
                           bool *none_at_all, char *msg, size_t msglen)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, plats, &np);
    *none_at_all = false;
    if (err != CL_SUCCESS || np == 0) {
        *none_at_all = true;
        return eng_fail(msg, msglen, ENG_E_NO_DEVICE,
                        "no OpenCL platform is installed (%s)",
                        err != CL_SUCCESS ? eng_cl_strerror(err)
                                          : "the ICD loader found none");
    }
    if (np > MAX_PLATFORMS)
        np = MAX_PLATFORMS;

    bool any = spec == NULL || spec[0] == '\0' || strcmp(spec, "auto") == 0;
    bool want_gpu = spec != NULL && strcmp(spec, "gpu") == 0;
    bool want_cpu = spec != NULL && strcmp(spec, "cpu") == 0;
    unsigned long want_p = 0, want_d = 0;
    bool by_index = !any && parse_index(spec, &want_p, &want_d);

    cl_platform_id best_p = NULL, fallback_p = NULL;
    cl_device_id best_d = NULL, fallback_d = NULL;
    unsigned total = 0;
    for (cl_uint p = 0; p < np && best_d == NULL; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd)
            != CL_SUCCESS)
            continue;
        if (nd > MAX_DEVICES)
            nd = MAX_DEVICES;
        total += nd;
        for (cl_uint d = 0; d < nd && best_d == NULL; d++) {
            cl_device_type type = 0;
            char name[256];
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            describe(plats[p], devs[d], name, sizeof name);
            bool gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
            bool cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
            bool match;
            if (any)
                match = gpu;
            else if (want_gpu)
                match = gpu;
            else if (want_cpu)
                match = cpu;
            else if (by_index)
                match = p == want_p && d == want_d;
            else
                match = contains_nocase(name, spec);
            if (match) {
                best_p = plats[p];
                best_d = devs[d];
            } else if (any && fallback_d == NULL) {
                fallback_p = plats[p];
                fallback_d = devs[d];
            }
        }
    }
    if (best_d == NULL && any) {
        best_p = fallback_p;
        best_d = fallback_d;
    }
    if (best_d == NULL) {
        *none_at_all = total == 0;
        if (total == 0)
            return eng_fail(msg, msglen, ENG_E_NO_DEVICE,
                            "the OpenCL platforms report no devices");
        return eng_fail(msg, msglen, ENG_E_NO_DEVICE,
                        "no OpenCL device matches \"%s\" (%u found; "
                        "`tallyd --list-devices` shows them)",
                        spec, total);
    }
    return fill(dev, best_p, best_d, msg, msglen);
}

/* Appends "P:D" for every device of the given type (CL_DEVICE_TYPE_ALL
 * for all) to out; returns the new count, or -1 when out is full. */
static int every_device(cl_device_type want, char (*out)[ENG_SPEC_LEN], int n,
                        int max)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS)
        return n;
    for (cl_uint p = 0; p < np && p < MAX_PLATFORMS; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], want, 0, NULL, &nd) != CL_SUCCESS)
            continue;
        cl_device_id devs[MAX_DEVICES];
        cl_uint nall = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs,
                           &nall)
            != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nall && d < MAX_DEVICES; d++) {
            cl_device_type type = 0;
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            if ((type & want) == 0)
                continue;
            if (n >= max)
                return -1;
            snprintf(out[n++], ENG_SPEC_LEN, "%u:%u", p, d);
        }
    }
    return n;
}

int eng_cl_expand(const char *spec, char (*out)[ENG_SPEC_LEN], int max,
                  char *msg, size_t msglen)
{
    const char *p = spec != NULL && spec[0] != '\0' ? spec : "auto";
    int n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char item[ENG_SPEC_LEN];
        if (len == 0 || len >= sizeof item) {
            eng_fail(msg, msglen, ENG_E_INVALID,
                     "device list \"%.80s\": an empty or overlong entry", spec);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        int before = n;
        cl_device_type type =
            strcmp(item, "all") == 0       ? CL_DEVICE_TYPE_ALL
            : strcmp(item, "gpu:all") == 0 ? CL_DEVICE_TYPE_GPU
            : strcmp(item, "cpu:all") == 0 ? CL_DEVICE_TYPE_CPU
                                           : 0;
        if (type != 0) {
            n = every_device(type, out, n, max);
            if (n == before && type == CL_DEVICE_TYPE_ALL && n < max)
                snprintf(out[n++], ENG_SPEC_LEN, "host"); /* no OpenCL */
            if (n == before) {
                eng_fail(msg, msglen, ENG_E_NO_DEVICE,
                         "\"%s\": OpenCL has no such device "
                         "(`tallyd --list-devices` shows them)",
                         item);
                return -1;
            }
        } else if (n < max) {
            snprintf(out[n++], ENG_SPEC_LEN, "%s", item);
        } else {
            n = -1;
        }
        if (n < 0) {
            eng_fail(msg, msglen, ENG_E_INVALID,
                     "device list \"%.80s\" names more than %d devices", spec,
                     max);
            return -1;
        }
        if (comma == NULL)
            return n;
        p = comma + 1;
    }
}

void eng_cl_device_close(eng_cl_device *dev)
{
    if (dev->context != NULL)
        clReleaseContext(dev->context);
    dev->context = NULL;
}

int eng_cl_list(FILE *f)
{
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    if (clGetPlatformIDs(MAX_PLATFORMS, plats, &np) != CL_SUCCESS || np == 0) {
        fprintf(f, "no OpenCL platform is installed\n");
        return 0;
    }
    if (np > MAX_PLATFORMS)
        np = MAX_PLATFORMS;
    int total = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd)
            != CL_SUCCESS)
            nd = 0;
        if (nd > MAX_DEVICES)
            nd = MAX_DEVICES;
        for (cl_uint d = 0; d < nd; d++) {
            char name[256];
            cl_device_type type = 0;
            cl_uint cus = 0;
            describe(plats[p], devs[d], name, sizeof name);
            clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus,
                            &cus, NULL);
            fprintf(f, "%u:%u  %s  (%s, %u compute units)\n", p, d, name,
                    (type & CL_DEVICE_TYPE_GPU)   ? "GPU"
                    : (type & CL_DEVICE_TYPE_CPU) ? "CPU"
                                                  : "other",
                    cus);
            total++;
        }
    }
    return total;
}

uint64_t eng_cl_cache_share(const eng_cl_device *dev)
{
    uint64_t share = (uint64_t)(dev->compute_units ? dev->compute_units : 1)
                     * ((uint64_t)16 << 20);
    if ((dev->type & CL_DEVICE_TYPE_CPU) && dev->cache_bytes > share)
        return share;
    return dev->cache_bytes;
}
