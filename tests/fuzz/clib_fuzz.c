/* The fuzz driver of the C libraries (wasm_runtime/clib, sw_lib.h), built natively with
 * sanitizers by tests/fuzz/clib_fuzz.py, which writes the cases and runs this on them:
 *
 *     clib_fuzz CASE...
 *
 * For each case it prints "start N" before and "done N STATUS" after (stdout, flushed), so
 * the harness knows which case a crash or a sanitizer report belongs to. A finding is a
 * sanitizer report (the build makes every one fatal), a crash, a case that runs past its
 * alarm, or an oracle below that fails (it prints "ORACLE: ..." and aborts).
 *
 * Every buffer the libraries read or write is allocated with its exact size: with
 * AddressSanitizer, by malloc; without it, at the end of its own mapping followed by a page
 * that cannot be read, so a read or write past the end faults either way.
 *
 * A case is a little-endian record (the harness's encode_* functions write them):
 *   'I' u8 pixel_format u8 cancel, then the image's bytes to the end;
 *   'R' u32 nwords, i64 words[nwords] (a RegexFullMatch program, padded here with zeros
 *       to SW_RX_MAX_WORDS as the compiler's params are long enough for their counts),
 *       u8 tampered (the words were changed: SW_INTERNAL is then a right answer), strings;
 *   'T' u8 op: 0 StringSplit (u8 has_delimiter, i64 maxsplit, blob delimiter, strings),
 *       1 StringNormalizer (u8 case_change, u8 case_sensitive, u32 n, n blobs, strings),
 *       2 StringConcat and 3 Equal (strings a, strings b: b has one element or a's count),
 *       4 a string constant (u8 tampered, u32 count, blob: the packed bytes; when
 *       tampered with, SW_INTERNAL is a right answer too);
 * strings: u32 count, then count blobs; blob: u32 length, then the bytes.
 *
 * Oracles: the image probe and decode return SW_OK or SW_INVALID_INPUT with a reason code,
 * the decode agrees with itself whatever the scratch and output buffers held before
 * (nothing is left unwritten or read before it is written), StringSplit's parts point into
 * their own element, StringNormalizer's and StringConcat's outputs into the pool or the
 * input, and the text kernels return SW_OK on any text. Output strings' bytes are read, so
 * a pointer out of bounds faults.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sw_lib.h"
#include "sw_regex_ops.h"

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define WITH_ASAN 1
#else
#define WITH_ASAN 0
#endif

#define CASE_SECONDS 20 /* a case running longer is a hang */
#define MAX_OUT_BYTES ((int64_t)16 << 20) /* a decoded image larger than this is not decoded */
#define MAX_SCRATCH_BYTES ((int64_t)64 << 20)
#define MAX_ALLOCS 8192

static const char* current = "";

static void fail(const char* what) {
  printf("ORACLE: %s (%s)\n", what, current);
  fflush(stdout);
  abort();
}

/* ---- exact-size buffers ------------------------------------------------------------- */

static struct {
  void* base;
  size_t size;
} allocs[MAX_ALLOCS];
static int nallocs;

/* n bytes at an address that is a multiple of align, ending as close to the guard page as
 * that allows (a buffer of elements of 8 or 16 bytes ends right at it) */
static void* exact_aligned(size_t n, size_t align) {
  if (nallocs == MAX_ALLOCS) fail("too many buffers in one case");
  if (WITH_ASAN) {
    void* p = malloc(n ? n : 1);
    if (!p) fail("out of memory");
    allocs[nallocs].base = p;
    allocs[nallocs++].size = 0;
    return n ? p : (char*)p + 1; /* an empty buffer: any access is past its end */
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t size = (n + page - 1) / page * page + page;
  char* base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) fail("out of memory");
  if (mprotect(base + size - page, page, PROT_NONE) != 0) fail("mprotect");
  allocs[nallocs].base = base;
  allocs[nallocs++].size = size;
  return base + size - page - (n + align - 1) / align * align;
}

static void* exact(size_t n) { return exact_aligned(n, 1); }

static void free_all(void) {
  for (int i = 0; i < nallocs; i++) {
    if (allocs[i].size) munmap(allocs[i].base, allocs[i].size);
    else free(allocs[i].base);
  }
  nallocs = 0;
}

