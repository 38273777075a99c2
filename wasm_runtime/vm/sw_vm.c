/* The symwasm VM: verifies the embedded program when a context is created, then runs it
 * per call of sw_run.
 *
 * All run state lives in an sw_context (registers, shape heap, static arena, inputs,
 * outputs, memory accounting, error text); the program itself is read-only. So one loaded
 * module can hold several independent instances, and threads may run different contexts
 * of one native library at the same time. A context is used by one thread at a time.
 *
 * Registers hold tensor descriptors; the shape heap holds int64 symbol values. The program
 * is verified before a context can run, so dispatch does no operand range checks. Every
 * failure a user can cause (bad input, broken shape constraint, index out of range, out of
 * memory) returns a status with a message built from the compiler's context string;
 * nothing traps.
 */
#include "sw_vm.h"
#include "sw_pool.h"

#define SW_MAX_CALL_TENSORS 64
#define SW_MAX_CALL_SCALARS 64
#define SW_ERROR_CAP 1024

/* A register is empty, owns its buffer, borrows a writable one (the static arena, a view of an
 * owned buffer), or borrows a read-only one (a constant, an input, a view of those). */
enum { REG_EMPTY = 0, REG_OWNED, REG_WRITABLE, REG_READONLY };
#define SW_MAX_SIG_SYMBOLS 64

typedef struct sw_input_slot {
  void* buffer;
  int64_t capacity;
  int set;
  sw_tensor t;
} sw_input_slot;

struct sw_context {
  const sw_program* P;
  sw_status_t status; /* SW_OK, or why this context cannot run */
  sw_tensor* regs;
  unsigned char* reg_state;
  int32_t* owner; /* the owned register whose buffer a register's data lies in, -1 if none */
  int64_t* reg_bytes; /* bytes an owned register's buffer holds */
  int64_t* heap;
  unsigned char* arena; /* the static arena: one block for all compile-time-planned buffers */
  unsigned char* dynamic; /* the dynamic arena: buffers whose sizes are expressions of the input dims */
  int64_t dynamic_size;  /* its bytes, kept between runs (counted in memory_held) */
  sw_input_slot* inputs;
  int32_t* outputs; /* register of each output, -1 when none */
  sw_tensor* io; /* sw_io_table: ninputs descriptors the host fills, then noutputs sw_run_io fills */
  int64_t shape_buffer[SW_MAX_RANK];
  int64_t memory_limit; /* never above SIZE_MAX: see sw_set_memory_limit */
  int64_t memory_held;   /* between runs: the static and dynamic arenas and the input buffers */
  int64_t memory_in_use; /* during a run: its run-time buffers */
  char error_text[SW_ERROR_CAP];
  int32_t error_len;
  volatile int32_t cancel; /* set by the host from any thread: stop the running call */
  sw_pool* pool; /* the threads of parted kernels; NULL: the caller's only */
  int64_t pool_bytes; /* memory the pool holds for its threads (counted in memory_held) */
};

/* ------------------------------------------------------------------ small helpers */

static void* mem_set(void* dst, int c, size_t n) {
  unsigned char* d = (unsigned char*)dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

static void mem_copy(void* dst, const void* src, size_t n) {
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  while (n--) *d++ = *s++;
}

static const char* str_at(const sw_context* c, int32_t id) { return c->P->strings + c->P->string_offsets[id]; }

static void err_clear(sw_context* c) {
  c->error_len = 0;
  c->error_text[0] = 0;
}

static void err_append(sw_context* c, const char* s) {
  while (*s && c->error_len < SW_ERROR_CAP - 1) c->error_text[c->error_len++] = *s++;
  c->error_text[c->error_len] = 0;
}

static void err_append_int(sw_context* c, int64_t v) {
  char buf[24];
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    buf[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) buf[n++] = '-';
  char out[25];
  for (int i = 0; i < n; i++) out[i] = buf[n - 1 - i];
  out[n] = 0;
  err_append(c, out);
}

/* Sets the error text from a message template: "{0}", "{1}", "{2}" become the values. */
static sw_status_t fail(sw_context* c, sw_status_t status, int32_t msg, int64_t a, int64_t b, int64_t d) {
  const int64_t vals[3] = {a, b, d};
  err_clear(c);
  const char* s = msg >= 0 ? str_at(c, msg) : "error";
  char one[2] = {0, 0};
  for (; *s; s++) {
    if (s[0] == '{' && s[1] >= '0' && s[1] <= '2' && s[2] == '}') {
      err_append_int(c, vals[s[1] - '0']);
      s += 2;
    } else if (s[0] == '{' && s[1] >= '0' && s[1] <= '2' && s[2] == '?') {
      /* {k?first|second|...}: the alternative numbered by detail k (1 the first); the
       * number itself when there is no such alternative */
      int64_t v = vals[s[1] - '0'], k = 1;
      const char* p = s + 3;
      int printed = 0;
      for (; *p && *p != '}'; p++) {
        if (*p == '|') {
          k++;
        } else if (k == v) {
          one[0] = *p;
          err_append(c, one);
          printed = 1;
        }
      }
      if (!printed) err_append_int(c, v);
      if (!*p) break;
      s = p;
    } else {
      one[0] = *s;
      err_append(c, one);
    }
  }
  return status;
}

static sw_status_t fail_text(sw_context* c, sw_status_t status, const char* prefix, const char* text) {
  err_clear(c);
  if (prefix) {
    err_append(c, prefix);
    err_append(c, ": ");
  }
  err_append(c, text);
  return status;
}

/* a * b for non-negative operands; returns 1 on overflow. (__builtin_mul_overflow would
 * need compiler-rt's __multi3 on wasm32, which the module does not link.) */
static int mul_overflow(int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > INT64_MAX / a) return 1;
  *out = a * b;
  return 0;
}

static int64_t numel(const sw_tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->shape[i];
  return n;
}

/* ------------------------------------------------------------------ registers */

/* Empties r; if r owns its buffer, frees it and empties every register viewing it, so no
 * register can reach freed memory. */
/* Empties every register viewing r's buffer (not r itself): the buffer is going away. */
static void empty_views(sw_context* c, int32_t r) {
  for (int32_t q = 0; q < c->P->nregs; q++)
    if (c->owner[q] == r && q != r) {
      c->reg_state[q] = REG_EMPTY;
      c->regs[q].data = 0;
      c->owner[q] = -1;
    }
}

static void release(sw_context* c, int32_t r) {
  if (c->reg_state[r] == REG_OWNED) {
    c->memory_in_use -= c->reg_bytes[r];
    c->reg_bytes[r] = 0;
    sw_mem_free(c->regs[r].data);
    empty_views(c, r);
  }
  c->reg_state[r] = REG_EMPTY;
  c->regs[r].data = 0;
  c->owner[r] = -1;
}

static void release_all(sw_context* c) {
  for (int32_t r = 0; r < c->P->nregs; r++) release(c, r);
  for (int32_t i = 0; i < c->P->noutputs; i++) c->outputs[i] = -1;
  c->memory_in_use = 0;
}

/* ------------------------------------------------------------------ verifier */

static int check_operand(const sw_program* P, int kind, int32_t v) {
  switch (kind) {
    case SW_K_REG: return v >= 0 && v < P->nregs;
    case SW_K_SLOT: return v >= 0 && v < P->nheap;
    case SW_K_MSG: return v >= 0 && v < P->nstrings;
    case SW_K_KERNEL: return v >= 0 && v < P->nkernels;
    case SW_K_CONST: return v >= 0 && v < P->nconsts;
    case SW_K_INPUT: return v >= 0 && v < P->ninputs;
    case SW_K_OUTPUT: return v >= 0 && v < P->noutputs;
    case SW_K_ARITH: return v >= 0 && v < SW_ARITH_COUNT;
    case SW_K_DTYPE: return sw_dtype_size(v) > 0;
    case SW_K_PC: return v >= 0 && v < P->nwords;
    case SW_K_IMM: return 1;
    default: return 0;
  }
}

/* The length in words of the instruction at pc (operands already checked by walk). */
static int32_t instr_len(const int32_t* w, int32_t pc) {
  int32_t n = 1;
  for (const unsigned char* k = sw_op_operands[w[pc]]; *k != SW_K_END; k++)
    n += (*k & SW_K_LIST) ? 1 + w[pc + n] : 1;
  return n;
}

