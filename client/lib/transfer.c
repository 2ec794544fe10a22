/*
 * transfer.c - HTTP exchanges, many at once, with retries.
 *
 * A tc_transfer is one logical request (method, path, body) and where its
 * answer goes. tc_run() drives a set of them on the client's curl multi
 * handle from the calling thread: it starts up to TALLYOPT_MAX_CONNECTIONS,
 * collects each one's outcome when curl reports it done, and either
 * finishes it (its done callback fires, once) or schedules another attempt
 * after a backoff.
 *
 * What is retried: 503 and 429 answers (the server's queue was full), a
 * refused connection, and a connection that broke before the answer was
 * complete. Retrying a cumulative sum is always safe: it is a pure
 * function of the request. Each retry goes to the next URL, so that a
 * client with several servers routes around one that is down or full,
 * but for a pinned transfer (a sequence's chunk whose servers keep their
 * own state), which stays on its URL. A
 * timeout is not retried: it is the caller's limit. Nor is an unnumbered
 * chunk of a sequence (once), but after a refused connection: a 503 (the
 * sequence's store failed) or a broken connection may have added it, and
 * sent again it would be added twice; its failure goes to the caller
 * (tally.h, tally_cumsum_chunk()).
 *
 * Answers: a 2xx body goes to the transfer's fixed buffer (a tensor, whose
 * exact size is known) or to a buffer grown up to a limit; anything else is
 * an error whose body (kept up to 64 KiB) should be tallyd's JSON
 * {"error": "..."}, whose message becomes the transfer's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "internal.h"
#include "tx_utf8.h"

enum { TS_WAITING, TS_RUNNING, TS_DONE };

#define ERR_BODY_MAX (64 * 1024)
/* Bodies below this go without "Expect: 100-continue": the round trip it
 * costs buys nothing when the whole body is this small. */
#define EXPECT_MIN_BYTES (1u << 20)

/* ------------------------------------------------------------------------
 * Callbacks from curl.
 */
static bool header_is(const char *line, size_t len, const char *name,
                      const char **value, size_t *vlen)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return false;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    *value = v;
    *vlen = (size_t)(end - v);
    return true;
}

/* Retry-After is delay-seconds or an HTTP date. */
static long parse_retry_after(const char *v, size_t len)
{
    char text[64];
    if (len == 0 || len >= sizeof text)
        return -1;
    memcpy(text, v, len);
    text[len] = '\0';
    char *end;
    long s = strtol(text, &end, 10);
    if (end != text && *end == '\0' && s >= 0)
        return s > 86400 ? 86400000L : s * 1000;
    time_t when = curl_getdate(text, NULL);
    if (when == (time_t)-1)
        return -1;
    time_t now = time(NULL);
    return when <= now ? 0
                       : (long)(when - now > 86400 ? 86400 : when - now) * 1000;
}

static size_t on_header(char *line, size_t size, size_t n, void *ud)
{
    tc_transfer *t = ud;
    size_t len = size * n;
    const char *v;
    size_t vlen;
    if (len > 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* a new response (after a 100 Continue, say) starts over */
        t->retry_after_ms = -1;
        t->got_dtype[0] = '\0';
    } else if (header_is(line, len, "Retry-After", &v, &vlen)) {
        t->retry_after_ms = parse_retry_after(v, vlen);
    } else if (header_is(line, len, "Tensor-Dtype", &v, &vlen)) {
        if (vlen >= sizeof t->got_dtype)
            vlen = sizeof t->got_dtype - 1;
        memcpy(t->got_dtype, v, vlen);
        t->got_dtype[vlen] = '\0';
    }
    return len;
}

/* Takes len bytes of the body of an answer with this status: a success's
 * into the caller's buffer (or a grown one), anything else's into the
 * error body, up to ERR_BODY_MAX. Returns what curl must be told: len, or
 * 0 to stop the transfer. */