/* ---- reading a case ------------------------------------------------------------------- */

typedef struct reader {
  const uint8_t* p;
  size_t n, at;
} reader;

static uint64_t read_le(reader* r, int bytes) {
  if (r->n - r->at < (size_t)bytes) fail("the case record is truncated");
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->at + i] << (8 * i);
  r->at += (size_t)bytes;
  return v;
}

/* a blob's bytes in an exact buffer of their own */
static const uint8_t* read_blob_aligned(reader* r, int64_t* len, size_t align) {
  uint32_t n = (uint32_t)read_le(r, 4);
  if (r->n - r->at < n) fail("the case record is truncated");
  uint8_t* p = exact_aligned(n, align);
  memcpy(p, r->p + r->at, n);
  r->at += n;
  *len = n;
  return p;
}

static const uint8_t* read_blob(reader* r, int64_t* len) { return read_blob_aligned(r, len, 1); }

static sw_tensor tensor(void* data, int32_t dtype, int32_t rank, const int64_t* shape) {
  sw_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  for (int32_t i = 0; i < rank; i++) t.shape[i] = shape[i];
  return t;
}

/* a string tensor [count] from the record: each element's bytes in an exact buffer */
static sw_tensor read_strings(reader* r) {
  uint32_t count = (uint32_t)read_le(r, 4);
  if (count > 1 << 20) fail("too many strings");
  sw_str* s = exact_aligned(count * sizeof(sw_str), 8);
  for (uint32_t i = 0; i < count; i++) {
    int64_t len;
    const uint8_t* p = read_blob(r, &len);
    s[i] = sw_str_make(p, len);
  }
  int64_t shape[1] = {count};
  return tensor(s, SW_DT_STRING, 1, shape);
}

static volatile uint64_t sink;

/* reads every byte of s, so a pointer out of bounds faults */
static void touch(sw_str s) {
  if (s.len < 0) fail("a negative string length");
  const volatile uint8_t* p = (const volatile uint8_t*)sw_str_bytes(s);
  uint64_t sum = 0;
  for (int64_t i = 0; i < s.len; i++) sum += p[i];
  sink += sum;
}

static int within(sw_str part, sw_str whole) {
  if (part.len == 0) return 1;
  return part.ptr >= whole.ptr && part.len <= whole.len && part.ptr - whole.ptr <= whole.len - part.len;
}

static int within_bytes(sw_str part, const uint8_t* base, int64_t n) {
  return within(part, sw_str_make(base, n));
}

/* ---- images --------------------------------------------------------------------------- */

static sw_status_t run_image(reader* r) {
  int32_t pixel_format = (int32_t)read_le(r, 1) % 3;
  int32_t cancel_flag = (int32_t)read_le(r, 1) != 0;
  size_t n = r->n - r->at;
  uint8_t* data = exact(n);
  memcpy(data, r->p + r->at, n);
  int64_t dshape[1] = {(int64_t)n};
  sw_tensor x = tensor(data, SW_DT_UINT8, 1, dshape);
  sw_tensor* args[3] = {&x, NULL, NULL};
  int64_t scalars[8] = {0}, detail[3] = {0}, params[1] = {pixel_format};
  volatile int32_t cancel = 0;
  sw_status_t st = sw_image_probe(args, scalars, detail, &cancel, params, NULL);
  if (st == SW_INVALID_INPUT) {
    if (detail[0] < 1 || detail[0] > 5) fail("the probe refused with no reason code");
    return st;
  }
  if (st != SW_OK) fail("the probe returned a status other than OK or INVALID_INPUT");
  int64_t h = scalars[0], w = scalars[1], scratch = scalars[2], ch = pixel_format == 2 ? 1 : 3;
  if (h < 1 || w < 1 || h > 1 << 16 || w > 1 << 16 || scratch < 0) fail("the probe gave impossible sizes");
  if (h * w * ch > MAX_OUT_BYTES || scratch > MAX_SCRATCH_BYTES) return 100; /* too large to try */
  uint8_t* outs[2];
  sw_status_t sts[2];
  for (int k = 0; k < 2; k++) { /* twice, the buffers filled differently */
    uint8_t* work = exact_aligned((size_t)scratch, 16); /* the VM aligns its buffers */
    uint8_t* out = exact((size_t)(h * w * ch));
    memset(work, k ? 0xFF : 0x00, (size_t)scratch);
    memset(out, k ? 0x5A : 0xA5, (size_t)(h * w * ch));
    int64_t wshape[1] = {scratch}, oshape[3] = {h, w, ch};
    sw_tensor tw = tensor(work, SW_DT_UINT8, 1, wshape), to = tensor(out, SW_DT_UINT8, 3, oshape);
    sw_tensor* dargs[3] = {&x, &tw, &to};
    int64_t dsc[8] = {0}, ddet[3] = {0};
    cancel = cancel_flag;
    sts[k] = sw_image_decode(dargs, dsc, ddet, &cancel, params, NULL);
    if (sts[k] == SW_INVALID_INPUT && (ddet[0] < 1 || ddet[0] > 5)) fail("the decode refused with no reason code");
    if (sts[k] != SW_OK && sts[k] != SW_INVALID_INPUT && !(cancel_flag && sts[k] == SW_CANCELLED))
      fail("the decode returned a status other than OK or INVALID_INPUT");
    if (cancel_flag && sts[k] == SW_OK) fail("the decode ignored its cancel flag");
    outs[k] = out;
  }
  if (sts[0] != sts[1]) fail("two decodes of one file gave different statuses");
  if (sts[0] == SW_OK && memcmp(outs[0], outs[1], (size_t)(h * w * ch)) != 0)
    fail("the decoded pixels depend on what the scratch or output buffer held before");
  return sts[0];
}

