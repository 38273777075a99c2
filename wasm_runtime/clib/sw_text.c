/* Strings (sw_lib.h): Equal over strings, StringConcat, StringSplit and StringNormalizer, as
 * onnx.reference computes them (their node test cases are reproduced exactly; where the
 * reference departs from the operator's specification, it is said below).
 *
 * Elements are sw_str {int64 ptr, int64 len} over UTF-8 bytes. Outputs never copy what they
 * can point at: StringSplit's parts point into their input's bytes and its padding elements
 * are {0, 0}; an unchanged StringNormalizer element (case_change NONE) is its input element.
 * New text (StringConcat, a case change) is written into the pool tensor (uint8; t[2] for
 * StringConcat, t[1] for StringNormalizer), whose byte count is its element count: nothing
 * is written past it, and a pool too small for the text is SW_INTERNAL (it cannot be when
 * the lowering sized it with the _size function, which walks the input exactly as the
 * writing function does). An empty new string is {0, 0}.
 *
 * Equal and StringConcat broadcast as numpy does, over the descriptors' shapes (ranks may
 * differ: shapes align on their last dims; a dim of 1 stretches). The output's shape must be
 * the broadcast shape (the VM checked it); anything else is SW_INTERNAL.
 *
 * Text is compared and split as bytes, which for valid UTF-8 is the same as comparing and
 * splitting code points (UTF-8 is self-synchronizing). Where code points matter (white
 * space, case), bytes that start no well-formed UTF-8 sequence (a stray continuation byte,
 * an overlong form, a surrogate, beyond U+10FFFF, a truncated sequence) are units of their
 * own, kept unchanged, neither space nor cased: what Python does with the surrogateescape
 * error handler. Nothing is stripped: unlike onnx.reference, whose numpy str_ conversion
 * drops trailing NUL characters, every byte is kept.
 *
 * StringSplit (Python's str.split, which onnx.reference calls through np.char.split):
 * - with a delimiter: leftmost non-overlapping occurrences, at most maxsplit splits
 *   (negative: no limit), so an element gives splits + 1 parts, and "" gives one part "".
 *   The search is Two-Way (Crochemore-Perrin): linear in the element whatever the
 *   delimiter, with no memory beyond a few words. A delimiter that is not valid UTF-8 (the
 *   lowering never makes one) is matched as bytes.
 * - without one (or with an empty one): runs of white space separate parts and leading and
 *   trailing white space give none, so "" and "  " give no part; once maxsplit parts are
 *   taken, the rest after its leading white space is one last part (so maxsplit 0 gives
 *   the element without its leading white space, or no part). White space is what
 *   str.isspace() accepts (sw_case_table.h): ASCII \t \n \v \f \r and space, the separators
 *   U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F
 *   and U+3000; not U+200B (zero width space) nor U+FEFF, which Unicode does not count.
 *
 * StringNormalizer keeps the elements that are not stopwords, in order, case-changed; one
 * empty string when none is kept. Stopwords are compared as whole elements (the spec's
 * words, and onnxruntime's behaviour): exactly when is_case_sensitive, else after the same
 * case change on both sides (upper-cased when case_change is UPPER, as onnx.reference
 * compares; lower-cased otherwise). onnx.reference departs from the spec in three ways
 * symwasm does not follow: it removes stopwords as space-separated words inside each element
 * and then drops every element left empty (an empty input element too); it strips accents
 * (NFKD, then drops combining marks) from non-ASCII elements; and with case_change NONE and
 * is_case_sensitive 0 it compares exactly. No node test case tells these apart. The locale
 * attribute is ignored: case mapping is Unicode's, locale-independent.
 *
 * Case mapping is Python's str.lower() / str.upper() exactly (Unicode's full, unconditional
 * mappings): a code point may map to two or three ('ß' upper-cases to "SS", 'İ' lower-cases
 * to "i̇", 'ΐ' upper-cases to three), and a capital sigma lower-cases to final sigma 'ς' at
 * the end of a word (Unicode's Final_Sigma context: after a cased letter and any case-
 * ignorable ones, and not before another cased letter after case-ignorable ones), else to
 * 'σ'. The tables (sw_case_table.h, Unicode 14.0 from Python 3.11) are generated from
 * Python's own str methods by gen_case_table.py.
 *
 * Every loop over elements polls *cancel once per element (SW_CANCELLED). Sizes are int64;
 * counts or byte totals beyond 2^60 come from a broken descriptor and are SW_INTERNAL.
 * No function keeps state between calls.
 */