/* One pass over the program: checks every operand and marks where instructions start; with
 * check_targets (the second pass) it also requires every jump to land on a start. */
static int walk(const sw_program* P, unsigned char* starts, int check_targets, int32_t* last_op) {
  int32_t pc = 0;
  const int32_t* w = P->words;
  while (pc < P->nwords) {
    int32_t op = w[pc];
    if (op < 0 || op >= SW_OP_COUNT) return 0;
    int32_t at = pc;
    starts[pc] = 1;
    *last_op = op;
    if (op == SW_OP_DIM && pc + 3 < P->nwords && (w[pc + 3] < 0 || w[pc + 3] >= SW_MAX_RANK)) return 0;
    pc++;
    for (const unsigned char* k = sw_op_operands[op]; *k != SW_K_END; k++) {
      int kind = *k & ~(SW_K_LIST | SW_K_DEF);
      if (pc >= P->nwords) return 0;
      if (*k & SW_K_LIST) {
        int32_t n = w[pc++];
        if (n < 0 || n > P->nwords - pc) return 0;
        if ((op == SW_OP_ALLOC || op == SW_OP_ALLOC_STATIC || op == SW_OP_ALLOC_AT || op == SW_OP_VIEW) && n > SW_MAX_RANK) return 0;
        if (op == SW_OP_CALL && n > SW_MAX_CALL_TENSORS) return 0;
        for (int32_t i = 0; i < n; i++)
          if (!check_operand(P, kind, w[pc + i])) return 0;
        pc += n;
      } else {
        if (!check_operand(P, kind, w[pc])) return 0;
        if (check_targets && kind == SW_K_PC && !starts[w[pc]]) return 0;
        pc++;
      }
    }
    if (op == SW_OP_CALL) {
      /* the kernel takes exactly the tensors and scalars the call passes */
      int32_t k = w[at + 1], nt = w[at + 3], ns = w[at + 4 + nt];
      if (nt != P->kernel_info[SW_KERNEL_INFO * k + SW_KI_TENSORS] || ns != P->kernel_info[SW_KERNEL_INFO * k + SW_KI_SCALARS]) return 0;
    }
  }
  return 1;
}

/* Each kernel's entry: arities in range, its signature inside the table and well formed. */
static int check_kernels(const sw_program* P) {
  if (P->nkernel_sigs < 0) return 0;
  for (int32_t k = 0; k < P->nkernels; k++) {
    const int32_t* info = &P->kernel_info[SW_KERNEL_INFO * k];
    int32_t nt = info[SW_KI_TENSORS], ns = info[SW_KI_SCALARS], nout = info[SW_KI_OUTPUTS], at = info[SW_KI_SIGNATURE];
    if (nt < 0 || nt > SW_MAX_CALL_TENSORS || ns < 0 || ns > SW_MAX_CALL_SCALARS || nout < 0 || nout > nt ||
        at < 0 || at > P->nkernel_sigs || !P->kernels[k] || (info[SW_KI_PARTED] != 0 && info[SW_KI_PARTED] != 1))
      return 0;
    for (int32_t t = 0; t < nt; t++) {
      if (at > P->nkernel_sigs - 2) return 0;
      int32_t dtype = P->kernel_sigs[at], rank = P->kernel_sigs[at + 1];
      if (sw_dtype_size(dtype) == 0 || rank < 0 || rank > SW_MAX_RANK || at + 2 + rank > P->nkernel_sigs) return 0;
      for (int32_t a = 0; a < rank; a++) {
        int32_t d = P->kernel_sigs[at + 2 + a];
        if (d < 0 && d != SW_DIM_UNCHECKED && -1 - d >= SW_MAX_SIG_SYMBOLS) return 0;
      }
      at += 2 + rank;
    }
  }
  return 1;
}

/* FNV-1a over the program tables, as toolkit.program.ir.checksum computes it. */
static uint64_t fnv(uint64_t h, const void* data, size_t n) {
  const unsigned char* b = (const unsigned char*)data;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ULL;
  return h;
}

static int checksum_ok(const sw_program* P) {
  int32_t counts[9] = {P->nwords, P->nregs, P->nheap, P->nstrings, P->nkernels, P->nkernel_sigs,
                       P->ninputs, P->noutputs, P->nconsts};
  for (int i = 0; i < 9; i++)
    if (counts[i] < 0) return 0;
  uint64_t h = fnv(0xCBF29CE484222325ULL, counts, sizeof counts);
  h = fnv(h, P->words, 4 * (size_t)P->nwords);
  h = fnv(h, P->heap_init, 8 * (size_t)P->nheap);
  int32_t expect = 0;
  for (int32_t i = 0; i < P->nstrings; i++) {
    /* the strings lie back to back, as the compiler wrote them */
    if (P->string_offsets[i] != expect) return 0;
    const char* t = P->strings + expect;
    size_t n = 0;
    while (t[n]) n++;
    h = fnv(h, t, n + 1);
    expect += (int32_t)n + 1;
  }
  h = fnv(h, P->kernel_info, 4 * SW_KERNEL_INFO * (size_t)P->nkernels);
  h = fnv(h, P->kernel_sigs, 4 * (size_t)P->nkernel_sigs);
  h = fnv(h, P->inputs, 12 * (size_t)P->ninputs);
  h = fnv(h, P->outputs, 4 * (size_t)P->noutputs);
  for (int32_t i = 0; i < P->nconsts; i++) {
    int32_t dr[2] = {P->consts[i].dtype, P->consts[i].rank};
    h = fnv(h, dr, sizeof dr);
    h = fnv(h, P->consts[i].shape, sizeof P->consts[i].shape);
  }
  h = fnv(h, &P->arena_size, 8);
  return h == (uint64_t)P->checksum;
}

/* Registers are defined before they are read on every path: a forward data-flow of the
 * registers surely defined (FREE and MOVE's source undefine), over the blocks the jumps delimit, to a fixed
 * point. Views of a freed buffer are caught at run time (release empties them). */
