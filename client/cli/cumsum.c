/*
 * cumsum.c - `tally cumsum IN OUT`: one tensor from a file through the
 * service into another file.
 *
 * .npy and raw tensors go through tally_cumsum() (binary, split into
 * chunks over the servers when large), and raw buffers with --strides or
 * --out-strides through tally_cumsum_strided(); a JSON tensor is sent as it is
 * to POST /v1/cumsum with the command line's parameters added as members, and
 * the server's JSON answer is written out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

static const char help[] =
    "usage: tally cumsum [options] IN OUT\n"
    "\n"
    "Computes the cumulative sum of the tensor in IN along an axis and writes\n"
    "it to OUT, with the same dtype and shape. IN and OUT are files, or - for\n"
    "standard input and output. OUT is replaced only when all went well.\n"
    "\n"
    "  --axis N             the axis to sum along; negative counts from the\n"
    "                       back (-1 is the last) (default 0)\n"
    "  --exclusive          each element gets the sum of those before it\n"
    "  --reverse            sum from the end of the axis to its start\n"
    "  --direction D        increasing or decreasing (decreasing = --reverse)\n"
    "  --shm                when the server is on this machine, pass the\n"
    "                       tensor through POSIX shared memory instead of\n"
    "                       the socket (the server needs\n"
    "                       --allow-shared-memory; otherwise, or for a\n"
    "                       remote server, the socket, with a note)\n"
    "  --sequence-id ID     IN is one chunk of a sequence: the server keeps\n"
    "                       the running sum across calls, so that the\n"
    "                       chunks' answers make the whole tensor's sum\n"
    "                       (npy and raw; an id of digits names a number)\n"
    "  --sequence-start     the sequence's first chunk\n"
    "  --sequence-end       its last chunk: the server frees the sequence\n"
    "  --sequence-chunk N   the chunk's number, 1 for the start and one more\n"
    "                       for each after it: the server adds each chunk\n"
    "                       once, in number order, and answers a chunk sent\n"
    "                       again with its first answer (retry with the\n"
    "                       same N after a timeout or a busy answer)\n"
    "  --shared-state       the --url servers share their sequences' state\n"
    "                       (tallyd --state-store): a chunk may go to any of\n"
    "                       them, and fails over to the next; without it, a\n"
    "                       chunk goes only to the server its id hashes to,\n"
    "                       and a refused connection exits 3 (run the same\n"
    "                       chunk again: a failed run's chunk is the only\n"
    "                       one its sequence may send next)\n"
    "  --format F           npy, json or raw; by default json when IN ends in\n"
    "                       .json, else npy\n"
    "  --dtype NAME         raw: the element type (float16 bfloat16 float32\n"
    "                       float64 int8..int64 uint8..uint64); npy: bfloat16\n"
    "                       reads a 2-byte array as bfloat16\n"
    "  --shape D0,D1,...    raw: the shape, such as 3,4\n"
    "  --strides S0,S1,...  raw: IN is a buffer laid out as DirectML's\n"
    "                       buffer tensors are: element (i0, i1, ...) lies at\n"
    "                       element i0*S0 + i1*S1 + ... of the file (0\n"
    "                       repeats one element along a dimension)\n"
    "  --out-strides S0,... raw: lay OUT out with these strides (default\n"
    "                       packed); bytes that no element addresses are 0\n"
    "\n"
    "Server options:\n"
    "  --url URL            a server (repeat for several: large tensors are\n"
    "                       split across them) (default $TALLY_URL, else\n"
    "                       http://127.0.0.1:8080)\n"
    "  --timeout-ms MS      limit on each request (default none)\n"
    "  --connect-timeout-ms MS   limit on connecting (default 10000)\n"
    "  --retries N          retries after 503s and refused connections (4)\n"
    "  --chunk-bytes N      split tensors above N bytes (default 64 MiB; 0\n"
    "                       never splits)\n"
    "  --connections N      requests in flight at once (default 8)\n"
    "  --token T            send Authorization: Bearer T (default\n"
    "                       $TALLY_TOKEN, which stays out of `ps`)\n"
    "  --cacert FILE        verify https:// servers against the CA\n"
    "                       certificates in FILE (PEM), not the system's\n"
    "  --insecure           accept any certificate (tests only)\n"
    "  --verbose            print libcurl's trace of each request\n"
    "\n"
    "Formats: .npy as NumPy writes it (any byte order, C or Fortran order;\n"
    "the output is little-endian, C order). JSON as POST /v1/cumsum takes\n"
    "it: {\"dtype\": \"int32\", \"shape\": [2, 3], \"data\": [...]}. Raw: the\n"
    "bare little-endian elements, with --dtype and --shape.\n"
    "\n"
    "Examples:\n"
    "  tally cumsum --axis 1 x.npy y.npy\n"
    "  tally cumsum --exclusive --reverse - - < x.npy > y.npy\n"
    "  tally cumsum --sequence-id meter-7 --sequence-start day1.npy y1.npy\n"
    "  tally cumsum --sequence-id meter-7 --sequence-end day2.npy y2.npy\n"
    "  tally cumsum --sequence-id meter-8 --sequence-chunk 1 --sequence-start \\\n"
    "      day1.npy y1.npy\n"
    "  tally cumsum --format raw --dtype int32 --shape 2,3 x.bin y.bin\n"
    "  tally cumsum --format raw --dtype float32 --shape 2,3 --strides 1,2 \\\n"
    "      --out-strides 1,2 --axis 1 colmajor.bin out.bin\n";

/* The JSON body with the command line's members inserted after its '{'. */
static char *json_with_params(const char *cmd, const char *text, size_t len,
                              const char *members, size_t *out_len)
{
    const char *p = text;
    while (p < text + len
           && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    if (p == text + len || *p != '{') {
        cli_say(cmd, "the JSON input must be an object such as {\"dtype\": "
                     "\"int32\", \"shape\": [3], \"data\": [1, 2, 3]}");
        return NULL;
    }
    size_t head = (size_t)(p + 1 - text), mlen = strlen(members);
    char *body = malloc(len + mlen + 1);
    if (body == NULL) {
        cli_say(cmd, "out of memory");
        return NULL;
    }
    memcpy(body, text, head);
    memcpy(body + head, members, mlen);
    memcpy(body + head + mlen, text + head, len - head);
    body[len + mlen] = '\0';
    *out_len = len + mlen;
    return body;
}

static int run_json(const char *cmd, tally_client *c, const char *in,
                    const char *out, bool axis_given, long axis, bool exclusive,
                    bool reverse)
{
    char *text;
    size_t len;
    if (!cli_read_file(cmd, in, &text, &len))
        return EXIT_FILE;
    /* only what the command line says: the document may say the rest */
    char members[128];
    size_t m = 0;
    members[0] = '\0';
    if (axis_given)
        m += (size_t)snprintf(members + m, sizeof members - m,
                              "\"axis\": %ld, ", axis);
    if (exclusive)
        m += (size_t)snprintf(members + m, sizeof members - m,
                              "\"exclusive\": true, ");
    if (reverse)
        m += (size_t)snprintf(members + m, sizeof members - m,
                              "\"reverse\": true, ");
    /* a trailing ", " before an empty object would be invalid JSON; the
     * server rejects an object without dtype anyway, with a clear message,
     * so only the common case needs care: drop the comma when the object
     * is empty */
    const char *q = strchr(text, '{');
    if (m > 0 && q != NULL) {
        q++;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
            q++;
        if (*q == '}')
            members[m - 2] = '\0';
    }
    size_t blen;
    char *body = json_with_params(cmd, text, len, members, &blen);
    free(text);
    if (body == NULL)
        return EXIT_USAGE;
    char *resp;
    size_t rlen;
    tally_code code = tally_http(c, "POST", "/v1/cumsum", "application/json",
                                 body, blen, &resp, &rlen);
    free(body);
    if (code != TALLYE_OK)
        return cli_fail(cmd, code, tally_last_message(c));
    bool nl = rlen == 0 || resp[rlen - 1] != '\n';
    if (nl)
        resp[rlen] = '\n'; /* the library leaves room for a NUL there */
    bool ok = cli_write_file(cmd, out, resp, rlen + nl);
    tally_free(resp);
    return ok ? EXIT_OK : EXIT_FILE;
}

/* Raw buffers with strides: tally_cumsum_strided(). OUT gets the whole
 * output buffer (DMLCalcBufferTensorSize bytes). */
static int run_strided(const char *cmd, tally_client *c, const char *in,
                       const char *out, const char *dtype_name,
                       const char *shape_text, const char *strides_text,
                       const char *out_strides_text, long axis, unsigned flags)
{
    int t = tally_dt_parse(dtype_name);
    if (dtype_name == NULL || shape_text == NULL || t < 0) {
        cli_say(cmd, "--strides and --out-strides need --format raw with a "
                     "valid --dtype and a --shape");
        return EXIT_USAGE;
    }
    int rank, nis = 0, nos = 0;
    int64_t shape[TALLY_MAX_RANK], is[TALLY_MAX_RANK], os[TALLY_MAX_RANK];
    uint64_t sizes[TALLY_MAX_RANK], ius[TALLY_MAX_RANK], ous[TALLY_MAX_RANK];
    if (!cli_parse_shape(cmd, shape_text, &rank, shape)
        || (strides_text != NULL
            && !cli_parse_sizes(cmd, "--strides", strides_text, &nis, is))
        || (out_strides_text != NULL
            && !cli_parse_sizes(cmd, "--out-strides", out_strides_text, &nos,
                                os)))
        return EXIT_USAGE;
    if ((strides_text != NULL && nis != rank)
        || (out_strides_text != NULL && nos != rank)) {
        cli_say(cmd,
                "--strides and --out-strides need one number per "
                "dimension of --shape (%d)",
                rank);
        return EXIT_USAGE;
    }
    for (int k = 0; k < rank; k++) {
        sizes[k] = (uint64_t)shape[k];
        ius[k] = strides_text != NULL ? (uint64_t)is[k] : 0;
        ous[k] = out_strides_text != NULL ? (uint64_t)os[k] : 0;
    }
    tally_tensor_desc id = {(tally_dt)t, rank, sizes,
                            strides_text != NULL ? ius : NULL, 0};
    tally_tensor_desc od = {(tally_dt)t, rank, sizes,
                            out_strides_text != NULL ? ous : NULL, 0};
    uint64_t in_min, out_bytes;
    if (tally_buffer_bytes(&id, &in_min) != TALLYE_OK
        || tally_buffer_bytes(&od, &out_bytes) != TALLYE_OK
        || out_bytes > SIZE_MAX / 2) {
        cli_say(cmd, "--shape and the strides describe no buffer (a size "
                     "of 0, or more than 2^64 bytes)");
        return EXIT_USAGE;
    }
    char *data;
    size_t bytes;
    if (!cli_read_file(cmd, in, &data, &bytes))
        return EXIT_FILE;
    /* a file of exactly the addressed bytes is sent as it is; a longer one
     * is the whole buffer (TotalTensorSizeInBytes) */
    uint64_t exact = 0;
    for (int k = 0; k < rank; k++)
        exact += (sizes[k] - 1) * (strides_text != NULL ? ius[k] : 0);
    if (strides_text == NULL) {
        exact = 1;
        for (int k = 0; k < rank; k++)
            exact *= sizes[k];
        exact -= 1;
    }
    exact = (exact + 1) * tally_dt_size((tally_dt)t);
    if (bytes < exact || (bytes > exact && bytes < in_min)) {
        cli_say(cmd,
                "%s has %zu bytes, but the --shape and --strides address "
                "%llu (or a buffer of %llu or more)",
                in, bytes, (unsigned long long)exact,
                (unsigned long long)in_min);
        free(data);
        return EXIT_USAGE;
    }
    if (bytes > exact)
        id.total_bytes = bytes;
    char *result = calloc(1, out_bytes ? (size_t)out_bytes : 1);
    if (result == NULL) {
        free(data);
        cli_say(cmd, "out of memory");
        return EXIT_FILE;
    }
    tally_code code =
        tally_cumsum_strided(c, &id, data, &od, result, (int)axis, flags);
    int rc = EXIT_OK;
    if (code != TALLYE_OK)
        rc = cli_fail(cmd, code, tally_last_message(c));
    else if (!cli_write_file(cmd, out, result, (size_t)out_bytes))
        rc = EXIT_FILE;
    free(result);
    free(data);
    return rc;
}

/* Whether url's host is this machine: localhost, 127.x.y.z or ::1. */
static bool local_url(const char *url)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    if (strncmp(h, "[::1]", 5) == 0)
        return true;
    size_t n = strcspn(h, ":/");
    return (n == 9 && strncasecmp(h, "localhost", 9) == 0)
           || strncmp(h, "127.", 4) == 0;
}