#include "sw_lib.h"
#include "sw_case_table.h"

#define TEXT_MAX ((int64_t)1 << 60) /* any size beyond this is a broken descriptor */

/* ---- descriptors -------------------------------------------------------------------- */

/* x's element count, or -1 when its rank or a dim is out of range. The product of its
 * dims other than 0 is bounded too, so that strides over them cannot overflow. */
static int64_t numel(const sw_tensor* x) {
  if (x->rank < 0 || x->rank > SW_MAX_RANK) return -1;
  int64_t nonzero = 1, zero = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    int64_t d = x->shape[i];
    if (d < 0 || (d > 0 && nonzero > TEXT_MAX / d)) return -1;
    if (d == 0) zero = 1;
    else nonzero *= d;
  }
  return zero ? 0 : nonzero;
}

static int str_valid(sw_str s) { return s.len >= 0 && s.len <= TEXT_MAX && (s.len == 0 || s.ptr != 0); }

/* len bytes of the pool at off, or {0, 0} when empty (the pool may have no bytes at all) */
static sw_str pool_str(uint8_t* pool, int64_t off, int64_t len) {
  return len ? sw_str_make(pool + off, len) : sw_str_make(NULL, 0);
}

static int bytes_equal(const uint8_t* a, const uint8_t* b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* ---- broadcasting ------------------------------------------------------------------- */

/* A walk over the broadcast of a and b in row-major order: ia and ib are the elements of a
 * and b that output element i reads. */
typedef struct bcast {
  int32_t rank;
  int64_t shape[SW_MAX_RANK];
  int64_t step_a[SW_MAX_RANK], step_b[SW_MAX_RANK]; /* element strides, 0 along a stretched dim */
  int64_t idx[SW_MAX_RANK];
  int64_t n, ia, ib;
} bcast;

static sw_status_t bcast_init(bcast* bc, const sw_tensor* a, const sw_tensor* b) {
  if (numel(a) < 0 || numel(b) < 0) return SW_INTERNAL;
  bc->rank = a->rank > b->rank ? a->rank : b->rank;
  bc->n = 1;
  bc->ia = bc->ib = 0;
  int64_t sa = 1, sb = 1;
  for (int32_t k = bc->rank - 1; k >= 0; k--) {
    int32_t ka = k - (bc->rank - a->rank), kb = k - (bc->rank - b->rank);
    int64_t da = ka >= 0 ? a->shape[ka] : 1, db = kb >= 0 ? b->shape[kb] : 1;
    if (da != db && da != 1 && db != 1) return SW_INTERNAL; /* the compiler checks broadcasting first */
    int64_t d = da == 1 ? db : da;
    bc->shape[k] = d;
    bc->step_a[k] = da == 1 ? 0 : sa;
    bc->step_b[k] = db == 1 ? 0 : sb;
    bc->idx[k] = 0;
    sa *= da;
    sb *= db;
    if (d > 0 && bc->n > TEXT_MAX / d) return SW_INTERNAL;
    bc->n *= d;
  }
  return SW_OK;
}

static void bcast_next(bcast* bc) {
  for (int32_t k = bc->rank - 1; k >= 0; k--) {
    bc->ia += bc->step_a[k];
    bc->ib += bc->step_b[k];
    if (++bc->idx[k] < bc->shape[k]) return;
    bc->ia -= bc->step_a[k] * bc->shape[k];
    bc->ib -= bc->step_b[k] * bc->shape[k];
    bc->idx[k] = 0;
  }
}

static int bcast_is_shape_of(const bcast* bc, const sw_tensor* out) {
  if (out->rank != bc->rank) return 0;
  for (int32_t k = 0; k < bc->rank; k++)
    if (out->shape[k] != bc->shape[k]) return 0;
  return 1;
}

/* ---- Equal -------------------------------------------------------------------------- */

sw_status_t sw_text_equal(SW_LIB_ARGS) {
  (void)scalars, (void)detail, (void)params, (void)blob;
  bcast bc;
  sw_status_t st = bcast_init(&bc, t[0], t[1]);
  if (st != SW_OK) return st;
  if (!bcast_is_shape_of(&bc, t[2])) return SW_INTERNAL;
  const sw_str* a = (const sw_str*)t[0]->data;
  const sw_str* b = (const sw_str*)t[1]->data;
  uint8_t* out = (uint8_t*)t[2]->data;
  for (int64_t i = 0; i < bc.n; i++, bcast_next(&bc)) {
    if (*cancel) return SW_CANCELLED;
    sw_str x = a[bc.ia], y = b[bc.ib];
    if (!str_valid(x) || !str_valid(y)) return SW_INTERNAL;
    out[i] = x.len == y.len && bytes_equal(sw_str_bytes(x), sw_str_bytes(y), x.len);
  }
  return SW_OK;
}

/* ---- StringConcat ------------------------------------------------------------------- */

/* The total bytes of a + b over the broadcast (*total); when out is not NULL, also writes
 * each result into the pool (cap bytes) and its element into out. */
static sw_status_t concat(sw_tensor* const* t, const volatile int32_t* cancel, int64_t* total, uint8_t* pool,
                          int64_t cap, sw_str* out) {
  bcast bc;
  sw_status_t st = bcast_init(&bc, t[0], t[1]);
  if (st != SW_OK) return st;
  const sw_str* a = (const sw_str*)t[0]->data;
  const sw_str* b = (const sw_str*)t[1]->data;
  int64_t off = 0;
  for (int64_t i = 0; i < bc.n; i++, bcast_next(&bc)) {
    if (*cancel) return SW_CANCELLED;
    sw_str x = a[bc.ia], y = b[bc.ib];
    if (!str_valid(x) || !str_valid(y)) return SW_INTERNAL;
    int64_t len = x.len + y.len;
    if (len > TEXT_MAX - off) return SW_INTERNAL;
    if (out) {
      if (len > cap - off) return SW_INTERNAL;
      if (x.len) __builtin_memcpy(pool + off, sw_str_bytes(x), (size_t)x.len);
      if (y.len) __builtin_memcpy(pool + off + x.len, sw_str_bytes(y), (size_t)y.len);
      out[i] = pool_str(pool, off, len);
    }
    off += len;
  }
  *total = off;
  return SW_OK;
}

sw_status_t sw_text_concat_size(SW_LIB_ARGS) {
  (void)detail, (void)params, (void)blob;
  return concat(t, cancel, &scalars[0], NULL, 0, NULL);
}

sw_status_t sw_text_concat(SW_LIB_ARGS) {
  (void)scalars, (void)detail, (void)params, (void)blob;
  bcast bc;
  sw_status_t st = bcast_init(&bc, t[0], t[1]);
  if (st != SW_OK) return st;
  int64_t cap = numel(t[2]), total;
  if (cap < 0 || !bcast_is_shape_of(&bc, t[3])) return SW_INTERNAL;
  return concat(t, cancel, &total, (uint8_t*)t[2]->data, cap, (sw_str*)t[3]->data);
}

/* ---- UTF-8 and the Unicode tables --------------------------------------------------- */

/* The unit at s[i] (i < n) and its length in bytes: a code point, or 0xDC00 + the byte for
 * a byte that starts no well-formed sequence (as Python's surrogateescape decodes it; the
 * decoder never yields a real surrogate, so the two cannot be confused). */
static int64_t utf8_decode(const uint8_t* s, int64_t n, int64_t i, uint32_t* unit) {
  uint32_t b = s[i], c = 0, min = 0;
  int64_t len = 0;
  if (b < 0x80) {
    *unit = b;
    return 1;
  }
  if (b >= 0xC2 && b <= 0xDF) len = 2, c = b & 0x1F, min = 0x80;
  else if (b >= 0xE0 && b <= 0xEF) len = 3, c = b & 0x0F, min = 0x800;
  else if (b >= 0xF0 && b <= 0xF4) len = 4, c = b & 0x07, min = 0x10000;
  if (len > 0 && len <= n - i) {
    int64_t k = 1;
    for (; k < len && (s[i + k] & 0xC0) == 0x80; k++) c = c << 6 | (s[i + k] & 0x3F);
    if (k == len && c >= min && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF)) {
      *unit = c;
      return len;
    }
  }
  *unit = 0xDC00 + b;
  return 1;
}