static int check_defs(const sw_program* P, const unsigned char* starts) {
  const int32_t* w = P->words;
  int32_t n = P->nwords, nw = (P->nregs + 31) / 32, nblocks = 0;
  int32_t* block = (int32_t*)sw_mem_alloc(sizeof(int32_t) * (size_t)n);
  if (!block) return -1;
  for (int32_t pc = 0; pc < n; pc++) block[pc] = -1;
  /* leaders: the entry, every jump target, every instruction after a jump, branch or return */
  block[0] = 0;
  for (int32_t pc = 0, next; pc < n; pc = next) {
    int32_t op = w[pc];
    next = pc + instr_len(w, pc);
    if (op == SW_OP_JUMP) block[w[pc + 1]] = 0;
    if (op == SW_OP_BRANCH) block[w[pc + 2]] = 0;
    if ((op == SW_OP_JUMP || op == SW_OP_BRANCH || op == SW_OP_RETURN) && next < n) block[next] = 0;
  }
  int32_t* leader = (int32_t*)sw_mem_alloc(sizeof(int32_t) * (size_t)n);
  if (!leader) { sw_mem_free(block); return -1; }
  for (int32_t pc = 0; pc < n; pc++)
    if (starts[pc] && block[pc] == 0) { block[pc] = nblocks; leader[nblocks++] = pc; }
  size_t words = (size_t)nblocks * (size_t)(nw + 1);
  uint32_t* in = (uint32_t*)sw_mem_alloc(sizeof(uint32_t) * (words + (size_t)nw + 1));
  int32_t* work = (int32_t*)sw_mem_alloc(sizeof(int32_t) * (size_t)(nblocks + 1));
  unsigned char* queued = (unsigned char*)sw_mem_alloc((size_t)nblocks + 1);
  int ok = in && work && queued;
  if (ok) {
    uint32_t* cur = in + words;
    mem_set(in, 0xFF, sizeof(uint32_t) * words); /* unvisited: everything defined (the top) */
    for (int32_t b = 0; b < nblocks; b++) in[(size_t)b * (size_t)(nw + 1) + (size_t)nw] = 0; /* not visited */
    mem_set(queued, 0, (size_t)nblocks + 1);
    mem_set(in, 0, sizeof(uint32_t) * (size_t)(nw + 1)); /* entry: nothing defined */
    in[nw] = 1;
    int32_t top = 0;
    work[top++] = 0;
    queued[0] = 1;
    while (ok && top > 0) {
      int32_t b = work[--top];
      queued[b] = 0;
      mem_copy(cur, in + (size_t)b * (size_t)(nw + 1), sizeof(uint32_t) * (size_t)nw);
      int32_t pc = leader[b], succ[2], nsucc = 0;
      for (;;) {
        int32_t op = w[pc], at = pc + 1, defs[8], ndefs = 0;
        for (const unsigned char* k = sw_op_operands[op]; *k != SW_K_END; k++) {
          int32_t cnt = 1;
          const int32_t* v = &w[at];
          if (*k & SW_K_LIST) { cnt = w[at]; v = &w[at + 1]; at += 1 + cnt; } else at++;
          if ((*k & ~(SW_K_LIST | SW_K_DEF)) != SW_K_REG) continue;
          if (*k & SW_K_DEF) { defs[ndefs++] = v[0]; continue; } /* applied after the reads */
          for (int32_t i = 0; i < cnt; i++) {
            uint32_t bit = 1u << (v[i] & 31);
            if (op == SW_OP_FREE) cur[v[i] >> 5] &= ~bit;
            else if (!(cur[v[i] >> 5] & bit)) ok = 0;
            else if (op == SW_OP_MOVE) cur[v[i] >> 5] &= ~bit; /* moved out: empty */
          }
        }
        for (int32_t i = 0; i < ndefs; i++) cur[defs[i] >> 5] |= 1u << (defs[i] & 31);
        int32_t next = at;
        if (op == SW_OP_RETURN) break;
        if (op == SW_OP_JUMP) { succ[nsucc++] = w[pc + 1]; break; }
        if (op == SW_OP_BRANCH) { succ[nsucc++] = w[pc + 2]; if (next < n) succ[nsucc++] = next; break; }
        if (next >= n) break;
        if (block[next] >= 0 && starts[next] && leader[block[next]] == next) { succ[nsucc++] = next; break; }
        pc = next;
      }
      for (int32_t i = 0; ok && i < nsucc; i++) {
        int32_t sb = block[succ[i]];
        uint32_t* s_in = in + (size_t)sb * (size_t)(nw + 1);
        int changed = !(s_in[nw] & 1u); /* first visit */
        s_in[nw] |= 1u;
        for (int32_t j = 0; j < nw; j++) {
          uint32_t m = s_in[j] & cur[j];
          if (m != s_in[j]) { s_in[j] = m; changed = 1; }
        }
        if (changed && !queued[sb]) { queued[sb] = 1; work[top++] = sb; }
      }
    }
  }
  sw_mem_free(block);
  sw_mem_free(leader);
  sw_mem_free(in);
  sw_mem_free(work);
  sw_mem_free(queued);
  return ok ? 1 : (in && work && queued) ? 0 : -1;
}

/* SW_OK, or the status with *why set to what failed. */
static sw_status_t verify(sw_context* c, const char** why) {
  const sw_program* P = c->P;
  *why = "the program is empty or its counts are negative";
  if (P->nwords <= 0 || P->nregs < 0 || P->nkernels < 0) return SW_INVALID_PROGRAM;
  *why = "its checksum does not match (a corrupt file)";
  if (!checksum_ok(P)) return SW_INVALID_PROGRAM;
  *why = "a kernel's arity or signature is malformed";
  if (!check_kernels(P)) return SW_INVALID_PROGRAM;
  *why = "out of memory while verifying the program";
  unsigned char* starts = (unsigned char*)sw_mem_alloc((size_t)P->nwords);
  if (!starts) return SW_OUT_OF_MEMORY;
  mem_set(starts, 0, (size_t)P->nwords);
  int32_t last_op = -1;
  int ok = walk(P, starts, 0, &last_op) && walk(P, starts, 1, &last_op);
  /* execution can never run past the last word */
  if (ok && last_op != SW_OP_RETURN && last_op != SW_OP_JUMP) ok = 0;
  int defs = ok ? check_defs(P, starts) : 1;
  sw_mem_free(starts);
  if (defs < 0) return SW_OUT_OF_MEMORY;
  *why = "an instruction, operand, jump target or kernel arity is malformed";
  if (!ok) return SW_INVALID_PROGRAM;
  *why = "a register is read before it is defined on some path";
  if (!defs) return SW_INVALID_PROGRAM;
  *why = "an input's dtype or rank is malformed";
  for (int32_t i = 0; i < P->ninputs; i++)
    if (P->inputs[3 * i + 1] < 0 || P->inputs[3 * i + 1] > SW_MAX_RANK || sw_dtype_size(P->inputs[3 * i]) == 0)
      return SW_INVALID_PROGRAM;
  return SW_OK;
}

/* ------------------------------------------------------------------ contexts */

SW_EXPORT(sw_format_version) int32_t sw_format_version(void) { return (SW_FORMAT_MAJOR << 16) | SW_FORMAT_MINOR; }
SW_EXPORT(sw_num_inputs) int32_t sw_num_inputs(void) { return sw_model.ninputs; }
SW_EXPORT(sw_num_outputs) int32_t sw_num_outputs(void) { return sw_model.noutputs; }
SW_EXPORT(sw_metadata) const char* sw_metadata(void) { return sw_model.metadata; }
SW_EXPORT(sw_metadata_len) int32_t sw_metadata_len(void) { return sw_model.metadata_len; }

/* The program's own input and output tables: hosts check the metadata against them. */
SW_EXPORT(sw_input_name) const char* sw_input_name(int32_t i) {
  const sw_program* P = &sw_model;
  if (i < 0 || i >= P->ninputs) return 0;
  int32_t s = P->inputs[3 * i + 2];
  return s >= 0 && s < P->nstrings ? P->strings + P->string_offsets[s] : 0;
}
SW_EXPORT(sw_input_dtype) int32_t sw_input_dtype(int32_t i) {
  return i >= 0 && i < sw_model.ninputs ? sw_model.inputs[3 * i] : 0;
}
SW_EXPORT(sw_input_rank) int32_t sw_input_rank(int32_t i) {
  return i >= 0 && i < sw_model.ninputs ? sw_model.inputs[3 * i + 1] : -1;
}
SW_EXPORT(sw_output_name) const char* sw_output_name(int32_t i) {
  const sw_program* P = &sw_model;
  if (i < 0 || i >= P->noutputs) return 0;
  int32_t s = P->outputs[i];
  return s >= 0 && s < P->nstrings ? P->strings + P->string_offsets[s] : 0;
}

static void* zalloc(size_t nbytes) {
  void* p = sw_mem_alloc(nbytes);
  if (p) mem_set(p, 0, nbytes);
  return p;
}

SW_EXPORT(sw_context_create) sw_context* sw_context_create(void) {
  sw_context* c = (sw_context*)zalloc(sizeof(sw_context));
  if (!c) return 0;
  const sw_program* P = &sw_model;
  c->P = P;
  c->memory_limit = (int64_t)2 << 30;
  const char* why = 0;
  c->status = verify(c, &why);
  if (c->status != SW_OK) {
    fail_text(c, c->status, "the embedded program failed verification", why);
    return c;
  }
  c->regs = (sw_tensor*)zalloc(sizeof(sw_tensor) * (size_t)(P->nregs + 1));
  c->reg_state = (unsigned char*)zalloc((size_t)P->nregs + 1);
  c->owner = (int32_t*)zalloc(sizeof(int32_t) * (size_t)(P->nregs + 1));
  c->reg_bytes = (int64_t*)zalloc(sizeof(int64_t) * (size_t)(P->nregs + 1));
  c->heap = (int64_t*)zalloc(sizeof(int64_t) * (size_t)(P->nheap + 1));
  c->inputs = (sw_input_slot*)zalloc(sizeof(sw_input_slot) * (size_t)(P->ninputs + 1));
  c->outputs = (int32_t*)zalloc(sizeof(int32_t) * (size_t)(P->noutputs + 1));
  c->io = (sw_tensor*)zalloc(sizeof(sw_tensor) * (size_t)(P->ninputs + P->noutputs + 1));
  if (c->status != SW_OK || !c->regs || !c->reg_state || !c->owner || !c->reg_bytes || !c->heap || !c->inputs ||
      !c->outputs || !c->io) {
    c->status = fail_text(c, SW_OUT_OF_MEMORY, 0, "out of memory while creating a context");
    return c;
  }
  for (int32_t i = 0; i < P->noutputs; i++) c->outputs[i] = -1;
  for (int32_t r = 0; r < P->nregs; r++) c->owner[r] = -1;
  if (P->arena_size > 0) {
    if (P->arena_size > c->memory_limit || (uint64_t)P->arena_size > (uint64_t)SIZE_MAX) {
      c->status = fail_text(c, SW_OUT_OF_MEMORY, 0, "the static arena exceeds the memory limit");
      return c;
    }
    c->arena = (unsigned char*)sw_mem_alloc((size_t)P->arena_size);
    if (!c->arena) c->status = fail_text(c, SW_OUT_OF_MEMORY, 0, "out of memory for the static arena");
    c->memory_held = P->arena_size;
  }
  return c;
}

