/* tsan_c11_threads.c: glibc's C11 threads (<threads.h>) on top of pthreads, linked into every
 * executable of a ThreadSanitizer build only (cmake/sanitizers.cmake).
 *
 * Why: librdkafka starts its threads and takes its locks through thrd_create, mtx_lock,
 * cnd_wait..., which g++ 12's libtsan does not intercept, so TSan saw threads appear without a
 * creation and locks without an acquire: false races, and SEGVs inside TSan's runtime under the
 * mock cluster. An executable's definitions come before libc's when the dynamic linker binds
 * librdkafka's references (unversioned definitions satisfy its GLIBC_2.34 ones), so these
 * reach pthreads, which TSan intercepts. Only what librdkafka imports is here
 * (nm -D librdkafka.so.1: no tss_*). */
#define _POSIX_C_SOURCE 200809L /* C11 alone hides pthread_mutexattr_settype, nanosleep */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

/* glibc's C11 types are its pthread types under other names. */
_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t is a pthread_t");
_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is a pthread_cond_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag is a pthread_once_t");

#define QB_MUTEX(m) ((pthread_mutex_t *)(void *)(m))
#define QB_COND(c) ((pthread_cond_t *)(void *)(c))

static int qb_thrd_result(int err) {
  switch (err) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case ETIMEDOUT:
      return thrd_timedout;
    case EBUSY:
      return thrd_busy;
    default:
      return thrd_error;
  }
}

/* A C11 thread returns int, a pthread void *: the start routine is wrapped. */
struct qb_thrd_start {
  thrd_start_t func;
  void *arg;
};

static void *qb_thrd_trampoline(void *p) {
  struct qb_thrd_start start = *(struct qb_thrd_start *)p;
  free(p);
  return (void *)(intptr_t)start.func(start.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg) {
  struct qb_thrd_start *start = malloc(sizeof *start);
  if (start == NULL) return thrd_nomem;
  start->func = func;
  start->arg = arg;
  pthread_t t;
  int err = pthread_create(&t, NULL, qb_thrd_trampoline, start);
  if (err != 0) {
    free(start);
    return qb_thrd_result(err);
  }
  *thr = (thrd_t)t;
  return thrd_success;
}

int thrd_join(thrd_t thr, int *res) {
  void *ret = NULL;
  int err = pthread_join((pthread_t)thr, &ret);
  if (err == 0 && res != NULL) *res = (int)(intptr_t)ret;
  return qb_thrd_result(err);
}

int thrd_detach(thrd_t thr) { return qb_thrd_result(pthread_detach((pthread_t)thr)); }
_Noreturn void thrd_exit(int res) { pthread_exit((void *)(intptr_t)res); }
thrd_t thrd_current(void) { return (thrd_t)pthread_self(); }
int thrd_equal(thrd_t a, thrd_t b) { return pthread_equal((pthread_t)a, (pthread_t)b); }
void thrd_yield(void) { sched_yield(); }

int thrd_sleep(const struct timespec *duration, struct timespec *remaining) {
  if (nanosleep(duration, remaining) == 0) return 0;
  return errno == EINTR ? -1 : -2;
}

int mtx_init(mtx_t *m, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if ((type & mtx_recursive) != 0) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  int err = pthread_mutex_init(QB_MUTEX(m), &attr);
  pthread_mutexattr_destroy(&attr);
  return qb_thrd_result(err);
}

int mtx_lock(mtx_t *m) { return qb_thrd_result(pthread_mutex_lock(QB_MUTEX(m))); }
int mtx_trylock(mtx_t *m) { return qb_thrd_result(pthread_mutex_trylock(QB_MUTEX(m))); }
int mtx_unlock(mtx_t *m) { return qb_thrd_result(pthread_mutex_unlock(QB_MUTEX(m))); }
void mtx_destroy(mtx_t *m) { pthread_mutex_destroy(QB_MUTEX(m)); }

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict deadline) {
  return qb_thrd_result(pthread_mutex_timedlock(QB_MUTEX(m), deadline));
}

int cnd_init(cnd_t *c) { return qb_thrd_result(pthread_cond_init(QB_COND(c), NULL)); }
int cnd_signal(cnd_t *c) { return qb_thrd_result(pthread_cond_signal(QB_COND(c))); }
int cnd_broadcast(cnd_t *c) { return qb_thrd_result(pthread_cond_broadcast(QB_COND(c))); }
int cnd_wait(cnd_t *c, mtx_t *m) {
  return qb_thrd_result(pthread_cond_wait(QB_COND(c), QB_MUTEX(m)));
}
void cnd_destroy(cnd_t *c) { pthread_cond_destroy(QB_COND(c)); }

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict deadline) {
  return qb_thrd_result(pthread_cond_timedwait(QB_COND(c), QB_MUTEX(m), deadline));
}

void call_once(once_flag *flag, void (*func)(void)) {
  pthread_once((pthread_once_t *)(void *)flag, func);
}