/* The sum through a region of shared memory the library makes: the
 * tensor is copied in, summed in place by the server, and copied out.
 * *fell_back when shared memory could not be used, and nothing was sent
 * (the caller then uses the socket). */
static tally_code via_shm(const char *cmd, tally_client *c, const char *url,
                          tally_dt dtype, int rank, const int64_t *shape,
                          long axis, unsigned flags, void *data, size_t bytes,
                          bool *fell_back, char *why, size_t whylen)
{
    *fell_back = true;
    if (bytes == 0)
        return TALLYE_OK; /* nothing to place; the socket takes it */
    if (!local_url(url)) {
        fprintf(stderr,
                "tally %s: note: %s is not on this machine; sending the "
                "tensor over the socket\n",
                cmd, url);
        return TALLYE_OK;
    }
    tally_shm *s;
    void *mem;
    const char *region;
    tally_code code = tally_shm_new(c, bytes, &s, &mem, &region);
    bool refused = code == TALLYE_UNAUTHORIZED && tally_last_status(c) == 403;
    if (code != TALLYE_OK && !refused && code != TALLYE_IO) {
        *fell_back = false; /* the server is unreachable or failed */
        snprintf(why, whylen, "%s", tally_last_message(c));
        return code;
    }
    if (code != TALLYE_OK) { /* not allowed there, or not here */
        fprintf(stderr,
                "tally %s: note: no shared memory (%s); sending the tensor "
                "over the socket\n",
                cmd, tally_last_message(c));
        return TALLYE_OK;
    }
    *fell_back = false;
    memcpy(mem, data, bytes);
    tally_shm_place p = {region, 0, bytes};
    code = tally_cumsum_shm(c, dtype, rank, shape, (int)axis, flags, &p, &p);
    if (code == TALLYE_OK)
        memcpy(data, mem, bytes);
    /* the sum's failure, not the cleanup's */
    snprintf(why, whylen, "through shared memory: %s", tally_last_message(c));
    tally_shm_free(c, s);
    return code;
}