SW_EXPORT(sw_context_status) sw_status_t sw_context_status(sw_context* c) { return c->status; }

SW_EXPORT(sw_context_destroy) void sw_context_destroy(sw_context* c) {
  if (!c) return;
  sw_pool_destroy(c->pool);
  if (c->regs && c->reg_state && c->owner && c->reg_bytes && c->outputs) release_all(c);
  if (c->inputs)
    for (int32_t i = 0; i < c->P->ninputs; i++) sw_mem_free(c->inputs[i].buffer);
  sw_mem_free(c->arena);
  sw_mem_free(c->dynamic);
  sw_mem_free(c->regs);
  sw_mem_free(c->reg_state);
  sw_mem_free(c->owner);
  sw_mem_free(c->reg_bytes);
  sw_mem_free(c->heap);
  sw_mem_free(c->inputs);
  sw_mem_free(c->outputs);
  sw_mem_free(c->io);
  sw_mem_free(c);
}

SW_EXPORT(sw_shape_buffer) int64_t* sw_shape_buffer(sw_context* c) { return c->shape_buffer; }
SW_EXPORT(sw_memory_held) int64_t sw_memory_held(sw_context* c) { return c->memory_held + c->memory_in_use; }
SW_EXPORT(sw_io_table) sw_tensor* sw_io_table(sw_context* c) { return c->io; }
SW_EXPORT(sw_cancel_flag) void* sw_cancel_flag(sw_context* c) { return (void*)&c->cancel; }
/* A new pool every time, even of the same count: a host joins the old one's threads after
 * this returns, and starts the new one's. */
SW_EXPORT(sw_set_threads) int32_t sw_set_threads(sw_context* c, int32_t threads) {
  sw_pool_destroy(c->pool);
  c->memory_held -= c->pool_bytes;
  c->pool_bytes = 0;
  c->pool = sw_pool_create(threads, c->memory_limit - c->memory_held, &c->pool_bytes);
  c->memory_held += c->pool_bytes;
  return sw_pool_threads(c->pool);
}
SW_EXPORT(sw_thread_failed) void sw_thread_failed(sw_context* c, int32_t index) {
  (void)index;
  sw_pool_fail(c->pool);
}
SW_EXPORT(sw_thread_stack) void* sw_thread_stack(sw_context* c, int32_t index) { return sw_pool_stack(c->pool, index); }
SW_EXPORT(sw_threads_running) int32_t sw_threads_running(sw_context* c) { return sw_pool_running(c->pool); }

/* A .wasm thread's entry: it moves the instance's stack pointer to the stack the pool gave it
 * (every instance's starts at the main thread's), then runs the pool's loop. In assembly, so
 * that nothing touches the stack before the move; where there are no threads it returns. */
void sw_thread_main(sw_context* c, int32_t index);
void sw_thread_main(sw_context* c, int32_t index) { sw_pool_work(c->pool, index); }
#if defined(__wasm__) && defined(__wasm_atomics__)
__asm__(".globaltype __stack_pointer, i32\n"
        ".functype sw_thread_main (i32, i32) -> ()\n"
        ".section .text.sw_thread_start,\"\",@\n"
        ".globl sw_thread_start\n"
        ".type sw_thread_start,@function\n"
        "sw_thread_start:\n"
        ".functype sw_thread_start (i32, i32, i32) -> ()\n"
        "local.get 0\n"
        "global.set __stack_pointer\n"
        "local.get 1\n"
        "local.get 2\n"
        "call sw_thread_main\n"
        "end_function\n");
#else
SW_EXPORT(sw_thread_start) void sw_thread_start(void* stack_top, sw_context* c, int32_t index) {
  (void)stack_top;
  (void)c;
  (void)index;
}
#endif
SW_EXPORT(sw_last_error) const char* sw_last_error(sw_context* c) { return c->error_text; }
SW_EXPORT(sw_last_error_len) int32_t sw_last_error_len(sw_context* c) { return c->error_len; }

/* clamped to what the address space can hold, so every size under the limit fits a size_t */
SW_EXPORT(sw_set_memory_limit) void sw_set_memory_limit(sw_context* c, int64_t bytes) {
  if (bytes < 0) bytes = 0;
  if ((uint64_t)bytes > (uint64_t)SIZE_MAX) bytes = (int64_t)SIZE_MAX;
  c->memory_limit = bytes;
}

static const char* input_name(const sw_context* c, int32_t index) { return str_at(c, c->P->inputs[3 * index + 2]); }

SW_EXPORT(sw_input_buffer) void* sw_input_buffer(sw_context* c, int32_t index, int64_t nbytes) {
  if (c->status != SW_OK) return 0;
  if (index < 0 || index >= c->P->ninputs) {
    fail_text(c, SW_INVALID_INPUT, 0, "input index out of range");
    return 0;
  }
  sw_input_slot* in = &c->inputs[index];
  /* the input buffers count against the limit with the arena: what the limit leaves */
  int64_t room = c->memory_limit - (c->memory_held - in->capacity);
  if (nbytes < 0 || nbytes > room) {
    err_clear(c);
    err_append(c, "input '");
    err_append(c, input_name(c, index));
    err_append(c, "': cannot allocate ");
    err_append_int(c, nbytes);
    err_append(c, " bytes (memory limit ");
    err_append_int(c, c->memory_limit);
    err_append(c, ", of which the model holds ");
    err_append_int(c, c->memory_held - in->capacity);
    err_append(c, ")");
    return 0;
  }
  if (in->capacity < nbytes || !in->buffer) {
    sw_mem_free(in->buffer);
    c->memory_held -= in->capacity;
    in->buffer = sw_mem_alloc((size_t)(nbytes ? nbytes : 1));
    in->capacity = in->buffer ? nbytes : 0;
    c->memory_held += in->capacity;
    in->set = 0;
    if (!in->buffer) {
      fail_text(c, SW_OUT_OF_MEMORY, input_name(c, index), "out of memory for the input buffer");
      return 0;
    }
  }
  return in->buffer;
}

/* declares input index with this dtype, rank and shape (sw_set_input, sw_run_io); its data is
 * in its buffer, or (sw_run_io, format 3.6) at the host's `data` when that is not null: memory
 * the host keeps valid for the call, read in place (an input's register is read-only) */
