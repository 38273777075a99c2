/* symwasm VM internals shared by its C files. The ABI (dtypes, status codes, sw_tensor,
 * sw_program, the exports) is generated into sw_abi.h from toolkit/abi.py; the instruction
 * set into sw_isa.h from toolkit/vm/isa.py.
 *
 * Ownership: a context owns every tensor buffer it allocates (ALLOC), its static arena and
 * the input buffers it hands out (sw_input_buffer). Constant tensors point into read-only
 * data of the module. Kernels own nothing: they read and write the buffers of the
 * descriptors they are given.
 */
#ifndef SW_VM_H
#define SW_VM_H

#include "sw_abi.h"
#include "sw_isa.h"

/* The compiled model's program, emitted by the compiler. */
extern const sw_program sw_model;

/* memory (sw_alloc.c): NULL on failure, never a trap */
void* sw_mem_alloc(size_t nbytes);
void sw_mem_free(void* p);

#endif