/* ---- regular expressions ------------------------------------------------------------ */

static sw_status_t run_regex(reader* r) {
  uint32_t nwords = (uint32_t)read_le(r, 4);
  if (nwords > SW_RX_MAX_WORDS) fail("a program longer than SW_RX_MAX_WORDS");
  int64_t* words = exact(SW_RX_MAX_WORDS * sizeof(int64_t));
  memset(words, 0, SW_RX_MAX_WORDS * sizeof(int64_t));
  for (uint32_t i = 0; i < nwords; i++) words[i] = (int64_t)read_le(r, 8);
  int tampered = (int)read_le(r, 1);
  sw_tensor x = read_strings(r);
  uint8_t* out = exact((size_t)x.shape[0]);
  sw_tensor y = tensor(out, SW_DT_BOOL, 1, x.shape);
  sw_tensor* args[2] = {&x, &y};
  int64_t scalars[8] = {0}, detail[3] = {0};
  volatile int32_t cancel = 0;
  sw_status_t st = sw_regex_full_match(args, scalars, detail, &cancel, words, NULL);
  if (st != SW_OK && !(tampered && st == SW_INTERNAL)) fail("RegexFullMatch refused a program the compiler made");
  if (st == SW_OK)
    for (int64_t i = 0; i < x.shape[0]; i++)
      if (out[i] > 1) fail("RegexFullMatch wrote a bool other than 0 or 1");
  return st;
}

/* ---- strings -------------------------------------------------------------------------- */

static sw_status_t run_split(reader* r) {
  int64_t params[3];
  params[0] = (int64_t)read_le(r, 1);
  params[1] = (int64_t)read_le(r, 8);
  const uint8_t* delim = read_blob(r, &params[2]);
  sw_tensor x = read_strings(r);
  sw_tensor* args[3] = {&x, NULL, NULL};
  int64_t scalars[8] = {0}, detail[3] = {0};
  volatile int32_t cancel = 0;
  if (sw_text_split_count(args, scalars, detail, &cancel, params, delim) != SW_OK) fail("split_count failed");
  int64_t n = x.shape[0], cap = scalars[0];
  if (cap < 0 || (n == 0 && cap != 0) || cap > (int64_t)1 << 24) fail("split_count gave an impossible count");
  sw_str* y = exact((size_t)(n * cap) * sizeof(sw_str));
  int64_t* z = exact((size_t)n * sizeof(int64_t));
  int64_t yshape[2] = {n, cap};
  sw_tensor ty = tensor(y, SW_DT_STRING, 2, yshape), tz = tensor(z, SW_DT_INT64, 1, x.shape);
  sw_tensor* sargs[3] = {&x, &ty, &tz};
  if (sw_text_split(sargs, scalars, detail, &cancel, params, delim) != SW_OK) fail("split failed");
  const sw_str* xs = x.data;
  for (int64_t i = 0; i < n; i++) {
    if (z[i] < 0 || z[i] > cap) fail("split's part count is out of range");
    for (int64_t k = 0; k < cap; k++) {
      sw_str part = y[i * cap + k];
      if (k >= z[i] && (part.ptr != 0 || part.len != 0)) fail("split's padding is not empty");
      if (!within(part, xs[i])) fail("a part of split points outside its element");
      touch(part);
    }
  }
  return SW_OK;
}