static sw_status_t set_input(sw_context* c, int32_t index, int32_t dtype, int32_t rank, const int64_t* shape,
                             void* data) {
  if (c->status != SW_OK) return c->status;
  if (index < 0 || index >= c->P->ninputs) return fail_text(c, SW_INVALID_INPUT, 0, "input index out of range");
  sw_input_slot* in = &c->inputs[index];
  const char* name = input_name(c, index);
  int32_t want_dtype = c->P->inputs[3 * index], want_rank = c->P->inputs[3 * index + 1];
  in->set = 0;
  err_clear(c);
  if (dtype != want_dtype) {
    err_append(c, "input '");
    err_append(c, name);
    err_append(c, "': expected dtype ");
    err_append(c, sw_dtype_name(want_dtype));
    err_append(c, ", got ");
    err_append(c, sw_dtype_name(dtype));
    return SW_INVALID_INPUT;
  }
  if (rank != want_rank) {
    err_append(c, "input '");
    err_append(c, name);
    err_append(c, "': expected rank ");
    err_append_int(c, want_rank);
    err_append(c, ", got rank ");
    err_append_int(c, rank);
    return SW_INVALID_INPUT;
  }
  int64_t bytes = sw_dtype_size(dtype);
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) {
      err_append(c, "input '");
      err_append(c, name);
      err_append(c, "': negative dim ");
      err_append_int(c, i);
      return SW_INVALID_INPUT;
    }
    if (mul_overflow(bytes, shape[i], &bytes)) bytes = INT64_MAX;
  }
  if (data && dtype == SW_DT_STRING) {
    err_append(c, "input '");
    err_append(c, name);
    err_append(c, "': a string input must be in its buffer (its data pointer must be null)");
    return SW_INVALID_INPUT;
  }
  if (!data && (!in->buffer || bytes > in->capacity)) {
    err_append(c, "input '");
    err_append(c, name);
    err_append(c, "': its buffer holds ");
    err_append_int(c, in->capacity);
    err_append(c, " bytes but the shape needs ");
    err_append_int(c, bytes);
    err_append(c, " (call sw_input_buffer first)");
    return SW_INVALID_INPUT;
  }
  if (dtype == SW_DT_STRING) {
    /* every element's bytes must lie in this input's buffer, after the elements: a string
     * is read through its address, which must not reach anywhere else */
    const sw_str* el = (const sw_str*)in->buffer;
    int64_t n = bytes / (int64_t)sizeof(sw_str);
    uint64_t lo = (uint64_t)(uintptr_t)in->buffer + (uint64_t)bytes;
    uint64_t hi = (uint64_t)(uintptr_t)in->buffer + (uint64_t)in->capacity;
    for (int64_t i = 0; i < n; i++) {
      uint64_t p = (uint64_t)el[i].ptr, len = (uint64_t)el[i].len;
      if (el[i].len < 0 || (len > 0 && (p < lo || p > hi || len > hi - p))) {
        err_append(c, "input '");
        err_append(c, name);
        err_append(c, "': string element ");
        err_append_int(c, i);
        err_append(c, " points outside the input's buffer (its bytes must follow the elements)");
        return SW_INVALID_INPUT;
      }
    }
  }
  in->t.data = data ? data : in->buffer;
  in->t.dtype = dtype;
  in->t.rank = rank;
  for (int i = 0; i < SW_MAX_RANK; i++) in->t.shape[i] = i < rank ? shape[i] : 0;
  in->set = 1;
  return SW_OK;
}

SW_EXPORT(sw_set_input) sw_status_t sw_set_input(sw_context* c, int32_t index, int32_t dtype, int32_t rank) {
  return set_input(c, index, dtype, rank, c->shape_buffer, 0);
}

/* The whole descriptor of output i (NULL if none); its layout is sw_tensor's (sw_abi.h). */
SW_EXPORT(sw_output_tensor) const sw_tensor* sw_output_tensor(sw_context* c, int32_t i) {
  if (c->status != SW_OK || i < 0 || i >= c->P->noutputs || c->outputs[i] < 0 ||
      c->reg_state[c->outputs[i]] == REG_EMPTY)
    return 0;
  return &c->regs[c->outputs[i]];
}

/* ------------------------------------------------------------------ builtins */

static int64_t floordiv64(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

/* a * b for any signs; returns 1 on overflow. Built on the magnitudes with mul_overflow
 * because LLVM turns the usual r / a != b idiom into a 128-bit multiply (__multi3), which
 * the wasm32 module does not link. INT64_MIN counts as overflow: no dim gets near it. */
static int smul_overflow(int64_t a, int64_t b, int64_t* out) {
  if (a == INT64_MIN || b == INT64_MIN) return 1;
  int64_t m;
  if (mul_overflow(a < 0 ? -a : a, b < 0 ? -b : b, &m)) return 1;
  *out = (a < 0) != (b < 0) ? -m : m;
  return 0;
}

/* Shape arithmetic. Overflow, division by zero and INT64_MIN / -1 (a trap in wasm) fail
 * with the instruction's message instead of wrapping or trapping. */
static sw_status_t arith(sw_context* c, int32_t kind, int64_t a, int64_t b, int64_t* out, int32_t msg) {
  switch (kind) {
    case SW_ARITH_ADD:
      if (__builtin_add_overflow(a, b, out)) return fail(c, SW_INVALID_INPUT, msg, a, b, 0);
      return SW_OK;
    case SW_ARITH_SUB:
      if (__builtin_sub_overflow(a, b, out)) return fail(c, SW_INVALID_INPUT, msg, a, b, 0);
      return SW_OK;
    case SW_ARITH_MUL:
      if (smul_overflow(a, b, out)) return fail(c, SW_INVALID_INPUT, msg, a, b, 0);
      return SW_OK;
    case SW_ARITH_FLOORDIV:
      if (b == 0 || (a == INT64_MIN && b == -1)) return fail(c, SW_INVALID_INPUT, msg, a, b, 0);
      *out = floordiv64(a, b);
      return SW_OK;
    case SW_ARITH_MOD:
      if (b == 0) return fail(c, SW_INVALID_INPUT, msg, a, b, 0);
      *out = b == -1 ? 0 : a - floordiv64(a, b) * b;
      return SW_OK;
    case SW_ARITH_MIN: *out = a < b ? a : b; return SW_OK;
    case SW_ARITH_MAX: *out = a > b ? a : b; return SW_OK;
    case SW_ARITH_DIV:
      if (b == 0 || (a == INT64_MIN && b == -1) || a % b != 0) return fail(c, SW_INVALID_INPUT, msg, a, b, 0);
      *out = a / b;
      return SW_OK;
    case SW_ARITH_EQ: *out = a == b; return SW_OK;
    case SW_ARITH_LT: *out = a < b; return SW_OK;
    case SW_ARITH_LE: *out = a <= b; return SW_OK;
    default: return fail(c, SW_INVALID_PROGRAM, -1, 0, 0, 0);
  }
}

/* A new owned buffer in r of the given dtype and shape (shape values, not slots). */
static sw_status_t alloc_shape(sw_context* c, int32_t r, int32_t dtype, int32_t msg, int32_t rank, const int64_t* shape) {
  release(c, r);
  sw_tensor* t = &c->regs[r];
  int64_t bytes = sw_dtype_size(dtype);
  int overflow = 0;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0 || mul_overflow(bytes, shape[i], &bytes)) overflow = 1;
    t->shape[i] = shape[i];
  }
  if (overflow) bytes = INT64_MAX;
  /* memory_limit <= SIZE_MAX, so a size under it never truncates when cast to size_t; the
   * arenas and input buffers held between runs count too */
  if (bytes > c->memory_limit - c->memory_held - c->memory_in_use)
    return fail(c, SW_OUT_OF_MEMORY, msg, bytes, c->memory_limit, 0);
  void* p = sw_mem_alloc((size_t)(bytes ? bytes : 1));
  if (!p) return fail(c, SW_OUT_OF_MEMORY, msg, bytes, c->memory_limit, 0);
  c->memory_in_use += bytes;
  c->reg_bytes[r] = bytes;
  t->data = p;
  t->dtype = dtype;
  t->rank = rank;
  c->reg_state[r] = REG_OWNED;
  c->owner[r] = r;
  return SW_OK;
}

static sw_status_t alloc_tensor(sw_context* c, int32_t r, int32_t dtype, int32_t msg, int32_t rank, const int32_t* dims) {
  int64_t shape[SW_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    shape[i] = c->heap[dims[i]];
    if (shape[i] < 0) return fail(c, SW_INVALID_INPUT, msg, shape[i], c->memory_limit, 0);
  }
  return alloc_shape(c, r, dtype, msg, rank, shape);
}

/* r := a tensor of dtype and the dims in slots `dims`, at `offset` of an arena (`base`, `size`
 * bytes) the compiler planned; 0 if it does not lie inside (a corrupt program). */
