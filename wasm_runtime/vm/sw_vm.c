/* The symwasm VM: verifies the embedded program once, then runs it per call of sw_run.
 *
 * Registers hold tensor descriptors; the shape heap holds int64 symbol values. The program
 * is verified at load (sw_init), so dispatch does no operand range checks. Every failure a
 * user can cause (bad input, broken shape constraint, index out of range, out of memory)
 * returns a status with a message built from the compiler's context string; nothing traps.
 */
#include "sw_vm.h"

#if defined(__wasm__)
#define SW_EXPORT(name) __attribute__((export_name(#name)))
#else
#define SW_EXPORT(name) __attribute__((visibility("default")))
#endif

#define SW_MAX_CALL_TENSORS 64
#define SW_MAX_CALL_SCALARS 64
#define SW_ERROR_CAP 1024

enum { REG_EMPTY = 0, REG_OWNED, REG_BORROWED };

typedef struct sw_input_slot {
  void* buffer;
  int64_t capacity;
  int set;
  sw_tensor t;
} sw_input_slot;

static const sw_program* P = &sw_model;
static int vm_ready;
static sw_status_t init_status = -1;
static sw_tensor* regs;
static unsigned char* reg_state;
static int64_t* heap;
static unsigned char* arena; /* the static arena: one block for all compile-time-planned buffers */
static sw_input_slot* inputs;
static int32_t* outputs; /* register of each output, -1 when none */
static int64_t shape_buffer[SW_MAX_RANK];
static int64_t memory_limit = (int64_t)2 << 30; /* never above SIZE_MAX: see sw_set_memory_limit */
static int64_t memory_in_use;
static char error_text[SW_ERROR_CAP];
static int32_t error_len;

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

static const char* str_at(int32_t id) { return P->strings + P->string_offsets[id]; }

static void err_append(const char* s) {
  while (*s && error_len < SW_ERROR_CAP - 1) error_text[error_len++] = *s++;
  error_text[error_len] = 0;
}

static void err_append_int(int64_t v) {
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
  err_append(out);
}

/* Sets the error text from a message template: "{0}", "{1}", "{2}" become the values. */
static sw_status_t fail(sw_status_t status, int32_t msg, int64_t a, int64_t b, int64_t c) {
  const int64_t vals[3] = {a, b, c};
  error_len = 0;
  error_text[0] = 0;
  const char* s = msg >= 0 ? str_at(msg) : "error";
  char one[2] = {0, 0};
  for (; *s; s++) {
    if (s[0] == '{' && s[1] >= '0' && s[1] <= '2' && s[2] == '}') {
      err_append_int(vals[s[1] - '0']);
      s += 2;
    } else {
      one[0] = *s;
      err_append(one);
    }
  }
  return status;
}

static sw_status_t fail_text(sw_status_t status, const char* prefix, const char* text) {
  error_len = 0;
  error_text[0] = 0;
  if (prefix) {
    err_append(prefix);
    err_append(": ");
  }
  err_append(text);
  return status;
}

static int64_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case SW_DT_FLOAT32: return 4;
    case SW_DT_INT32: return 4;
    case SW_DT_INT64: return 8;
    case SW_DT_BOOL: return 1;
    default: return 0;
  }
}

static const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case SW_DT_FLOAT32: return "float32";
    case SW_DT_INT32: return "int32";
    case SW_DT_INT64: return "int64";
    case SW_DT_BOOL: return "bool";
    default: return "unknown dtype";
  }
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

static void release(int32_t r) {
  if (reg_state[r] == REG_OWNED) {
    int64_t bytes = numel(&regs[r]) * dtype_size(regs[r].dtype);
    memory_in_use -= bytes;
    sw_mem_free(regs[r].data);
  }
  reg_state[r] = REG_EMPTY;
  regs[r].data = 0;
}

static void release_all(void) {
  for (int32_t r = 0; r < P->nregs; r++) release(r);
  for (int32_t i = 0; i < P->noutputs; i++) outputs[i] = -1;
  memory_in_use = 0;
}

/* ------------------------------------------------------------------ verifier */