static int64_t utf8_length(uint32_t unit) {
  if (unit < 0x80 || (unit >= 0xDC80 && unit <= 0xDCFF)) return 1;
  return unit < 0x800 ? 2 : unit < 0x10000 ? 3 : 4;
}

static void utf8_encode(uint32_t unit, uint8_t* p) {
  if (unit < 0x80 || (unit >= 0xDC80 && unit <= 0xDCFF)) {
    p[0] = (uint8_t)unit; /* a kept byte: its low 8 bits */
  } else if (unit < 0x800) {
    p[0] = (uint8_t)(0xC0 | unit >> 6);
    p[1] = (uint8_t)(0x80 | (unit & 0x3F));
  } else if (unit < 0x10000) {
    p[0] = (uint8_t)(0xE0 | unit >> 12);
    p[1] = (uint8_t)(0x80 | (unit >> 6 & 0x3F));
    p[2] = (uint8_t)(0x80 | (unit & 0x3F));
  } else {
    p[0] = (uint8_t)(0xF0 | unit >> 18);
    p[1] = (uint8_t)(0x80 | (unit >> 12 & 0x3F));
    p[2] = (uint8_t)(0x80 | (unit >> 6 & 0x3F));
    p[3] = (uint8_t)(0x80 | (unit & 0x3F));
  }
}

