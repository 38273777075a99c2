/* The context's threads: a kernel whose work is split in parts (kernel_info's parted) is
 * called once per part, n parts for n threads, each part run by whichever thread claims it
 * first (the caller's included), and the call returns when every part has. The parts write
 * disjoint elements and each computes its own in the order one thread would, so the results
 * have the same bits whatever the thread count and whoever runs them.
 *
 * Natively the pool starts its threads itself (POSIX threads) and they sleep on a futex
 * between calls, after spinning a short while: the next kernel of a run is usually
 * microseconds away. A wasm32 module without shared memory has no threads (1). */
#ifndef SW_POOL_H
#define SW_POOL_H

#include "sw_abi.h"

#define SW_MAX_THREADS 64

typedef struct sw_pool sw_pool;

/* A pool of `threads` threads, the caller's included (threads - 1 started), or NULL when
 * there are none to start (threads <= 1, no thread support, out of memory). It may start
 * fewer than asked when the system refuses some: sw_pool_threads says how many run. */
sw_pool* sw_pool_create(int32_t threads);
int32_t sw_pool_threads(const sw_pool* p);
/* Stops and joins the pool's threads and frees it; NULL is a no-op. */
void sw_pool_destroy(sw_pool* p);
/* Runs every part of kernel fn and returns the first failing part's status (lowest part
 * first), its details in detail[0..2]; SW_OK when all succeed. */
sw_status_t sw_pool_run(sw_pool* p, sw_kernel_fn fn, sw_tensor* const* tensors, int64_t* scalars, int64_t* detail,
                        const volatile int32_t* cancel);

#endif