static int check_operand(int kind, int32_t v) {
  switch (kind) {
    case SW_K_REG: return v >= 0 && v < P->nregs;
    case SW_K_SLOT: return v >= 0 && v < P->nheap;
    case SW_K_MSG: return v >= 0 && v < P->nstrings;
    case SW_K_KERNEL: return v >= 0 && v < P->nkernels;
    case SW_K_CONST: return v >= 0 && v < P->nconsts;
    case SW_K_INPUT: return v >= 0 && v < P->ninputs;
    case SW_K_OUTPUT: return v >= 0 && v < P->noutputs;
    case SW_K_ARITH: return v >= 0 && v < SW_ARITH_COUNT;
    case SW_K_DTYPE: return dtype_size(v) > 0;
    case SW_K_PC: return v >= 0 && v < P->nwords;
    case SW_K_IMM: return 1;
    default: return 0;
  }
}

/* One pass over the program: checks every operand and marks where instructions start; with
 * check_targets (the second pass) it also requires every jump to land on a start. */
static sw_status_t walk(unsigned char* starts, int check_targets, int32_t* last_op) {
  int32_t pc = 0;
  while (pc < P->nwords) {
    int32_t op = P->words[pc];
    if (op < 0 || op >= SW_OP_COUNT) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
    starts[pc] = 1;
    *last_op = op;
    if (op == SW_OP_DIM && pc + 3 < P->nwords && (P->words[pc + 3] < 0 || P->words[pc + 3] >= SW_MAX_RANK))
      return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
    pc++;
    for (const unsigned char* k = sw_op_operands[op]; *k != SW_K_END; k++) {
      if (pc >= P->nwords) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
      if (*k & SW_K_LIST) {
        int32_t n = P->words[pc++];
        if (n < 0 || n > P->nwords - pc) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
        if ((op == SW_OP_ALLOC || op == SW_OP_ALLOC_STATIC || op == SW_OP_VIEW) && n > SW_MAX_RANK)
          return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
        if (op == SW_OP_CALL && n > SW_MAX_CALL_TENSORS) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
        for (int32_t i = 0; i < n; i++)
          if (!check_operand(*k & ~SW_K_LIST, P->words[pc + i])) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
        pc += n;
      } else {
        if (!check_operand(*k, P->words[pc])) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
        if (check_targets && *k == SW_K_PC && !starts[P->words[pc]]) return fail(SW_INVALID_PROGRAM, -1, pc, 0, 0);
        pc++;
      }
    }
  }
  return SW_OK;
}

static sw_status_t verify(void) {
  if (P->nwords <= 0) return fail(SW_INVALID_PROGRAM, -1, 0, 0, 0);
  unsigned char* starts = (unsigned char*)sw_mem_alloc((size_t)P->nwords);
  if (!starts) return SW_OUT_OF_MEMORY;
  mem_set(starts, 0, (size_t)P->nwords);
  int32_t last_op = -1;
  sw_status_t st = walk(starts, 0, &last_op);
  if (st == SW_OK) st = walk(starts, 1, &last_op);
  sw_mem_free(starts);
  if (st != SW_OK) return st;
  /* execution can never run past the last word */
  if (last_op != SW_OP_RETURN && last_op != SW_OP_JUMP) return fail(SW_INVALID_PROGRAM, -1, 0, 0, 0);
  for (int32_t i = 0; i < P->ninputs; i++)
    if (P->inputs[3 * i + 1] < 0 || P->inputs[3 * i + 1] > SW_MAX_RANK) return fail(SW_INVALID_PROGRAM, -1, i, 0, 0);
  return SW_OK;
}

/* ------------------------------------------------------------------ exports */

