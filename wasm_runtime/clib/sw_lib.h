/* Kernels written in C: strings (sw_text.c), regular expressions (sw_regex.c) and image
 * decoding (sw_image.c). They do byte-level work that LLVM IR built from Python would make
 * unreadable. The compiler emits, per call site, an LLVM kernel with the VM's signature that
 * calls one of these with two extra constant arguments:
 *
 *   sw_status_t fn(sw_tensor* const* t, int64_t* scalars, int64_t* detail,
 *                  const volatile int32_t* cancel, const int64_t* params, const uint8_t* blob);
 *
 * t: the call's tensors, inputs then outputs (their dtypes, ranks and static dims were
 *    checked by the VM against the kernel's signature before the call);
 * scalars: int64 values read and written back (sizes the lowering needs: a count, bytes);
 * detail: on SW_INVALID_INPUT, detail[0] is a reason code (SW_REASON_*, sw_abi.h), and
 *    detail[1], detail[2] may carry numbers the message names;
 * cancel: poll once per element (or per row of pixels) and return SW_CANCELLED when non-zero;
 * params, blob: the op's constant parameters, laid out as each function's comment says.
 *
 * String tensors (SW_DT_STRING) hold sw_str elements {ptr, len}: ptr is the address of the
 * first UTF-8 byte (on wasm32 a linear-memory address zero-extended to 64 bits), len the
 * byte count. A string's bytes are never written after it is made, and live until the run
 * ends, so an output element may point into an input's bytes. A function that makes new
 * strings writes their bytes into a uint8 "pool" tensor the lowering allocated with the
 * size the function's _size companion returned.
 *
 * No libc: wasm32 builds freestanding (-ffreestanding -fno-builtin -nostdlib). Use
 * __builtin_memcpy / __builtin_memset (bulk memory) and nothing from <string.h>.
 */
#ifndef SW_LIB_H
#define SW_LIB_H

#include "sw_abi.h"

#define SW_LIB_ARGS \
  sw_tensor* const* t, int64_t* scalars, int64_t* detail, const volatile int32_t* cancel, \
  const int64_t* params, const uint8_t* blob

static inline const uint8_t* sw_str_bytes(sw_str s) { return (const uint8_t*)(uintptr_t)s.ptr; }
static inline sw_str sw_str_make(const uint8_t* p, int64_t len) {
  sw_str s;
  s.ptr = (int64_t)(uintptr_t)p;
  s.len = len;
  return s;
}

/* ---- strings (sw_text.c) ------------------------------------------------------------ */

/* A string constant: t = [packed uint8, out string]. The packed bytes (the module's
 * read-only data) hold the elements {offset, length}, offsets from the start of the packed
 * bytes, then the text; out gets the addresses. (sw_strconst.c) */
sw_status_t sw_text_unpack(SW_LIB_ARGS);

/* Equal over strings, numpy broadcasting: t = [a string, b string, out bool]. */
sw_status_t sw_text_equal(SW_LIB_ARGS);

/* StringConcat, numpy broadcasting. _size: t = [a, b]; scalars[0] = the result's total bytes.
 * t = [a, b, pool uint8[total], out string]. */
sw_status_t sw_text_concat_size(SW_LIB_ARGS);
sw_status_t sw_text_concat(SW_LIB_ARGS);

/* StringSplit. params = {has_delimiter (0: split on runs of whitespace, as Python's
 * str.split()), maxsplit (-1: none)}; blob = the delimiter's bytes, params[2] its length.
 * _count: t = [x]; scalars[0] = the most parts of any element (0 for an empty x).
 * t = [x, y string x.shape + [scalars[0]] (padded with ""), z int64 x.shape]. */
sw_status_t sw_text_split_count(SW_LIB_ARGS);
sw_status_t sw_text_split(SW_LIB_ARGS);

/* StringNormalizer. params = {case_change (0 NONE, 1 LOWER, 2 UPPER), is_case_sensitive,
 * nstopwords, then each stopword's byte length}; blob = the stopwords' bytes, one after
 * another. x is [C] or [1, C].
 * _size: t = [x]; scalars[0] = the output's element count (the kept elements, or 1 when none
 * is kept: the output is then one empty string), scalars[1] = the pool bytes.
 * t = [x, pool uint8[scalars[1]], out string [scalars[0]] or [1, scalars[0]]]. */
sw_status_t sw_text_normalize_size(SW_LIB_ARGS);
sw_status_t sw_text_normalize(SW_LIB_ARGS);

/* ---- regular expressions (sw_regex.c) ------------------------------------------------ */

/* RegexFullMatch: t = [x string, out bool]. params = a program the compiler made from the
 * pattern (toolkit/regex.py), matched against each element's code points by a Pike
 * VM (linear in the input: no backtracking). */
sw_status_t sw_regex_full_match(SW_LIB_ARGS);

/* ---- images (sw_image.c) ------------------------------------------------------------- */

/* ImageDecoder. params = {pixel_format (0 RGB, 1 BGR, 2 Grayscale)}.
 * _probe: t = [data uint8[n]]; scalars[0] = height, scalars[1] = width, scalars[2] = the
 * scratch bytes the decode needs. t = [data, scratch uint8[scalars[2]], out uint8
 * [height, width, 3 or 1]]. Refusals: SW_INVALID_INPUT with detail[0] = SW_REASON_IMAGE_*. */
sw_status_t sw_image_probe(SW_LIB_ARGS);
sw_status_t sw_image_decode(SW_LIB_ARGS);

#endif
