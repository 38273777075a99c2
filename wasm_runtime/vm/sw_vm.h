/* symwasm VM: the types shared by the VM, the generated kernels and the compiler.
 *
 * Ownership: the VM owns every tensor buffer it allocates (ALLOC) and the input buffers
 * it hands out (sw_input_buffer). Constant tensors point into read-only data of the module.
 * Kernels own nothing: they read and write the buffers of the descriptors they are given.
 */
#ifndef SW_VM_H
#define SW_VM_H

#include <stddef.h>
#include <stdint.h>

#include "sw_isa.h"

#define SW_MAX_RANK 8

typedef int32_t sw_status_t;
#define SW_OK 0
#define SW_INVALID_INPUT 1
#define SW_OUT_OF_RANGE 2
#define SW_OUT_OF_MEMORY 3
#define SW_INVALID_PROGRAM 4
#define SW_INTERNAL 5

/* dtype codes are ONNX TensorProto's */
#define SW_DT_FLOAT32 1
#define SW_DT_INT32 6
#define SW_DT_INT64 7
#define SW_DT_BOOL 9

/* A tensor descriptor. The compiler mirrors this layout as the LLVM struct
 * { ptr, i32, i32, [8 x i64] }: keep the two in step. */
typedef struct sw_tensor {
  void* data;
  int32_t dtype;
  int32_t rank;
  int64_t shape[SW_MAX_RANK];
} sw_tensor;

/* Every generated kernel: tensors (inputs then outputs), in/out scalars, and on failure up
 * to three int64 details for the error message. Returns 0 or a status code. */
typedef sw_status_t (*sw_kernel_fn)(sw_tensor* const* tensors, int64_t* scalars, int64_t* detail);

/* The compiled model's program, emitted by the compiler as the global `sw_model`. */
typedef struct sw_program {
  const int32_t* words;
  int32_t nwords;
  int32_t nregs;
  const int64_t* heap_init; /* initial shape heap: constants preset, the rest 0 */
  int32_t nheap;
  const char* strings; /* messages and names, each NUL-terminated, at string_offsets */
  const int32_t* string_offsets;
  int32_t nstrings;
  const sw_tensor* consts;
  int32_t nconsts;
  const sw_kernel_fn* kernels;
  int32_t nkernels;
  const int32_t* inputs; /* per input: dtype, rank, name string */
  int32_t ninputs;
  const int32_t* outputs; /* per output: name string */
  int32_t noutputs;
  const char* metadata; /* the metadata JSON */
  int32_t metadata_len;
  int64_t arena_size; /* bytes of the static arena (buffers whose shapes are known at compile time) */
} sw_program;

extern const sw_program sw_model;

/* memory (sw_alloc.c) */
void* sw_mem_alloc(size_t nbytes);
void sw_mem_free(void* p);

#endif