SW_EXPORT(sw_init) sw_status_t sw_init(void) {
  if (vm_ready) return init_status;
  vm_ready = 1;
  init_status = verify();
  if (init_status != SW_OK) {
    fail_text(SW_INVALID_PROGRAM, 0, "the embedded program failed verification");
    return init_status;
  }
  regs = (sw_tensor*)sw_mem_alloc(sizeof(sw_tensor) * (size_t)(P->nregs + 1));
  reg_state = (unsigned char*)sw_mem_alloc((size_t)P->nregs + 1);
  heap = (int64_t*)sw_mem_alloc(sizeof(int64_t) * (size_t)(P->nheap + 1));
  inputs = (sw_input_slot*)sw_mem_alloc(sizeof(sw_input_slot) * (size_t)(P->ninputs + 1));
  outputs = (int32_t*)sw_mem_alloc(sizeof(int32_t) * (size_t)(P->noutputs + 1));
  if (outputs)
    for (int32_t i = 0; i < P->noutputs; i++) outputs[i] = -1;
  if (P->arena_size > 0) {
    if (P->arena_size > memory_limit || (uint64_t)P->arena_size > (uint64_t)SIZE_MAX) {
      init_status = fail_text(SW_OUT_OF_MEMORY, 0, "the static arena exceeds the memory limit");
      return init_status;
    }
    arena = (unsigned char*)sw_mem_alloc((size_t)P->arena_size);
    if (!arena) {
      init_status = fail_text(SW_OUT_OF_MEMORY, 0, "out of memory for the static arena");
      return init_status;
    }
  }
  if (!regs || !reg_state || !heap || !inputs || !outputs) {
    init_status = fail_text(SW_OUT_OF_MEMORY, 0, "out of memory while loading the model");
    return init_status;
  }
  mem_set(regs, 0, sizeof(sw_tensor) * (size_t)(P->nregs + 1));
  mem_set(reg_state, 0, (size_t)P->nregs + 1);
  mem_set(inputs, 0, sizeof(sw_input_slot) * (size_t)(P->ninputs + 1));
  for (int32_t i = 0; i < P->noutputs; i++) outputs[i] = -1;
  return SW_OK;
}

SW_EXPORT(sw_num_inputs) int32_t sw_num_inputs(void) { return P->ninputs; }
SW_EXPORT(sw_num_outputs) int32_t sw_num_outputs(void) { return P->noutputs; }
SW_EXPORT(sw_shape_buffer) int64_t* sw_shape_buffer(void) { return shape_buffer; }
SW_EXPORT(sw_last_error) const char* sw_last_error(void) { return error_text; }
SW_EXPORT(sw_last_error_len) int32_t sw_last_error_len(void) { return error_len; }
SW_EXPORT(sw_metadata) const char* sw_metadata(void) { return P->metadata; }
SW_EXPORT(sw_metadata_len) int32_t sw_metadata_len(void) { return P->metadata_len; }
/* clamped to what the address space can hold, so every size under the limit fits a size_t */
SW_EXPORT(sw_set_memory_limit) void sw_set_memory_limit(int64_t bytes) {
  if (bytes < 0) bytes = 0;
  if ((uint64_t)bytes > (uint64_t)SIZE_MAX) bytes = (int64_t)SIZE_MAX;
  memory_limit = bytes;
}

SW_EXPORT(sw_input_buffer) void* sw_input_buffer(int32_t index, int64_t nbytes) {
  if (sw_init() != SW_OK) return 0;
  if (index < 0 || index >= P->ninputs) {
    fail_text(SW_INVALID_INPUT, 0, "input index out of range");
    return 0;
  }
  sw_input_slot* in = &inputs[index];
  if (nbytes < 0 || (uint64_t)nbytes > (uint64_t)memory_limit) {
    fail(SW_OUT_OF_MEMORY, -1, 0, 0, 0);
    error_len = 0;
    err_append("input '");
    err_append(str_at(P->inputs[3 * index + 2]));
    err_append("': cannot allocate ");
    err_append_int(nbytes);
    err_append(" bytes (memory limit ");
    err_append_int(memory_limit);
    err_append(")");
    return 0;
  }
  if (in->capacity < nbytes || !in->buffer) {
    if (in->buffer) sw_mem_free(in->buffer);
    in->buffer = sw_mem_alloc((size_t)(nbytes ? nbytes : 1));
    in->capacity = in->buffer ? nbytes : 0;
    in->set = 0;
    if (!in->buffer) {
      fail_text(SW_OUT_OF_MEMORY, str_at(P->inputs[3 * index + 2]), "out of memory for the input buffer");
      return 0;
    }
  }
  return in->buffer;
}