static int in_ranges(const sw_cp_range* r, int64_t n, uint32_t cp) {
  int64_t lo = 0, hi = n; /* the first range that ends at or after cp */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (r[mid].hi < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && r[lo].lo <= cp;
}

static int is_space(uint32_t cp) { return in_ranges(sw_space, SW_SPACE_COUNT, cp); }

/* cp's full case mapping into out (SW_CASE_MAX_MULTI units); returns how many units */
static int32_t case_map(uint32_t cp, int32_t upper, uint32_t* out) {
  if (cp < 0x80) {
    int changes = upper ? cp >= 'a' && cp <= 'z' : cp >= 'A' && cp <= 'Z';
    out[0] = changes ? cp ^ 0x20 : cp;
    return 1;
  }
  const sw_case_run* runs = upper ? sw_upper_runs : sw_lower_runs;
  int64_t lo = 0, hi = upper ? SW_UPPER_RUNS_COUNT : SW_LOWER_RUNS_COUNT;
  while (lo < hi) { /* the first run that starts after cp */
    int64_t mid = lo + (hi - lo) / 2;
    if (runs[mid].first <= cp) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0) {
    const sw_case_run* r = &runs[lo - 1];
    uint32_t off = cp - r->first;
    if (off % r->stride == 0 && off / r->stride < r->count) {
      out[0] = (uint32_t)((int32_t)cp + r->delta);
      return 1;
    }
  }
  const sw_case_multi* multi = upper ? sw_upper_multi : sw_lower_multi;
  lo = 0, hi = upper ? SW_UPPER_MULTI_COUNT : SW_LOWER_MULTI_COUNT;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (multi[mid].cp < cp) lo = mid + 1;
    else hi = mid;
  }
  if (lo < (upper ? SW_UPPER_MULTI_COUNT : SW_LOWER_MULTI_COUNT) && multi[lo].cp == cp) {
    for (uint32_t k = 0; k < multi[lo].n; k++) out[k] = multi[lo].to[k];
    return (int32_t)multi[lo].n;
  }
  out[0] = cp;
  return 1;
}

