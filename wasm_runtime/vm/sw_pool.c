/* The context's threads (sw_pool.h). A job is one call of a parted kernel: the caller
 * publishes it by bumping `job`, then it and the threads claim its parts one at a time until
 * none is left (run_parts), and the caller waits for `done` to count them all. A thread still
 * waking up when the job starts costs nothing: the caller runs the parts it did not claim.
 * Waiting spins a while, then sleeps on the word (a futex natively, memory.atomic.wait32 in a
 * .wasm). `sleepers` counts the threads asleep, so a job or its end wakes them only when one
 * is: the bump and the count are sequentially consistent, and a sleeper rechecks the word as
 * it goes to sleep, so no wake-up is lost.
 *
 * Natively the pool starts its threads (POSIX threads). A .wasm cannot: its host starts them,
 * each an instance of the module over the same shared memory that calls sw_thread_start with
 * the stack the pool allocated for it (sw_thread_stack); the pool counts them in `running`
 * and waits for them all to leave before it is freed. A .wasm built without shared memory
 * (no `threads` variant) has no threads at all. */
#define _GNU_SOURCE /* syscall() under -std=c11 */
#include "sw_pool.h"

#include "sw_vm.h"

#if defined(__wasm__) && !defined(__wasm_atomics__)

sw_pool* sw_pool_create(int32_t threads, int64_t budget, int64_t* held) {
  (void)threads;
  (void)budget;
  (void)held;
  return 0;
}
int32_t sw_pool_threads(const sw_pool* p) {
  (void)p;
  return 1;
}
void sw_pool_destroy(sw_pool* p) { (void)p; }
sw_status_t sw_pool_run(sw_pool* p, sw_kernel_fn fn, sw_tensor* const* tensors, int64_t* scalars, int64_t* detail,
                        const volatile int32_t* cancel) {
  (void)p;
  return fn(tensors, scalars, detail, cancel, 0, 1);
}
void* sw_pool_stack(sw_pool* p, int32_t index) {
  (void)p;
  (void)index;
  return 0;
}
void sw_pool_work(sw_pool* p, int32_t index) {
  (void)p;
  (void)index;
}
int32_t sw_pool_running(const sw_pool* p) {
  (void)p;
  return 0;
}
void sw_pool_fail(sw_pool* p) { (void)p; }
int32_t sw_pool_broken(const sw_pool* p) {
  (void)p;
  return 0;
}

#else

#include <stdatomic.h>

#if defined(__wasm__)
/* a worker's stack: the kernels that split their work keep a few tiles on theirs (the GEMM's
 * packed block of B is 16 KiB) */
#define WORKER_STACK (256 << 10)
/* loads of the word before a waiting thread sleeps (a wasm module has no clock) */
#define SPIN_LOADS (1 << 18)
#else
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* A waiting thread spins this long before it sleeps: the kernels split in parts follow each
 * other closer than that within a run, and a thread woken from sleep may come too late to take
 * a part (bert2 at 2 threads: a spin of ~0.1 ms left the speed-up at 1.1-1.5x, 1 ms 1.85x) */
#define SPIN_NS 1000000
#endif

#if !defined(__wasm__)
typedef struct { /* a POSIX thread's argument */
  sw_pool* pool;
  int32_t index;
} sw_worker;
#endif

struct sw_pool {
  _Atomic int32_t job;      /* the current job's number: bumped to publish one, and to quit */
  _Atomic uint64_t claim;   /* job number << 32 | the next part to claim */
  _Atomic int32_t done;     /* parts of the current job finished */
  _Atomic int32_t sleepers; /* threads asleep on `job` or `done` */
  _Atomic int32_t running;  /* threads inside the pool's loop (a .wasm's host starts them) */
  _Atomic int32_t broken;   /* a thread failed (its host said so): calls fail, the pool is rebuilt */
  int32_t threads;          /* parts per job, the caller's thread included */
  _Atomic int32_t quit;     /* set, then `job` bumped: the threads return */
  sw_kernel_fn fn;
  sw_tensor* const* tensors;
  int64_t* scalars;
  const volatile int32_t* cancel;
  sw_status_t status[SW_MAX_THREADS];
  int64_t detail[SW_MAX_THREADS][3];
#if defined(__wasm__)
  unsigned char* stacks[SW_MAX_THREADS];
#else
  sw_worker workers[SW_MAX_THREADS];
  pthread_t tid[SW_MAX_THREADS];
  pid_t owner; /* the process that started the threads: a forked child has none of them */
#endif
};

