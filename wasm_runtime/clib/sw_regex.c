/* RegexFullMatch (sw_lib.h): a Pike VM, that is a Thompson NFA simulation that keeps the set
 * of instructions the match can be at, so the time is linear in the input (times the program
 * length) and no pattern can make it backtrack. The program comes from
 * toolkit/regex.py, whose docstring defines its format; sw_regex_ops.h, generated
 * from it, gives the numbers. A full match needs no capture positions and no thread priority,
 * so a thread is just an instruction index.
 *
 * The program is part of the module and could have been tampered with: it is verified before
 * use (every opcode known, every jump target an instruction, every class in the table with
 * sorted ranges) and a malformed one returns SW_INTERNAL. Only its length word cannot be
 * checked against the params it came in, so it is capped at SW_RX_MAX_WORDS.
 *
 * Input is decoded from UTF-8 by hand; a byte that starts no valid sequence is one unit,
 * SW_RX_INVALID_UNIT, which only ., (?s). and negated classes match. */
#include "sw_lib.h"
#include "sw_regex_ops.h"

#define RX_MAX_INSTR (SW_RX_MAX_WORDS - SW_RX_HEADER_WORDS)
#define RX_POLL_UNITS 1024 /* units between polls of the cancel flag within one string */

typedef struct rx_prog {
  const int64_t* code; /* ninstr instruction words */
  const int64_t* classes; /* nclass words of class table */
  int32_t ninstr;
} rx_prog;

/* The two thread lists, the stack of the epsilon closure and the marks that keep an
 * instruction from being added twice to the list being built: about 40 KiB of stack. */
typedef struct rx_work {
  uint16_t list[2][RX_MAX_INSTR];
  int32_t count[2];
  uint16_t stack[RX_MAX_INSTR];
  uint32_t mark[RX_MAX_INSTR];
  uint32_t stamp;
} rx_work;

/* What the assertions see at a position: the unit before it and the one after (-1 at the
 * ends of the input). */
typedef struct rx_pos {
  int32_t before, after;
} rx_pos;

static inline int32_t rx_op(int64_t w) { return (int32_t)(w & 0xFF); }
static inline int32_t rx_a(int64_t w) { return (int32_t)(((uint64_t)w >> SW_RX_A_SHIFT) & SW_RX_OPERAND_MASK); }
static inline int32_t rx_b(int64_t w) { return (int32_t)(((uint64_t)w >> SW_RX_B_SHIFT) & SW_RX_OPERAND_MASK); }
static inline uint32_t rx_lo(int64_t r) { return (uint32_t)((uint64_t)r & 0xFFFFFFFFu); }
static inline uint32_t rx_hi(int64_t r) { return (uint32_t)((uint64_t)r >> 32); }

/* 1 if the program is well formed; fills *out. */
static int rx_verify(const int64_t* params, rx_prog* out) {
  if (params[0] != SW_RX_HEADER_WORD) return 0;
  int64_t ninstr = params[1], nclass = params[2];
  if (ninstr < 1 || nclass < 0 || ninstr > SW_RX_MAX_WORDS - SW_RX_HEADER_WORDS ||
      nclass > SW_RX_MAX_WORDS - SW_RX_HEADER_WORDS - ninstr)
    return 0;
  const int64_t* code = params + SW_RX_HEADER_WORDS;
  const int64_t* classes = code + ninstr;

  /* the class table: each class's start, and its ranges sorted and disjoint */
  uint8_t class_start[RX_MAX_INSTR];
  __builtin_memset(class_start, 0, (size_t)nclass);
  for (int64_t at = 0; at < nclass;) {
    int64_t k = classes[at];
    if (k < 0 || k > nclass - at - 1) return 0;
    int64_t prev_hi = -1;
    for (int64_t j = 1; j <= k; j++) {
      int64_t r = classes[at + j];
      uint32_t lo = rx_lo(r), hi = rx_hi(r);
      if (lo > hi || hi > SW_RX_INVALID_UNIT || (int64_t)lo <= prev_hi) return 0;
      prev_hi = hi;
    }
    class_start[at] = 1;
    at += 1 + k;
  }

  for (int64_t pc = 0; pc < ninstr; pc++) {
    int64_t w = code[pc];
    if ((uint64_t)w >> SW_RX_RESERVED_SHIFT) return 0;
    int32_t a = rx_a(w), b = rx_b(w);
    int falls_through = 1; /* goes on at pc + 1, which must then exist */
    switch (rx_op(w)) {
      case SW_RX_OP_MATCH: falls_through = 0; break;
      case SW_RX_OP_CHAR:
        if (a > SW_RX_INVALID_UNIT) return 0;
        break;
      case SW_RX_OP_ANY:
      case SW_RX_OP_ANY_NOT_NL: break;
      case SW_RX_OP_CLASS:
        if (a >= nclass || !class_start[a]) return 0;
        break;
      case SW_RX_OP_JMP:
        if (a >= ninstr) return 0;
        falls_through = 0;
        break;
      case SW_RX_OP_SPLIT:
        if (a >= ninstr || b >= ninstr) return 0;
        falls_through = 0;
        break;
      case SW_RX_OP_ASSERT:
        if (a < SW_RX_AT_BEGIN_TEXT || a > SW_RX_AT_NOT_WORD_BOUNDARY) return 0;
        break;
      default: return 0;
    }
    if (falls_through && pc + 1 >= ninstr) return 0;
  }
  out->code = code;
  out->classes = classes;
  out->ninstr = (int32_t)ninstr;
  return 1;
}