SW_EXPORT(sw_set_input) sw_status_t sw_set_input(int32_t index, int32_t dtype, int32_t rank) {
  sw_status_t st = sw_init();
  if (st != SW_OK) return st;
  if (index < 0 || index >= P->ninputs) return fail_text(SW_INVALID_INPUT, 0, "input index out of range");
  sw_input_slot* in = &inputs[index];
  const char* name = str_at(P->inputs[3 * index + 2]);
  int32_t want_dtype = P->inputs[3 * index], want_rank = P->inputs[3 * index + 1];
  in->set = 0;
  error_len = 0;
  if (dtype != want_dtype) {
    err_append("input '");
    err_append(name);
    err_append("': expected dtype ");
    err_append(dtype_name(want_dtype));
    err_append(", got ");
    err_append(dtype_name(dtype));
    return SW_INVALID_INPUT;
  }
  if (rank != want_rank) {
    err_append("input '");
    err_append(name);
    err_append("': expected rank ");
    err_append_int(want_rank);
    err_append(", got rank ");
    err_append_int(rank);
    return SW_INVALID_INPUT;
  }
  int64_t bytes = dtype_size(dtype);
  for (int i = 0; i < rank; i++) {
    if (shape_buffer[i] < 0) {
      err_append("input '");
      err_append(name);
      err_append("': negative dim ");
      err_append_int(i);
      return SW_INVALID_INPUT;
    }
    if (mul_overflow(bytes, shape_buffer[i], &bytes)) bytes = INT64_MAX;
  }
  if (!in->buffer || bytes > in->capacity) {
    err_append("input '");
    err_append(name);
    err_append("': its buffer holds ");
    err_append_int(in->capacity);
    err_append(" bytes but the shape needs ");
    err_append_int(bytes);
    err_append(" (call sw_input_buffer first)");
    return SW_INVALID_INPUT;
  }
  in->t.data = in->buffer;
  in->t.dtype = dtype;
  in->t.rank = rank;
  for (int i = 0; i < SW_MAX_RANK; i++) in->t.shape[i] = i < rank ? shape_buffer[i] : 0;
  in->set = 1;
  return SW_OK;
}

static int valid_output(int32_t i) {
  return vm_ready && init_status == SW_OK && i >= 0 && i < P->noutputs && outputs[i] >= 0;
}

/* The whole descriptor of output i (NULL if none): one call instead of one per field.
 * Layout on both targets: data pointer at 0 (4 or 8 bytes), dtype at 8 on native / 4 on
 * wasm32, rank after it, shape (int64[8]) at offset 16. */
SW_EXPORT(sw_output_tensor) const sw_tensor* sw_output_tensor(int32_t i) { return valid_output(i) ? &regs[outputs[i]] : 0; }

SW_EXPORT(sw_output_data) void* sw_output_data(int32_t i) { return valid_output(i) ? regs[outputs[i]].data : 0; }
SW_EXPORT(sw_output_dtype) int32_t sw_output_dtype(int32_t i) { return valid_output(i) ? regs[outputs[i]].dtype : 0; }
SW_EXPORT(sw_output_rank) int32_t sw_output_rank(int32_t i) { return valid_output(i) ? regs[outputs[i]].rank : -1; }