static int place_in_arena(sw_context* c, int32_t r, int32_t dtype, unsigned char* base, int64_t size,
                          int64_t offset, int32_t rank, const int32_t* dims) {
  int64_t bytes = sw_dtype_size(dtype);
  int overflow = 0;
  release(c, r);
  for (int32_t i = 0; i < rank; i++) {
    c->regs[r].shape[i] = c->heap[dims[i]];
    if (c->regs[r].shape[i] < 0 || mul_overflow(bytes, c->regs[r].shape[i], &bytes)) overflow = 1;
  }
  if (overflow || offset < 0 || offset > size - bytes) return 0;
  c->regs[r].data = base + offset;
  c->regs[r].dtype = dtype;
  c->regs[r].rank = rank;
  c->reg_state[r] = REG_WRITABLE;
  return 1;
}

static sw_status_t reshape_dims(sw_context* c, int32_t msg, int32_t nin, const int32_t* in, int32_t nout, const int32_t* out) {
  int64_t* heap = c->heap;
  const char* what = str_at(c, msg);
  int64_t total = 1, known = 1;
  int infer = -1;
  for (int i = 0; i < nin; i++)
    if (mul_overflow(total, heap[in[i]], &total))
      return fail_text(c, SW_INVALID_INPUT, what, "the input's element count overflows");
  for (int i = 0; i < nout; i++) {
    int64_t v = heap[out[i]];
    if (v == 0) {
      if (i >= nin) return fail_text(c, SW_INVALID_INPUT, what, "a 0 in the target shape has no input dim to copy");
      v = heap[in[i]];
      heap[out[i]] = v;
    }
    if (v == -1) {
      if (infer >= 0) return fail_text(c, SW_INVALID_INPUT, what, "more than one -1 in the target shape");
      infer = i;
      continue;
    }
    if (v < -1) return fail_text(c, SW_INVALID_INPUT, what, "a negative dim other than -1 in the target shape");
    if (mul_overflow(known, v, &known))
      return fail_text(c, SW_INVALID_INPUT, what, "the target shape's element count overflows");
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) {
      fail_text(c, SW_INVALID_INPUT, what, "cannot infer the -1 dim: ");
      err_append_int(c, total);
      err_append(c, " elements are not a multiple of ");
      err_append_int(c, known);
      return SW_INVALID_INPUT;
    }
    heap[out[infer]] = total / known;
  } else if (known != total) {
    fail_text(c, SW_INVALID_INPUT, what, "cannot reshape ");
    err_append_int(c, total);
    err_append(c, " elements into a shape of ");
    err_append_int(c, known);
    return SW_INVALID_INPUT;
  }
  return SW_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static sw_status_t slice_dim(sw_context* c, const int32_t* w) {
  int64_t* heap = c->heap;
  int64_t dim = heap[w[0]], start = heap[w[1]], end = heap[w[2]], step = heap[w[3]];
  if (step == 0) return fail(c, SW_INVALID_INPUT, w[6], dim, start, end);
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  int64_t count;
  if (step > 0) {
    start = clamp64(start, 0, dim);
    end = clamp64(end, 0, dim);
    count = end > start ? (end - start - 1) / step + 1 : 0; /* no overflow for huge steps */
  } else {
    /* numpy's (and onnx.reference's) clamping: a backward slice starting before the first
     * element is empty, and so is any slice of an empty dim */
    start = clamp64(start, -1, dim - 1);
    end = clamp64(end, -1, dim - 1);
    count = start > end ? (int64_t)((uint64_t)(start - end - 1) / ((uint64_t)0 - (uint64_t)step)) + 1 : 0;
  }
  heap[w[4]] = start;
  heap[w[5]] = count;
  return SW_OK;
}

/* Element i of an integer or bool tensor (shape tensors are int32 or int64; the others
 * are read the same way). Floats are truncated; float16 is never a shape tensor. */
static int64_t read_int(const sw_tensor* t, int64_t i) {
  const void* d = t->data;
  switch (t->dtype) {
    case SW_DT_INT64: return ((const int64_t*)d)[i];
    case SW_DT_INT32: return ((const int32_t*)d)[i];
    case SW_DT_INT16: return ((const int16_t*)d)[i];
    case SW_DT_INT8: return ((const int8_t*)d)[i];
    case SW_DT_UINT64: return (int64_t)((const uint64_t*)d)[i];
    case SW_DT_UINT32: return ((const uint32_t*)d)[i];
    case SW_DT_UINT16: return ((const uint16_t*)d)[i];
    case SW_DT_UINT8:
    case SW_DT_BOOL: return ((const uint8_t*)d)[i];
    case SW_DT_FLOAT64: return (int64_t)((const double*)d)[i];
    case SW_DT_FLOAT32: return (int64_t)((const float*)d)[i];
    default: return 0;
  }
}

static void write_int(sw_tensor* t, int64_t i, int64_t v) {
  void* d = t->data;
  switch (t->dtype) {
    case SW_DT_INT64:
    case SW_DT_UINT64: ((int64_t*)d)[i] = v; break;
    case SW_DT_INT32:
    case SW_DT_UINT32: ((int32_t*)d)[i] = (int32_t)v; break;
    case SW_DT_INT16:
    case SW_DT_UINT16: ((int16_t*)d)[i] = (int16_t)v; break;
    case SW_DT_INT8:
    case SW_DT_UINT8: ((int8_t*)d)[i] = (int8_t)v; break;
    case SW_DT_BOOL: ((uint8_t*)d)[i] = v != 0; break;
    case SW_DT_FLOAT64: ((double*)d)[i] = (double)v; break;
    case SW_DT_FLOAT32: ((float*)d)[i] = (float)v; break;
    default: break;
  }
}

/* ------------------------------------------------------------------ run */

/* A program our compiler emits never reaches these; a tampered one stops here instead of
 * touching memory it does not own. */
static sw_status_t bad_register(sw_context* c, int32_t r, int32_t pc, const char* what) {
  err_clear(c);
  err_append(c, "invalid program: register ");
  err_append_int(c, r);
  err_append(c, what);
  err_append(c, " (instruction at word ");
  err_append_int(c, pc);
  err_append(c, ")");
  return SW_INVALID_PROGRAM;
}

#define NEED(r) \
  do { if (c->reg_state[r] == REG_EMPTY) return bad_register(c, r, pc, " is read while empty (never defined, or its buffer was freed)"); } while (0)
#define NEED_WRITABLE(r) \
  do { NEED(r); if (c->reg_state[r] == REG_READONLY) return bad_register(c, r, pc, " is written but holds a constant or an input"); } while (0)

static int64_t tensor_bytes(const sw_tensor* t) {
  int64_t bytes = sw_dtype_size(t->dtype);
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] < 0 || mul_overflow(bytes, t->shape[i], &bytes)) return -1;
  return bytes;
}

/* The call's tensors have the dtype, rank and dims kernel k was compiled for: static dims
 * equal, each symbol the same wherever it appears. Returns the failing tensor + 1, or 0. */
/* dst takes src's tensor and state; an owned buffer changes owner together with its views.
 * src is left empty. */
static void move_register(sw_context* c, int32_t dst, int32_t src) {
  if (dst == src) return;
  release(c, dst);
  c->regs[dst] = c->regs[src];
  c->reg_state[dst] = c->reg_state[src];
  if (c->reg_state[src] == REG_OWNED) {
    c->owner[dst] = dst;
    c->reg_bytes[dst] = c->reg_bytes[src];
    c->reg_bytes[src] = 0;
    for (int32_t q = 0; q < c->P->nregs; q++)
      if (c->owner[q] == src) c->owner[q] = dst;
  } else {
    c->owner[dst] = c->owner[src];
  }
  c->reg_state[src] = REG_EMPTY;
  c->regs[src].data = 0;
  c->owner[src] = -1;
}