static size_t take_body(tc_transfer *t, long status, const char *data,
                        size_t len)
{
    if (status < 200 || status > 299) {
        size_t room = ERR_BODY_MAX - t->err_len;
        size_t take = len < room ? len : room;
        if (take > 0) {
            char *p = realloc(t->err_body, t->err_len + take + 1);
            if (p == NULL)
                return len; /* the message is a nicety; the status stays */
            t->err_body = p;
            memcpy(p + t->err_len, data, take);
            t->err_len += take;
            p[t->err_len] = '\0';
        }
        return len;
    }
    if (len > t->recv_cap - t->recv_len) {
        t->overflow = true;
        return 0;
    }
    if (t->recv != NULL) {
        memcpy((char *)t->recv + t->recv_len, data, len);
    } else {
        size_t need = t->recv_len + len + 1, cap = 4096;
        while (cap < need)
            cap *= 2;
        char *p = realloc(t->grown, cap);
        if (p == NULL)
            return 0;
        t->grown = p;
        memcpy(p + t->recv_len, data, len);
        p[t->recv_len + len] = '\0';
    }
    t->recv_len += len;
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    tc_transfer *t = ud;
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    return take_body(t, status, data, size * n);
}

/* ------------------------------------------------------------------------
 * The server's error message.
 */

/* Appends code point cp to out as UTF-8; a lone surrogate (half of a
 * \u pair that came alone) becomes U+FFFD. */
static size_t put_utf8(char *out, size_t room, unsigned long cp)
{
    char b[4];
    size_t n;
    if (cp >= 0xd800 && cp < 0xe000)
        cp = 0xfffd;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    if (n > room)
        return 0;
    memcpy(out, b, n);
    return n;
}

static long hex4(const char *p, const char *end)
{
    if (end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Finds "error": "<string>" in a JSON body and decodes the string into out.
 * Returns false when there is none. */
static bool json_error_message(const char *body, size_t len, char *out,
                               size_t outlen)
{
    const char *end = body + len;
    const char *p = body;
    for (;;) {
        p = memchr(p, '"', (size_t)(end - p));
        if (p == NULL || end - p < 7)
            return false;
        if (memcmp(p, "\"error\"", 7) == 0)
            break;
        p++;
    }
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    if (p >= end || *p++ != ':')
        return false;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    if (p >= end || *p++ != '"')
        return false;
    size_t o = 0;
    while (p < end && *p != '"' && o + 1 < outlen) {
        char ch = *p++;
        if (ch != '\\') {
            out[o++] = ch;
            continue;
        }
        if (p >= end)
            break;
        char esc = *p++;
        unsigned long cp;
        switch (esc) {
        case 'n': cp = '\n'; break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'u': {
            long u = hex4(p, end);
            if (u < 0) { /* a broken escape: the words before it */
                out[o] = '\0';
                return o > 0;
            }
            p += 4;
            cp = (unsigned long)u;
            if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && p[0] == '\\'
                && p[1] == 'u') {
                long lo = hex4(p + 2, end);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10)
                         + ((unsigned long)lo - 0xdc00);
                    p += 6;
                }
            }
            break;
        }
        default: cp = (unsigned char)esc; break;
        }
        size_t w = put_utf8(out + o, outlen - 1 - o, cp);
        if (w == 0)
            break;
        o += w;
    }
    out[o] = '\0';
    return true;
}

/* A message for an answer that is not a success: the server's own words
 * when it sent JSON, else the start of whatever it sent. */
static void answer_message(tc_transfer *t, const char *url)
{
    char raw[TC_MSG - 128], said[TC_MSG - 128];
    said[0] = '\0';
    if (t->err_body != NULL
        && json_error_message(t->err_body, t->err_len, raw, sizeof raw)) {
        /* the server's words, in UTF-8 whatever bytes it sent */
        tx_utf8_escape(raw, strlen(raw), said, sizeof said);
    } else {
        /* not tallyd's JSON: a proxy's page, perhaps; keep a printable
         * first line */
        size_t o = 0;
        for (size_t i = 0; t->err_body && i < t->err_len && o < 120; i++) {
            unsigned char ch = (unsigned char)t->err_body[i];
            if (ch == '\n' && o > 0)
                break;
            if (ch >= 0x20 && ch < 0x7f)
                said[o++] = (char)ch;
        }
        said[o] = '\0';
    }
    if (said[0])
        tc_fmt(t->msg, sizeof t->msg, "%s (HTTP %ld from %s)", said, t->status,
               url);
    else
        tc_fmt(t->msg, sizeof t->msg, "HTTP %ld from %s with no message",
               t->status, url);
}

