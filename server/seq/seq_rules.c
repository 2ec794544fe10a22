/*
 * seq_rules.c - what a chunk may do to its sequence (seq_rules.h).
 */
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "seq_rules.h"
#include "tx_dtype.h"

/* d's axis in [0, rank). */
static int64_t seq_rule_axis(const eng_scan_desc *d)
{
    return d->axis < 0 ? d->axis + d->rank : d->axis;
}

/* "float32 [*, 4] along axis 0, inclusive, forward" */
static void describe(const eng_scan_desc *d, int64_t axis, char *buf,
                     size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "%s [", tx_dtype_name(d->dtype));
    for (int i = 0; i < d->rank && at < len; i++)
        at += (size_t)(i == axis
                           ? snprintf(buf + at, len - at, "%s*", i ? ", " : "")
                           : snprintf(buf + at, len - at, "%s%" PRIu64,
                                      i ? ", " : "", d->shape[i]));
    if (at < len)
        snprintf(buf + at, len - at, "] along axis %" PRId64 ", %s, %s", axis,
                 d->exclusive ? "exclusive" : "inclusive",
                 d->reverse ? "reverse" : "forward");
}

/* Whether chunk d may follow the chunks of a sequence whose attributes
 * are a. */
static bool same_kind(const eng_scan_desc *a, const eng_scan_desc *d)
{
    int64_t axis = seq_rule_axis(d);
    if (a->dtype != d->dtype || a->rank != d->rank || a->axis != axis
        || a->exclusive != d->exclusive || a->reverse != d->reverse)
        return false;
    for (int i = 0; i < d->rank; i++)
        if (i != axis && a->shape[i] != d->shape[i])
            return false;
    return true;
}