static sw_status_t run_normalize(reader* r) {
  int64_t change = (int64_t)read_le(r, 1) % 3, sensitive = (int64_t)read_le(r, 1) != 0;
  uint32_t nstop = (uint32_t)read_le(r, 4);
  if (nstop > 1 << 16) fail("too many stopwords");
  int64_t* params = exact((3 + (size_t)nstop) * sizeof(int64_t));
  params[0] = change, params[1] = sensitive, params[2] = nstop;
  /* the stopwords one after another in one exact blob, as the compiler lays them out */
  size_t total = 0, at0 = r->at;
  for (uint32_t w = 0; w < nstop; w++) {
    uint32_t len = (uint32_t)read_le(r, 4);
    if (r->n - r->at < len) fail("the case record is truncated");
    params[3 + w] = len;
    total += len;
    r->at += len;
  }
  uint8_t* blob = exact(total);
  r->at = at0;
  for (uint32_t w = 0, off = 0; w < nstop; w++) {
    uint32_t len = (uint32_t)read_le(r, 4);
    memcpy(blob + off, r->p + r->at, len);
    off += len;
    r->at += len;
  }
  sw_tensor x = read_strings(r);
  sw_tensor* args[3] = {&x, NULL, NULL};
  int64_t scalars[8] = {0}, detail[3] = {0};
  volatile int32_t cancel = 0;
  if (sw_text_normalize_size(args, scalars, detail, &cancel, params, blob) != SW_OK) fail("normalize_size failed");
  int64_t kept = scalars[0], bytes = scalars[1];
  if (kept < 1 || kept > (x.shape[0] > 1 ? x.shape[0] : 1) || bytes < 0 || bytes > (int64_t)1 << 30)
    fail("normalize_size gave impossible sizes");
  uint8_t* pool = exact((size_t)bytes);
  sw_str* out = exact((size_t)kept * sizeof(sw_str));
  int64_t pshape[1] = {bytes}, oshape[1] = {kept};
  sw_tensor tp = tensor(pool, SW_DT_UINT8, 1, pshape), to = tensor(out, SW_DT_STRING, 1, oshape);
  sw_tensor* nargs[3] = {&x, &tp, &to};
  if (sw_text_normalize(nargs, scalars, detail, &cancel, params, blob) != SW_OK) fail("normalize failed");
  const sw_str* xs = x.data;
  for (int64_t k = 0; k < kept; k++) {
    int ok = within_bytes(out[k], pool, bytes);
    for (int64_t i = 0; !ok && i < x.shape[0]; i++) ok = change == 0 && within(out[k], xs[i]);
    if (!ok) fail("a normalized string points outside the pool and the input");
    touch(out[k]);
  }
  return SW_OK;
}