/* ------------------------------------------------------------------------
 * Classifying an outcome.
 */
static tally_code code_for_status(long status)
{
    switch (status) {
    case 401:
    case 403: return TALLYE_UNAUTHORIZED;
    case 404:
    case 405: return TALLYE_NOT_FOUND;
    case 413: return TALLYE_TOO_LARGE;
    case 429:
    case 503: return TALLYE_BUSY;
    case 504: return TALLYE_TIMEOUT;
    default: break;
    }
    if (status >= 400 && status < 500)
        return TALLYE_REJECTED;
    if (status >= 500 && status < 600)
        return TALLYE_SERVER;
    return TALLYE_PROTOCOL;
}

/* The outcome of an answer that came whole (t->status set): a success
 * whose tensor is what was asked for, or a failure with the server's
 * message. Returns whether it may be retried. */
static bool judge_answer(tc_transfer *t, const char *url)
{
    if (t->status >= 200 && t->status <= 299) {
        if (t->check_tensor) {
            const char *want = tally_dt_name(t->expect_dtype);
            if (t->got_dtype[0] == '\0') {
                t->code = TALLYE_PROTOCOL;
                tc_fmt(t->msg, sizeof t->msg,
                       "%s answered without a Tensor-Dtype header: is it a "
                       "tally server?",
                       url);
                return false;
            }
            if (strcmp(t->got_dtype, want) != 0) {
                char got[4 * sizeof t->got_dtype];
                tx_utf8_escape(t->got_dtype, strlen(t->got_dtype), got,
                               sizeof got);
                t->code = TALLYE_PROTOCOL;
                tc_fmt(t->msg, sizeof t->msg,
                       "%s answered with dtype %s, not %s", url, got, want);
                return false;
            }
            if (t->recv_len != t->expect_bytes) {
                t->code = TALLYE_PROTOCOL;
                tc_fmt(t->msg, sizeof t->msg,
                       "%s answered with %zu bytes, not the %zu expected", url,
                       t->recv_len, t->expect_bytes);
                return false;
            }
        }
        t->code = TALLYE_OK;
        t->msg[0] = '\0';
        return false;
    }
    t->code = code_for_status(t->status);
    answer_message(t, url);
    return t->code == TALLYE_BUSY;
}

/* The outcome of an attempt; returns whether it may be retried. */
static bool classify(tally_client *c, tc_transfer *t, CURLcode rc)
{
    const char *url = c->urls[t->url % c->nurls];
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
    if (rc == CURLE_OK)
        return judge_answer(t, url);
    if (rc == CURLE_WRITE_ERROR) {
        if (t->overflow && t->check_tensor) {
            t->code = TALLYE_PROTOCOL;
            tc_fmt(t->msg, sizeof t->msg,
                   "%s answered with more than the %zu bytes expected", url,
                   t->expect_bytes);
        } else if (t->overflow) {
            t->code = TALLYE_TOO_LARGE;
            tc_fmt(t->msg, sizeof t->msg,
                   "the answer from %s is larger than "
                   "TALLYOPT_MAX_RESPONSE_BYTES (%zu bytes)",
                   url, t->recv_cap);
        } else {
            t->code = TALLYE_NOMEM;
            tc_fmt(t->msg, sizeof t->msg, "out of memory reading the answer");
        }
        return false;
    }
    const char *why = t->curl_err[0] ? t->curl_err : curl_easy_strerror(rc);
    bool retry = false;
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        t->code = TALLYE_CONNECT;
        retry = true;
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        t->code = TALLYE_CONNECT;
        retry = c->nurls > 1;
        break;
    case CURLE_OPERATION_TIMEDOUT: t->code = TALLYE_TIMEOUT; break;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        t->code = TALLYE_NETWORK;
        retry = true;
        break;
    case CURLE_OUT_OF_MEMORY: t->code = TALLYE_NOMEM; break;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: t->code = TALLYE_URL; break;
    case CURLE_WEIRD_SERVER_REPLY: t->code = TALLYE_PROTOCOL; break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CONNECT_ERROR: t->code = TALLYE_TLS; break;
    default: t->code = TALLYE_NETWORK; break;
    }
    tc_fmt(t->msg, sizeof t->msg, "%s (%s)", why, url);
    return retry;
}

