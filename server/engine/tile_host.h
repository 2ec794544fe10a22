/*
 * tile_host.h - the host backend's vector walks for float32: register tiles
 * for strided layouts that transpose, whole contiguous lines, and blocks of
 * packed columns.
 *
 * A strided scan whose lines are contiguous on one side and whose columns
 * are contiguous on the other (a transposed input or output: DirectML's
 * buffer tensors with strides {1, n}) touches one element of each line per
 * column step, so the plain column walk reads or writes a whole cache line
 * for every 4 bytes it uses. Here the block is cut into tiles of 8 x 8
 * float32 (16 wide where whole 64-byte lines are written), each loaded
 * along its contiguous side, transposed in registers, summed down its
 * columns into float64 carries, and stored along the other contiguous side
 * with non-temporal stores when the output is aligned for them.
 *
 * The host backend calls it for the tiles of a column block and walks the
 * leftover rows and columns itself. Thread-safe: it keeps no state beyond
 * the instruction set picked on first use.
 *
 * Threading: any thread (thread-safe, as said above).
 */
#ifndef TALLY_TILE_HOST_H
#define TALLY_TILE_HOST_H

#include <stdbool.h>
#include <stddef.h>

/* Whether tiles serve this layout on this CPU: strides (in elements) with
 * ci == 1 and ro == 1, or ri == 1 and co == 1, and AVX2 at run time. */
bool eng_tile_fits(size_t ri, size_t ro, size_t ci, size_t co);

/* Scans the tiles of a block of `rows` rows of `ncols` columns: src and dst
 * point at row 0, column 0; ri/ro are the row strides, ci/co the column
 * strides (elements; eng_tile_fits() must hold). acc holds one float64
 * carry per column and is left at each column's running total. In scan
 * order the tiles cover the first `*rows_done` rows (rows [0, *rows_done)
 * forward, [rows - *rows_done, rows) in reverse) of the first `return`
 * columns; the caller scans the rest, the leftover rows after these.
 * Rounds as the host backend does: each element is added to its column's
 * float64 carry, and the carry rounded once to float32. */
size_t eng_tile_f32(const float *src, float *dst, size_t rows, size_t ri,
                    size_t ro, size_t ci, size_t co, size_t ncols, double *acc,
                    bool rev, bool excl, size_t *rows_done);

/* Scans one contiguous float32 line of len elements from *carry (left at
 * its total), in float32 within 8-element vectors, with a float-float
 * carry (hi + lo in float32, folded every 64 elements: the OpenCL kernels'
 * scheme and accuracy bound); with stream, and dst 32-byte aligned, the
 * results go out with non-temporal stores. Returns false, touching
 * nothing, where the CPU lacks AVX2. */
bool eng_line_f32(const float *src, float *dst, size_t len, double *carry,
                  bool rev, bool excl, bool stream);

/* eng_line_f32() for `lines` packed lines of len elements each (line q
 * at src + q * len), each from a zero carry: one call for many short
 * lines. Returns false, touching nothing, where the CPU lacks AVX2. */
bool eng_lines_f32(const float *src, float *dst, size_t lines, size_t len,
                   bool rev, bool excl, bool stream);

/* Scans `rows` rows of `ncols` adjacent float32 columns, rows `inner`
 * elements apart in src and dst, from the float64 carries in acc (one per
 * column, left at each column's total), as scan_host.c's column walk
 * rounds: each element added to its column's carry, the carry rounded once
 * to float32. Does the first 8 * (ncols / 8) columns and returns how many;
 * the caller scans the rest. With stream, dst 32-byte aligned and inner a
 * multiple of 8, the results go out with non-temporal stores. Returns 0,
 * touching nothing, where the CPU lacks AVX2. */
size_t eng_cols_f32(const float *src, float *dst, size_t rows, size_t inner,
                    size_t ncols, double *acc, bool rev, bool excl,
                    bool stream);

#endif
