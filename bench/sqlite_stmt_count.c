/* sqlite_stmt_count: an LD_PRELOAD shim for benchmarks of the SQLite store. It counts the
 * statements a process executes, by SQL text, and records when the first claim ran.
 *
 * The SQLite store (src/store/sqlite/sqlite_store.cc, RunLocked) calls sqlite3_clear_bindings
 * exactly once per execution of a cached prepared statement, so wrapping it counts executions
 * without touching the store. BEGIN IMMEDIATE / COMMIT go through sqlite3_exec and are not
 * counted (one pair per write, in process, no round trip).
 *
 * At exit it writes JSON to $QB_STMT_COUNT_OUT:
 *   {"first_claim_unix_ns": N, "statements": [{"sql": "<first 80 chars>", "executions": N}, ...]}
 * The first claim is the first execution of SQL containing "qb_fast" (the claim's CTE).
 *
 *   cc -O2 -shared -fPIC -o libqbcount.so bench/sqlite_stmt_count.c -ldl -lpthread
 *   QB_STMT_COUNT_OUT=counts.json LD_PRELOAD=./libqbcount.so queuebox run --until-idle
 * bench/sqlite_bench.sh builds and uses it. Not part of the product. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SQL 256

static struct {
  const char* sql; /* owned copy */
  long executions;
} counts[MAX_SQL];
static int n_counts;
static long long first_claim_ns;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void note(const char* sql) {
  if (sql == NULL) return;
  pthread_mutex_lock(&mu);
  if (first_claim_ns == 0 && strstr(sql, "qb_fast") != NULL) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    first_claim_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }
  int i = 0;
  while (i < n_counts && strcmp(counts[i].sql, sql) != 0) ++i;
  if (i == n_counts && n_counts < MAX_SQL) counts[n_counts++].sql = strdup(sql);
  if (i < n_counts) ++counts[i].executions;
  pthread_mutex_unlock(&mu);
}

int sqlite3_clear_bindings(sqlite3_stmt* stmt) {
  static int (*real)(sqlite3_stmt*) = NULL;
  if (real == NULL) real = (int (*)(sqlite3_stmt*))dlsym(RTLD_NEXT, "sqlite3_clear_bindings");
  note(sqlite3_sql(stmt));
  return real(stmt);
}

static void json_string(FILE* f, const char* s, size_t max) {
  fputc('"', f);
  for (size_t i = 0; s[i] != '\0' && i < max; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      fputc('\\', f);
      fputc(c, f);
    } else if (c < 0x20) {
      fputc(' ', f);
    } else {
      fputc(c, f);
    }
  }
  fputc('"', f);
}

__attribute__((destructor)) static void dump(void) {
  const char* path = getenv("QB_STMT_COUNT_OUT");
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  pthread_mutex_lock(&mu);
  fprintf(f, "{\"first_claim_unix_ns\": %lld, \"statements\": [", first_claim_ns);
  for (int i = 0; i < n_counts; ++i) {
    fprintf(f, "%s{\"sql\": ", i > 0 ? ", " : "");
    json_string(f, counts[i].sql, 80);
    fprintf(f, ", \"claim\": %s, \"executions\": %ld}",
            strstr(counts[i].sql, "qb_fast") != NULL ? "true" : "false", counts[i].executions);
  }
  fprintf(f, "]}\n");
  pthread_mutex_unlock(&mu);
  fclose(f);
}