SW_EXPORT(sw_output_dim) int64_t sw_output_dim(int32_t i, int32_t axis) {
  if (!valid_output(i) || axis < 0 || axis >= regs[outputs[i]].rank) return -1;
  return regs[outputs[i]].shape[axis];
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
static sw_status_t arith(int32_t kind, int64_t a, int64_t b, int64_t* out, int32_t msg) {
  switch (kind) {
    case SW_ARITH_ADD:
      if (__builtin_add_overflow(a, b, out)) return fail(SW_INVALID_INPUT, msg, a, b, 0);
      return SW_OK;
    case SW_ARITH_SUB:
      if (__builtin_sub_overflow(a, b, out)) return fail(SW_INVALID_INPUT, msg, a, b, 0);
      return SW_OK;
    case SW_ARITH_MUL:
      if (smul_overflow(a, b, out)) return fail(SW_INVALID_INPUT, msg, a, b, 0);
      return SW_OK;
    case SW_ARITH_FLOORDIV:
      if (b == 0 || (a == INT64_MIN && b == -1)) return fail(SW_INVALID_INPUT, msg, a, b, 0);
      *out = floordiv64(a, b);
      return SW_OK;
    case SW_ARITH_MOD:
      if (b == 0) return fail(SW_INVALID_INPUT, msg, a, b, 0);
      *out = b == -1 ? 0 : a - floordiv64(a, b) * b;
      return SW_OK;
    case SW_ARITH_MIN: *out = a < b ? a : b; return SW_OK;
    case SW_ARITH_MAX: *out = a > b ? a : b; return SW_OK;
    case SW_ARITH_DIV:
      if (b == 0 || (a == INT64_MIN && b == -1) || a % b != 0) return fail(SW_INVALID_INPUT, msg, a, b, 0);
      *out = a / b;
      return SW_OK;
    case SW_ARITH_EQ: *out = a == b; return SW_OK;
    case SW_ARITH_LT: *out = a < b; return SW_OK;
    case SW_ARITH_LE: *out = a <= b; return SW_OK;
    default: return fail(SW_INVALID_PROGRAM, -1, 0, 0, 0);
  }
}

static sw_status_t alloc_tensor(int32_t r, int32_t dtype, int32_t msg, int32_t rank, const int32_t* dims) {
  release(r);
  sw_tensor* t = &regs[r];
  int64_t bytes = dtype_size(dtype);
  int overflow = 0;
  for (int i = 0; i < rank; i++) {
    int64_t d = heap[dims[i]];
    if (d < 0) return fail(SW_INVALID_INPUT, msg, d, memory_limit, 0);
    if (mul_overflow(bytes, d, &bytes)) overflow = 1;
    t->shape[i] = d;
  }
  if (overflow) bytes = INT64_MAX;
  /* memory_limit <= SIZE_MAX, so a size under it never truncates when cast to size_t */
  if (bytes > memory_limit - memory_in_use) return fail(SW_OUT_OF_MEMORY, msg, bytes, memory_limit, 0);
  void* p = sw_mem_alloc((size_t)(bytes ? bytes : 1));
  if (!p) return fail(SW_OUT_OF_MEMORY, msg, bytes, memory_limit, 0);
  memory_in_use += bytes;
  t->data = p;
  t->dtype = dtype;
  t->rank = rank;
  reg_state[r] = REG_OWNED;
  return SW_OK;
}

static sw_status_t reshape_dims(int32_t msg, int32_t nin, const int32_t* in, int32_t nout, const int32_t* out) {
  int64_t total = 1, known = 1;
  int infer = -1;
  for (int i = 0; i < nin; i++)
    if (mul_overflow(total, heap[in[i]], &total))
      return fail_text(SW_INVALID_INPUT, str_at(msg), "the input's element count overflows");
  for (int i = 0; i < nout; i++) {
    int64_t v = heap[out[i]];
    if (v == 0) {
      if (i >= nin) return fail_text(SW_INVALID_INPUT, str_at(msg), "a 0 in the target shape has no input dim to copy");
      v = heap[in[i]];
      heap[out[i]] = v;
    }
    if (v == -1) {
      if (infer >= 0) return fail_text(SW_INVALID_INPUT, str_at(msg), "more than one -1 in the target shape");
      infer = i;
      continue;
    }
    if (v < -1) return fail_text(SW_INVALID_INPUT, str_at(msg), "a negative dim other than -1 in the target shape");
    if (mul_overflow(known, v, &known))
      return fail_text(SW_INVALID_INPUT, str_at(msg), "the target shape's element count overflows");
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) {
      fail_text(SW_INVALID_INPUT, str_at(msg), "cannot infer the -1 dim: ");
      err_append_int(total);
      err_append(" elements are not a multiple of ");
      err_append_int(known);
      return SW_INVALID_INPUT;
    }
    heap[out[infer]] = total / known;
  } else if (known != total) {
    fail_text(SW_INVALID_INPUT, str_at(msg), "cannot reshape ");
    err_append_int(total);
    err_append(" elements into a shape of ");
    err_append_int(known);
    return SW_INVALID_INPUT;
  }
  return SW_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static sw_status_t slice_dim(const int32_t* w) {
  int64_t dim = heap[w[0]], start = heap[w[1]], end = heap[w[2]], step = heap[w[3]];
  if (step == 0) return fail(SW_INVALID_INPUT, w[6], dim, start, end);
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

static int64_t read_int(const sw_tensor* t, int64_t i) {
  switch (t->dtype) {
    case SW_DT_INT64: return ((const int64_t*)t->data)[i];
    case SW_DT_INT32: return ((const int32_t*)t->data)[i];
    case SW_DT_BOOL: return ((const unsigned char*)t->data)[i];
    default: return (int64_t)((const float*)t->data)[i];
  }
}

/* ------------------------------------------------------------------ run */

static sw_status_t execute(void) {
  const int32_t* w = P->words;
  int32_t pc = 0;
  sw_tensor* call_tensors[SW_MAX_CALL_TENSORS];
  int64_t scalars[SW_MAX_CALL_SCALARS];
  int64_t detail[3];
  sw_status_t st;
  for (;;) {
    switch (w[pc]) {
      case SW_OP_RETURN:
        return SW_OK;
      case SW_OP_INPUT: {
        regs[w[pc + 2]] = inputs[w[pc + 1]].t;
        reg_state[w[pc + 2]] = REG_BORROWED;
        pc += 3;
        break;
      }
      case SW_OP_DIM:
        heap[w[pc + 1]] = w[pc + 3] < regs[w[pc + 2]].rank ? regs[w[pc + 2]].shape[w[pc + 3]] : 0;
        pc += 4;
        break;
      case SW_OP_CHECK_EQ:
        if (heap[w[pc + 1]] != heap[w[pc + 2]]) return fail(SW_INVALID_INPUT, w[pc + 3], heap[w[pc + 1]], heap[w[pc + 2]], 0);
        pc += 4;
        break;
      case SW_OP_CHECK_LE:
        if (heap[w[pc + 1]] > heap[w[pc + 2]]) return fail(SW_INVALID_INPUT, w[pc + 3], heap[w[pc + 1]], heap[w[pc + 2]], 0);
        pc += 4;
        break;
      case SW_OP_ARITH:
        st = arith(w[pc + 1], heap[w[pc + 3]], heap[w[pc + 4]], &heap[w[pc + 2]], w[pc + 5]);
        if (st != SW_OK) return st;
        pc += 6;
        break;
      case SW_OP_BCAST: {
        int64_t a = heap[w[pc + 2]], b = heap[w[pc + 3]];
        if (a != b && a != 1 && b != 1) return fail(SW_INVALID_INPUT, w[pc + 4], a, b, 0);
        heap[w[pc + 1]] = a == 1 ? b : a;
        pc += 5;
        break;
      }
      case SW_OP_LOAD_VALUES: {
        const sw_tensor* t = &regs[w[pc + 1]];
        int32_t n = w[pc + 3];
        int64_t have = numel(t);
        if (have != n) return fail(SW_INVALID_INPUT, w[pc + 2], have, n, 0);
        for (int32_t i = 0; i < n; i++) heap[w[pc + 4 + i]] = read_int(t, i);
        pc += 4 + n;
        break;
      }
      case SW_OP_STORE_VALUES: {
        sw_tensor* t = &regs[w[pc + 1]];
        int32_t n = w[pc + 2];
        if (!t->data || numel(t) < n) return fail_text(SW_INVALID_PROGRAM, 0, "STORE_VALUES past its tensor");
        for (int32_t i = 0; i < n; i++) {
          int64_t v = heap[w[pc + 3 + i]];
          if (t->dtype == SW_DT_INT64) ((int64_t*)t->data)[i] = v;
          else if (t->dtype == SW_DT_INT32) ((int32_t*)t->data)[i] = (int32_t)v;
          else if (t->dtype == SW_DT_FLOAT32) ((float*)t->data)[i] = (float)v;
          else ((unsigned char*)t->data)[i] = v != 0;
        }
        pc += 3 + n;
        break;
      }
      case SW_OP_ALLOC:
        st = alloc_tensor(w[pc + 1], w[pc + 2], w[pc + 3], w[pc + 4], &w[pc + 5]);
        if (st != SW_OK) return st;
        pc += 5 + w[pc + 4];
        break;
      case SW_OP_ALLOC_STATIC: {
        int32_t r = w[pc + 1], n = w[pc + 4];
        int64_t offset = w[pc + 3], bytes = dtype_size(w[pc + 2]);
        release(r);
        int overflow = 0;
        for (int32_t i = 0; i < n; i++) {
          regs[r].shape[i] = heap[w[pc + 5 + i]];
          if (regs[r].shape[i] < 0 || mul_overflow(bytes, regs[r].shape[i], &bytes)) overflow = 1;
        }
        /* the compiler planned it inside the arena; a program that did not is corrupt */
        if (overflow || offset < 0 || offset > P->arena_size - bytes)
          return fail_text(SW_INVALID_PROGRAM, 0, "a static buffer lies outside the arena");
        regs[r].data = arena + offset;
        regs[r].dtype = w[pc + 2];
        regs[r].rank = n;
        reg_state[r] = REG_BORROWED;
        pc += 5 + n;
        break;
      }
      case SW_OP_VIEW: {
        int32_t dst = w[pc + 1], src = w[pc + 2], n = w[pc + 3];
        sw_tensor t = regs[src];
        t.rank = n;
        for (int32_t i = 0; i < n; i++) t.shape[i] = heap[w[pc + 4 + i]];
        if (dst != src) release(dst);
        regs[dst] = t;
        if (dst != src) reg_state[dst] = REG_BORROWED;
        pc += 4 + n;
        break;
      }
      case SW_OP_CALL: {
        int32_t k = w[pc + 1], msg = w[pc + 2], nt = w[pc + 3];
        const int32_t* ts = &w[pc + 4];
        int32_t ns = w[pc + 4 + nt];
        const int32_t* ss = &w[pc + 5 + nt];
        for (int32_t i = 0; i < nt; i++) call_tensors[i] = &regs[ts[i]];
        for (int32_t i = 0; i < ns && i < SW_MAX_CALL_SCALARS; i++) scalars[i] = heap[ss[i]];
        detail[0] = detail[1] = detail[2] = 0;
        st = P->kernels[k](call_tensors, scalars, detail);
        if (st != SW_OK) return fail(st, msg, detail[0], detail[1], detail[2]);
        for (int32_t i = 0; i < ns && i < SW_MAX_CALL_SCALARS; i++) heap[ss[i]] = scalars[i];
        pc += 5 + nt + ns;
        break;
      }
      case SW_OP_FREE:
        release(w[pc + 1]);
        pc += 2;
        break;
      case SW_OP_CONST:
        regs[w[pc + 1]] = P->consts[w[pc + 2]];
        reg_state[w[pc + 1]] = REG_BORROWED;
        pc += 3;
        break;
      case SW_OP_OUTPUT:
        outputs[w[pc + 1]] = w[pc + 2];
        pc += 3;
        break;
      case SW_OP_RESHAPE: {
        int32_t nin = w[pc + 2];
        int32_t nout = w[pc + 3 + nin];
        st = reshape_dims(w[pc + 1], nin, &w[pc + 3], nout, &w[pc + 4 + nin]);
        if (st != SW_OK) return st;
        pc += 4 + nin + nout;
        break;
      }
      case SW_OP_SLICE_DIM:
        st = slice_dim(&w[pc + 1]);
        if (st != SW_OK) return st;
        pc += 8;
        break;
      case SW_OP_JUMP:
        pc = w[pc + 1];
        break;
      case SW_OP_BRANCH:
        pc = heap[w[pc + 1]] ? w[pc + 2] : pc + 3;
        break;
      default:
        return fail_text(SW_INVALID_PROGRAM, 0, "bad opcode");
    }
  }
}

SW_EXPORT(sw_run) sw_status_t sw_run(void) {
  sw_status_t st = sw_init();
  if (st != SW_OK) return st;
  release_all();
  for (int32_t i = 0; i < P->ninputs; i++) {
    if (!inputs[i].set) {
      error_len = 0;
      err_append("input '");
      err_append(str_at(P->inputs[3 * i + 2]));
      err_append("' was not set");
      return SW_INVALID_INPUT;
    }
  }
  mem_copy(heap, P->heap_init, sizeof(int64_t) * (size_t)P->nheap);
  error_len = 0;
  error_text[0] = 0;
  st = execute();
  if (st != SW_OK) release_all();
  return st;
}