/* The unit at s[i] (i < len) and its length in bytes: a code point of a well-formed UTF-8
 * sequence (no overlong forms, no surrogates, at most U+10FFFF), else the invalid unit for
 * the one byte. */
static int32_t rx_decode(const uint8_t* s, int64_t len, int64_t i, int32_t* unit) {
  uint32_t b0 = s[i];
  if (b0 < 0x80) {
    *unit = (int32_t)b0;
    return 1;
  }
  int32_t n;
  uint32_t cp, lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *unit = SW_RX_INVALID_UNIT;
    return 1;
  }
  if (len - i < n || s[i + 1] < lo || s[i + 1] > hi) {
    *unit = SW_RX_INVALID_UNIT;
    return 1;
  }
  for (int32_t k = 1; k < n; k++) {
    uint32_t c = s[i + k];
    if ((c & 0xC0) != 0x80) {
      *unit = SW_RX_INVALID_UNIT;
      return 1;
    }
    cp = cp << 6 | (c & 0x3F);
  }
  *unit = (int32_t)cp;
  return n;
}

static inline int rx_is_word(int32_t u) {
  return (u >= '0' && u <= '9') || (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || u == '_';
}

static int rx_assert(int32_t kind, rx_pos p) {
  switch (kind) {
    case SW_RX_AT_BEGIN_TEXT: return p.before < 0;
    case SW_RX_AT_END_TEXT: return p.after < 0;
    case SW_RX_AT_BEGIN_LINE: return p.before < 0 || p.before == '\n';
    case SW_RX_AT_END_LINE: return p.after < 0 || p.after == '\n';
    case SW_RX_AT_WORD_BOUNDARY: return rx_is_word(p.before) != rx_is_word(p.after);
    default: return rx_is_word(p.before) == rx_is_word(p.after); /* NOT_WORD_BOUNDARY (verified) */
  }
}

static int rx_in_class(const int64_t* cls, int32_t u) {
  int64_t lo = 0, hi = cls[0]; /* binary search over the ranges cls[1..k] */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int64_t r = cls[1 + mid];
    if ((uint32_t)u < rx_lo(r)) {
      hi = mid;
    } else if ((uint32_t)u > rx_hi(r)) {
      lo = mid + 1;
    } else {
      return 1;
    }
  }
  return 0;
}

static int rx_consumes(const rx_prog* p, int64_t w, int32_t u) {
  switch (rx_op(w)) {
    case SW_RX_OP_CHAR: return u == rx_a(w);
    case SW_RX_OP_ANY: return 1;
    case SW_RX_OP_ANY_NOT_NL: return u != '\n';
    case SW_RX_OP_CLASS: return rx_in_class(p->classes + rx_a(w), u);
    default: return 0; /* MATCH: the input is not at its end */
  }
}