bool seq_rule_sha(const eng_scan_desc *d, const void *in, size_t bytes,
                  unsigned char out[32])
{
    uint64_t head[2 + ENG_MAX_RANK];
    size_t n = 0;
    head[n++] = (uint64_t)d->dtype;
    head[n++] = (uint64_t)d->rank;
    for (int i = 0; i < d->rank && i < ENG_MAX_RANK; i++)
        head[n++] = d->shape[i];
    unsigned len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c != NULL && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1
              && EVP_DigestUpdate(c, head, n * sizeof *head) == 1
              && (bytes == 0 || EVP_DigestUpdate(c, in, bytes) == 1)
              && EVP_DigestFinal_ex(c, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(c);
    return ok;
}

/* The refusal of a chunk whose sequence is not live (STATUS_INVALID). */
static void seq_rule_not_live(const seq_params *id, uint64_t idle_ms, char *msg,
                              size_t msglen)
{
    char s[SEQ_ID_MAX + 8];
    seq_id_format(id, s, sizeof s);
    snprintf(msg, msglen,
             "sequence %s is not live: it was never started, has ended, "
             "or was dropped after %" PRIu64 " ms without an answered chunk; "
             "the first request of a sequence must carry sequence_start",
             s, idle_ms);
}

/* Whether p carries the flag of the chunk v applied last: a chunk sent
 * again keeps its first send's sequence_end. */
static bool same_flags(const seq_view *v, const seq_params *p)
{
    return p->end == v->last_end;
}

/* "sequence ID: chunk N was applied with another input ...", or with
 * other flags. */
static void applied_otherwise(const seq_view *v, const seq_params *p,
                              const unsigned char sha[32], char *msg,
                              size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    if (memcmp(v->last_sha, sha, 32) != 0)
        snprintf(msg, msglen,
                 "sequence %s: chunk %" PRIu64 " was applied with another "
                 "input (dtype, shape or bytes); nothing changed",
                 id, p->chunk);
    else
        snprintf(msg, msglen,
                 "sequence %s: chunk %" PRIu64 " was applied %s "
                 "sequence_end, and this one has %s: a chunk sent again "
                 "keeps its flags; nothing changed",
                 id, p->chunk, v->last_end ? "with" : "without",
                 p->end ? "it" : "none");
}

int seq_rule_admit(const seq_view *v, const seq_params *p,
                   const eng_scan_desc *d, const unsigned char sha[32],
                   uint64_t idle_ms, bool *late, char *msg, size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    *late = false;
    /* a numbered start on a live numbered sequence is a retry of its
     * chunk 1 (so is one on an ended one-chunk sequence, with the same
     * input and flags: that chunk sent again) */
    bool restart = p->start;
    if (restart && p->has_chunk && v->exists && v->numbered
        && (!v->closed
            || (v->applied == 1 && memcmp(v->last_sha, sha, 32) == 0
                && same_flags(v, p))))
        restart = false;
    if (restart)
        return SEQ_RULE_START;
    if (!v->exists) {
        seq_rule_not_live(p, idle_ms, msg, msglen);
        return SEQ_RULE_INVALID;
    }
    if (!same_kind(v->desc, d)) {
        char was[200], is[200];
        describe(v->desc, v->desc->axis, was, sizeof was);
        describe(d, seq_rule_axis(d), is, sizeof is);
        return msg_fail_as(
            SEQ_RULE_INVALID, msg, msglen,
            "sequence %s is %s, and this chunk is %s: every chunk of a "
            "sequence keeps its first chunk's dtype, axis, mode and "
            "shape off the axis",
            id, was, is);
    }
    if (v->numbered != p->has_chunk)
        return msg_fail_as(
            SEQ_RULE_INVALID, msg, msglen,
            v->numbered ? "sequence %s numbers its chunks (sequence_chunk), "
                          "and this chunk has no number"
                        : "sequence %s does not number its chunks (its start "
                          "had no sequence_chunk), and this chunk has one",
            id);
    if (v->numbered && p->chunk < v->applied)
        return msg_fail_as(
            SEQ_RULE_CONFLICT, msg, msglen,
            "sequence %s: chunk %" PRIu64 " is older than its last "
            "applied chunk, %" PRIu64 "%s; nothing changed",
            id, p->chunk, v->applied, v->closed ? " (its end)" : "");
    if (v->numbered && v->closed && p->chunk != v->applied)
        return msg_fail_as(
            SEQ_RULE_CONFLICT, msg, msglen,
            "sequence %s ended at chunk %" PRIu64 "; chunk %" PRIu64
            " cannot follow it (only the end chunk may be sent again)",
            id, v->applied, p->chunk);
    if (v->numbered && p->chunk == v->applied
        && (memcmp(v->last_sha, sha, 32) != 0 || !same_flags(v, p))) {
        applied_otherwise(v, p, sha, msg, msglen);
        return SEQ_RULE_CONFLICT;
    }
    *late = !v->numbered && !p->start && v->closed;
    return SEQ_RULE_TAKE;
}

int seq_rule_outcome(const seq_view *v, const seq_params *p,
                     const unsigned char sha[32], char *msg, size_t msglen)
{
    uint64_t chunk = p->chunk;
    if (chunk == v->applied + 1 && !v->closed)
        return SEQ_OUT_APPLY;
    if (chunk == v->applied && v->applied > 0
        && memcmp(sha, v->last_sha, 32) == 0 && same_flags(v, p))
        return SEQ_OUT_REPEAT;
    if (chunk > v->applied + 1 && !v->closed)
        return SEQ_OUT_EARLY;
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    if (chunk == v->applied)
        applied_otherwise(v, p, sha, msg, msglen);
    else if (v->closed && chunk > v->applied)
        snprintf(msg, msglen,
                 "sequence %s ended at chunk %" PRIu64 "; chunk %" PRIu64
                 " cannot follow it",
                 id, v->applied, chunk);
    else
        snprintf(msg, msglen,
                 "sequence %s: chunk %" PRIu64 " is older than its last "
                 "applied chunk, %" PRIu64 "; nothing changed",
                 id, chunk, v->applied);
    return SEQ_OUT_CONFLICT;
}

void seq_rule_gap(const seq_params *idp, uint64_t chunk, uint64_t next,
                  uint64_t reorder_ms, char *msg, size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(idp, id, sizeof id);
    snprintf(msg, msglen,
             "sequence %s: chunk %" PRIu64 " waited %" PRIu64
             " ms (--sequence-reorder-ms) for chunk %" PRIu64
             ", which did not come; send that one, then this again",
             id, chunk, reorder_ms, next);
}