static int run_binary(const char *cmd, tally_client *c, const char *fmt,
                      const char *in, const char *out, const char *dtype_name,
                      const char *shape_text, long axis, unsigned flags,
                      const char *shm_url, const char *seq_id,
                      uint64_t seq_chunk)
{
    tally_dt dtype;
    int rank;
    int64_t shape[TALLY_MAX_RANK];
    void *data = NULL;
    size_t bytes;
    char msg[512];
    bool raw = strcmp(fmt, "raw") == 0;
    if (raw) {
        int t = tally_dt_parse(dtype_name);
        if (dtype_name == NULL || shape_text == NULL) {
            cli_say(cmd, "--format raw needs --dtype and --shape, such as "
                         "--dtype float32 --shape 3,4");
            return EXIT_USAGE;
        }
        if (t < 0) {
            cli_say(cmd,
                    "unknown --dtype \"%s\" (float16 bfloat16 float32 "
                    "float64 int8 int16 int32 int64 uint8 uint16 uint32 "
                    "uint64)",
                    dtype_name);
            return EXIT_USAGE;
        }
        dtype = (tally_dt)t;
        if (!cli_parse_shape(cmd, shape_text, &rank, shape))
            return EXIT_USAGE;
        char *text;
        if (!cli_read_file(cmd, in, &text, &bytes))
            return EXIT_FILE;
        data = text;
        /* the byte count the shape implies, without overflow */
        size_t want = tally_dt_size(dtype);
        bool over = false;
        for (int d = 0; d < rank; d++) {
            if (shape[d] != 0 && want > SIZE_MAX / (uint64_t)shape[d])
                over = true;
            want *= (size_t)shape[d];
        }
        if (over || want != bytes) {
            cli_say(cmd, "%s has %zu bytes, but %s with shape [%s] takes %s%zu",
                    in, bytes, dtype_name, shape_text, over ? "over " : "",
                    over ? SIZE_MAX : want);
            free(data);
            return EXIT_USAGE;
        }
    } else {
        unsigned nflags = 0;
        if (dtype_name != NULL) {
            if (strcmp(dtype_name, "bfloat16") != 0) {
                cli_say(cmd, "an .npy file names its own dtype; --dtype only "
                             "reads a 2-byte array as bfloat16 (--dtype "
                             "bfloat16)");
                return EXIT_USAGE;
            }
            nflags = TALLY_NPY_BFLOAT16;
        }
        if (shape_text != NULL) {
            cli_say(cmd, "an .npy file names its own shape; --shape is for "
                         "--format raw");
            return EXIT_USAGE;
        }
        tally_code code = tally_npy_read(in, nflags, &dtype, &rank, shape,
                                         &data, &bytes, msg, sizeof msg);
        if (code != TALLYE_OK)
            return cli_fail(cmd, code, msg);
    }
    if (axis < -rank || axis >= rank) {
        cli_say(cmd,
                "--axis %ld is out of range for a tensor of rank %d "
                "(-%d to %d)",
                axis, rank, rank, rank - 1);
        free(data);
        return EXIT_USAGE;
    }
    bool fell_back = true;
    tally_code code = TALLYE_OK;
    if (shm_url != NULL) {
        char why[600];
        code = via_shm(cmd, c, shm_url, dtype, rank, shape, axis, flags, data,
                       bytes, &fell_back, why, sizeof why);
        if (code != TALLYE_OK) {
            if (raw)
                free(data);
            else
                tally_free(data);
            return cli_fail(cmd, code, why);
        }
    }
    if (fell_back && seq_id != NULL)
        code = tally_cumsum_chunk(c, seq_id, seq_chunk, dtype, rank, shape,
                                  (int)axis, flags, data, data);
    else if (fell_back)
        code = tally_cumsum(
            c, dtype, rank, shape, (int)axis,
            flags & ~(TALLY_SEQUENCE_START | TALLY_SEQUENCE_END), data, data);
    if (code != TALLYE_OK) {
        int rc = cli_fail(cmd, code, tally_last_message(c));
        if (raw)
            free(data);
        else
            tally_free(data);
        return rc;
    }
    int rc = EXIT_OK;
    if (raw) {
        if (!cli_write_file(cmd, out, data, bytes))
            rc = EXIT_FILE;
    } else {
        code = tally_npy_write(out, dtype, rank, shape, data, msg, sizeof msg);
        if (code != TALLYE_OK)
            rc = cli_fail(cmd, code, msg);
    }
    if (raw)
        free(data);
    else
        tally_free(data);
    return rc;
}