/* Starts a new list to build: a fresh stamp makes every mark stale. */
static void rx_new_list(rx_work* w, int32_t which) {
  w->count[which] = 0;
  if (++w->stamp == 0) {
    __builtin_memset(w->mark, 0, sizeof w->mark);
    w->stamp = 1;
  }
}

/* Adds instruction pc and everything reachable from it without consuming input at position
 * pos to list which: the instructions that consume a unit, and MATCH. */
static void rx_add(const rx_prog* p, rx_work* w, int32_t which, int32_t pc, rx_pos pos) {
  if (w->mark[pc] == w->stamp) return;
  w->mark[pc] = w->stamp;
  int32_t top = 0;
  w->stack[top++] = (uint16_t)pc;
  while (top > 0) { /* each instruction is pushed once per list, so top <= ninstr */
    int32_t at = w->stack[--top];
    int64_t ins = p->code[at];
    int32_t next[2], nnext = 0;
    switch (rx_op(ins)) {
      case SW_RX_OP_JMP: next[nnext++] = rx_a(ins); break;
      case SW_RX_OP_SPLIT:
        next[nnext++] = rx_a(ins);
        next[nnext++] = rx_b(ins);
        break;
      case SW_RX_OP_ASSERT:
        if (rx_assert(rx_a(ins), pos)) next[nnext++] = at + 1;
        break;
      default: w->list[which][w->count[which]++] = (uint16_t)at;
    }
    for (int32_t k = 0; k < nnext; k++) {
      if (w->mark[next[k]] != w->stamp) {
        w->mark[next[k]] = w->stamp;
        w->stack[top++] = (uint16_t)next[k];
      }
    }
  }
}

/* 1 if the program matches all of s, 0 if not, -1 if cancelled. */
static int rx_full_match(const rx_prog* p, rx_work* w, const uint8_t* s, int64_t len,
                         const volatile int32_t* cancel) {
  int32_t cur = 0, unit = -1;
  int64_t i = 0, units = 0;
  int32_t step = 0;
  if (len > 0) step = rx_decode(s, len, 0, &unit);
  rx_new_list(w, cur);
  rx_add(p, w, cur, 0, (rx_pos){-1, unit});
  while (i < len) {
    if (w->count[cur] == 0) return 0;
    if (++units % RX_POLL_UNITS == 0 && *cancel) return -1;
    int64_t j = i + step;
    int32_t after = -1, after_step = 0;
    if (j < len) after_step = rx_decode(s, len, j, &after);
    int32_t nxt = cur ^ 1;
    rx_new_list(w, nxt);
    rx_pos pos = {unit, after};
    for (int32_t k = 0; k < w->count[cur]; k++) {
      int32_t pc = w->list[cur][k];
      if (rx_consumes(p, p->code[pc], unit)) rx_add(p, w, nxt, pc + 1, pos);
    }
    cur = nxt;
    i = j, unit = after, step = after_step;
  }
  for (int32_t k = 0; k < w->count[cur]; k++)
    if (rx_op(p->code[w->list[cur][k]]) == SW_RX_OP_MATCH) return 1;
  return 0;
}

sw_status_t sw_regex_full_match(SW_LIB_ARGS) {
  (void)scalars, (void)detail, (void)blob;
  const sw_tensor* x = t[0];
  sw_tensor* out = t[1];
  rx_prog prog;
  if (!rx_verify(params, &prog)) return SW_INTERNAL;
  if (x->rank != out->rank || x->rank < 0 || x->rank > SW_MAX_RANK) return SW_INTERNAL;
  int64_t n = 1;
  for (int32_t d = 0; d < x->rank; d++) {
    if (x->shape[d] != out->shape[d]) return SW_INTERNAL;
    n *= x->shape[d];
  }
  const sw_str* in = (const sw_str*)x->data;
  uint8_t* result = (uint8_t*)out->data;
  rx_work w;
  __builtin_memset(w.mark, 0, sizeof w.mark);
  w.stamp = 0;
  for (int64_t e = 0; e < n; e++) {
    if (*cancel) return SW_CANCELLED;
    if (in[e].len < 0) return SW_INTERNAL;
    int m = rx_full_match(&prog, &w, sw_str_bytes(in[e]), in[e].len, cancel);
    if (m < 0) return SW_CANCELLED;
    result[e] = (uint8_t)m;
  }
  return SW_OK;
}