static sw_status_t run_binary(reader* r, int concat) {
  sw_tensor a = read_strings(r), b = read_strings(r);
  if (b.shape[0] != 1 && b.shape[0] != a.shape[0]) fail("the case's shapes do not broadcast");
  int64_t n = a.shape[0];
  int64_t scalars[8] = {0}, detail[3] = {0};
  volatile int32_t cancel = 0;
  if (!concat) {
    uint8_t* out = exact((size_t)n);
    sw_tensor to = tensor(out, SW_DT_BOOL, 1, a.shape);
    sw_tensor* args[3] = {&a, &b, &to};
    if (sw_text_equal(args, scalars, detail, &cancel, NULL, NULL) != SW_OK) fail("equal failed");
    const sw_str *as = a.data, *bs = b.data;
    for (int64_t i = 0; i < n; i++) {
      sw_str sa = as[i], sb = bs[b.shape[0] == 1 ? 0 : i];
      int want = sa.len == sb.len && (sa.len == 0 || memcmp(sw_str_bytes(sa), sw_str_bytes(sb), (size_t)sa.len) == 0);
      if (out[i] != want) fail("Equal gave the wrong answer");
    }
    return SW_OK;
  }
  sw_tensor* args[4] = {&a, &b, NULL, NULL};
  if (sw_text_concat_size(args, scalars, detail, &cancel, NULL, NULL) != SW_OK) fail("concat_size failed");
  int64_t total = scalars[0];
  if (total < 0 || total > (int64_t)1 << 30) fail("concat_size gave an impossible size");
  uint8_t* pool = exact((size_t)total);
  sw_str* out = exact((size_t)n * sizeof(sw_str));
  int64_t pshape[1] = {total};
  sw_tensor tp = tensor(pool, SW_DT_UINT8, 1, pshape), to = tensor(out, SW_DT_STRING, 1, a.shape);
  sw_tensor* cargs[4] = {&a, &b, &tp, &to};
  if (sw_text_concat(cargs, scalars, detail, &cancel, NULL, NULL) != SW_OK) fail("concat failed");
  const sw_str *as = a.data, *bs = b.data;
  for (int64_t i = 0; i < n; i++) {
    sw_str sb = bs[b.shape[0] == 1 ? 0 : i];
    if (out[i].len != as[i].len + sb.len || !within_bytes(out[i], pool, total))
      fail("a concatenated string has the wrong length or points outside the pool");
    touch(out[i]);
  }
  return SW_OK;
}

static sw_status_t run_unpack(reader* r) {
  int tampered = (int)read_le(r, 1);
  uint32_t count = (uint32_t)read_le(r, 4);
  int64_t len;
  /* the packed bytes hold sw_str elements: 8-byte aligned, as the weights place them */
  uint8_t* packed = (uint8_t*)read_blob_aligned(r, &len, 8);
  sw_str* out = exact((size_t)count * sizeof(sw_str));
  int64_t pshape[1] = {len}, oshape[1] = {count};
  sw_tensor tp = tensor(packed, SW_DT_UINT8, 1, pshape), to = tensor(out, SW_DT_STRING, 1, oshape);
  sw_tensor* args[2] = {&tp, &to};
  int64_t scalars[8] = {0}, detail[3] = {0};
  volatile int32_t cancel = 0;
  sw_status_t st = sw_text_unpack(args, scalars, detail, &cancel, NULL, NULL);
  if (st != SW_OK && !(tampered && st == SW_INTERNAL)) fail("unpack refused a string constant the compiler made");
  if (st == SW_OK)
    for (uint32_t i = 0; i < count; i++) {
      if (!within_bytes(out[i], packed, len)) fail("an unpacked string points outside the packed bytes");
      touch(out[i]);
    }
  return st;
}

static sw_status_t run_text(reader* r) {
  switch (read_le(r, 1)) {
    case 0: return run_split(r);
    case 1: return run_normalize(r);
    case 2: return run_binary(r, 1);
    case 3: return run_binary(r, 0);
    case 4: return run_unpack(r);
    default: fail("an unknown text op"); return 0;
  }
}

/* ---- main ----------------------------------------------------------------------------- */

static uint8_t* read_file(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  uint8_t* buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *n = len;
  return buf;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    current = argv[i];
    size_t n;
    uint8_t* data = read_file(argv[i], &n);
    if (!data) {
      printf("missing %d\n", i - 1);
      fflush(stdout);
      continue;
    }
    printf("start %d\n", i - 1);
    fflush(stdout);
    alarm(CASE_SECONDS);
    reader r = {data, n, 1};
    sw_status_t st = 0;
    if (n == 0) fail("an empty case");
    switch (data[0]) {
      case 'I': st = run_image(&r); break;
      case 'R': st = run_regex(&r); break;
      case 'T': st = run_text(&r); break;
      default: fail("an unknown case kind");
    }
    alarm(0);
    free_all();
    free(data);
    printf("done %d %d\n", i - 1, st);
    fflush(stdout);
  }
  return 0;
}
