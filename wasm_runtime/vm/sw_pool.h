/* The context's threads: a kernel whose work is split in parts (kernel_info's parted) is
 * called once per part, n parts for n threads, each part run by whichever thread claims it
 * first (the caller's included), and the call returns when every part has. The parts write
 * disjoint elements and each computes its own in the order one thread would, so the results
 * have the same bits whatever the thread count and whoever runs them.
 *
 * Natively the pool starts its threads itself (POSIX threads) and they sleep on a futex
 * between calls, after spinning a short while: the next kernel of a run is usually
 * microseconds away. In a .wasm of the `threads` variant the host starts them: each is an
 * instance of the module over the same shared memory, calling sw_thread_start (sw_vm.c) with
 * the stack sw_pool_stack gives it. A .wasm without shared memory has no threads (1). */
#ifndef SW_POOL_H
#define SW_POOL_H

#include "sw_abi.h"

typedef struct sw_pool sw_pool;

/* A pool of `threads` threads, the caller's included, or NULL when there are none to start
 * (threads <= 1, no thread support, out of memory). It may have fewer than asked when the
 * system refuses some or their memory (a .wasm's worker stacks, added to *held) would take
 * *held past `budget`: sw_pool_threads says how many. */
sw_pool* sw_pool_create(int32_t threads, int64_t budget, int64_t* held);
int32_t sw_pool_threads(const sw_pool* p);
/* Stops the pool's threads, waits for them to leave it and frees it; NULL is a no-op. */
void sw_pool_destroy(sw_pool* p);
/* Runs every part of kernel fn and returns the first failing part's status (lowest part
 * first), its details in detail[0..2]; SW_OK when all succeed. */
sw_status_t sw_pool_run(sw_pool* p, sw_kernel_fn fn, sw_tensor* const* tensors, int64_t* scalars, int64_t* detail,
                        const volatile int32_t* cancel);
/* a .wasm: the top of thread `index`'s stack (1 <= index < threads), NULL otherwise */
void* sw_pool_stack(sw_pool* p, int32_t index);
/* thread `index`'s loop, until the pool is destroyed (a .wasm's host thread runs it) */
void sw_pool_work(sw_pool* p, int32_t index);
/* how many threads are inside sw_pool_work */
int32_t sw_pool_running(const sw_pool* p);
/* a .wasm's host: one of the pool's threads failed (trapped), so the call waiting for its part
 * returns SW_INTERNAL, as every later one does: the pool is broken for good */
void sw_pool_fail(sw_pool* p);
int32_t sw_pool_broken(const sw_pool* p);

#endif