int cmd_cumsum(int argc, char **argv)
{
    const char *cmd = "cumsum";
    long axis = 0;
    bool exclusive = false, reverse = false, use_shm = false;
    bool seq_start = false, seq_end = false, shared_state = false;
    const char *seq_id = NULL, *seq_chunk_text = NULL;
    const char *direction = NULL, *format = NULL, *dtype = NULL, *shape = NULL;
    const char *axis_text = NULL, *strides = NULL, *out_strides = NULL;
    cli_opt opts[] = {
        {"axis", OPT_STRING, &axis_text, true},
        {"exclusive", OPT_FLAG, &exclusive, false},
        {"reverse", OPT_FLAG, &reverse, false},
        {"direction", OPT_STRING, &direction, false},
        {"format", OPT_STRING, &format, false},
        {"dtype", OPT_STRING, &dtype, false},
        {"shape", OPT_STRING, &shape, false},
        {"strides", OPT_STRING, &strides, false},
        {"out-strides", OPT_STRING, &out_strides, false},
        {"shm", OPT_FLAG, &use_shm, false},
        {"sequence-id", OPT_STRING, &seq_id, false},
        {"sequence-start", OPT_FLAG, &seq_start, false},
        {"sequence-end", OPT_FLAG, &seq_end, false},
        {"sequence-chunk", OPT_STRING, &seq_chunk_text, false},
        {"shared-state", OPT_FLAG, &shared_state, false},
        {NULL, OPT_FLAG, NULL, false},
    };
    cli_common common;
    const char *pos[2];
    int npos;
    int rc = cli_begin(cmd, help, opts, &common, argc, argv, pos, 2, &npos);
    if (rc >= 0)
        return rc;
    if (npos != 2) {
        cli_say(cmd, "needs an input and an output file, such as tally "
                     "cumsum x.npy y.npy (- for standard input or output)");
        return EXIT_USAGE;
    }
    if (axis_text != NULL) {
        char *end;
        axis = strtol(axis_text, &end, 10);
        if (axis_text[0] == '\0' || *end != '\0' || axis < -TALLY_MAX_RANK
            || axis >= TALLY_MAX_RANK) {
            cli_say(cmd,
                    "--axis needs an integer such as 0 or -1, not "
                    "\"%s\"",
                    axis_text);
            return EXIT_USAGE;
        }
    }
    if (direction != NULL) {
        bool dec = strcmp(direction, "decreasing") == 0;
        if (!dec && strcmp(direction, "increasing") != 0) {
            cli_say(cmd,
                    "--direction is increasing or decreasing, not "
                    "\"%s\"",
                    direction);
            return EXIT_USAGE;
        }
        if (reverse && !dec) {
            cli_say(cmd, "--reverse and --direction increasing disagree");
            return EXIT_USAGE;
        }
        reverse = dec;
    }
    if (format == NULL) {
        size_t n = strlen(pos[0]);
        format = n > 5 && strcmp(pos[0] + n - 5, ".json") == 0 ? "json" : "npy";
    }
    if (strcmp(format, "npy") != 0 && strcmp(format, "json") != 0
        && strcmp(format, "raw") != 0) {
        cli_say(cmd, "--format is npy, json or raw, not \"%s\"", format);
        return EXIT_USAGE;
    }
    if (strcmp(format, "json") == 0 && (dtype != NULL || shape != NULL)) {
        cli_say(cmd, "a JSON tensor names its own dtype and shape; --dtype "
                     "and --shape are for --format raw");
        return EXIT_USAGE;
    }
    if ((strides != NULL || out_strides != NULL)
        && strcmp(format, "raw") != 0) {
        cli_say(cmd, "--strides and --out-strides are for --format raw");
        return EXIT_USAGE;
    }
    if (use_shm
        && (strcmp(format, "json") == 0 || strides != NULL
            || out_strides != NULL)) {
        cli_say(cmd, "--shm is for npy and raw tensors without strides");
        return EXIT_USAGE;
    }
    if (seq_id == NULL
        && (seq_start || seq_end || seq_chunk_text || shared_state)) {
        cli_say(cmd, "--sequence-start, --sequence-end, --sequence-chunk and "
                     "--shared-state need --sequence-id");
        return EXIT_USAGE;
    }
    uint64_t seq_chunk = 0;
    if (seq_chunk_text != NULL) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(seq_chunk_text, &end, 10);
        if (seq_chunk_text[0] < '0' || seq_chunk_text[0] > '9' || *end != '\0'
            || errno != 0 || v == 0) {
            cli_say(cmd,
                    "--sequence-chunk \"%.40s\" is not a chunk number (1 to "
                    "18446744073709551615)",
                    seq_chunk_text);
            return EXIT_USAGE;
        }
        seq_chunk = v;
    }
    if (seq_id != NULL
        && (strcmp(format, "json") == 0 || strides != NULL
            || out_strides != NULL || use_shm)) {
        cli_say(cmd, "--sequence-id is for npy and raw tensors without "
                     "strides or --shm");
        return EXIT_USAGE;
    }
    cli_resolve_urls(&common);
    tally_client *c = cli_client(cmd, &common, -1, &rc);
    if (c == NULL)
        return rc;
    if (shared_state
        && tally_setopt_long(c, TALLYOPT_SHARED_STATE, 1) != TALLYE_OK) {
        rc = cli_fail(cmd, TALLYE_ARGUMENT, tally_last_message(c));
        tally_client_free(c);
        return rc;
    }
    unsigned flags = (exclusive ? TALLY_EXCLUSIVE : 0u)
                     | (reverse ? TALLY_REVERSE : 0u)
                     | (seq_start ? TALLY_SEQUENCE_START : 0u)
                     | (seq_end ? TALLY_SEQUENCE_END : 0u);
    if (strides != NULL || out_strides != NULL)
        rc = run_strided(cmd, c, pos[0], pos[1], dtype, shape, strides,
                         out_strides, axis, flags);
    else if (strcmp(format, "json") == 0)
        rc = run_json(cmd, c, pos[0], pos[1], axis_text != NULL, axis,
                      exclusive, reverse);
    else
        rc = run_binary(cmd, c, format, pos[0], pos[1], dtype, shape, axis,
                        flags, use_shm ? common.urls[0] : NULL, seq_id,
                        seq_chunk);
    tally_client_free(c);
    return rc;
}
