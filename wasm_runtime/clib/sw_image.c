/* ImageDecoder (sw_lib.h): BMP, PNM, TIFF, PNG and JPEG decoded to the pixels Pillow gives;
 * WebP and JPEG 2000 recognized by their signatures and refused.
 *
 * Pillow is the reference because ONNX's reference implementation and test data are made with
 * it. RGB is Pillow's image converted to RGB (a palette looked up, gray repeated, alpha
 * dropped), Grayscale is Pillow's RGB->L (ITU-R 601-2 luma in 16-bit fixed point) of that,
 * BGR reverses RGB. Where Pillow reads a file its own way (a BMP palette too short, PNM's
 * comments inside tokens, a TIFF with more strip offsets than strips) this file does the same;
 * where Pillow's result is not a decoding (16-bit gray clipped to 255, premultiplied alpha) it
 * refuses with SW_REASON_IMAGE_UNSUPPORTED_FEATURE. JPEG is decoded as libjpeg-turbo does by
 * default: "islow" integer IDCT, "fancy" triangular chroma upsampling, fixed-point YCbCr->RGB;
 * the one difference is a progressive file whose scans stop before the low coefficients are
 * fully refined, which libjpeg smooths across blocks and this decodes as it stands.
 *
 * No allocation: sw_image_probe reads the headers and returns the scratch bytes the decode
 * needs (PNG's inflated scanlines, JPEG's component planes and progressive coefficients);
 * sw_image_decode parses the headers again itself and checks the buffers it was given against
 * what they need. Every read is checked against the input's length; every loop is bounded by
 * the input or the output size.
 */
#include "sw_lib.h"

#define IMG_MAX_SIDE 16384

/* Internal results: IMG_OK, a SW_REASON_IMAGE_* code, or IMG_CANCELLED. */
#define IMG_OK 0
#define IMG_CANCELLED (-1)
#define UNRECOGNIZED SW_REASON_IMAGE_UNRECOGNIZED
#define UNSUPPORTED_FORMAT SW_REASON_IMAGE_UNSUPPORTED_FORMAT
#define UNSUPPORTED SW_REASON_IMAGE_UNSUPPORTED_FEATURE
#define CORRUPT SW_REASON_IMAGE_CORRUPT
#define TOO_LARGE SW_REASON_IMAGE_TOO_LARGE

#define TRY(expr)          \
  do {                     \
    int r_ = (expr);       \
    if (r_ != IMG_OK) {    \
      return r_;           \
    }                      \
  } while (0)

enum { PIX_RGB = 0, PIX_BGR = 1, PIX_GRAY = 2 };
enum { FMT_BMP = 1, FMT_PNM, FMT_TIFF, FMT_PNG, FMT_JPEG };

typedef struct {
  const uint8_t* p;
  uint64_t n;
} img_bytes;

static int has(const img_bytes* d, uint64_t off, uint64_t len) { return off <= d->n && len <= d->n - off; }

/* memcmp would be a libc call in the freestanding wasm build. */
static int same(const uint8_t* p, const char* text, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != (uint8_t)text[i]) {
      return 0;
    }
  }
  return 1;
}

static uint32_t le16(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t* p) { return le16(p) | le16(p + 2) << 16; }
static uint32_t be16(const uint8_t* p) { return (uint32_t)p[0] << 8 | (uint32_t)p[1]; }
static uint32_t be32(const uint8_t* p) { return be16(p) << 16 | be16(p + 2); }

/* Where decoded pixels go: the output tensor, in the requested pixel format. */
typedef struct {
  uint8_t* px;
  int64_t width;
  int32_t format;  /* PIX_* */
  int32_t channels;
  const volatile int32_t* cancel;
} img_sink;

static uint8_t* sink_row(const img_sink* s, int64_t y) { return s->px + y * s->width * s->channels; }

static int sink_poll(const img_sink* s) { return *s->cancel ? IMG_CANCELLED : IMG_OK; }