/* A string's case mapping, one unit at a time (see utf8_decode for units). */
typedef struct case_iter {
  const uint8_t* s;
  int64_t n, i;
  int32_t upper;
  int32_t after_cased; /* the last unit before i that is not case-ignorable is cased (Final_Sigma) */
  uint32_t out[SW_CASE_MAX_MULTI];
  int32_t nout, kout;
} case_iter;

static void case_iter_init(case_iter* it, sw_str s, int32_t upper) {
  it->s = s.len ? sw_str_bytes(s) : NULL;
  it->n = s.len;
  it->i = 0;
  it->upper = upper;
  it->after_cased = 0;
  it->nout = it->kout = 0;
}

/* Whether the capital sigma that ends before s[i] is final: after a cased letter (the
 * caller knows), and no cased letter follows once case-ignorable units are skipped. The
 * scan stops at the next unit that is not case-ignorable, so over a string the scans never
 * overlap: linear in all. */
static int sigma_is_final(const uint8_t* s, int64_t n, int64_t i) {
  while (i < n) {
    uint32_t cp;
    i += utf8_decode(s, n, i, &cp);
    if (!in_ranges(sw_case_ignorable, SW_CASE_IGNORABLE_COUNT, cp)) return !in_ranges(sw_cased, SW_CASED_COUNT, cp);
  }
  return 1;
}

/* The next unit of the mapping into *unit; 0 at the end. */
static int case_next(case_iter* it, uint32_t* unit) {
  if (it->kout == it->nout) {
    if (it->i >= it->n) return 0;
    uint32_t cp;
    it->i += utf8_decode(it->s, it->n, it->i, &cp);
    it->kout = 0;
    if (it->upper) {
      it->nout = case_map(cp, 1, it->out);
      /* Final_Sigma only lower-cases; upper-casing needs no context */
    } else {
      if (cp == 0x3A3) {
        it->out[0] = it->after_cased && sigma_is_final(it->s, it->n, it->i) ? 0x3C2 : 0x3C3;
        it->nout = 1;
      } else {
        it->nout = case_map(cp, 0, it->out);
      }
      if (!in_ranges(sw_case_ignorable, SW_CASE_IGNORABLE_COUNT, cp))
        it->after_cased = in_ranges(sw_cased, SW_CASED_COUNT, cp);
    }
  }
  *unit = it->out[it->kout++];
  return 1;
}

/* ---- StringSplit -------------------------------------------------------------------- */

/* The delimiter, prepared for Two-Way search: the needle x = uv is cut at its critical
 * factorization (u = x[0..ell], v the rest); v is matched left to right, then u right to
 * left, and a mismatch shifts by what the factorization proves safe. */
typedef struct finder {
  const uint8_t* x;
  int64_t m, ell, per;
  int periodic; /* x has period per: remember the matched prefix across a shift */
} finder;

/* The maximal suffix of x under the byte order (flip 0) or its reverse (flip 1): returns
 * the index just before it and its period in *period (which is at most its length). */
static int64_t max_suffix(const uint8_t* x, int64_t m, int flip, int64_t* period) {
  int64_t ms = -1, j = 0, k = 1, p = 1;
  while (j + k < m) {
    uint8_t a = x[j + k], b = x[ms + k];
    if (a == b) {
      if (k == p) j += p, k = 1;
      else k++;
    } else if ((a < b) != flip) {
      j += k, k = 1, p = j - ms;
    } else {
      ms = j, j = ms + 1, k = p = 1;
    }
  }
  *period = p;
  return ms;
}

