/*
 * cumsum.c - libtally in a few lines: running totals of a small matrix.
 *
 *     cc cumsum.c $(pkg-config --cflags --libs tally) -o cumsum
 *     ./cumsum http://127.0.0.1:8080
 *
 * The server URL comes from the first argument, else TALLY_URL, else
 * http://127.0.0.1:8080.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tally.h>

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : getenv("TALLY_URL");
    tally_client *c = tally_client_new();
    if (c == NULL || tally_add_url(c, url ? url : "http://127.0.0.1:8080")) {
        fprintf(stderr, "cumsum: %s\n",
                c ? tally_last_message(c) : "out of memory");
        tally_client_free(c);
        return 1;
    }
    tally_setopt_long(c, TALLYOPT_TIMEOUT_MS, 30000);

    /* two rows of sales, summed along each row (axis 1), in place */
    int64_t shape[2] = {2, 4};
    int32_t sales[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    tally_code code =
        tally_cumsum(c, TALLY_DT_INT32, 2, shape, 1, 0, sales, sales);
    if (code != TALLY_OK) {
        fprintf(stderr, "cumsum: %s: %s (HTTP %ld)\n", tally_strerror(code),
                tally_last_message(c), tally_last_status(c));
        tally_client_free(c);
        return 1;
    }
    for (int r = 0; r < 2; r++)
        printf("row %d: %d %d %d %d\n", r, sales[4 * r], sales[4 * r + 1],
               sales[4 * r + 2], sales[4 * r + 3]);

    /* what is still to come, from each position: exclusive and reversed */
    double x[5] = {0.5, 0.25, 0.125, 1, 2}, left[5];
    int64_t n = 5;
    code = tally_cumsum(c, TALLY_DT_FLOAT64, 1, &n, 0,
                        TALLY_EXCLUSIVE | TALLY_REVERSE, x, left);
    if (code != TALLY_OK) {
        fprintf(stderr, "cumsum: %s\n", tally_last_message(c));
        tally_client_free(c);
        return 1;
    }
    printf("after:");
    for (int i = 0; i < 5; i++)
        printf(" %g", left[i]);
    printf("\n");
    tally_client_free(c);
    return 0;
}