/* ------------------------------------------------------------------------
 * Starting and finishing attempts.
 */
static uint64_t rand64(tally_client *c)
{
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static long backoff_ms(tally_client *c, tc_transfer *t)
{
    long wait = c->backoff_ms;
    for (int i = 1; i < t->attempts && wait < c->backoff_max_ms; i++)
        wait *= 2;
    if (wait > c->backoff_max_ms)
        wait = c->backoff_max_ms;
    /* jitter in [wait/2, wait], so that clients turned away together do
     * not come back together */
    wait = wait / 2 + (long)(rand64(c) % (uint64_t)(wait / 2 + 1));
    if (t->retry_after_ms > wait)
        wait = t->retry_after_ms;
    return wait < c->backoff_max_ms ? wait : c->backoff_max_ms;
}

static bool add_header(tc_transfer *t, const char *h)
{
    struct curl_slist *l = curl_slist_append(t->headers, h);
    if (l == NULL)
        return false;
    t->headers = l;
    return true;
}

/* Starts an attempt; false when memory ran out (t->code says so). */
static bool start(tally_client *c, tc_transfer *t)
{
    t->status = 0;
    t->recv_len = 0;
    t->err_len = 0;
    t->retry_after_ms = -1;
    t->got_dtype[0] = '\0';
    t->overflow = false;
    t->curl_err[0] = '\0';
    t->attempts++;

    const char *base = c->urls[t->url % c->nurls];
    size_t n = strlen(base) + strlen(t->path) + 1;
    char *url = malloc(n);
    t->easy = tc_easy_get(c);
    bool ok = url != NULL && t->easy != NULL;
    char h[96];
    if (ok) {
        snprintf(url, n, "%s%s", base, t->path);
        if (t->content_type != NULL) {
            tc_fmt(h, sizeof h, "Content-Type: %s", t->content_type);
            ok = add_header(t, h);
        }
        if (ok && t->header != NULL)
            ok = add_header(t, t->header);
        if (ok && t->body_len < EXPECT_MIN_BYTES)
            ok = add_header(t, "Expect:");
        if (ok && c->timeout_ms > 0) {
            tc_fmt(h, sizeof h, "X-Timeout-Ms: %ld", c->timeout_ms);
            ok = add_header(t, h);
        }
        if (ok && c->token_header != NULL)
            ok = add_header(t, c->token_header);
    }
    if (ok) {
        CURL *e = t->easy;
        curl_easy_setopt(e, CURLOPT_URL, url);
        if (strcmp(t->method, "GET") == 0) {
            curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        } else {
            curl_easy_setopt(e, CURLOPT_POST, 1L);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS,
                             t->body != NULL ? t->body : "");
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)t->body_len);
            if (strcmp(t->method, "POST") != 0)
                curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, t->method);
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->curl_err);
        curl_easy_setopt(e, CURLOPT_PRIVATE, t);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_ms);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
        curl_easy_setopt(e, CURLOPT_USERAGENT,
                         c->user_agent ? c->user_agent
                                       : "libtally/" TALLY_VERSION);
        curl_easy_setopt(e, CURLOPT_VERBOSE, c->verbose);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
        if (c->cainfo != NULL)
            curl_easy_setopt(e, CURLOPT_CAINFO, c->cainfo);
        ok = curl_multi_add_handle(c->multi, e) == CURLM_OK;
    }
    free(url); /* curl copied it */
    if (!ok) {
        if (t->easy != NULL)
            tc_easy_put(c, t->easy);
        t->easy = NULL;
        curl_slist_free_all(t->headers);
        t->headers = NULL;
        t->code = TALLYE_NOMEM;
        tc_copy(t->msg, sizeof t->msg, "out of memory starting a request");
        return false;
    }
    t->state = TS_RUNNING;
    return true;
}