static void finder_init(finder* f, const uint8_t* x, int64_t m) {
  int64_t p, q;
  int64_t i = max_suffix(x, m, 0, &p), j = max_suffix(x, m, 1, &q);
  f->x = x;
  f->m = m;
  f->ell = i > j ? i : j;
  f->per = i > j ? p : q;
  /* per <= m - ell - 1, so x[per .. per + ell] is inside x */
  f->periodic = bytes_equal(x, x + f->per, f->ell + 1);
  if (!f->periodic) f->per = (f->ell + 1 > f->m - f->ell - 1 ? f->ell + 1 : f->m - f->ell - 1) + 1;
}

/* The first occurrence of the needle in y[from, n), as an index into y; -1 if none. */
static int64_t finder_find(const finder* f, const uint8_t* y, int64_t from, int64_t n) {
  const uint8_t* x = f->x;
  int64_t m = f->m, ell = f->ell, j = from;
  if (f->periodic) {
    int64_t memory = -1; /* x[0..memory] is known to match at j */
    while (j <= n - m) {
      int64_t i = (ell > memory ? ell : memory) + 1;
      while (i < m && x[i] == y[i + j]) i++;
      if (i < m) {
        j += i - ell;
        memory = -1;
        continue;
      }
      i = ell;
      while (i > memory && x[i] == y[i + j]) i--;
      if (i <= memory) return j;
      j += f->per;
      memory = m - f->per - 1;
    }
  } else {
    while (j <= n - m) {
      int64_t i = ell + 1;
      while (i < m && x[i] == y[i + j]) i++;
      if (i < m) {
        j += i - ell;
        continue;
      }
      i = ell;
      while (i >= 0 && x[i] == y[i + j]) i--;
      if (i < 0) return j;
      j += f->per;
    }
  }
  return -1;
}

typedef struct splitter {
  int whitespace; /* split on runs of white space (no delimiter, or an empty one) */
  int64_t maxsplit; /* < 0: no limit */
  finder f;
} splitter;

static sw_status_t splitter_init(splitter* sp, const int64_t* params, const uint8_t* blob) {
  int64_t len = params[2];
  if (len < 0) return SW_INTERNAL;
  sp->whitespace = !params[0] || len == 0;
  sp->maxsplit = params[1];
  if (!sp->whitespace) finder_init(&sp->f, blob, len);
  return SW_OK;
}

static void put_part(sw_str* out, int64_t cap, int64_t k, sw_str s, int64_t from, int64_t len) {
  if (out && k < cap) {
    out[k].ptr = s.ptr + from; /* an address, as sw_str_make would make it */
    out[k].len = len;
  }
}

/* The end of the run of white space (space 1) or of other units (space 0) at p[i]. */
static int64_t skip_units(const uint8_t* p, int64_t n, int64_t i, int space) {
  while (i < n) {
    uint32_t cp;
    int64_t len = utf8_decode(p, n, i, &cp);
    if (is_space(cp) != space) break;
    i += len;
  }
  return i;
}

/* s split as str.split(delimiter, maxsplit) or str.split(None, maxsplit): returns how many
 * parts, and writes the first cap of them into out when out is not NULL. */
static int64_t split_one(const splitter* sp, sw_str s, sw_str* out, int64_t cap) {
  const uint8_t* p = s.len ? sw_str_bytes(s) : NULL;
  int64_t n = s.len, i = 0, k = 0, left = sp->maxsplit;
  if (!sp->whitespace) {
    for (; left != 0; left -= left > 0) {
      int64_t at = finder_find(&sp->f, p, i, n);
      if (at < 0) break;
      put_part(out, cap, k++, s, i, at - i);
      i = at + sp->f.m;
    }
    put_part(out, cap, k++, s, i, n - i);
    return k;
  }
  for (;; left -= left > 0) {
    i = skip_units(p, n, i, 1);
    if (i == n) return k;
    if (left == 0) { /* the splits are spent: the rest is the last part */
      put_part(out, cap, k++, s, i, n - i);
      return k;
    }
    int64_t start = i;
    i = skip_units(p, n, i, 0);
    put_part(out, cap, k++, s, start, i - start);
  }
}