/* Append item to acc along a new first dim (see the APPEND instruction). */
static sw_status_t append_item(sw_context* c, int32_t acc, int32_t item, int32_t shape_msg, int32_t mem_msg) {
  sw_tensor* a = &c->regs[acc];
  const sw_tensor* t = &c->regs[item];
  if (acc == item || c->reg_state[acc] != REG_OWNED || a->dtype != t->dtype || a->rank != t->rank + 1)
    return fail_text(c, SW_INVALID_PROGRAM, 0, "invalid program: APPEND to a register that is not an owned "
                                               "accumulator of the item's dtype and rank + 1");
  int64_t n = a->shape[0];
  if (n == 0) {
    for (int i = 0; i < t->rank; i++) a->shape[i + 1] = t->shape[i];
  } else {
    for (int i = 0; i < t->rank; i++)
      if (a->shape[i + 1] != t->shape[i]) return fail(c, SW_INVALID_INPUT, shape_msg, i, a->shape[i + 1], t->shape[i]);
  }
  int64_t item_bytes = tensor_bytes(t), used, need;
  if (item_bytes < 0 || mul_overflow(n, item_bytes, &used) || used > INT64_MAX - item_bytes)
    return fail(c, SW_OUT_OF_MEMORY, mem_msg, INT64_MAX, c->memory_limit, 0);
  need = used + item_bytes;
  int64_t have = c->reg_bytes[acc];
  if (need > have) {
    int64_t grow = have > INT64_MAX / 2 ? INT64_MAX : 2 * have;
    if (grow < need) grow = need;
    if (grow < 64) grow = 64;
    int64_t room = c->memory_limit - c->memory_held - c->memory_in_use + have;
    if (grow > room) grow = need; /* doubling would pass the limit: take just what is needed */
    if (need > room) return fail(c, SW_OUT_OF_MEMORY, mem_msg, need, c->memory_limit, 0);
    unsigned char* p = (unsigned char*)sw_mem_alloc((size_t)grow);
    if (!p) return fail(c, SW_OUT_OF_MEMORY, mem_msg, grow, c->memory_limit, 0);
    mem_copy(p, a->data, (size_t)used);
    sw_mem_free(a->data);
    empty_views(c, acc); /* views of the old buffer would dangle */
    c->memory_in_use += grow - have;
    c->reg_bytes[acc] = grow;
    a->data = p;
  }
  mem_copy((unsigned char*)a->data + used, t->data, (size_t)item_bytes);
  a->shape[0] = n + 1;
  return SW_OK;
}

/* The dynamic arena holds at least `need` bytes (see the ARENA instruction). */
static sw_status_t size_dynamic_arena(sw_context* c, int64_t need, int64_t reserve, int32_t msg) {
  if (need < 0) return fail(c, SW_INVALID_INPUT, msg, need, c->memory_limit, 0);
  if (need <= c->dynamic_size && c->dynamic) return SW_OK;
  int64_t want = reserve > need ? reserve : need;
  int64_t room = c->memory_limit - (c->memory_held - c->dynamic_size) - c->memory_in_use;
  if (want > room) want = need; /* the reserve does not fit: take what this run needs */
  if (need > room) return fail(c, SW_OUT_OF_MEMORY, msg, need, c->memory_limit, 0);
  sw_mem_free(c->dynamic);
  c->memory_held -= c->dynamic_size;
  c->dynamic_size = 0;
  c->dynamic = (unsigned char*)sw_mem_alloc((size_t)(want ? want : 1));
  if (!c->dynamic) return fail(c, SW_OUT_OF_MEMORY, msg, want, c->memory_limit, 0);
  c->dynamic_size = want;
  c->memory_held += want;
  return SW_OK;
}

static int32_t check_call_types(sw_context* c, int32_t k, int32_t nt, const int32_t* ts) {
  const int32_t* sig = c->P->kernel_sigs + c->P->kernel_info[SW_KERNEL_INFO * k + SW_KI_SIGNATURE];
  int64_t sym[SW_MAX_SIG_SYMBOLS];
  uint64_t bound = 0;
  for (int32_t i = 0; i < nt; i++) {
    const sw_tensor* t = &c->regs[ts[i]];
    if (t->dtype != sig[0] || t->rank != sig[1]) return i + 1;
    for (int32_t a = 0; a < t->rank; a++) {
      int32_t d = sig[2 + a];
      int64_t v = t->shape[a];
      if (v < 0) return i + 1;
      if (d >= 0) {
        if (v != d) return i + 1;
      } else if (d != SW_DIM_UNCHECKED) {
        int32_t s = -1 - d;
        if (bound >> s & 1) {
          if (sym[s] != v) return i + 1;
        } else {
          sym[s] = v;
          bound |= (uint64_t)1 << s;
        }
      }
    }
    sig += 2 + t->rank;
  }
  return 0;
}