#if defined(__wasm__)

static void sleep_on(sw_pool* p, _Atomic int32_t* word, int32_t value) {
  atomic_fetch_add(&p->sleepers, 1);
  __builtin_wasm_memory_atomic_wait32((int32_t*)word, value, -1); /* returns at once if it changed */
  atomic_fetch_sub(&p->sleepers, 1);
}

static void wake_all(sw_pool* p, _Atomic int32_t* word) {
  if (atomic_load(&p->sleepers) > 0) __builtin_wasm_memory_atomic_notify((int32_t*)word, 0xFFFFFFFFu);
}

/* waits until *word != value, spinning SPIN_LOADS then sleeping; returns the new value */
static int32_t wait_change(sw_pool* p, _Atomic int32_t* word, int32_t value) {
  int32_t now;
  for (uint32_t spin = 0; (now = atomic_load(word)) == value; spin++)
    if (spin >= SPIN_LOADS) {
      sleep_on(p, word, value);
      spin = 0;
    }
  return now;
}

#else

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static void sleep_on(sw_pool* p, _Atomic int32_t* word, int32_t value) {
  atomic_fetch_add(&p->sleepers, 1);
  /* sleeps only if the word still holds value: a change before this is not missed */
  syscall(SYS_futex, (int32_t*)word, FUTEX_WAIT_PRIVATE, value, 0, 0, 0);
  atomic_fetch_sub(&p->sleepers, 1);
}