sw_status_t sw_text_split_count(SW_LIB_ARGS) {
  (void)detail;
  splitter sp;
  sw_status_t st = splitter_init(&sp, params, blob);
  if (st != SW_OK) return st;
  int64_t n = numel(t[0]), most = 0;
  if (n < 0) return SW_INTERNAL;
  const sw_str* x = (const sw_str*)t[0]->data;
  for (int64_t i = 0; i < n; i++) {
    if (*cancel) return SW_CANCELLED;
    if (!str_valid(x[i])) return SW_INTERNAL;
    int64_t parts = split_one(&sp, x[i], NULL, 0);
    if (parts > most) most = parts;
  }
  scalars[0] = most;
  return SW_OK;
}

sw_status_t sw_text_split(SW_LIB_ARGS) {
  (void)scalars, (void)detail;
  splitter sp;
  sw_status_t st = splitter_init(&sp, params, blob);
  if (st != SW_OK) return st;
  const sw_tensor *xt = t[0], *yt = t[1], *zt = t[2];
  int64_t n = numel(xt);
  if (n < 0 || numel(yt) < 0 || numel(zt) < 0 || yt->rank != xt->rank + 1 || zt->rank != xt->rank)
    return SW_INTERNAL;
  for (int32_t k = 0; k < xt->rank; k++)
    if (yt->shape[k] != xt->shape[k] || zt->shape[k] != xt->shape[k]) return SW_INTERNAL;
  int64_t cap = yt->shape[xt->rank];
  const sw_str* x = (const sw_str*)xt->data;
  sw_str* y = (sw_str*)yt->data;
  int64_t* z = (int64_t*)zt->data;
  for (int64_t i = 0; i < n; i++) {
    if (*cancel) return SW_CANCELLED;
    if (!str_valid(x[i])) return SW_INTERNAL;
    sw_str* row = cap ? y + i * cap : NULL; /* NULL: count only */
    int64_t parts = split_one(&sp, x[i], row, cap);
    if (parts > cap) return SW_INTERNAL; /* y's last dim is not what sw_text_split_count said */
    for (int64_t k = parts; k < cap; k++) row[k] = sw_str_make(NULL, 0);
    z[i] = parts;
  }
  return SW_OK;
}

/* ---- StringNormalizer --------------------------------------------------------------- */

typedef struct normalizer {
  int32_t change; /* 0 NONE, 1 LOWER, 2 UPPER */
  int32_t case_sensitive;
  int64_t nstop;
  const int64_t* lens; /* each stopword's bytes, one after another in words */
  const uint8_t* words;
} normalizer;

static sw_status_t normalizer_init(normalizer* nz, const int64_t* params, const uint8_t* blob) {
  nz->change = (int32_t)params[0];
  nz->case_sensitive = params[1] != 0;
  nz->nstop = params[2];
  nz->lens = params + 3;
  nz->words = blob;
  if (params[0] < 0 || params[0] > 2 || nz->nstop < 0 || nz->nstop > TEXT_MAX) return SW_INTERNAL;
  int64_t total = 0;
  for (int64_t w = 0; w < nz->nstop; w++) {
    if (nz->lens[w] < 0 || nz->lens[w] > TEXT_MAX - total) return SW_INTERNAL;
    total += nz->lens[w];
  }
  return SW_OK;
}