/* Ends an attempt; returns whether another should follow. */
static bool end(tally_client *c, tc_transfer *t, CURLcode rc)
{
    bool retry = classify(c, t, rc);
    if (t->once && rc != CURLE_COULDNT_CONNECT)
        retry = false; /* it may have been added: the caller's to decide */
    curl_multi_remove_handle(c->multi, t->easy);
    tc_easy_put(c, t->easy);
    t->easy = NULL;
    curl_slist_free_all(t->headers);
    t->headers = NULL;
    free(t->err_body);
    t->err_body = NULL;
    t->err_len = 0;
    if (!retry || t->skip)
        return false;
    if (t->attempts > c->retries) {
        size_t len = strlen(t->msg);
        tc_fmt(t->msg + len, sizeof t->msg - len, "; gave up after %d attempts",
               t->attempts);
        return false;
    }
    t->not_before_ms = tc_now_ms() + (uint64_t)backoff_ms(c, t);
    if (!t->pinned) /* a sequence's home keeps its chunks */
        t->url = (t->url + 1) % c->nurls;
    if (t->grown != NULL) {
        free(t->grown);
        t->grown = NULL;
    }
    t->state = TS_WAITING;
    return true;
}

static void finish(tc_transfer *t)
{
    t->state = TS_DONE;
    if (t->done != NULL)
        t->done(t);
}

void tc_run(tally_client *c, tc_transfer **t, size_t n)
{
    if (c->nurls == 0) {
        for (size_t i = 0; i < n; i++) {
            t[i]->code = TALLYE_ARGUMENT;
            tc_copy(t[i]->msg, sizeof t[i]->msg,
                    "the client has no server URL: call tally_add_url() "
                    "first");
            finish(t[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        t[i]->state = TS_WAITING;
        t[i]->attempts = 0;
        t[i]->not_before_ms = 0;
    }
    /* transfers waiting for a retry, in a list threaded through `retry`;
     * fresh ones are taken in order from `next` */
    tc_transfer **retry = calloc(n ? n : 1, sizeof *retry);
    size_t nretry = 0, next = 0, done = 0;
    long active = 0;
    while (done < n) {
        uint64_t now = tc_now_ms(), soonest = UINT64_MAX;
        for (size_t i = 0; i < nretry && active < c->max_connections;) {
            tc_transfer *r = retry[i];
            if (r->skip || r->not_before_ms <= now) {
                retry[i] = retry[--nretry];
                if (r->skip || !start(c, r)) {
                    finish(r);
                    done++;
                } else {
                    active++;
                }
                continue;
            }
            if (r->not_before_ms < soonest)
                soonest = r->not_before_ms;
            i++;
        }
        while (active < c->max_connections && next < n) {
            tc_transfer *f = t[next++];
            if (f->skip || (f->prepare != NULL && !f->prepare(f))
                || !start(c, f)) {
                finish(f);
                done++;
            } else {
                active++;
            }
        }
        if (done == n)
            break;
        int running;
        curl_multi_perform(c->multi, &running);
        CURLMsg *m;
        int left;
        bool freed = false;
        while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            tc_transfer *d = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&d);
            active--;
            freed = true;
            if (end(c, d, m->data.result) && retry != NULL) {
                retry[nretry++] = d;
                if (d->not_before_ms < soonest)
                    soonest = d->not_before_ms;
            } else {
                finish(d);
                done++;
            }
        }
        if (done == n)
            break;
        if (freed && next < n)
            continue; /* fill the free slots before waiting */
        long wait = 1000;
        if (nretry > 0) {
            now = tc_now_ms();
            wait = soonest <= now         ? 0
                   : soonest - now < 1000 ? (long)(soonest - now)
                                          : 1000;
        }
        if (wait > 0 || active > 0)
            curl_multi_poll(c->multi, NULL, 0, (int)wait, NULL);
    }
    free(retry);
}

void tc_transfer_clear(tc_transfer *t)
{
    free(t->path);
    t->path = NULL;
    free(t->grown);
    t->grown = NULL;
    free(t->err_body);
    t->err_body = NULL;
}
