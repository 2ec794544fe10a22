/*
 * fuzz_sequence.c - what a sequence takes from outside: the state file's
 * reader (seq/sequence_file.h), and the sequence parameters as the
 * query string and JSON give them (scan_params.h, sequence_id.h).
 *
 * The first byte picks: 0 the state file (the rest is the file), 1 a
 * query string's sequence_id, 2 a JSON object of parameters, 3 the
 * sequences' log (store/kv_log.h's reader: every record it takes is a
 * write of a known kind, its key within the limit, a value on a put
 * only; a torn tail is at most what was left).
 * Properties: a refusal comes with a message (UTF-8 from the sequence
 * code; JSON's, which may quote the bytes it stopped at, valid in the
 * error body the server would send) and leaves nothing allocated; a file that
 * decodes has entries within the limits (rank, axis, carries that match the
 * shape), and encodes again to the same bytes; an id that is taken is 1 to
 * SEQ_ID_MAX bytes of UTF-8 without control characters (or a number other than
 * 0), and formats as UTF-8.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzzd.h"
#include "kv_log.h"
#include "scan_params.h"
#include "sequence_file.h"
#include "tx_utf8.h"

static void check_id(const seq_params *p)
{
    if (!p->has_id)
        return;
    if (p->is_string) {
        FUZZ_CHECK(p->len >= 1 && p->len <= SEQ_ID_MAX, "id of %zu bytes",
                   p->len);
        FUZZ_CHECK(tx_utf8_valid(p->str, p->len) == p->len, "id not UTF-8");
        for (size_t i = 0; i < p->len; i++)
            FUZZ_CHECK((unsigned char)p->str[i] >= 0x20 && p->str[i] != 0x7f,
                       "a control character in an id");
    } else {
        FUZZ_CHECK(p->num != 0, "id 0 taken");
    }
    char text[SEQ_ID_MAX + 8];
    seq_id_format(p, text, sizeof text);
    fuzz_utf8("the formatted id", text, strlen(text));
}

static void state_file(const uint8_t *b, size_t n)
{
    seq_file_entry *e;
    size_t k;
    char msg[256];
    if (!seq_file_decode(b, n, 64, 1 << 16, &e, &k, msg, sizeof msg)) {
        fuzz_message("seq_file_decode's message", msg, sizeof msg);
        return;
    }
    uint64_t carries = 0;
    for (size_t i = 0; i < k; i++) {
        check_id(&e[i].id);
        FUZZ_CHECK(e[i].desc.rank >= 1 && e[i].desc.rank <= ENG_MAX_RANK,
                   "rank %d", e[i].desc.rank);
        FUZZ_CHECK(e[i].desc.axis >= 0 && e[i].desc.axis < e[i].desc.rank,
                   "axis");
        uint64_t lines = 1;
        for (int d = 0; d < e[i].desc.rank; d++)
            if (d != e[i].desc.axis)
                lines *= e[i].desc.shape[d];
        FUZZ_CHECK(lines == e[i].count, "carries unlike the shape");
        carries += e[i].count;
    }
    FUZZ_CHECK(k <= 64 && carries * 8 <= (1u << 16), "past the limits");
    size_t len;
    uint8_t *again = seq_file_encode(e, k, &len);
    FUZZ_CHECK(again != NULL, "out of memory");
    /* an older version's file is read, and written as the current one */
    if (n > 8 && b[8] == SEQ_FILE_VERSION)
        FUZZ_CHECK(len == n && memcmp(again, b, n) == 0,
                   "encoded again, %zu bytes differ from %zu", len, n);
    free(again);
    seq_file_free(e, k);
}

static bool log_record(void *user, kv_write *w, bool legacy)
{
    size_t *records = user;
    FUZZ_CHECK(legacy || (w->op >= KV_W_PUT && w->op <= KV_W_TOUCH), "op %d",
               w->op);
    FUZZ_CHECK(w->keylen <= KEYMAP_KEY_MAX, "a key of %zu bytes", w->keylen);
    FUZZ_CHECK(legacy || (w->op == KV_W_PUT) == (w->val != NULL),
               "a value on a record that has none, or none on a put");
    kv_write_free(w);
    (*records)++;
    return true;
}

static void sequence_log(const uint8_t *b, size_t n)
{
    size_t records = 0, torn = 0, end = 0;
    char msg[256];
    if (!kv_log_decode(b, n, log_record, &records, &end, &torn, msg,
                       sizeof msg)) {
        fuzz_message("kv_log_decode's message", msg, sizeof msg);
        return;
    }
    FUZZ_CHECK(torn <= n && end <= n, "torn %zu, end %zu of %zu bytes", torn,
               end, n);
    FUZZ_CHECK(records * 16 <= n, "%zu records in %zu bytes", records, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char msg[512];
    seq_params p;
    memset(&p, 0, sizeof p);
    switch (data[0] % 4) {
    case 0: state_file(data + 1, size - 1); break;
    case 3: sequence_log(data + 1, size - 1); break;
    case 1: {
        char *v = fuzz_text(data + 1, size - 1);
        bool ok;
        if (seq_query_param("sequence_id", v, &p, &ok, msg, sizeof msg) && !ok)
            fuzz_message("seq_query_param's message", msg, sizeof msg);
        check_id(&p);
        free(v);
        break;
    }
    default: {
        jcur c;
        jcur_init(&c, (const char *)data + 1, size - 1, msg, sizeof msg);
        bool first = true, ok = true;
        const char *k;
        size_t kn;
        while (ok && jcur_member(&c, &first, &k, &kn))
            if (!seq_json_param(&c, k, kn, "parameters.", &p, &ok))
                ok = jcur_skip(&c);
        if (c.failed)
            fuzz_refusal("the JSON parameters' message", msg, sizeof msg);
        else if (!seq_params_check(&p, msg, sizeof msg))
            fuzz_refusal("seq_params_check's message", msg, sizeof msg);
        check_id(&p);
        break;
    }
    }
    return 0;
}
