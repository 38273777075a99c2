/* Memory for the VM. On native the C library's allocator; on wasm32 (no libc, no imports)
 * a first-fit free list over linear memory, grown with memory.grow. Failure is a NULL
 * return, never a trap, so the VM can report out-of-memory as a status. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign under -std=c11 */
#include "sw_vm.h"

#ifndef __wasm__
#include <stdlib.h>

void* sw_mem_alloc(size_t nbytes) {
  void* p = NULL;
  if (posix_memalign(&p, 64, nbytes ? nbytes : 1) != 0) return NULL;
  return p;
}

void sw_mem_free(void* p) { free(p); }

#else

#define SW_ALIGN 16
#define SW_PAGE 65536

/* A block: its header sits SW_ALIGN bytes before the pointer handed out. `size` counts
 * the header. Free blocks are kept sorted by address so neighbours can merge. */
typedef struct sw_block {
  size_t size;
  struct sw_block* next;
} sw_block;

extern unsigned char __heap_base;
static sw_block* free_list;
static int initialized;

static size_t align_up(size_t n) { return (n + SW_ALIGN - 1) & ~(size_t)(SW_ALIGN - 1); }

static void insert_free(sw_block* b) {
  sw_block** link = &free_list;
  while (*link && *link < b) link = &(*link)->next;
  b->next = *link;
  *link = b;
  /* merge with the following block, then with the preceding one */
  if (b->next && (unsigned char*)b + b->size == (unsigned char*)b->next) {
    b->size += b->next->size;
    b->next = b->next->next;
  }
  if (link != &free_list) {
    sw_block* prev = (sw_block*)((unsigned char*)link - offsetof(sw_block, next));
    if ((unsigned char*)prev + prev->size == (unsigned char*)b) {
      prev->size += b->size;
      prev->next = b->next;
    }
  }
}

static void init_heap(void) {
  size_t start = align_up((size_t)&__heap_base);
  size_t end = __builtin_wasm_memory_size(0) * (size_t)SW_PAGE;
  initialized = 1;
  if (end > start + sizeof(sw_block) + SW_ALIGN) {
    sw_block* b = (sw_block*)start;
    b->size = end - start;
    b->next = NULL;
    insert_free(b);
  }
}

static int grow(size_t need) {
  size_t pages = (need + SW_PAGE - 1) / SW_PAGE;
  if (pages > 65536) return 0;
  size_t old = __builtin_wasm_memory_grow(0, pages);
  if (old == (size_t)-1) return 0;
  sw_block* b = (sw_block*)(old * (size_t)SW_PAGE);
  b->size = pages * (size_t)SW_PAGE;
  insert_free(b);
  return 1;
}

void* sw_mem_alloc(size_t nbytes) {
  if (!initialized) init_heap();
  if (nbytes > (size_t)0xF0000000u) return NULL; /* beyond any wasm32 memory */
  size_t need = align_up(nbytes ? nbytes : 1) + SW_ALIGN;
  for (int attempt = 0; attempt < 2; attempt++) {
    for (sw_block** link = &free_list; *link; link = &(*link)->next) {
      sw_block* b = *link;
      if (b->size < need) continue;
      if (b->size - need >= 2 * SW_ALIGN + sizeof(sw_block)) {
        sw_block* rest = (sw_block*)((unsigned char*)b + need);
        rest->size = b->size - need;
        rest->next = b->next;
        *link = rest;
        b->size = need;
      } else {
        *link = b->next;
      }
      return (unsigned char*)b + SW_ALIGN;
    }
    if (attempt == 0 && !grow(need)) return NULL;
  }
  return NULL;
}

void sw_mem_free(void* p) {
  if (!p) return;
  sw_block* b = (sw_block*)((unsigned char*)p - SW_ALIGN);
  insert_free(b);
}

#endif
