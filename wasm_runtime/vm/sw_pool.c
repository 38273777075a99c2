/* The context's threads (sw_pool.h). A job is one call of a parted kernel: the caller
 * publishes it by bumping `job`, runs part 0 and waits for `left` to reach 0; thread p runs
 * part p. Waiting spins a while, then sleeps on the word (a futex natively). `sleepers`
 * counts the threads asleep, so a job or its end wakes them only when one is: the bump and
 * the count are sequentially consistent, and a sleeper rechecks the word as it goes to sleep,
 * so no wake-up is lost. */
#define _GNU_SOURCE /* syscall() under -std=c11 */
#include "sw_pool.h"

#include <stdatomic.h>

#include "sw_vm.h"

#if defined(__wasm__)

/* wasm32: a module without shared memory runs on its caller's thread only */
sw_pool* sw_pool_create(int32_t threads) {
  (void)threads;
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

#else

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* about 50-100 us of pause instructions before a waiting thread sleeps: the kernels of a
 * run follow each other closer than that, and a wake-up from sleep costs more */
#define SPINS 4000

typedef struct {
  sw_pool* pool;
  int32_t part;
} sw_worker;

struct sw_pool {
  _Atomic int32_t job;      /* bumped for each job; a thread waits for it to change */
  _Atomic int32_t left;     /* the started threads' parts of the current job not yet done */
  _Atomic int32_t sleepers; /* threads asleep on `job` or `left` */
  int32_t threads;          /* parts per job, the caller's included */
  int32_t quit;             /* set, then `job` bumped: the threads return */
  sw_kernel_fn fn;
  sw_tensor* const* tensors;
  int64_t* scalars;
  const volatile int32_t* cancel;
  sw_status_t status[SW_MAX_THREADS];
  int64_t detail[SW_MAX_THREADS][3];
  sw_worker workers[SW_MAX_THREADS];
  pthread_t tid[SW_MAX_THREADS];
};

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

/* waits until *word != value; returns the new value */
static int32_t wait_change(sw_pool* p, _Atomic int32_t* word, int32_t value) {
  int32_t now;
  for (int spin = 0; (now = atomic_load(word)) == value; spin++) {
    if (spin < SPINS) relax();
    else sleep_on(p, word, value);
  }
  return now;
}

static void* work(void* arg) {
  sw_worker* w = (sw_worker*)arg;
  sw_pool* p = w->pool;
  int32_t seen = 0;
  for (;;) {
    seen = wait_change(p, &p->job, seen);
    if (p->quit) return 0;
    int64_t* d = p->detail[w->part];
    d[0] = d[1] = d[2] = 0;
    p->status[w->part] = p->fn(p->tensors, p->scalars, d, p->cancel, w->part, p->threads);
    if (atomic_fetch_sub(&p->left, 1) == 1) wake_all(p, &p->left);
  }
}

sw_pool* sw_pool_create(int32_t threads) {
  if (threads <= 1) return 0;
  if (threads > SW_MAX_THREADS) threads = SW_MAX_THREADS;
  sw_pool* p = (sw_pool*)sw_mem_alloc(sizeof(sw_pool));
  if (!p) return 0;
  atomic_init(&p->job, 0);
  atomic_init(&p->left, 0);
  atomic_init(&p->sleepers, 0);
  p->quit = 0;
  p->threads = 1;
  for (int32_t i = 1; i < threads; i++) {
    p->workers[i].pool = p;
    p->workers[i].part = i;
    if (pthread_create(&p->tid[i], 0, work, &p->workers[i]) != 0) break;
    p->threads = i + 1;
  }
  if (p->threads == 1) {
    sw_mem_free(p);
    return 0;
  }
  return p;
}

int32_t sw_pool_threads(const sw_pool* p) { return p ? p->threads : 1; }

void sw_pool_destroy(sw_pool* p) {
  if (!p) return;
  p->quit = 1;
  atomic_fetch_add(&p->job, 1);
  wake_all(p, &p->job);
  for (int32_t i = 1; i < p->threads; i++) pthread_join(p->tid[i], 0);
  sw_mem_free(p);
}

sw_status_t sw_pool_run(sw_pool* p, sw_kernel_fn fn, sw_tensor* const* tensors, int64_t* scalars, int64_t* detail,
                        const volatile int32_t* cancel) {
  if (!p) return fn(tensors, scalars, detail, cancel, 0, 1);
  p->fn = fn;
  p->tensors = tensors;
  p->scalars = scalars;
  p->cancel = cancel;
  atomic_store(&p->left, p->threads - 1);
  atomic_fetch_add(&p->job, 1); /* publishes the job's fields to the threads */
  wake_all(p, &p->job);
  sw_status_t st = fn(tensors, scalars, detail, cancel, 0, p->threads);
  for (int32_t left; (left = atomic_load(&p->left)) != 0;) wait_change(p, &p->left, left);
  if (st != SW_OK) return st;
  for (int32_t i = 1; i < p->threads; i++)
    if (p->status[i] != SW_OK) {
      detail[0] = p->detail[i][0];
      detail[1] = p->detail[i][1];
      detail[2] = p->detail[i][2];
      return p->status[i];
    }
  return SW_OK;
}

#endif