/* a and b are equal once both are case-mapped (upper or lower) */
static int equal_mapped(sw_str a, sw_str b, int32_t upper) {
  case_iter ia, ib;
  case_iter_init(&ia, a, upper);
  case_iter_init(&ib, b, upper);
  for (;;) {
    uint32_t ua, ub;
    int more_a = case_next(&ia, &ua), more_b = case_next(&ib, &ub);
    if (more_a != more_b) return 0;
    if (!more_a) return 1;
    if (ua != ub) return 0;
  }
}

static int is_stopword(const normalizer* nz, sw_str s) {
  const uint8_t* word = nz->words;
  for (int64_t w = 0; w < nz->nstop; word += nz->lens[w], w++) {
    sw_str stop = sw_str_make(word, nz->lens[w]);
    if (nz->case_sensitive) {
      if (s.len == stop.len && bytes_equal(sw_str_bytes(s), word, s.len)) return 1;
    } else if (equal_mapped(s, stop, nz->change == 2)) {
      return 1;
    }
  }
  return 0;
}

/* Walks x as both functions do: *kept output elements (1 when none is kept), *bytes of new
 * text; when out is not NULL, also writes the text into the pool (cap bytes) and the
 * elements into out (out_n of them). */
static sw_status_t normalize(sw_tensor* const* t, const volatile int32_t* cancel, const int64_t* params,
                             const uint8_t* blob, int64_t* kept, int64_t* bytes, uint8_t* pool, int64_t cap,
                             sw_str* out, int64_t out_n) {
  normalizer nz;
  sw_status_t st = normalizer_init(&nz, params, blob);
  if (st != SW_OK) return st;
  const sw_tensor* xt = t[0];
  int64_t n = numel(xt);
  if (n < 0 || xt->rank < 1 || xt->rank > 2 || (xt->rank == 2 && xt->shape[0] != 1)) return SW_INTERNAL;
  const sw_str* x = (const sw_str*)xt->data;
  int64_t k = 0, off = 0;
  for (int64_t i = 0; i < n; i++) {
    if (*cancel) return SW_CANCELLED;
    if (!str_valid(x[i])) return SW_INTERNAL;
    if (is_stopword(&nz, x[i])) continue;
    if (out && k >= out_n) return SW_INTERNAL;
    if (nz.change == 0) {
      if (out) out[k] = x[i];
    } else {
      case_iter it;
      case_iter_init(&it, x[i], nz.change == 2);
      int64_t start = off;
      uint32_t unit;
      while (case_next(&it, &unit)) {
        int64_t len = utf8_length(unit);
        if (len > TEXT_MAX - off) return SW_INTERNAL;
        if (out) {
          if (len > cap - off) return SW_INTERNAL;
          utf8_encode(unit, pool + off);
        }
        off += len;
      }
      if (out) out[k] = pool_str(pool, start, off - start);
    }
    k++;
  }
  if (k == 0) { /* nothing kept: one empty string */
    if (out && out_n < 1) return SW_INTERNAL;
    if (out) out[0] = sw_str_make(NULL, 0);
    k = 1;
  }
  if (out && k != out_n) return SW_INTERNAL;
  *kept = k;
  *bytes = off;
  return SW_OK;
}

sw_status_t sw_text_normalize_size(SW_LIB_ARGS) {
  (void)detail;
  return normalize(t, cancel, params, blob, &scalars[0], &scalars[1], NULL, 0, NULL, 0);
}

sw_status_t sw_text_normalize(SW_LIB_ARGS) {
  (void)scalars, (void)detail;
  const sw_tensor *xt = t[0], *yt = t[2];
  int64_t cap = numel(t[1]), out_n = numel(yt), kept, bytes;
  if (cap < 0 || out_n < 0 || yt->rank != xt->rank || (yt->rank == 2 && yt->shape[0] != 1)) return SW_INTERNAL;
  return normalize(t, cancel, params, blob, &kept, &bytes, (uint8_t*)t[1]->data, cap, (sw_str*)yt->data, out_n);
}