/* Pillow's RGB->L: L = R*299/1000 + G*587/1000 + B*114/1000, as 16-bit fixed point rounded. */
static uint8_t luma(uint32_t r, uint32_t g, uint32_t b) {
  return (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

static void put_rgb(const img_sink* s, uint8_t* row, int64_t x, uint8_t r, uint8_t g, uint8_t b) {
  switch (s->format) {
    case PIX_RGB:
      row[3 * x] = r, row[3 * x + 1] = g, row[3 * x + 2] = b;
      break;
    case PIX_BGR:
      row[3 * x] = b, row[3 * x + 1] = g, row[3 * x + 2] = r;
      break;
    default:
      row[x] = luma(r, g, b);
      break;
  }
}

/* A gray source: RGB repeats it, and L of (v, v, v) is v. */
static void put_gray(const img_sink* s, uint8_t* row, int64_t x, uint8_t v) {
  if (s->format == PIX_GRAY) {
    row[x] = v;
  } else {
    row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = v;
  }
}

/* The sample at index i of a row packed MSB first with `bits` (1, 2, 4 or 8) per sample. */
static uint32_t packed_sample(const uint8_t* row, int64_t i, int32_t bits) {
  if (bits == 8) {
    return row[i];
  }
  int64_t bit = i * bits;
  return (uint32_t)(row[bit >> 3] >> (8 - bits - (bit & 7))) & ((1u << bits) - 1);
}

static uint8_t bit_reverse(uint8_t v) {
  v = (uint8_t)((v & 0xF0) >> 4 | (v & 0x0F) << 4);
  v = (uint8_t)((v & 0xCC) >> 2 | (v & 0x33) << 2);
  return (uint8_t)((v & 0xAA) >> 1 | (v & 0x55) << 1);
}

static int check_size(uint64_t width, uint64_t height) {
  if (width == 0 || height == 0) {
    return CORRUPT;
  }
  return width > IMG_MAX_SIDE || height > IMG_MAX_SIDE ? TOO_LARGE : IMG_OK;
}

/* ---- BMP ------------------------------------------------------------------------------- */

enum { BMP_PALETTE, BMP_555, BMP_565, BMP_BYTES, BMP_RLE8, BMP_RLE4 };

typedef struct {
  uint64_t data;    /* first stored row */
  uint64_t stride;
  int32_t bits;
  int32_t top_down;
  int32_t kind;     /* BMP_* */
  int32_t r, g, b;  /* BMP_BYTES: byte of each channel within a pixel */
  uint64_t pal;     /* palette: offset, entries, bytes per entry */
  uint64_t colors;
  int32_t pal_step;
  int32_t gray;     /* Pillow took the palette for a gray ramp: indices are gray levels */
} bmp_info;

/* Pillow's list of BITFIELDS layouts for 32-bit pixels: (r, g, b, alpha) masks. */
static const uint32_t BMP_MASKS32[][4] = {
    {0xFF0000, 0xFF00, 0xFF, 0x0},      {0xFF000000, 0xFF0000, 0xFF00, 0x0},
    {0xFF000000, 0xFF00, 0xFF, 0x0},    {0xFF000000, 0xFF0000, 0xFF00, 0xFF},
    {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, {0xFF0000, 0xFF00, 0xFF, 0xFF000000},
    {0xFF000000, 0xFF00, 0xFF, 0xFF0000}, {0x0, 0x0, 0x0, 0x0},
};

static int32_t mask_byte(uint32_t mask) {
  int32_t i = 0;
  while (i < 3 && mask != 0xFFu << (8 * i)) {
    i++;
  }
  return i;
}

static int bmp_parse(const img_bytes* d, bmp_info* info, int64_t* width, int64_t* height) {
  if (!has(d, 0, 18)) {
    return CORRUPT;
  }
  uint64_t offset = le32(d->p + 10);
  uint32_t hsize = le32(d->p + 14);
  if (hsize != 12 && hsize != 40 && hsize != 52 && hsize != 56 && hsize != 64 && hsize != 108 && hsize != 124) {
    return UNSUPPORTED;
  }
  if (!has(d, 14, hsize)) {
    return CORRUPT;
  }
  const uint8_t* h = d->p + 14;
  uint64_t w, ht;
  uint32_t compression = 0, colors = 0;
  __builtin_memset(info, 0, sizeof *info);
  if (hsize == 12) {
    w = le16(h + 4), ht = le16(h + 6);
    info->bits = (int32_t)le16(h + 10);
    info->pal_step = 3;
  } else {
    w = le32(h + 4), ht = le32(h + 8);
    if (h[11] == 0xFF) {  /* a negative height: rows stored top down */
      info->top_down = 1;
      ht = 0x100000000ull - ht;
    }
    info->bits = (int32_t)le16(h + 14);
    compression = le32(h + 16);
    colors = le32(h + 32);
    info->pal_step = 4;
  }
  TRY(check_size(w, ht));
  int32_t bits = info->bits;
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32) {
    return UNSUPPORTED;
  }
  info->colors = colors ? colors : (bits <= 8 ? 1u << bits : 0);
  if (offset == 14u + hsize && bits <= 8) {
    offset += (uint64_t)info->pal_step * info->colors;
  }
  info->kind = bits <= 8 ? BMP_PALETTE : bits == 16 ? BMP_555 : BMP_BYTES;
  info->b = 0, info->g = 1, info->r = 2;
  if (compression == 3) {  /* BITFIELDS */
    uint32_t m[4] = {0, 0, 0, 0};
    if (hsize >= 52) {
      for (int i = 0; i < (hsize >= 56 ? 4 : 3); i++) {
        m[i] = le32(h + 40 + 4 * i);
      }
    } else {
      if (!has(d, 14u + hsize, 12)) {
        return CORRUPT;
      }
      for (int i = 0; i < 3; i++) {
        m[i] = le32(d->p + 14 + hsize + 4 * i);
      }
    }
    int ok = 0;
    if (bits == 32) {
      for (size_t i = 0; i < sizeof BMP_MASKS32 / sizeof BMP_MASKS32[0]; i++) {
        const uint32_t* k = BMP_MASKS32[i];
        if (m[0] == k[0] && m[1] == k[1] && m[2] == k[2] && m[3] == k[3]) {
          ok = 1;
          if (m[0] != 0) {  /* all zero means BGRA, the default positions */
            info->r = mask_byte(m[0]), info->g = mask_byte(m[1]), info->b = mask_byte(m[2]);
          }
        }
      }
    } else if (bits == 24) {
      ok = m[0] == 0xFF0000 && m[1] == 0xFF00 && m[2] == 0xFF;
    } else if (bits == 16) {
      ok = m[2] == 0x1F && ((m[0] == 0xF800 && m[1] == 0x7E0) || (m[0] == 0x7C00 && m[1] == 0x3E0));
      info->kind = m[0] == 0xF800 ? BMP_565 : BMP_555;
    }
    if (!ok) {
      return UNSUPPORTED;
    }
  } else if (compression == 1 || compression == 2) {
    if (bits > 8) {
      return UNSUPPORTED;
    }
    info->kind = compression == 1 ? BMP_RLE8 : BMP_RLE4;
  } else if (compression != 0) {
    return UNSUPPORTED;  /* embedded JPEG or PNG */
  }
  if (info->kind == BMP_PALETTE || info->kind == BMP_RLE8 || info->kind == BMP_RLE4) {
    if (info->colors > 65536) {
      return CORRUPT;
    }
    info->pal = 14u + hsize;
    uint64_t used = info->colors < 256 ? info->colors : 256;
    if (!has(d, info->pal, used * info->pal_step)) {
      return CORRUPT;
    }
    /* Pillow drops a palette that is a gray ramp (0/255 for two colors) and reads the indices
     * as gray levels: the same pixels, except for indices past the palette and for depths its
     * shortcut then reads wrongly (those are refused). */
    int gray = info->colors <= 256;
    for (uint64_t i = 0; i < used && gray; i++) {
      const uint8_t* e = d->p + info->pal + i * info->pal_step;
      uint32_t v = info->colors == 2 ? (uint32_t)(i ? 255 : 0) : (uint32_t)i;
      gray = e[0] == v && e[1] == v && e[2] == v;
    }
    info->gray = gray;
    int rle = info->kind != BMP_PALETTE;  /* its indices are read as gray levels whatever the depth */
    if (gray && (info->colors <= 2 ? rle || bits != 1 : !rle && bits != 8)) {
      return UNSUPPORTED;
    }
  }
  if (offset == 0) {  /* Pillow then reads from where the header (and palette) end */
    offset = info->kind != BMP_555 && info->kind != BMP_565 && info->kind != BMP_BYTES
                 ? info->pal + (uint64_t)info->pal_step * info->colors
                 : 14u + hsize + (compression == 3 && hsize < 52 ? 12 : 0);
  }
  info->data = offset;
  info->stride = ((w * (uint64_t)bits + 31) >> 3) & ~(uint64_t)3;
  if (info->kind == BMP_RLE8 || info->kind == BMP_RLE4 ? offset > d->n : !has(d, offset, info->stride * ht)) {
    return CORRUPT;
  }
  *width = (int64_t)w, *height = (int64_t)ht;
  return IMG_OK;
}

/* Pillow's RLE decoder, quirks included: the indices fill the stored rows one after another;
 * a run is cut at the row's end but an absolute run is not; end of line pads the row with
 * index 0, a delta skips with index 0; the word alignment after an absolute run is of the
 * file offset; the pixels must all be there when the data or the bitmap ends. */
static int bmp_decode_rle(const img_bytes* d, const bmp_info* info, int64_t width, int64_t height,
                          const uint8_t (*pal)[3], const img_sink* s) {
  uint64_t total = (uint64_t)width * (uint64_t)height, filled = 0, pos = info->data;
  int64_t x = 0;
  int rle4 = info->kind == BMP_RLE4;
  uint64_t polled_row = 0;
  TRY(sink_poll(s));
#define RLE_PUT(index)                                                                       \
  do {                                                                                     \
    uint64_t row_ = filled / (uint64_t)width;                                              \
    int64_t y_ = info->top_down ? (int64_t)row_ : height - 1 - (int64_t)row_;              \
    const uint8_t* c_ = pal[(index)];                                                      \
    put_rgb(s, sink_row(s, y_), (int64_t)(filled % (uint64_t)width), c_[0], c_[1], c_[2]); \
    filled++;                                                                              \
  } while (0)
  while (filled < total) {
    if (filled / (uint64_t)width != polled_row) {
      polled_row = filled / (uint64_t)width;
      TRY(sink_poll(s));
    }
    if (!has(d, pos, 2)) {
      break;
    }
    uint32_t count = d->p[pos], byte = d->p[pos + 1];
    pos += 2;
    if (count) {
      uint64_t n = x + (int64_t)count > width ? (uint64_t)(x < width ? width - x : 0) : count;
      for (uint64_t i = 0; i < n && filled < total; i++) {
        RLE_PUT(rle4 ? (i % 2 ? byte & 15 : byte >> 4) : byte);
      }
      x += (int64_t)n;
    } else if (byte == 0) {  /* end of line */
      while (filled % (uint64_t)width) {
        RLE_PUT(0);
      }
      x = 0;
    } else if (byte == 1) {  /* end of bitmap */
      break;
    } else if (byte == 2) {  /* delta */
      if (!has(d, pos, 2)) {
        break;
      }
      uint64_t skip = d->p[pos] + (uint64_t)d->p[pos + 1] * (uint64_t)width;
      pos += 2;
      for (uint64_t i = 0; i < skip && filled < total; i++) {
        RLE_PUT(0);
      }
      x = (int64_t)(filled % (uint64_t)width);
    } else {  /* an absolute run of `byte` indices */
      uint64_t n = total - filled < byte ? total - filled : byte;
      uint64_t nbytes = rle4 ? (n + 1) / 2 : n;
      uint64_t avail = d->n - pos < nbytes ? d->n - pos : nbytes;
      for (uint64_t i = 0; i < (rle4 ? 2 * avail : avail) && i < n; i++) {
        uint32_t v = d->p[pos + (rle4 ? i / 2 : i)];
        RLE_PUT(rle4 ? (i % 2 ? v & 15 : v >> 4) : v);
      }
      pos += avail;
      if (avail < nbytes || filled == total) {
        break;
      }
      x += byte;
      pos += pos & 1;
    }
  }
#undef RLE_PUT
  return filled == total ? IMG_OK : CORRUPT;
}

static int bmp_decode(const img_bytes* d, const bmp_info* info, int64_t width, int64_t height,
                      const img_sink* s) {
  uint8_t pal[256][3];
  if (info->kind != BMP_555 && info->kind != BMP_565 && info->kind != BMP_BYTES) {
    for (uint32_t i = 0; i < 256; i++) {  /* past the palette: black, or the gray level */
      uint8_t v = info->gray ? (uint8_t)i : 0;
      pal[i][0] = pal[i][1] = pal[i][2] = v;
    }
    if (info->gray && info->colors <= 2) {
      pal[1][0] = pal[1][1] = pal[1][2] = 255;
    }
    for (uint64_t i = 0; i < info->colors && i < 256 && !info->gray; i++) {
      const uint8_t* e = d->p + info->pal + i * info->pal_step;
      pal[i][0] = e[2], pal[i][1] = e[1], pal[i][2] = e[0];
    }
  }
  if (info->kind == BMP_RLE8 || info->kind == BMP_RLE4) {
    return bmp_decode_rle(d, info, width, height, (const uint8_t(*)[3])pal, s);
  }
  int32_t bpp = info->bits / 8;
  for (int64_t y = 0; y < height; y++) {
    TRY(sink_poll(s));
    int64_t stored = info->top_down ? y : height - 1 - y;
    const uint8_t* src = d->p + info->data + (uint64_t)stored * info->stride;
    uint8_t* row = sink_row(s, y);
    for (int64_t x = 0; x < width; x++) {
      if (info->kind == BMP_PALETTE) {
        const uint8_t* c = pal[packed_sample(src, x, info->bits)];
        put_rgb(s, row, x, c[0], c[1], c[2]);
      } else if (info->kind == BMP_BYTES) {
        const uint8_t* p = src + x * bpp;
        put_rgb(s, row, x, p[info->r], p[info->g], p[info->b]);
      } else {
        uint32_t v = le16(src + 2 * x);
        uint32_t r = info->kind == BMP_565 ? v >> 11 & 31 : v >> 10 & 31;
        uint32_t g = info->kind == BMP_565 ? (v >> 5 & 63) * 255 / 63 : (v >> 5 & 31) * 255 / 31;
        put_rgb(s, row, x, (uint8_t)(r * 255 / 31), (uint8_t)g, (uint8_t)((v & 31) * 255 / 31));
      }
    }
  }
  return IMG_OK;
}

/* ---- PNM (PBM, PGM, PPM; binary and plain) ---------------------------------------------- */

typedef struct {
  int32_t kind;   /* 1..6: P1..P6 */
  uint32_t maxval;
  uint64_t data;  /* first byte after the header */
} pnm_info;

static int pnm_space(uint8_t c) { return c == ' ' || (c >= 9 && c <= 13); }

/* Pillow's header token: whitespace skipped, a '#' comment runs to CR or LF and does not end the
 * token, at most 10 characters; the one whitespace byte that ends it is consumed. */
static int pnm_token(const img_bytes* d, uint64_t* pos, uint64_t* value) {
  uint64_t v = 0;
  int len = 0;
  while (*pos < d->n) {
    uint8_t c = d->p[(*pos)++];
    if (pnm_space(c)) {
      if (len) {
        break;
      }
    } else if (c == '#') {
      while (*pos < d->n && d->p[*pos] != '\r' && d->p[*pos] != '\n') {
        (*pos)++;
      }
      if (*pos < d->n) {
        (*pos)++;
      }
    } else if (c < '0' || c > '9' || ++len > 10) {
      return CORRUPT;
    } else {
      v = v * 10 + (c - '0');
    }
  }
  if (!len) {
    return CORRUPT;
  }
  *value = v;
  return IMG_OK;
}

static int pnm_parse(const img_bytes* d, pnm_info* info, int64_t* width, int64_t* height) {
  if (d->n < 3 || !pnm_space(d->p[2])) {
    return CORRUPT;
  }
  info->kind = d->p[1] - '0';
  uint64_t pos = 3, w, h, maxval = 1;
  TRY(pnm_token(d, &pos, &w));
  TRY(pnm_token(d, &pos, &h));
  if (info->kind != 1 && info->kind != 4) {
    TRY(pnm_token(d, &pos, &maxval));
    if (maxval == 0 || maxval > 65535) {
      return CORRUPT;
    }
    if (maxval > 255 && (info->kind == 2 || info->kind == 5)) {
      return UNSUPPORTED;  /* Pillow makes a 32-bit "I" image and clips it to 255 */
    }
  }
  TRY(check_size(w, h));
  info->maxval = (uint32_t)maxval;
  info->data = pos;
  uint64_t channels = info->kind == 3 || info->kind == 6 ? 3 : 1;
  if (info->kind == 4 && !has(d, pos, (w + 7) / 8 * h)) {
    return CORRUPT;
  }
  if ((info->kind == 5 || info->kind == 6) && !has(d, pos, w * h * channels * (maxval > 255 ? 2 : 1))) {
    return CORRUPT;
  }
  *width = (int64_t)w, *height = (int64_t)h;
  return IMG_OK;
}

/* Pillow's scaling of a sample to 0..255: min(255, round(v / maxval * 255)) in doubles, with
 * Python's round half to even. */
static uint8_t pnm_scale(uint32_t v, uint32_t maxval) {
  if (maxval == 255) {
    return (uint8_t)v;
  }
  double x = (double)v / (double)maxval * 255.0;
  if (x >= 255.0) {
    return 255;
  }
  uint32_t t = (uint32_t)x;
  double frac = x - (double)t;
  if (frac > 0.5 || (frac == 0.5 && (t & 1))) {
    t++;
  }
  return (uint8_t)t;
}

/* The next plain-format value: whitespace separates values, a comment is cut out (it does not
 * separate them), P1's digits need no separator. */
static int pnm_plain_value(const img_bytes* d, uint64_t* pos, int bitmap, uint32_t maxval, uint32_t* out) {
  uint64_t v = 0;
  int len = 0;
  while (*pos < d->n) {
    uint8_t c = d->p[*pos];
    if (pnm_space(c)) {
      (*pos)++;
      if (len) {
        break;
      }
    } else if (c == '#') {
      while (*pos < d->n && d->p[*pos] != '\r' && d->p[*pos] != '\n') {
        (*pos)++;
      }
      if (*pos < d->n) {
        (*pos)++;
      }
    } else if (c < '0' || c > '9' || ++len > 10 || (bitmap && c > '1')) {
      return CORRUPT;
    } else {
      (*pos)++;
      v = v * 10 + (c - '0');
      if (bitmap) {
        break;
      }
    }
  }
  if (!len || v > maxval) {
    return CORRUPT;
  }
  *out = (uint32_t)v;
  return IMG_OK;
}

static int pnm_decode(const img_bytes* d, const pnm_info* info, int64_t width, int64_t height,
                      const img_sink* s) {
  uint64_t pos = info->data;
  const uint8_t* p = d->p + pos;
  int color = info->kind == 3 || info->kind == 6;
  int wide = info->maxval > 255;
  for (int64_t y = 0; y < height; y++) {
    TRY(sink_poll(s));
    uint8_t* row = sink_row(s, y);
    for (int64_t x = 0; x < width; x++) {
      uint32_t v[3];
      if (info->kind == 4) {
        v[0] = p[y * ((width + 7) / 8) + x / 8] >> (7 - x % 8) & 1 ? 0 : 255;
      } else if (info->kind >= 5) {
        for (int c = 0; c <= 2 * color; c++) {
          uint64_t i = (uint64_t)(y * width + x) * (color ? 3 : 1) + c;
          v[c] = pnm_scale(wide ? be16(p + 2 * i) : p[i], info->maxval);
        }
      } else {
        for (int c = 0; c <= 2 * color; c++) {
          TRY(pnm_plain_value(d, &pos, info->kind == 1, info->kind == 1 ? 1 : info->maxval, &v[c]));
          v[c] = info->kind == 1 ? (v[c] ? 0 : 255) : pnm_scale(v[c], info->maxval);
        }
      }
      if (color) {
        put_rgb(s, row, x, (uint8_t)v[0], (uint8_t)v[1], (uint8_t)v[2]);
      } else {
        put_gray(s, row, x, (uint8_t)v[0]);
      }
    }
  }
  return IMG_OK;
}

/* ---- TIFF (uncompressed strips) --------------------------------------------------------- */

enum { TIFF_GRAY, TIFF_RGB, TIFF_PALETTE };

typedef struct {
  int32_t big_endian;
  int32_t kind;      /* TIFF_* */
  int32_t bits;      /* per sample: 1, 2, 4, 8 (16 for RGB) */
  int32_t samples;   /* per pixel, extra samples included */
  int32_t planar;    /* 1 chunky, 2 one plane per sample */
  int32_t invert;    /* WhiteIsZero */
  int32_t reverse;   /* FillOrder 2: bits of each byte reversed */
  uint64_t rows_per_strip;
  uint64_t strips;   /* StripOffsets: entries, type, where the values are */
  uint32_t strips_type;
  uint64_t strips_at;
  uint64_t cmap_at;  /* ColorMap values (SHORT) */
} tiff_info;

typedef struct {
  uint32_t type;
  uint64_t count;
  uint64_t at;  /* where the values are: inline in the entry or at its offset */
} tiff_field;

static uint32_t tiff_u16(const tiff_info* t, const uint8_t* p) { return t->big_endian ? be16(p) : le16(p); }
static uint32_t tiff_u32(const tiff_info* t, const uint8_t* p) { return t->big_endian ? be32(p) : le32(p); }

static uint32_t tiff_type_size(uint32_t type) { return type == 1 ? 1 : type == 3 ? 2 : type == 4 ? 4 : 0; }

/* Value i of an integer field (BYTE, SHORT or LONG); the field was bounds-checked when read. */
static uint32_t tiff_value(const img_bytes* d, const tiff_info* t, const tiff_field* f, uint64_t i) {
  const uint8_t* p = d->p + f->at + i * tiff_type_size(f->type);
  return f->type == 1 ? p[0] : f->type == 3 ? tiff_u16(t, p) : tiff_u32(t, p);
}

/* The tags read, by their index in a parsed IFD. */
enum {
  T_WIDTH, T_HEIGHT, T_BITS, T_COMPRESSION, T_PHOTOMETRIC, T_FILL_ORDER, T_STRIP_OFFSETS, T_ORIENTATION,
  T_SAMPLES, T_ROWS_PER_STRIP, T_PLANAR, T_COLOR_MAP, T_TILE_OFFSETS, T_EXTRA_SAMPLES, T_SAMPLE_FORMAT,
  TIFF_NTAGS
};
static const uint16_t TIFF_TAGS[TIFF_NTAGS] = {
    [T_WIDTH] = 256, [T_HEIGHT] = 257, [T_BITS] = 258, [T_COMPRESSION] = 259, [T_PHOTOMETRIC] = 262,
    [T_FILL_ORDER] = 266, [T_STRIP_OFFSETS] = 273, [T_ORIENTATION] = 274, [T_SAMPLES] = 277,
    [T_ROWS_PER_STRIP] = 278, [T_PLANAR] = 284, [T_COLOR_MAP] = 320, [T_TILE_OFFSETS] = 324,
    [T_EXTRA_SAMPLES] = 338, [T_SAMPLE_FORMAT] = 339,
};

static int tiff_parse(const img_bytes* d, tiff_info* info, int64_t* width, int64_t* height) {
  __builtin_memset(info, 0, sizeof *info);
  if (!has(d, 0, 8)) {
    return CORRUPT;
  }
  info->big_endian = d->p[0] == 'M';
  if (tiff_u16(info, d->p + 2) == 43) {
    return UNSUPPORTED;  /* BigTIFF */
  }
  uint64_t ifd = tiff_u32(info, d->p + 4);
  if (!has(d, ifd, 2)) {
    return CORRUPT;
  }
  uint32_t entries = tiff_u16(info, d->p + ifd);
  if (!has(d, ifd + 2, (uint64_t)entries * 12)) {
    return CORRUPT;
  }
  tiff_field f[TIFF_NTAGS];
  __builtin_memset(f, 0, sizeof f);
  for (uint32_t e = 0; e < entries; e++) {
    const uint8_t* p = d->p + ifd + 2 + 12 * (uint64_t)e;
    uint32_t tag = tiff_u16(info, p);
    for (int k = 0; k < TIFF_NTAGS; k++) {
      if (TIFF_TAGS[k] != tag) {
        continue;
      }
      tiff_field* t = &f[k];
      t->type = tiff_u16(info, p + 2);
      t->count = tiff_u32(info, p + 4);
      uint32_t size = tiff_type_size(t->type);
      if (size == 0 || t->count == 0) {
        return CORRUPT;
      }
      t->at = t->count * size <= 4 ? (uint64_t)(p + 8 - d->p) : tiff_u32(info, p + 8);
      if (!has(d, t->at, t->count * size)) {
        return CORRUPT;
      }
    }
  }
#define FIELD(k) (&f[k])
#define PRESENT(k) (f[k].count != 0)
#define SCALAR(k, dflt) (PRESENT(k) ? tiff_value(d, info, FIELD(k), 0) : (dflt))
  if (!PRESENT(T_WIDTH) || !PRESENT(T_HEIGHT)) {
    return CORRUPT;
  }
  uint64_t w = SCALAR(T_WIDTH, 0), h = SCALAR(T_HEIGHT, 0);
  TRY(check_size(w, h));
  if (SCALAR(T_COMPRESSION, 1) != 1 || PRESENT(T_TILE_OFFSETS)) {
    return UNSUPPORTED;  /* compressed (Pillow hands those to libtiff) or tiled */
  }
  uint32_t orientation = SCALAR(T_ORIENTATION, 1);
  if (orientation >= 5 && orientation <= 8) {
    return UNSUPPORTED;  /* Pillow swaps the size but not the pixels */
  }
  uint32_t photo = SCALAR(T_PHOTOMETRIC, 0), fill = SCALAR(T_FILL_ORDER, 1);
  info->planar = (int32_t)SCALAR(T_PLANAR, 1);
  uint64_t samples = SCALAR(T_SAMPLES, 1);
  /* Pillow's normalization of the per-sample tags before it looks the layout up in its table */
  uint32_t format = SCALAR(T_SAMPLE_FORMAT, 1);
  for (uint64_t i = 1; PRESENT(T_SAMPLE_FORMAT) && i < FIELD(T_SAMPLE_FORMAT)->count; i++) {
    if (tiff_value(d, info, FIELD(T_SAMPLE_FORMAT), i) != format) {
      return UNSUPPORTED;
    }
  }
  uint64_t extra = PRESENT(T_EXTRA_SAMPLES) ? FIELD(T_EXTRA_SAMPLES)->count : 0;
  uint32_t extra_kind[8] = {0};
  if (extra > 6 || samples > 6) {
    return UNSUPPORTED;
  }
  uint32_t extra_max = 0;
  for (uint64_t i = 0; i < extra; i++) {
    extra_kind[i] = tiff_value(d, info, FIELD(T_EXTRA_SAMPLES), i);
    extra_max = extra_kind[i] > extra_max ? extra_kind[i] : extra_max;
  }
  uint64_t nbits = PRESENT(T_BITS) ? FIELD(T_BITS)->count : 1;
  if (info->planar == 2 && extra && extra_max == 0) {
    nbits = nbits > extra ? nbits - extra : 0;  /* unspecified extra planes are ignored */
    samples = samples > extra ? samples - extra : 0;
    extra = 0;
  }
  if (samples > nbits && nbits != 1) {
    return UNSUPPORTED;
  }
  uint32_t bits = SCALAR(T_BITS, 1);
  for (uint64_t i = 1; i < samples && i < nbits; i++) {
    if (tiff_value(d, info, FIELD(T_BITS), i) != bits) {
      return UNSUPPORTED;
    }
  }
  if (samples == 0) {
    return UNSUPPORTED;
  }
  /* The layouts of Pillow's table that are a plain decoding: extra samples unspecified (0) or
   * unassociated alpha (2) are dropped; premultiplied alpha (1) would need Pillow's division. */
  uint64_t base = photo == 2 ? 3 : 1;
  if (samples != base + extra && !(photo == 2 && samples == 4 && extra == 0)) {
    return UNSUPPORTED;
  }
  for (uint64_t i = 0; i < extra; i++) {
    int ok = i == 0 ? extra_kind[0] == 0 || extra_kind[0] == 2 || (extra_kind[0] == 999 && samples == 4 && bits == 8)
                    : extra_kind[i] == 0;
    if (!ok) {
      return UNSUPPORTED;
    }
  }
  int format_ok = format == 1 || (format == 2 && photo == 1 && samples == 1 && bits == 8 && fill == 1);
  /* FillOrder 2 where Pillow has an unpacker for it */
  int fill_ok = fill == 1 || (fill == 2 && samples == base &&
                              (photo == 0 || photo == 1 ? bits < 8 || photo == 1 : bits == 8));
  if (!format_ok || !fill_ok) {
    return UNSUPPORTED;
  }
  if (photo == 0 || photo == 1) {
    info->kind = TIFF_GRAY;
    if (!((bits == 1 || bits == 2 || bits == 4 || bits == 8) && (samples == 1 || (bits == 8 && photo == 1)))) {
      return UNSUPPORTED;  /* 16-bit gray: Pillow's "I;16", clipped to 255 when converted */
    }
    if (samples == 2 && fill == 2) {
      return UNSUPPORTED;
    }
    info->invert = photo == 0;
  } else if (photo == 2) {
    info->kind = TIFF_RGB;
    if (!(bits == 8 || (bits == 16 && samples <= 4 && fill == 1))) {
      return UNSUPPORTED;
    }
  } else if (photo == 3) {
    info->kind = TIFF_PALETTE;
    if (!(bits == 1 || bits == 2 || bits == 4 || bits == 8) || (samples == 2 && bits != 8)) {
      return UNSUPPORTED;
    }
    if (!PRESENT(T_COLOR_MAP) || FIELD(T_COLOR_MAP)->type != 3 || FIELD(T_COLOR_MAP)->count < 3u << bits) {
      return CORRUPT;
    }
    info->cmap_at = FIELD(T_COLOR_MAP)->at;
  } else {
    return UNSUPPORTED;  /* CMYK, YCbCr, CIELab, ... */
  }
  if (info->planar != 1 && (info->planar != 2 || bits != 8)) {
    return UNSUPPORTED;
  }
  info->bits = (int32_t)bits;
  info->samples = (int32_t)samples;
  info->reverse = fill == 2;
  if (!PRESENT(T_STRIP_OFFSETS) || FIELD(T_STRIP_OFFSETS)->type == 1) {
    return CORRUPT;
  }
  info->rows_per_strip = SCALAR(T_ROWS_PER_STRIP, h);
  if (info->rows_per_strip == 0) {
    return CORRUPT;
  }
  info->strips = FIELD(T_STRIP_OFFSETS)->count;
  info->strips_type = FIELD(T_STRIP_OFFSETS)->type;
  info->strips_at = FIELD(T_STRIP_OFFSETS)->at;
  uint64_t per_plane = (h + info->rows_per_strip - 1) / info->rows_per_strip;
  if (info->strips < per_plane * (info->planar == 2 ? samples : 1)) {
    return CORRUPT;
  }
  /* Every row's bytes must be in the file (Pillow reads them without looking at byte counts). */
  uint64_t row_bytes = info->planar == 2 ? w : (w * samples * bits + 7) / 8;
  tiff_field sf = *FIELD(T_STRIP_OFFSETS);
  for (uint64_t k = 0; k < info->strips; k++) {
    uint64_t first = (k % per_plane) * info->rows_per_strip;
    uint64_t rows = h - first < info->rows_per_strip ? h - first : info->rows_per_strip;
    if (!has(d, tiff_value(d, info, &sf, k), rows * row_bytes)) {
      return CORRUPT;
    }
  }
#undef FIELD
#undef PRESENT
#undef SCALAR
  *width = (int64_t)w, *height = (int64_t)h;
  return IMG_OK;
}

static int tiff_decode(const img_bytes* d, const tiff_info* info, int64_t width, int64_t height,
                       const img_sink* s) {
  uint8_t pal[256][3];
  if (info->kind == TIFF_PALETTE) {
    uint32_t n = 1u << info->bits;
    for (uint32_t i = 0; i < 256; i++) {
      for (uint32_t c = 0; c < 3; c++) {  /* Pillow keeps the high byte of each 16-bit entry */
        pal[i][c] = i < n ? (uint8_t)(tiff_u16(info, d->p + info->cmap_at + 2 * (c * n + i)) >> 8) : 0;
      }
    }
  }
  tiff_field sf = {info->strips_type, info->strips, info->strips_at};
  uint64_t rps = info->rows_per_strip;
  uint64_t per_plane = ((uint64_t)height + rps - 1) / rps;
  int32_t planes = info->planar == 2 ? info->samples : 1;
  uint64_t row_bytes = info->planar == 2 ? (uint64_t)width
                                         : ((uint64_t)width * info->samples * info->bits + 7) / 8;
  uint64_t strip = UINT64_MAX, offsets[3] = {0, 0, 0};
  for (int64_t y = 0; y < height; y++) {
    TRY(sink_poll(s));
    if ((uint64_t)y / rps != strip) {
      strip = (uint64_t)y / rps;
      for (int32_t pl = 0; pl < planes && pl < 3; pl++) {
        offsets[pl] = tiff_value(d, info, &sf, strip + (uint64_t)pl * per_plane);
      }
      if (info->planar == 1 && rps == (uint64_t)height) {
        offsets[0] = tiff_value(d, info, &sf, info->strips - 1);  /* Pillow reads only the last */
      } else if (info->planar == 1) {
        /* With more offsets than strips, Pillow makes a tile of each, going back to the top
         * past the bottom, and decodes them in the order of their offsets: the largest offset
         * (the later of equal ones) covering a row wins. */
        for (uint64_t k = strip + per_plane; k < info->strips; k += per_plane) {
          uint64_t o = tiff_value(d, info, &sf, k);
          offsets[0] = o >= offsets[0] ? o : offsets[0];
        }
      }
    }
    const uint8_t* src[3];
    for (int32_t pl = 0; pl < planes && pl < 3; pl++) {
      src[pl] = d->p + offsets[pl] + ((uint64_t)y % rps) * row_bytes;
    }
    uint8_t* row = sink_row(s, y);
    for (int64_t x = 0; x < width; x++) {
      if (info->kind == TIFF_RGB) {
        uint8_t v[3];
        for (int c = 0; c < 3; c++) {
          if (info->planar == 2) {
            v[c] = src[c][x];
          } else if (info->bits == 16) {  /* Pillow keeps the high byte */
            v[c] = src[0][2 * (x * info->samples + c) + (info->big_endian ? 0 : 1)];
          } else {
            v[c] = src[0][x * info->samples + c];
            v[c] = info->reverse ? bit_reverse(v[c]) : v[c];
          }
        }
        put_rgb(s, row, x, v[0], v[1], v[2]);
        continue;
      }
      uint32_t v;
      if (info->bits == 8) {
        v = src[0][info->planar == 2 ? x : x * info->samples];
        v = info->reverse ? bit_reverse((uint8_t)v) : v;
      } else {
        int64_t bit = x * info->bits;
        uint8_t byte = src[0][bit >> 3];
        byte = info->reverse ? bit_reverse(byte) : byte;
        v = (uint32_t)(byte >> (8 - info->bits - (bit & 7))) & ((1u << info->bits) - 1);
      }
      if (info->kind == TIFF_PALETTE) {
        put_rgb(s, row, x, pal[v][0], pal[v][1], pal[v][2]);
      } else {
        v = v * 255 / ((1u << info->bits) - 1);
        put_gray(s, row, x, (uint8_t)(info->invert ? 255 - v : v));
      }
    }
  }
  return IMG_OK;
}

/* ---- PNG -------------------------------------------------------------------------------- */

typedef struct {
  int32_t depth;       /* bits per sample */
  int32_t color_type;  /* 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA */
  int32_t interlace;   /* 0 none, 1 Adam7 */
  int32_t channels;
  uint64_t first_idat; /* offset of the first IDAT chunk */
  uint64_t plte, plte_n;
  uint64_t raw;        /* bytes of the inflated stream: every pass's filtered scanlines */
} png_info;

/* Adam7 passes: first column, first row, column step, row step. */
static const uint8_t ADAM7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                    {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};

static void png_pass(const png_info* info, int64_t width, int64_t height, int pass, uint64_t geom[4],
                     uint64_t* pw, uint64_t* ph) {
  if (!info->interlace) {
    geom[0] = geom[1] = 0, geom[2] = geom[3] = 1;
  } else {
    for (int i = 0; i < 4; i++) {
      geom[i] = ADAM7[pass][i];
    }
  }
  *pw = (uint64_t)width > geom[0] ? ((uint64_t)width - geom[0] + geom[2] - 1) / geom[2] : 0;
  *ph = (uint64_t)height > geom[1] ? ((uint64_t)height - geom[1] + geom[3] - 1) / geom[3] : 0;
}

static uint64_t png_row_bytes(const png_info* info, uint64_t pw) {
  return (pw * (uint64_t)info->channels * (uint64_t)info->depth + 7) / 8;
}

static int png_parse(const img_bytes* d, png_info* info, int64_t* width, int64_t* height) {
  __builtin_memset(info, 0, sizeof *info);
  if (!has(d, 8, 8 + 13) || be32(d->p + 8) != 13 || !same(d->p + 12, "IHDR", 4)) {
    return CORRUPT;
  }
  const uint8_t* h = d->p + 16;
  uint64_t w = be32(h), ht = be32(h + 4);
  int32_t depth = h[8], ct = h[9];
  if (w > 0x7FFFFFFF || ht > 0x7FFFFFFF || h[10] != 0 || h[11] != 0 || h[12] > 1) {
    return CORRUPT;
  }
  TRY(check_size(w, ht));
  int depth_ok = ct == 0 ? depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16
               : ct == 3 ? depth == 1 || depth == 2 || depth == 4 || depth == 8
               : ct == 2 || ct == 4 || ct == 6 ? depth == 8 || depth == 16 : 0;
  if (!depth_ok) {
    return CORRUPT;
  }
  if (ct == 0 && depth == 16) {
    return UNSUPPORTED;  /* Pillow's "I;16", clipped to 255 when converted */
  }
  info->depth = depth, info->color_type = ct, info->interlace = h[12];
  info->channels = ct == 2 ? 3 : ct == 4 ? 2 : ct == 6 ? 4 : 1;
  /* Chunks up to the first IDAT: PLTE must come before it. */
  uint64_t at = 8;
  for (;;) {
    if (!has(d, at, 8)) {
      return CORRUPT;
    }
    uint64_t len = be32(d->p + at);
    const uint8_t* type = d->p + at + 4;
    if (len > 0x7FFFFFFF || !has(d, at + 8, len)) {
      return CORRUPT;
    }
    if (same(type, "IDAT", 4)) {
      break;
    }
    if (same(type, "IEND", 4)) {
      return CORRUPT;
    }
    if (same(type, "PLTE", 4)) {
      if (len % 3 != 0 || len == 0 || len > 768) {
        return CORRUPT;
      }
      info->plte = at + 8, info->plte_n = len / 3;
    }
    at += 12 + len;
  }
  if (ct == 3 && info->plte_n == 0) {
    return CORRUPT;
  }
  info->first_idat = at;
  for (int pass = 0; pass < (info->interlace ? 7 : 1); pass++) {
    uint64_t g[4], pw, ph;
    png_pass(info, (int64_t)w, (int64_t)ht, pass, g, &pw, &ph);
    if (pw && ph) {
      info->raw += ph * (1 + png_row_bytes(info, pw));
    }
  }
  *width = (int64_t)w, *height = (int64_t)ht;
  return IMG_OK;
}

/* The zlib stream, read LSB first across the IDAT chunks; past the last one it reads zeros and
 * counts them, so a decode that used them is found corrupt. */
typedef struct {
  const img_bytes* d;
  uint64_t pos, end;  /* the current IDAT's data */
  uint64_t bits;
  int32_t nbits;
  int32_t ended;
  uint64_t pad;       /* zero bytes supplied past the end */
} png_stream;

static int png_next_idat(png_stream* z) {
  while (!z->ended) {
    uint64_t at = z->end + 4;  /* past the CRC */
    if (!has(z->d, at, 8) || !same(z->d->p + at + 4, "IDAT", 4) ||
        !has(z->d, at + 8, be32(z->d->p + at))) {
      z->ended = 1;
      break;
    }
    z->pos = at + 8, z->end = z->pos + be32(z->d->p + at);
    if (z->pos < z->end) {
      return 1;
    }
  }
  return 0;
}

static void png_fill(png_stream* z) {
  while (z->nbits <= 56) {
    uint64_t byte = 0;
    if (z->pos < z->end || png_next_idat(z)) {
      byte = z->d->p[z->pos++];
    } else {
      z->pad++;
    }
    z->bits |= byte << z->nbits;
    z->nbits += 8;
  }
}

static uint32_t png_bits(png_stream* z, int32_t n) {
  if (z->nbits < n) {
    png_fill(z);
  }
  uint32_t v = (uint32_t)(z->bits & ((1ull << n) - 1));
  z->bits >>= n;
  z->nbits -= n;
  return v;
}

static int png_overrun(const png_stream* z) { return z->pad * 8 > (uint64_t)z->nbits; }

#define FAST_BITS 9

/* A canonical Huffman code: a table of the codes up to FAST_BITS long, looked up by the next
 * bits; longer codes are decoded bit by bit from the counts per length. */
typedef struct {
  uint16_t fast[1 << FAST_BITS];  /* length << 9 | symbol; 0: not a code this short */
  uint16_t count[16];
  uint16_t symbol[288];
} inflate_huff;

static int huff_build(inflate_huff* t, const uint8_t* lens, int n) {
  __builtin_memset(t->count, 0, sizeof t->count);
  __builtin_memset(t->fast, 0, sizeof t->fast);
  for (int i = 0; i < n; i++) {
    t->count[lens[i]]++;
  }
  t->count[0] = 0;
  int32_t left = 1;
  uint16_t offs[16];
  offs[1] = 0;
  for (int len = 1; len < 16; len++) {
    left = 2 * left - t->count[len];
    if (left < 0) {
      return CORRUPT;  /* over-subscribed */
    }
    if (len < 15) {
      offs[len + 1] = (uint16_t)(offs[len] + t->count[len]);
    }
  }
  for (int i = 0; i < n; i++) {
    if (lens[i]) {
      t->symbol[offs[lens[i]]++] = (uint16_t)i;
    }
  }
  uint32_t code = 0, k = 0;
  for (int len = 1; len <= FAST_BITS; len++) {
    for (uint32_t i = 0; i < t->count[len]; i++, code++, k++) {
      uint32_t rev = 0;
      for (int b = 0; b < len; b++) {
        rev |= (code >> b & 1) << (len - 1 - b);
      }
      for (uint32_t j = rev; j < (1u << FAST_BITS); j += 1u << len) {
        t->fast[j] = (uint16_t)(len << 9 | t->symbol[k]);
      }
    }
    code <<= 1;
  }
  return IMG_OK;
}

/* The next symbol, or -1 for a code that is not in the table. */
static int32_t huff_decode(png_stream* z, const inflate_huff* t) {
  if (z->nbits < 16) {
    png_fill(z);
  }
  uint32_t e = t->fast[z->bits & ((1u << FAST_BITS) - 1)];
  if (e) {
    z->bits >>= e >> 9;
    z->nbits -= (int32_t)(e >> 9);
    return (int32_t)(e & 511);
  }
  int32_t code = 0, first = 0, index = 0;
  for (int len = 1; len < 16; len++) {
    code |= (int32_t)png_bits(z, 1);
    int32_t count = t->count[len];
    if (code - count < first) {
      return t->symbol[index + (code - first)];
    }
    index += count;
    first = (first + count) << 1;
    code <<= 1;
  }
  return -1;
}

static const uint16_t LEN_BASE[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t LEN_EXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t DIST_BASE[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
                                       193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
                                       6145, 8193, 12289, 16385, 24577};
static const uint8_t DIST_EXTRA[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
static const uint8_t CLEN_ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

static int inflate_tables(png_stream* z, inflate_huff* lit, inflate_huff* dist) {
  uint8_t lens[320];
  uint32_t nlit = png_bits(z, 5) + 257, ndist = png_bits(z, 5) + 1, nclen = png_bits(z, 4) + 4;
  if (nlit > 286 || ndist > 30) {
    return CORRUPT;
  }
  __builtin_memset(lens, 0, sizeof lens);
  for (uint32_t i = 0; i < nclen; i++) {
    lens[CLEN_ORDER[i]] = (uint8_t)png_bits(z, 3);
  }
  TRY(huff_build(lit, lens, 19));
  uint32_t i = 0;
  while (i < nlit + ndist) {
    int32_t sym = huff_decode(z, lit);
    uint32_t repeat, value = 0;
    if (sym < 0 || png_overrun(z)) {
      return CORRUPT;
    }
    if (sym < 16) {
      lens[i++] = (uint8_t)sym;
      continue;
    }
    if (sym == 16) {
      if (i == 0) {
        return CORRUPT;
      }
      value = lens[i - 1], repeat = 3 + png_bits(z, 2);
    } else {
      repeat = sym == 17 ? 3 + png_bits(z, 3) : 11 + png_bits(z, 7);
    }
    if (i + repeat > nlit + ndist) {
      return CORRUPT;
    }
    while (repeat--) {
      lens[i++] = (uint8_t)value;
    }
  }
  if (lens[256] == 0) {
    return CORRUPT;  /* no end-of-block code */
  }
  TRY(huff_build(lit, lens, (int)nlit));
  return huff_build(dist, lens + nlit, (int)ndist);
}

/* Inflates the zlib stream into out[0, size): stops once size bytes are out (Pillow ignores
 * what follows), fails if the stream ends before. */
static int png_inflate(png_stream* z, uint8_t* out, uint64_t size, const volatile int32_t* cancel) {
  uint32_t cmf = png_bits(z, 8), flg = png_bits(z, 8);
  if ((cmf & 15) != 8 || cmf >> 4 > 7 || (cmf << 8 | flg) % 31 != 0 || (flg & 32)) {
    return CORRUPT;
  }
  inflate_huff lit, dist;
  uint64_t pos = 0, polled = 0;
  int final = 0;
  while (!final && pos < size) {
    if (*cancel) {
      return IMG_CANCELLED;
    }
    final = (int)png_bits(z, 1);
    uint32_t type = png_bits(z, 2);
    if (type == 0) {
      png_bits(z, z->nbits & 7);
      uint32_t len = png_bits(z, 16), nlen = png_bits(z, 16);
      if ((len ^ 0xFFFF) != nlen) {
        return CORRUPT;
      }
      for (; len && pos < size; len--) {
        out[pos++] = (uint8_t)png_bits(z, 8);
      }
      if (png_overrun(z)) {
        return CORRUPT;
      }
      continue;
    }
    if (type == 1) {
      uint8_t lens[320];
      __builtin_memset(lens, 8, 144);
      __builtin_memset(lens + 144, 9, 112);
      __builtin_memset(lens + 256, 7, 24);
      __builtin_memset(lens + 280, 8, 8);
      __builtin_memset(lens + 288, 5, 30);
      TRY(huff_build(&lit, lens, 288));
      TRY(huff_build(&dist, lens + 288, 30));
    } else if (type == 2) {
      TRY(inflate_tables(z, &lit, &dist));
    } else {
      return CORRUPT;
    }
    for (;;) {
      int32_t sym = huff_decode(z, &lit);
      if (sym < 0 || png_overrun(z)) {
        return CORRUPT;
      }
      if (sym < 256) {
        out[pos++] = (uint8_t)sym;
      } else if (sym == 256) {
        break;
      } else {
        sym -= 257;
        if (sym >= 29) {
          return CORRUPT;
        }
        uint64_t len = LEN_BASE[sym] + png_bits(z, LEN_EXTRA[sym]);
        int32_t ds = huff_decode(z, &dist);
        if (ds < 0 || ds >= 30) {
          return CORRUPT;
        }
        uint64_t back = DIST_BASE[ds] + png_bits(z, DIST_EXTRA[ds]);
        if (back > pos || png_overrun(z)) {
          return CORRUPT;
        }
        len = len < size - pos ? len : size - pos;
        for (uint64_t i = 0; i < len; i++, pos++) {
          out[pos] = out[pos - back];
        }
      }
      if (pos == size) {
        break;
      }
      if (pos - polled >= 65536) {
        if (*cancel) {
          return IMG_CANCELLED;
        }
        polled = pos;
      }
    }
  }
  return pos == size ? IMG_OK : CORRUPT;
}

static uint8_t paeth(uint8_t a, uint8_t b, uint8_t c) {
  int32_t p = (int32_t)a + b - c;
  int32_t pa = p > a ? p - a : a - p, pb = p > b ? p - b : b - p, pc = p > c ? p - c : c - p;
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static int png_unfilter(uint8_t filter, uint8_t* row, const uint8_t* prev, uint64_t n, uint64_t bpp) {
  switch (filter) {
    case 0:
      return IMG_OK;
    case 1:
      for (uint64_t i = bpp; i < n; i++) {
        row[i] = (uint8_t)(row[i] + row[i - bpp]);
      }
      return IMG_OK;
    case 2:
      for (uint64_t i = 0; i < n && prev; i++) {
        row[i] = (uint8_t)(row[i] + prev[i]);
      }
      return IMG_OK;
    case 3:
      for (uint64_t i = 0; i < n; i++) {
        uint32_t a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0;
        row[i] = (uint8_t)(row[i] + ((a + b) >> 1));
      }
      return IMG_OK;
    case 4:
      for (uint64_t i = 0; i < n; i++) {
        uint8_t a = i >= bpp ? row[i - bpp] : 0, b = prev ? prev[i] : 0;
        uint8_t c = prev && i >= bpp ? prev[i - bpp] : 0;
        row[i] = (uint8_t)(row[i] + paeth(a, b, c));
      }
      return IMG_OK;
    default:
      return CORRUPT;
  }
}

static int png_decode(const img_bytes* d, const png_info* info, int64_t width, int64_t height,
                      uint8_t* scratch, const img_sink* s) {
  png_stream z;
  __builtin_memset(&z, 0, sizeof z);
  z.d = d;
  z.pos = info->first_idat + 8;
  z.end = z.pos + be32(d->p + info->first_idat);
  TRY(png_inflate(&z, scratch, info->raw, s->cancel));
  uint8_t pal[256][3];
  __builtin_memset(pal, 0, sizeof pal);  /* indices past the palette are black, as in Pillow */
  for (uint64_t i = 0; i < info->plte_n; i++) {
    __builtin_memcpy(pal[i], d->p + info->plte + 3 * i, 3);
  }
  int32_t depth = info->depth, ct = info->color_type, step = depth / 8;  /* step: bytes per sample */
  uint32_t gray_scale = depth < 8 ? 255u / ((1u << depth) - 1) : 1;
  uint64_t bpp = (uint64_t)(info->channels * depth + 7) / 8;
  uint8_t* p = scratch;
  for (int pass = 0; pass < (info->interlace ? 7 : 1); pass++) {
    uint64_t g[4], pw, ph;
    png_pass(info, width, height, pass, g, &pw, &ph);
    if (!pw || !ph) {
      continue;
    }
    uint64_t rb = png_row_bytes(info, pw);
    const uint8_t* prev = 0;
    for (uint64_t r = 0; r < ph; r++, p += rb + 1) {
      TRY(sink_poll(s));
      uint8_t* row = p + 1;
      TRY(png_unfilter(p[0], row, prev, rb, bpp));
      prev = row;
      uint8_t* out = sink_row(s, (int64_t)(g[1] + r * g[3]));
      for (uint64_t i = 0; i < pw; i++) {
        int64_t x = (int64_t)(g[0] + i * g[2]);
        const uint8_t* px = row + i * info->channels * step;  /* depth >= 8 only */
        switch (ct) {
          case 0:
            put_gray(s, out, x, (uint8_t)(packed_sample(row, (int64_t)i, depth) * gray_scale));
            break;
          case 3: {
            const uint8_t* c = pal[packed_sample(row, (int64_t)i, depth)];
            put_rgb(s, out, x, c[0], c[1], c[2]);
            break;
          }
          case 4:  /* 16-bit samples: Pillow keeps the high (first) byte */
            put_gray(s, out, x, px[0]);
            break;
          default:
            put_rgb(s, out, x, px[0], px[step], px[2 * step]);
            break;
        }
      }
    }
  }
  return IMG_OK;
}

/* ---- JPEG (baseline, extended sequential and progressive Huffman; 8-bit; 1 or 3 components) */

#define JPEG_MAX_COMPONENTS 3
#define JPEG_MAX_SCANS 1000

typedef struct {
  int32_t id, h, v, tq;
  int64_t bw, bh;     /* blocks per row and rows of blocks in the plane (whole MCUs) */
  int64_t dw, dh;     /* samples that are image: libjpeg's downsampled width and height */
  uint64_t plane;     /* offsets in the scratch: samples (bw * 8 per row), coefficients */
  uint64_t coefs;
} jpeg_comp;

typedef struct {
  int32_t progressive;
  int32_t ncomp;
  int32_t hmax, vmax;
  int32_t color;      /* JPEG_GRAY, JPEG_YCC or JPEG_RGB: libjpeg's guess of the color space */
  int64_t mcux, mcuy;
  jpeg_comp comp[JPEG_MAX_COMPONENTS];
  uint64_t rows;      /* scratch offset of three rows of upsampled samples */
} jpeg_info;

enum { JPEG_GRAY, JPEG_YCC, JPEG_RGB };

/* Zigzag index -> natural index; past 63 it stays at 63, as libjpeg's table does, so a run
 * that overshoots the block writes its last coefficient instead of out of bounds. */
static const uint8_t ZIGZAG[80] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,
    40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
    29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
    47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};

/* The next marker from pos, skipping what is not one as libjpeg does (garbage bytes, fill
 * 0xFF bytes, a stuffed 0xFF 0x00); -1 at the end of the data. */
static int32_t jpeg_next_marker(const img_bytes* d, uint64_t* pos) {
  for (;;) {
    while (*pos < d->n && d->p[*pos] != 0xFF) {
      (*pos)++;
    }
    while (*pos < d->n && d->p[*pos] == 0xFF) {
      (*pos)++;
    }
    if (*pos >= d->n) {
      return -1;
    }
    uint8_t c = d->p[(*pos)++];
    if (c != 0) {
      return c;
    }
  }
}

/* A marker segment's payload: [*at, *at + *len), after its 2-byte length. */
static int jpeg_segment(const img_bytes* d, uint64_t pos, uint64_t* at, uint64_t* len) {
  if (!has(d, pos, 2) || be16(d->p + pos) < 2 || !has(d, pos, be16(d->p + pos))) {
    return CORRUPT;
  }
  *at = pos + 2, *len = be16(d->p + pos) - 2u;
  return IMG_OK;
}

static int jpeg_is_standalone(int32_t m) { return m == 0x01 || (m >= 0xD0 && m <= 0xD7); }

/* The frame header and the color space, from the markers before the first scan. */
static int jpeg_parse(const img_bytes* d, jpeg_info* info, int64_t* width, int64_t* height, uint64_t* scratch) {
  __builtin_memset(info, 0, sizeof *info);
  uint64_t pos = 2;
  int jfif = 0, adobe = 0, adobe_transform = 0, frame = 0;
  int64_t w = 0, h = 0;
  for (;;) {
    int32_t m = jpeg_next_marker(d, &pos);
    if (m < 0 || m == 0xD9) {
      return CORRUPT;  /* no scan */
    }
    if (m == 0xD8 || jpeg_is_standalone(m)) {
      continue;
    }
    uint64_t at, len;
    TRY(jpeg_segment(d, pos, &at, &len));
    const uint8_t* p = d->p + at;
    pos = at + len;
    if (m == 0xE0 && len >= 14 && same(p, "JFIF\0", 5)) {
      jfif = 1;
    } else if (m == 0xEE && len >= 12 && same(p, "Adobe", 5)) {
      adobe = 1, adobe_transform = p[11];
    } else if (m == 0xC0 || m == 0xC1 || m == 0xC2) {
      if (frame++ || len < 6) {
        return CORRUPT;
      }
      if (p[0] != 8) {
        return UNSUPPORTED;  /* 12-bit samples */
      }
      h = be16(p + 1), w = be16(p + 3);
      info->ncomp = p[5];
      info->progressive = m == 0xC2;
      if (h == 0) {
        return UNSUPPORTED;  /* height given by a DNL marker */
      }
      if (info->ncomp != 1 && info->ncomp != 3) {
        return UNSUPPORTED;  /* CMYK, YCCK, ... */
      }
      if (len != 6u + 3u * info->ncomp) {
        return CORRUPT;
      }
      TRY(check_size((uint64_t)w, (uint64_t)h));
      for (int32_t c = 0; c < info->ncomp; c++) {
        jpeg_comp* k = &info->comp[c];
        k->id = p[6 + 3 * c], k->h = p[7 + 3 * c] >> 4, k->v = p[7 + 3 * c] & 15, k->tq = p[8 + 3 * c];
        if (k->h < 1 || k->h > 4 || k->v < 1 || k->v > 4 || k->tq > 3) {
          return CORRUPT;
        }
        info->hmax = k->h > info->hmax ? k->h : info->hmax;
        info->vmax = k->v > info->vmax ? k->v : info->vmax;
      }
    } else if ((m >= 0xC3 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC)) {
      return UNSUPPORTED;  /* lossless, hierarchical or arithmetic coding */
    } else if (m == 0xDA) {
      break;
    }
  }
  if (!frame) {
    return CORRUPT;
  }
  if (info->ncomp == 1) {
    info->color = JPEG_GRAY;
  } else if (jfif) {
    info->color = JPEG_YCC;
  } else if (adobe) {
    info->color = adobe_transform == 0 ? JPEG_RGB : JPEG_YCC;
  } else {
    const jpeg_comp* k = info->comp;
    info->color = k[0].id == 'R' && k[1].id == 'G' && k[2].id == 'B' ? JPEG_RGB : JPEG_YCC;
  }
  info->mcux = (w + 8 * info->hmax - 1) / (8 * info->hmax);
  info->mcuy = (h + 8 * info->vmax - 1) / (8 * info->vmax);
  uint64_t total = 0;
  for (int32_t c = 0; c < info->ncomp; c++) {
    jpeg_comp* k = &info->comp[c];
    if (info->hmax % k->h || info->vmax % k->v) {
      return UNSUPPORTED;  /* a fractional sampling ratio, which libjpeg refuses too */
    }
    k->bw = info->mcux * k->h, k->bh = info->mcuy * k->v;
    k->dw = (w * k->h + info->hmax - 1) / info->hmax;
    k->dh = (h * k->v + info->vmax - 1) / info->vmax;
    k->plane = total;
    total += (uint64_t)(k->bw * k->bh) * 64;
    if (info->progressive) {
      k->coefs = total;
      total += (uint64_t)(k->bw * k->bh) * 128;
    }
  }
  info->rows = total;
  total += 3 * (uint64_t)w;
  *width = w, *height = h, *scratch = total + 8;  /* room to align the coefficients */
  return IMG_OK;
}

/* The entropy-coded data of a scan, read MSB first: 0xFF 0x00 is a 0xFF byte; at a marker or
 * the end of the data it reads zeros and counts them, so a decode that used them is found
 * corrupt. */
typedef struct {
  const img_bytes* d;
  uint64_t pos;
  uint64_t bits;
  int32_t nbits;
  int32_t at_marker;
  uint64_t pad;
} jpeg_bits;

static void jpeg_fill(jpeg_bits* b) {
  const uint8_t* p = b->d->p;
  while (b->nbits <= 56) {
    uint32_t byte = 0;
    int real = 0;
    if (!b->at_marker && b->pos < b->d->n) {
      if (p[b->pos] != 0xFF) {
        byte = p[b->pos++], real = 1;
      } else {
        uint64_t q = b->pos + 1;
        while (q < b->d->n && p[q] == 0xFF) {
          q++;
        }
        if (q < b->d->n && p[q] == 0) {
          byte = 0xFF, real = 1;
          b->pos = q + 1;
        } else {
          b->at_marker = 1;
        }
      }
    }
    b->pad += !real;
    b->bits = b->bits << 8 | byte;
    b->nbits += 8;
  }
}

static uint32_t jpeg_get(jpeg_bits* b, int32_t n) {
  if (n == 0) {
    return 0;
  }
  if (b->nbits < n) {
    jpeg_fill(b);
  }
  b->nbits -= n;
  return (uint32_t)(b->bits >> b->nbits) & ((1u << n) - 1);
}

static int jpeg_overrun(const jpeg_bits* b) { return b->pad * 8 > (uint64_t)b->nbits; }

/* A restart marker: the bits left in the buffer are dropped, then RSTn must come next. */
static int jpeg_restart(jpeg_bits* b, int32_t expected) {
  uint64_t pos = b->pos;
  if (jpeg_next_marker(b->d, &pos) != 0xD0 + expected) {
    return CORRUPT;
  }
  b->pos = pos, b->bits = 0, b->nbits = 0, b->at_marker = 0, b->pad = 0;
  return IMG_OK;
}

typedef struct {
  uint16_t fast[1 << FAST_BITS];  /* length << 8 | symbol; 0: a longer code or none */
  int32_t maxcode[17];            /* the largest code of each length, -1 if none */
  int32_t delta[17];              /* index in vals of a code of each length, minus the code */
  uint8_t vals[256];
} jpeg_huff;

/* A DHT table: counts of codes per length 1..16, then the symbols; DC symbols (sizes) above
 * 15 and code sets that do not fit their lengths are refused, as libjpeg refuses them. */
static int jpeg_huff_build(jpeg_huff* t, const uint8_t* counts, const uint8_t* vals, int dc) {
  __builtin_memset(t->fast, 0, sizeof t->fast);
  int32_t code = 0, k = 0;
  for (int len = 1; len <= 16; len++) {
    t->delta[len] = k - code;
    for (int i = 0; i < counts[len - 1]; i++, k++, code++) {
      if (code + 1 >= 1 << len || (dc && vals[k] > 15)) {
        return CORRUPT;  /* more codes than the length allows (or an all-ones code) */
      }
      t->vals[k] = vals[k];
      if (len <= FAST_BITS) {
        int32_t shift = FAST_BITS - len;
        for (int32_t j = code << shift; j < (code + 1) << shift; j++) {
          t->fast[j] = (uint16_t)(len << 8 | vals[k]);
        }
      }
    }
    t->maxcode[len] = counts[len - 1] ? code - 1 : -1;
    code <<= 1;
  }
  return IMG_OK;
}

/* The next symbol, or -1 for bits that are no code of the table. */
static int32_t jpeg_symbol(jpeg_bits* b, const jpeg_huff* t) {
  if (b->nbits < 16) {
    jpeg_fill(b);
  }
  uint32_t e = t->fast[(b->bits >> (b->nbits - FAST_BITS)) & ((1u << FAST_BITS) - 1)];
  if (e) {
    b->nbits -= (int32_t)(e >> 8);
    return (int32_t)(e & 255);
  }
  for (int len = FAST_BITS + 1; len <= 16; len++) {
    int32_t code = (int32_t)((b->bits >> (b->nbits - len)) & ((1u << len) - 1));
    if (code <= t->maxcode[len]) {
      b->nbits -= len;
      return t->vals[t->delta[len] + code];
    }
  }
  return -1;
}

/* A coefficient from its size category s and s more bits (F.2.2.1's EXTEND). */
static int32_t jpeg_extend(jpeg_bits* b, int32_t s) {
  if (s == 0) {
    return 0;
  }
  int32_t v = (int32_t)jpeg_get(b, s);
  return v < 1 << (s - 1) ? v - (1 << s) + 1 : v;
}

static int16_t wrap16(int64_t v) { return (int16_t)(uint16_t)(uint64_t)v; }

static uint8_t clamp255(int64_t v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

/* libjpeg's "islow" inverse DCT (jidctint.c: the Loeffler-Ligtenberg-Moschytz factorization
 * in 13-bit fixed point, 2 extra bits kept between the column and the row pass), with its
 * rounding, so the samples are the same. Results are clamped to 0..255 as its SIMD versions
 * do (its C version wraps values far out of range, which valid data never gives). */
enum { IDCT_CB = 13, IDCT_P1 = 2 };  /* libjpeg's CONST_BITS and PASS1_BITS */

/* One 8-point pass of the islow IDCT (the same for columns and rows): out is scaled by
 * 2^IDCT_CB, the caller descales. */
static void idct_1d(const int64_t in[8], int64_t out8[8]) {
  int64_t z1 = (in[2] + in[6]) * 4433;
  int64_t t2 = z1 - in[6] * 15137, t3 = z1 + in[2] * 6270;
  int64_t t0 = (in[0] + in[4]) * (1 << IDCT_CB), t1 = (in[0] - in[4]) * (1 << IDCT_CB);
  int64_t e10 = t0 + t3, e13 = t0 - t3, e11 = t1 + t2, e12 = t1 - t2;
  int64_t o0 = in[7], o1 = in[5], o2 = in[3], o3 = in[1];
  int64_t za = o0 + o3, zb = o1 + o2, zc = o0 + o2, zd = o1 + o3;
  int64_t z5 = (zc + zd) * 9633;
  o0 *= 2446, o1 *= 16819, o2 *= 25172, o3 *= 12299;
  za *= -7373, zb *= -20995, zc = zc * -16069 + z5, zd = zd * -3196 + z5;
  o0 += za + zc, o1 += zb + zd, o2 += zb + zc, o3 += za + zd;
  out8[0] = e10 + o3, out8[7] = e10 - o3, out8[1] = e11 + o2, out8[6] = e11 - o2;
  out8[2] = e12 + o1, out8[5] = e12 - o1, out8[3] = e13 + o0, out8[4] = e13 - o0;
}

static void jpeg_idct(const int16_t* coef, const uint16_t* q, uint8_t* out, int64_t stride) {
  enum { CB = IDCT_CB, P1 = IDCT_P1 };
  int32_t ws[64];
  for (int c = 0; c < 8; c++) {
    int64_t in[8];
    int ac = 0;
    for (int r = 0; r < 8; r++) {
      in[r] = (int64_t)coef[8 * r + c] * q[8 * r + c];
      ac |= r && in[r];
    }
    if (!ac) {  /* the same result as the full computation, faster */
      for (int r = 0; r < 8; r++) {
        ws[8 * r + c] = (int32_t)(in[0] * (1 << P1));
      }
      continue;
    }
    int64_t out8[8];
    idct_1d(in, out8);
    for (int r = 0; r < 8; r++) {
      ws[8 * r + c] = (int32_t)((out8[r] + (1 << (CB - P1 - 1))) >> (CB - P1));
    }
  }
  for (int r = 0; r < 8; r++) {
    const int32_t* w = ws + 8 * r;
    uint8_t* o = out + r * stride;
    int64_t in[8];
    int ac = 0;
    for (int c = 0; c < 8; c++) {
      in[c] = w[c];
      ac |= c && in[c];
    }
    if (!ac) {
      uint8_t v = clamp255(128 + ((in[0] + (1 << (P1 + 2))) >> (P1 + 3)));
      for (int c = 0; c < 8; c++) {
        o[c] = v;
      }
      continue;
    }
    int64_t out8[8];
    idct_1d(in, out8);
    for (int c = 0; c < 8; c++) {
      o[c] = clamp255(128 + ((out8[c] + ((int64_t)1 << (CB + P1 + 2))) >> (CB + P1 + 3)));
    }
  }
}


/* The tables and state a decode builds as it walks the markers. */
typedef struct {
  const img_bytes* d;
  const jpeg_info* info;
  uint8_t* work;                 /* the scratch, aligned to 8 bytes */
  uint16_t qt[4][64];            /* quantization tables, natural order */
  int32_t qt_defined[4];
  uint16_t comp_qt[JPEG_MAX_COMPONENTS][64];  /* each component's table, latched at its first scan */
  int32_t comp_latched[JPEG_MAX_COMPONENTS];
  jpeg_huff dc[4], ac[4];
  int32_t dc_defined[4], ac_defined[4];
  uint32_t restart_interval;
  int32_t scanned[JPEG_MAX_COMPONENTS];
  const volatile int32_t* cancel;
} jpeg_state;

/* One scan's parameters and entropy state. */
typedef struct {
  int32_t n;
  int32_t comp[4];  /* component indices */
  const jpeg_huff* dc[4];
  const jpeg_huff* ac[4];
  int32_t ss, se, ah, al;
  int32_t pred[4];  /* DC predictions */
  uint32_t eobrun;
  jpeg_bits bits;
} jpeg_scan;

/* The example tables of the JPEG standard (Annex K.3): counts of codes of lengths 1..16, then
 * the symbols. libjpeg-turbo decodes a sequential file that defines no Huffman tables (a
 * Motion-JPEG frame) with these, as tables 0 (luma) and 1 (chroma). */
static const uint8_t STD_DC_COUNTS[2][16] = {{0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
                                             {0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}};
static const uint8_t STD_AC_COUNTS[2][16] = {{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125},
                                             {0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119}};
static const uint8_t STD_AC_SYMBOLS[2][162] = {
    {0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
     0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
     0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
     0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
     0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
     0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
     0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
     0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
     0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
     0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
     0xf9, 0xfa},
    {0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
     0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
     0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
     0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
     0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
     0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
     0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
     0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
     0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
     0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
     0xf9, 0xfa}};
static const uint8_t STD_DC_SYMBOLS[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

static void jpeg_standard_tables(jpeg_state* st) {
  for (int i = 0; i < 2; i++) {
    jpeg_huff_build(&st->dc[i], STD_DC_COUNTS[i], STD_DC_SYMBOLS, 1);
    jpeg_huff_build(&st->ac[i], STD_AC_COUNTS[i], STD_AC_SYMBOLS[i], 0);
    st->dc_defined[i] = st->ac_defined[i] = 1;
  }
}

static int jpeg_dqt(jpeg_state* st, const uint8_t* p, uint64_t len) {
  while (len) {
    uint32_t precision = p[0] >> 4, id = p[0] & 15;
    uint64_t size = 1 + 64 * (precision ? 2 : 1);
    if (precision > 1 || id > 3 || len < size) {
      return CORRUPT;
    }
    for (int i = 0; i < 64; i++) {
      st->qt[id][ZIGZAG[i]] = (uint16_t)(precision ? be16(p + 1 + 2 * i) : p[1 + i]);
    }
    st->qt_defined[id] = 1;
    p += size, len -= size;
  }
  return IMG_OK;
}

static int jpeg_dht(jpeg_state* st, const uint8_t* p, uint64_t len) {
  while (len) {
    if (len < 17) {
      return CORRUPT;
    }
    uint32_t cls = p[0] >> 4, id = p[0] & 15, total = 0;
    for (int i = 0; i < 16; i++) {
      total += p[1 + i];
    }
    if (cls > 1 || id > 3 || total > 256 || len < 17 + total) {
      return CORRUPT;
    }
    TRY(jpeg_huff_build(cls ? &st->ac[id] : &st->dc[id], p + 1, p + 17, !cls));
    (cls ? st->ac_defined : st->dc_defined)[id] = 1;
    p += 17 + total, len -= 17 + total;
  }
  return IMG_OK;
}

static int16_t* jpeg_coefs(const jpeg_state* st, int32_t c, int64_t bx, int64_t by) {
  const jpeg_comp* k = &st->info->comp[c];
  return (int16_t*)(st->work + k->coefs) + (by * k->bw + bx) * 64;
}

/* One block of a sequential scan: decoded, then transformed into the component's plane. */
static int jpeg_block_sequential(jpeg_state* st, jpeg_scan* sc, int32_t i, int64_t bx, int64_t by) {
  int16_t coef[64];
  __builtin_memset(coef, 0, sizeof coef);
  jpeg_bits* b = &sc->bits;
  int32_t s = jpeg_symbol(b, sc->dc[i]);
  if (s < 0) {
    return CORRUPT;
  }
  sc->pred[i] = (int32_t)((uint32_t)sc->pred[i] + (uint32_t)jpeg_extend(b, s));
  coef[0] = wrap16(sc->pred[i]);
  for (int32_t k = 1; k < 64; k++) {
    int32_t rs = jpeg_symbol(b, sc->ac[i]);
    if (rs < 0) {
      return CORRUPT;
    }
    int32_t r = rs >> 4;
    s = rs & 15;
    if (s) {
      k += r;
      coef[ZIGZAG[k]] = wrap16(jpeg_extend(b, s));
    } else if (r == 15) {
      k += 15;
    } else {
      break;
    }
  }
  int32_t c = sc->comp[i];
  const jpeg_comp* comp = &st->info->comp[c];
  int64_t stride = comp->bw * 8;
  jpeg_idct(coef, st->comp_qt[c], st->work + comp->plane + by * 8 * stride + bx * 8, stride);
  return IMG_OK;
}

/* One block of a progressive scan (G.1.2): DC first and refinement, AC first and refinement
 * with end-of-band runs, into the coefficients kept for the whole image. */
static int jpeg_block_progressive(jpeg_state* st, jpeg_scan* sc, int32_t i, int64_t bx, int64_t by) {
  int16_t* coef = jpeg_coefs(st, sc->comp[i], bx, by);
  jpeg_bits* b = &sc->bits;
  if (sc->ss == 0) {
    if (sc->ah == 0) {
      int32_t s = jpeg_symbol(b, sc->dc[i]);
      if (s < 0) {
        return CORRUPT;
      }
      sc->pred[i] = (int32_t)((uint32_t)sc->pred[i] + (uint32_t)jpeg_extend(b, s));
      coef[0] = wrap16((int64_t)((uint64_t)(int64_t)sc->pred[i] << sc->al));
    } else if (jpeg_get(b, 1)) {
      coef[0] = (int16_t)(coef[0] | (1 << sc->al));
    }
    return IMG_OK;
  }
  if (sc->ah == 0) {
    if (sc->eobrun) {
      sc->eobrun--;
      return IMG_OK;
    }
    for (int32_t k = sc->ss; k <= sc->se; k++) {
      int32_t rs = jpeg_symbol(b, sc->ac[i]);
      if (rs < 0) {
        return CORRUPT;
      }
      int32_t r = rs >> 4, s = rs & 15;
      if (s) {
        k += r;
        coef[ZIGZAG[k]] = wrap16((int64_t)((uint64_t)(int64_t)jpeg_extend(b, s) << sc->al));
      } else if (r == 15) {
        k += 15;
      } else {
        sc->eobrun = (1u << r) + jpeg_get(b, r) - 1;
        break;
      }
    }
    return IMG_OK;
  }
  /* Refinement: one more bit of every coefficient already nonzero, new ones of +-1 << al. */
  int32_t p1 = 1 << sc->al, m1 = -p1;
  int32_t k = sc->ss;
  if (!sc->eobrun) {
    for (; k <= sc->se; k++) {
      int32_t rs = jpeg_symbol(b, sc->ac[i]);
      if (rs < 0) {
        return CORRUPT;
      }
      int32_t r = rs >> 4, s = rs & 15, value = 0;
      if (s) {
        value = jpeg_get(b, 1) ? p1 : m1;
      } else if (r != 15) {
        sc->eobrun = (1u << r) + jpeg_get(b, r);
        break;
      }
      do {
        int16_t* c = &coef[ZIGZAG[k]];
        if (*c) {
          if (jpeg_get(b, 1) && (*c & p1) == 0) {
            *c = wrap16(*c + (*c >= 0 ? p1 : m1));
          }
        } else if (--r < 0) {
          break;
        }
        k++;
      } while (k <= sc->se);
      if (s) {
        coef[ZIGZAG[k]] = (int16_t)value;
      }
    }
  }
  if (sc->eobrun) {
    for (; k <= sc->se; k++) {
      int16_t* c = &coef[ZIGZAG[k]];
      if (*c && jpeg_get(b, 1) && (*c & p1) == 0) {
        *c = wrap16(*c + (*c >= 0 ? p1 : m1));
      }
    }
    sc->eobrun--;
  }
  return IMG_OK;
}

static int jpeg_block(jpeg_state* st, jpeg_scan* sc, int32_t i, int64_t bx, int64_t by) {
  return st->info->progressive ? jpeg_block_progressive(st, sc, i, bx, by)
                               : jpeg_block_sequential(st, sc, i, bx, by);
}

/* A scan: its header at p (len bytes), its entropy-coded data from pos; returns where the
 * data was left, for the next marker. */
static int jpeg_scan_decode(jpeg_state* st, const uint8_t* p, uint64_t len, uint64_t* pos) {
  const jpeg_info* info = st->info;
  jpeg_scan sc;
  __builtin_memset(&sc, 0, sizeof sc);
  sc.n = p[0];
  if (len < 1 || sc.n < 1 || sc.n > info->ncomp || len != 4u + 2u * sc.n) {
    return CORRUPT;
  }
  int32_t blocks_in_mcu = 0;
  for (int32_t i = 0; i < sc.n; i++) {
    /* libjpeg-turbo's match, which lets a frame repeat an id: the first component with this
     * id at or after the scan position i */
    int32_t id = p[1 + 2 * i], td = p[2 + 2 * i] >> 4, ta = p[2 + 2 * i] & 15, c = i;
    while (c < info->ncomp && info->comp[c].id != id) {
      c++;
    }
    if (c == info->ncomp || td > 3 || ta > 3) {
      return CORRUPT;
    }
    for (int32_t o = 0; o < i; o++) {
      if (sc.comp[o] == c) {
        return CORRUPT;
      }
    }
    sc.comp[i] = c;
    sc.dc[i] = &st->dc[td], sc.ac[i] = &st->ac[ta];
    blocks_in_mcu += info->comp[c].h * info->comp[c].v;
    if (!st->comp_latched[c]) {
      if (!st->qt_defined[info->comp[c].tq]) {
        return CORRUPT;
      }
      __builtin_memcpy(st->comp_qt[c], st->qt[info->comp[c].tq], sizeof st->comp_qt[c]);
      st->comp_latched[c] = 1;
    }
  }
  const uint8_t* q = p + 1 + 2 * sc.n;
  sc.ss = q[0], sc.se = q[1], sc.ah = q[2] >> 4, sc.al = q[2] & 15;
  if (sc.n > 1 && blocks_in_mcu > 10) {
    return CORRUPT;
  }
  int dc_needed = 1, ac_needed = 1;
  if (info->progressive) {
    /* libjpeg's checks of the progression parameters */
    int bad = sc.ss == 0 ? sc.se != 0 : sc.ss > sc.se || sc.se > 63 || sc.n != 1;
    if (bad || (sc.ah && sc.al != sc.ah - 1) || sc.al > 13) {
      return CORRUPT;
    }
    dc_needed = sc.ss == 0 && sc.ah == 0, ac_needed = sc.ss != 0;
  }
  for (int32_t i = 0; i < sc.n; i++) {
    int32_t td = p[2 + 2 * i] >> 4, ta = p[2 + 2 * i] & 15;
    if ((dc_needed && !st->dc_defined[td]) || (ac_needed && !st->ac_defined[ta])) {
      return CORRUPT;
    }
    st->scanned[sc.comp[i]] = 1;
  }
  sc.bits.d = st->d;
  sc.bits.pos = *pos;
  /* Interleaved scans go MCU by MCU over the whole MCU grid; a one-component scan goes block
   * by block over the blocks that hold image samples. */
  const jpeg_comp* first = &info->comp[sc.comp[0]];
  int64_t cols = sc.n > 1 ? info->mcux : (first->dw + 7) / 8;
  int64_t rows = sc.n > 1 ? info->mcuy : (first->dh + 7) / 8;
  uint32_t until_restart = st->restart_interval;
  int32_t next_restart = 0;
  for (int64_t my = 0; my < rows; my++) {
    if (*st->cancel) {
      return IMG_CANCELLED;
    }
    for (int64_t mx = 0; mx < cols; mx++) {
      if (st->restart_interval) {
        if (until_restart == 0) {
          TRY(jpeg_restart(&sc.bits, next_restart));
          next_restart = (next_restart + 1) & 7;
          until_restart = st->restart_interval;
          sc.pred[0] = sc.pred[1] = sc.pred[2] = sc.pred[3] = 0;
          sc.eobrun = 0;
        }
        until_restart--;
      }
      if (sc.n == 1) {
        TRY(jpeg_block(st, &sc, 0, mx, my));
      } else {
        for (int32_t i = 0; i < sc.n; i++) {
          const jpeg_comp* k = &info->comp[sc.comp[i]];
          for (int32_t v = 0; v < k->v; v++) {
            for (int32_t h = 0; h < k->h; h++) {
              TRY(jpeg_block(st, &sc, i, mx * k->h + h, my * k->v + v));
            }
          }
        }
      }
      if (jpeg_overrun(&sc.bits)) {
        return CORRUPT;
      }
    }
  }
  *pos = sc.bits.pos;
  return IMG_OK;
}

/* floor(x / 2^16) for a negative x too */
static int32_t shift16(int32_t x) { return x >= 0 ? x >> 16 : -(int32_t)((uint32_t)(-x + 65535) >> 16); }

/* Component c's samples upsampled to row y of the image, as libjpeg's upsampler makes them:
 * "fancy" triangle filters for 2:1 horizontal (when more than 2 samples wide), 2:1 vertical
 * and both; replication for other integral ratios. Past the edges the nearest sample is used,
 * which is what libjpeg's edge cases and duplicated context rows amount to. */
static const uint8_t* jpeg_upsample(const jpeg_state* st, int32_t c, int64_t y, int64_t width, uint8_t* row) {
  const jpeg_info* info = st->info;
  const jpeg_comp* k = &info->comp[c];
  int32_t hr = info->hmax / k->h, vr = info->vmax / k->v;
  int64_t stride = k->bw * 8;
  const uint8_t* plane = st->work + k->plane;
  if (hr == 1 && vr == 1) {
    return plane + y * stride;
  }
  int64_t dw = k->dw;
  int fancy_h = hr == 2 && dw > 2;
  if (vr == 2 && (fancy_h || hr == 1)) {
    int64_t i = y / 2, far = y % 2 ? (i + 1 < k->dh ? i + 1 : i) : (i > 0 ? i - 1 : 0);
    const uint8_t* near_row = plane + i * stride;
    const uint8_t* far_row = plane + far * stride;
    if (hr == 1) {
      int32_t bias = y % 2 ? 2 : 1;
      for (int64_t x = 0; x < width; x++) {
        row[x] = (uint8_t)((near_row[x] * 3 + far_row[x] + bias) >> 2);
      }
      return row;
    }
    for (int64_t x = 0; x < width; x++) {
      int64_t j = x / 2, o = x % 2 ? (j + 1 < dw ? j + 1 : j) : (j > 0 ? j - 1 : 0);
      int32_t here = near_row[j] * 3 + far_row[j], there = near_row[o] * 3 + far_row[o];
      row[x] = (uint8_t)((here * 3 + there + (x % 2 ? 7 : 8)) >> 4);
    }
    return row;
  }
  if (vr == 1 && fancy_h) {
    const uint8_t* in = plane + y * stride;
    for (int64_t x = 0; x < width; x++) {
      int64_t j = x / 2, o = x % 2 ? (j + 1 < dw ? j + 1 : j) : (j > 0 ? j - 1 : 0);
      row[x] = (uint8_t)((in[j] * 3 + in[o] + (x % 2 ? 2 : 1)) >> 2);
    }
    return row;
  }
  const uint8_t* in = plane + (y / vr) * stride;
  for (int64_t x = 0; x < width; x++) {
    row[x] = in[x / hr];
  }
  return row;
}

static int jpeg_decode(const img_bytes* d, const jpeg_info* info, int64_t width, int64_t height,
                       uint8_t* scratch, const img_sink* s) {
  jpeg_state st;  /* about 13 KiB of stack, most of it the eight Huffman tables */
  __builtin_memset(&st, 0, sizeof st);
  st.d = d, st.info = info, st.cancel = s->cancel;
  st.work = scratch + ((8 - ((uintptr_t)scratch & 7)) & 7);
  for (int32_t c = 0; c < info->ncomp && info->progressive; c++) {
    const jpeg_comp* k = &info->comp[c];
    __builtin_memset(st.work + k->coefs, 0, (size_t)(k->bw * k->bh) * 128);
  }
  if (!info->progressive) {
    jpeg_standard_tables(&st);
  }
  uint64_t pos = 2;
  int32_t scans = 0;
  for (;;) {
    int32_t m = jpeg_next_marker(d, &pos);
    if (m < 0 || m == 0xD9) {
      break;
    }
    if (m == 0xD8 || jpeg_is_standalone(m)) {
      continue;
    }
    uint64_t at, len;
    TRY(jpeg_segment(d, pos, &at, &len));
    pos = at + len;
    const uint8_t* p = d->p + at;
    if (m == 0xDB) {
      TRY(jpeg_dqt(&st, p, len));
    } else if (m == 0xC4) {
      TRY(jpeg_dht(&st, p, len));
    } else if (m == 0xDD) {
      if (len != 2) {
        return CORRUPT;
      }
      st.restart_interval = be16(p);
    } else if (m == 0xDA) {
      /* Each scan goes over every block, and a scan can take a few bytes: a bound keeps a
       * small file from costing hours (encoders write about ten). */
      if (++scans > JPEG_MAX_SCANS) {
        return CORRUPT;
      }
      TRY(jpeg_scan_decode(&st, p, len, &pos));
      if (!info->progressive) {
        int done = 1;
        for (int32_t c = 0; c < info->ncomp; c++) {
          done &= st.scanned[c];
        }
        if (done) {
          break;  /* what follows (EOI, or trailing bytes) is not needed */
        }
      }
    } else if (m == 0xDC) {
      return UNSUPPORTED;  /* DNL */
    }
  }
  for (int32_t c = 0; c < info->ncomp; c++) {
    if (!st.scanned[c]) {
      return CORRUPT;
    }
  }
  if (info->progressive) {
    for (int32_t c = 0; c < info->ncomp; c++) {
      const jpeg_comp* k = &info->comp[c];
      int64_t stride = k->bw * 8;
      for (int64_t by = 0; by < k->bh; by++) {
        TRY(sink_poll(s));
        for (int64_t bx = 0; bx < k->bw; bx++) {
          jpeg_idct(jpeg_coefs(&st, c, bx, by), st.comp_qt[c], st.work + k->plane + by * 8 * stride + bx * 8, stride);
        }
      }
    }
  }
  uint8_t* rows = st.work + info->rows;
  for (int64_t y = 0; y < height; y++) {
    TRY(sink_poll(s));
    uint8_t* out = sink_row(s, y);
    const uint8_t* c0 = jpeg_upsample(&st, 0, y, width, rows);
    if (info->color == JPEG_GRAY) {
      for (int64_t x = 0; x < width; x++) {
        put_gray(s, out, x, c0[x]);
      }
      continue;
    }
    const uint8_t* c1 = jpeg_upsample(&st, 1, y, width, rows + width);
    const uint8_t* c2 = jpeg_upsample(&st, 2, y, width, rows + 2 * width);
    for (int64_t x = 0; x < width; x++) {
      if (info->color == JPEG_RGB) {
        put_rgb(s, out, x, c0[x], c1[x], c2[x]);
        continue;
      }
      /* libjpeg's YCbCr->RGB: 16-bit fixed point, red and blue offsets rounded, green's sum
       * rounded once */
      int32_t lum = c0[x], cb = c1[x] - 128, cr = c2[x] - 128;
      int32_t red = shift16(91881 * cr + 32768), blue = shift16(116130 * cb + 32768);
      int32_t green = shift16(-22554 * cb + 32768 - 46802 * cr);
      put_rgb(s, out, x, clamp255(lum + red), clamp255(lum + green), clamp255(lum + blue));
    }
  }
  return IMG_OK;
}

/* ---- entry points ----------------------------------------------------------------------- */

typedef struct {
  int32_t format;  /* FMT_* */
  int64_t width, height;
  uint64_t scratch;
  union {
    bmp_info bmp;
    pnm_info pnm;
    tiff_info tiff;
    png_info png;
    jpeg_info jpeg;
  } u;
} img_info;

static int img_parse(const img_bytes* d, img_info* info) {
  const uint8_t* p = d->p;
  uint64_t n = d->n;
  info->scratch = 0;
  if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) {
    info->format = FMT_JPEG;
    return jpeg_parse(d, &info->u.jpeg, &info->width, &info->height, &info->scratch);
  }
  if (n >= 8 && same(p, "\x89PNG\r\n\x1a\n", 8)) {
    info->format = FMT_PNG;
    TRY(png_parse(d, &info->u.png, &info->width, &info->height));
    info->scratch = info->u.png.raw;
    return IMG_OK;
  }
  if (n >= 2 && p[0] == 'B' && p[1] == 'M') {
    info->format = FMT_BMP;
    return bmp_parse(d, &info->u.bmp, &info->width, &info->height);
  }
  if (n >= 4 && (same(p, "II*\0", 4) || same(p, "MM\0*", 4) ||
                 same(p, "II+\0", 4) || same(p, "MM\0+", 4))) {
    info->format = FMT_TIFF;
    return tiff_parse(d, &info->u.tiff, &info->width, &info->height);
  }
  if (n >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6') {
    info->format = FMT_PNM;
    return pnm_parse(d, &info->u.pnm, &info->width, &info->height);
  }
  if (n >= 2 && p[0] == 'P' && p[1] == 'f') {
    return UNSUPPORTED;  /* PFM: float samples */
  }
  if (n >= 12 && same(p, "RIFF", 4) && same(p + 8, "WEBP", 4)) {
    return UNSUPPORTED_FORMAT;
  }
  if ((n >= 12 && same(p, "\0\0\0\x0CjP  \r\n\x87\n", 12)) ||
      (n >= 4 && same(p, "\xFF\x4F\xFF\x51", 4))) {
    return UNSUPPORTED_FORMAT;  /* JPEG 2000: JP2 file or raw codestream */
  }
  return UNRECOGNIZED;
}

static sw_status_t img_status(int r, int64_t* detail) {
  if (r == IMG_CANCELLED) {
    return SW_CANCELLED;
  }
  detail[0] = r;
  return SW_INVALID_INPUT;
}

sw_status_t sw_image_probe(SW_LIB_ARGS) {
  (void)cancel, (void)params, (void)blob;
  img_bytes d = {(const uint8_t*)t[0]->data, (uint64_t)t[0]->shape[0]};
  img_info info;
  int r = img_parse(&d, &info);
  if (r != IMG_OK) {
    return img_status(r, detail);
  }
  scalars[0] = info.height;
  scalars[1] = info.width;
  scalars[2] = (int64_t)info.scratch;
  return SW_OK;
}

sw_status_t sw_image_decode(SW_LIB_ARGS) {
  (void)scalars, (void)blob;
  img_bytes d = {(const uint8_t*)t[0]->data, (uint64_t)t[0]->shape[0]};
  const sw_tensor* scratch = t[1];
  const sw_tensor* out = t[2];
  int64_t format = params[0];
  if (format < PIX_RGB || format > PIX_GRAY) {
    return SW_INTERNAL;
  }
  img_info info;
  int r = img_parse(&d, &info);
  if (r != IMG_OK) {
    return img_status(r, detail);
  }
  /* The buffers come from the probe of what should be the same bytes; check them anyway. */
  int32_t channels = format == PIX_GRAY ? 1 : 3;
  if (out->rank != 3 || out->shape[0] != info.height || out->shape[1] != info.width ||
      out->shape[2] != channels || scratch->rank != 1 || scratch->shape[0] < 0 ||
      (uint64_t)scratch->shape[0] < info.scratch) {
    return SW_INTERNAL;
  }
  img_sink s = {(uint8_t*)out->data, info.width, (int32_t)format, channels, cancel};
  uint8_t* work = (uint8_t*)scratch->data;
  switch (info.format) {
    case FMT_BMP:
      r = bmp_decode(&d, &info.u.bmp, info.width, info.height, &s);
      break;
    case FMT_PNM:
      r = pnm_decode(&d, &info.u.pnm, info.width, info.height, &s);
      break;
    case FMT_TIFF:
      r = tiff_decode(&d, &info.u.tiff, info.width, info.height, &s);
      break;
    case FMT_PNG:
      r = png_decode(&d, &info.u.png, info.width, info.height, work, &s);
      break;
    default:
      r = jpeg_decode(&d, &info.u.jpeg, info.width, info.height, work, &s);
      break;
  }
  return r == IMG_OK ? SW_OK : img_status(r, detail);
}