static sw_status_t execute(sw_context* c) {
  const sw_program* P = c->P;
  const int32_t* w = P->words;
  sw_tensor* regs = c->regs;
  int64_t* heap = c->heap;
  int32_t pc = 0;
  sw_tensor* call_tensors[SW_MAX_CALL_TENSORS];
  int64_t scalars[SW_MAX_CALL_SCALARS];
  int64_t detail[3];
  sw_status_t st;
  for (;;) {
    if (c->cancel) return fail_text(c, SW_CANCELLED, 0, "the call was cancelled");
    switch (w[pc]) {
      case SW_OP_RETURN:
        return SW_OK;
      case SW_OP_INPUT:
        release(c, w[pc + 2]);
        regs[w[pc + 2]] = c->inputs[w[pc + 1]].t;
        c->reg_state[w[pc + 2]] = REG_READONLY;
        pc += 3;
        break;
      case SW_OP_DIM:
        NEED(w[pc + 2]);
        heap[w[pc + 1]] = w[pc + 3] < regs[w[pc + 2]].rank ? regs[w[pc + 2]].shape[w[pc + 3]] : 0;
        pc += 4;
        break;
      case SW_OP_CHECK_EQ:
        if (heap[w[pc + 1]] != heap[w[pc + 2]]) return fail(c, SW_INVALID_INPUT, w[pc + 3], heap[w[pc + 1]], heap[w[pc + 2]], 0);
        pc += 4;
        break;
      case SW_OP_CHECK_LE:
        if (heap[w[pc + 1]] > heap[w[pc + 2]]) return fail(c, SW_INVALID_INPUT, w[pc + 3], heap[w[pc + 1]], heap[w[pc + 2]], 0);
        pc += 4;
        break;
      case SW_OP_ARITH:
        st = arith(c, w[pc + 1], heap[w[pc + 3]], heap[w[pc + 4]], &heap[w[pc + 2]], w[pc + 5]);
        if (st != SW_OK) return st;
        pc += 6;
        break;
      case SW_OP_BCAST: {
        int64_t a = heap[w[pc + 2]], b = heap[w[pc + 3]];
        if (a != b && a != 1 && b != 1) return fail(c, SW_INVALID_INPUT, w[pc + 4], a, b, 0);
        heap[w[pc + 1]] = a == 1 ? b : a;
        pc += 5;
        break;
      }
      case SW_OP_LOAD_VALUES: {
        NEED(w[pc + 1]);
        const sw_tensor* t = &regs[w[pc + 1]];
        int32_t n = w[pc + 3];
        int64_t have = numel(t);
        if (have != n) return fail(c, SW_INVALID_INPUT, w[pc + 2], have, n, 0);
        for (int32_t i = 0; i < n; i++) heap[w[pc + 4 + i]] = read_int(t, i);
        pc += 4 + n;
        break;
      }
      case SW_OP_STORE_VALUES: {
        NEED_WRITABLE(w[pc + 1]);
        sw_tensor* t = &regs[w[pc + 1]];
        int32_t n = w[pc + 2];
        if (!t->data || numel(t) < n) return fail_text(c, SW_INVALID_PROGRAM, 0, "STORE_VALUES past its tensor");
        for (int32_t i = 0; i < n; i++) write_int(t, i, heap[w[pc + 3 + i]]);
        pc += 3 + n;
        break;
      }
      case SW_OP_ALLOC:
        st = alloc_tensor(c, w[pc + 1], w[pc + 2], w[pc + 3], w[pc + 4], &w[pc + 5]);
        if (st != SW_OK) return st;
        pc += 5 + w[pc + 4];
        break;
      case SW_OP_ALLOC_STATIC:
        /* the compiler planned it inside the arena; a program that did not is corrupt */
        if (!place_in_arena(c, w[pc + 1], w[pc + 2], c->arena, P->arena_size, w[pc + 3], w[pc + 4], &w[pc + 5]))
          return fail_text(c, SW_INVALID_PROGRAM, 0, "a static buffer lies outside the arena");
        pc += 5 + w[pc + 4];
        break;
      case SW_OP_VIEW: {
        int32_t dst = w[pc + 1], src = w[pc + 2], n = w[pc + 3];
        if (dst != src) release(c, dst); /* may empty src, if src viewed dst */
        NEED(src);
        sw_tensor t = regs[src];
        t.rank = n;
        for (int32_t i = 0; i < n; i++) t.shape[i] = heap[w[pc + 4 + i]];
        int64_t have = tensor_bytes(&regs[src]), want = tensor_bytes(&t);
        if (want < 0 || want > have) return bad_register(c, src, pc, " is viewed with more bytes than it holds");
        regs[dst] = t;
        if (dst != src) {
          c->reg_state[dst] = c->reg_state[src] == REG_READONLY ? REG_READONLY : REG_WRITABLE;
          c->owner[dst] = c->owner[src];
        }
        pc += 4 + n;
        break;
      }
      case SW_OP_CALL: {
        int32_t k = w[pc + 1], msg = w[pc + 2], nt = w[pc + 3];
        const int32_t* ts = &w[pc + 4];
        int32_t ns = w[pc + 4 + nt];
        const int32_t* ss = &w[pc + 5 + nt];
        int32_t nout = P->kernel_info[SW_KERNEL_INFO * k + SW_KI_OUTPUTS];
        for (int32_t i = 0; i < nt; i++) {
          if (i < nt - nout) NEED(ts[i]);
          else NEED_WRITABLE(ts[i]);
          call_tensors[i] = &regs[ts[i]];
        }
        int32_t wrong = check_call_types(c, k, nt, ts);
        if (wrong) return bad_register(c, ts[wrong - 1], pc, " does not have the dtype, rank or dims its kernel was compiled for");
        for (int32_t i = 0; i < ns; i++) scalars[i] = heap[ss[i]];
        detail[0] = detail[1] = detail[2] = 0;
        if (c->pool && P->kernel_info[SW_KERNEL_INFO * k + SW_KI_PARTED])
          st = sw_pool_run(c->pool, P->kernels[k], call_tensors, scalars, detail, &c->cancel);
        else
          st = P->kernels[k](call_tensors, scalars, detail, &c->cancel, 0, 1);
        if (st == SW_CANCELLED) return fail_text(c, st, 0, "the call was cancelled");
        if (st == SW_INTERNAL && sw_pool_broken(c->pool))
          return fail_text(c, st, 0, "a thread of the model's pool failed (it trapped)");
        if (st != SW_OK) return fail(c, st, msg, detail[0], detail[1], detail[2]);
        for (int32_t i = 0; i < ns; i++) heap[ss[i]] = scalars[i];
        pc += 5 + nt + ns;
        break;
      }
      case SW_OP_FREE:
        release(c, w[pc + 1]);
        pc += 2;
        break;
      case SW_OP_CONST:
        release(c, w[pc + 1]);
        regs[w[pc + 1]] = P->consts[w[pc + 2]];
        c->reg_state[w[pc + 1]] = REG_READONLY;
        pc += 3;
        break;
      case SW_OP_OUTPUT:
        NEED(w[pc + 2]);
        c->outputs[w[pc + 1]] = w[pc + 2];
        pc += 3;
        break;
      case SW_OP_RESHAPE: {
        int32_t nin = w[pc + 2];
        int32_t nout = w[pc + 3 + nin];
        st = reshape_dims(c, w[pc + 1], nin, &w[pc + 3], nout, &w[pc + 4 + nin]);
        if (st != SW_OK) return st;
        pc += 4 + nin + nout;
        break;
      }
      case SW_OP_SLICE_DIM:
        st = slice_dim(c, &w[pc + 1]);
        if (st != SW_OK) return st;
        pc += 8;
        break;
      case SW_OP_JUMP:
        pc = w[pc + 1];
        break;
      case SW_OP_BRANCH:
        pc = heap[w[pc + 1]] ? w[pc + 2] : pc + 3;
        break;
      case SW_OP_ARENA:
        st = size_dynamic_arena(c, heap[w[pc + 1]], w[pc + 2], w[pc + 3]);
        if (st != SW_OK) return st;
        pc += 4;
        break;
      case SW_OP_ALLOC_AT:
        /* the compiler planned it inside the arena the ARENA instruction sized */
        if (!c->dynamic ||
            !place_in_arena(c, w[pc + 1], w[pc + 2], c->dynamic, c->dynamic_size, heap[w[pc + 3]], w[pc + 4], &w[pc + 5]))
          return fail_text(c, SW_INVALID_PROGRAM, 0, "invalid program: a planned buffer lies outside the dynamic arena");
        pc += 5 + w[pc + 4];
        break;
      case SW_OP_MOVE:
        NEED(w[pc + 2]);
        if (w[pc + 1] != w[pc + 2] && c->owner[w[pc + 2]] == w[pc + 1])
          return bad_register(c, w[pc + 2], pc, " is moved onto the buffer it views");
        move_register(c, w[pc + 1], w[pc + 2]);
        pc += 3;
        break;
      case SW_OP_COPY: {
        int32_t dst = w[pc + 1], src = w[pc + 2];
        NEED(src);
        if (dst == src) return bad_register(c, src, pc, " is copied onto itself");
        sw_tensor t = regs[src];
        int64_t bytes = tensor_bytes(&t);
        if (bytes < 0) return bad_register(c, src, pc, " has a negative or overflowing shape");
        st = alloc_shape(c, dst, t.dtype, w[pc + 3], t.rank, t.shape);
        if (st != SW_OK) return st;
        if (c->reg_state[src] == REG_EMPTY) return bad_register(c, src, pc, " was a view of the copy's destination");
        mem_copy(regs[dst].data, t.data, (size_t)bytes);
        pc += 4;
        break;
      }
      case SW_OP_APPEND:
        NEED(w[pc + 1]);
        NEED(w[pc + 2]);
        st = append_item(c, w[pc + 1], w[pc + 2], w[pc + 3], w[pc + 4]);
        if (st != SW_OK) return st;
        pc += 5;
        break;
      default:
        return fail_text(c, SW_INVALID_PROGRAM, 0, "bad opcode");
    }
  }
}

SW_EXPORT(sw_run) sw_status_t sw_run(sw_context* c) {
  if (c->status != SW_OK) return c->status;
  release_all(c);
  for (int32_t i = 0; i < c->P->ninputs; i++) {
    if (!c->inputs[i].set) {
      err_clear(c);
      err_append(c, "input '");
      err_append(c, input_name(c, i));
      err_append(c, "' was not set");
      return SW_INVALID_INPUT;
    }
  }
  mem_copy(c->heap, c->P->heap_init, sizeof(int64_t) * (size_t)c->P->nheap);
  err_clear(c);
  sw_status_t st = execute(c);
  if (st != SW_OK) release_all(c);
  return st;
}

/* An input read in place (format 3.6) was the host's for one sw_run_io only: undeclared
 * after it, so a later sw_run without declaring it again fails instead of reading it. */
static void forget_host_inputs(sw_context* c) {
  for (int32_t i = 0; i < c->P->ninputs; i++) {
    if (c->io[i].data) {
      c->inputs[i].set = 0;
      c->inputs[i].t.data = c->inputs[i].buffer;
    }
  }
}

/* One call per run: declare every input from the io table, run, and describe every output
 * in the table after the inputs (all zero for an output the run did not produce). An output
 * that is an input read in place points into the host's memory, as the input did. */
SW_EXPORT(sw_run_io) sw_status_t sw_run_io(sw_context* c) {
  if (c->status != SW_OK) return c->status;
  int32_t n_in = c->P->ninputs, n_out = c->P->noutputs;
  for (int32_t i = 0; i < n_in; i++) {
    sw_status_t st = set_input(c, i, c->io[i].dtype, c->io[i].rank, c->io[i].shape, c->io[i].data);
    if (st != SW_OK) {
      forget_host_inputs(c);
      return st;
    }
  }
  sw_status_t st = sw_run(c);
  for (int32_t i = 0; i < n_out; i++) {
    const sw_tensor* t = st == SW_OK ? sw_output_tensor(c, i) : 0;
    if (t) {
      mem_copy(&c->io[n_in + i], t, sizeof(sw_tensor));
    } else {
      mem_set(&c->io[n_in + i], 0, sizeof(sw_tensor));
    }
  }
  forget_host_inputs(c);
  return st;
}