static void wake_all(sw_pool* p, _Atomic int32_t* word) {
  if (atomic_load(&p->sleepers) > 0) syscall(SYS_futex, (int32_t*)word, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* waits until *word != value, spinning SPIN_NS then sleeping; returns the new value */
static int32_t wait_change(sw_pool* p, _Atomic int32_t* word, int32_t value) {
  int32_t now;
  int64_t until = 0;
  for (uint32_t spin = 0; (now = atomic_load(word)) == value; spin++) {
    if (spin % 256 == 255) {
      int64_t t = now_ns();
      if (!until) until = t + SPIN_NS;
      else if (t > until) {
        sleep_on(p, word, value);
        until = 0;
        continue;
      }
    }
    relax();
  }
  return now;
}

#endif

/* Claims and runs parts of job `job` until none is left. A part is claimed by moving `claim`
 * from (job, k) to (job, k + 1): the job's fields were read while it was still (job, k), when
 * the caller could not yet have moved on to another job (it waits for every part of this one),
 * so they are this job's. A thread that wakes late finds the parts taken (the caller runs the
 * parts no thread has claimed) and waits for the next job. */
static void run_parts(sw_pool* p, uint32_t job) {
  for (;;) {
    uint64_t c = atomic_load(&p->claim);
    uint32_t k = (uint32_t)c;
    if ((uint32_t)(c >> 32) != job || k >= (uint32_t)p->threads) return;
    sw_kernel_fn fn = p->fn;
    sw_tensor* const* tensors = p->tensors;
    int64_t* scalars = p->scalars;
    const volatile int32_t* cancel = p->cancel;
    if (!atomic_compare_exchange_weak(&p->claim, &c, c + 1)) continue;
    int64_t* d = p->detail[k];
    d[0] = d[1] = d[2] = 0;
    p->status[k] = fn(tensors, scalars, d, cancel, (int32_t)k, p->threads);
    if (atomic_fetch_add(&p->done, 1) == p->threads - 1) wake_all(p, &p->done);
  }
}

/* a thread's loop: the jobs' parts until the pool quits */
void sw_pool_work(sw_pool* p, int32_t index) {
  if (!p || index < 1 || index >= p->threads) return;
  atomic_fetch_add(&p->running, 1);
  int32_t seen = atomic_load(&p->job);
  while (!atomic_load(&p->quit)) {
    run_parts(p, (uint32_t)seen);
    seen = wait_change(p, &p->job, seen);
  }
  atomic_fetch_sub(&p->running, 1); /* the last touch of the pool: it may be freed at once */
}

int32_t sw_pool_running(const sw_pool* p) { return p ? atomic_load(&p->running) : 0; }

#if !defined(__wasm__)
static void* work(void* arg) {
  sw_worker* w = (sw_worker*)arg;
  sw_pool_work(w->pool, w->index);
  return 0;
}
#endif

sw_pool* sw_pool_create(int32_t threads, int64_t budget, int64_t* held) {
  if (threads <= 1) return 0;
  if (threads > SW_MAX_THREADS) threads = SW_MAX_THREADS;
  sw_pool* p = (sw_pool*)sw_mem_alloc(sizeof(sw_pool));
  if (!p) return 0;
  atomic_init(&p->job, 0);
  atomic_init(&p->claim, 0xFFFFFFFFu); /* job 0 has no part left: no job has been posted */
  atomic_init(&p->done, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->running, 0);
  atomic_init(&p->broken, 0);
  atomic_init(&p->quit, 0);
  p->threads = 1;
#if !defined(__wasm__)
  (void)budget;
  p->owner = getpid();
#endif
  for (int32_t i = 1; i < threads; i++) {
#if defined(__wasm__)
    /* the host starts the thread; its stack is the pool's, counted against the memory limit */
    if (*held + WORKER_STACK > budget) break;
    p->stacks[i] = (unsigned char*)sw_mem_alloc(WORKER_STACK);
    if (!p->stacks[i]) break;
    *held += WORKER_STACK;
#else
    (void)held;
    p->workers[i].pool = p;
    p->workers[i].index = i;
    p->threads = i + 1; /* before the thread starts: it checks its index against it */
    if (pthread_create(&p->tid[i], 0, work, &p->workers[i]) != 0) {
      p->threads = i;
      break;
    }
#endif
    p->threads = i + 1;
  }
  if (p->threads == 1) {
    sw_mem_free(p);
    return 0;
  }
  return p;
}

int32_t sw_pool_threads(const sw_pool* p) { return p ? p->threads : 1; }

void* sw_pool_stack(sw_pool* p, int32_t index) {
#if defined(__wasm__)
  if (p && index >= 1 && index < p->threads) return p->stacks[index] + WORKER_STACK; /* stacks grow down */
#else
  (void)p;
  (void)index;
#endif
  return 0;
}

void sw_pool_fail(sw_pool* p) {
  if (!p) return;
  atomic_store(&p->broken, 1);
  atomic_store(&p->done, p->threads); /* the caller stops waiting for the failed thread's part */
  wake_all(p, &p->done);
}

int32_t sw_pool_broken(const sw_pool* p) { return p ? atomic_load(&p->broken) : 0; }

void sw_pool_destroy(sw_pool* p) {
  if (!p) return;
  atomic_store(&p->quit, 1);
  atomic_fetch_add(&p->job, 1);
  wake_all(p, &p->job);
#if defined(__wasm__)
  /* the host's threads leave the loop; none may still read the pool when it is freed. A
   * spin, not a sleep: a thread's last touch of the pool is leaving the count, with no
   * wake-up after it, and the threads are on their way out */
  while (atomic_load(&p->running) != 0 && !atomic_load(&p->broken)) {
  }
  if (atomic_load(&p->broken)) return; /* a thread that failed may still be in it: left, not freed */
  for (int32_t i = 1; i < p->threads; i++) sw_mem_free(p->stacks[i]);
#else
  if (p->owner != getpid()) return; /* a forked child: the threads are the parent's (left, not freed) */
  for (int32_t i = 1; i < p->threads; i++) pthread_join(p->tid[i], 0);
#endif
  sw_mem_free(p);
}

sw_status_t sw_pool_run(sw_pool* p, sw_kernel_fn fn, sw_tensor* const* tensors, int64_t* scalars, int64_t* detail,
                        const volatile int32_t* cancel) {
  if (!p || atomic_load(&p->broken)) return p ? SW_INTERNAL : fn(tensors, scalars, detail, cancel, 0, 1);
  uint32_t job = (uint32_t)atomic_load(&p->job) + 1;
  p->fn = fn;
  p->tensors = tensors;
  p->scalars = scalars;
  p->cancel = cancel;
  atomic_store(&p->done, 0);
  atomic_store(&p->claim, (uint64_t)job << 32); /* publishes the fields with the job */
  atomic_store(&p->job, (int32_t)job);
  wake_all(p, &p->job);
  run_parts(p, job);
  for (int32_t done; (done = atomic_load(&p->done)) < p->threads;) wait_change(p, &p->done, done);
  if (atomic_load(&p->broken)) return SW_INTERNAL;
  for (int32_t i = 0; i < p->threads; i++)
    if (p->status[i] != SW_OK) {
      detail[0] = p->detail[i][0];
      detail[1] = p->detail[i][1];
      detail[2] = p->detail[i][2];
      return p->status[i];
    }
  return SW_OK;
}

#endif
