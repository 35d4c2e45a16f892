// rabbitmq_ceiling.c: what RabbitMQ itself allows on this machine, without the relay and without
// PostgreSQL: one bare publisher on one channel in confirm mode publishes N persistent
// (delivery_mode 2) messages of SIZE bytes through the default exchange into a fresh durable
// queue (routing key = queue; mandatory, as the relay publishes), keeping at most W of them
// unconfirmed (pipelined: it publishes while the acks arrive; basic.ack and basic.nack with
// `multiple` are read; a nack or a return counts as an error). The queue (random name) is
// declared before and deleted after; nothing consumes it. Prints one JSON line: the rate, and the
// CPU seconds of RabbitMQ's beam.smp (utime + stime from /proc/<pid>/stat, read right before the
// first publish and right after the last confirm) per message. Explains the RabbitMQ sink's rate
// at QueueBox's defaults (bench/README.md, "Brokers at the defaults: one call per task");
// bench/rabbitmq_ceiling.sh runs it against bench_floor.
//   cmake --build build --target rabbitmq_ceiling   (or: gcc -O2 bench/rabbitmq_ceiling.c
//                                                     -lrabbitmq -o /tmp/rabbitmq_ceiling)
//   rabbitmq_ceiling [--url amqp://guest:guest@127.0.0.1:56729/] [--type classic|cqv2|quorum]
//                    [-n 40000] [-w 100] [--size 1024] [--beam-pid PID]
// --url defaults to $QB_TEST_AMQP_URL. classic: no queue arguments (3.10's default, version 1);
// cqv2: x-queue-version = 2; quorum: x-queue-type = quorum. Without --beam-pid the broker is the
// one beam.smp process, or, when there are several, the one whose command line or environment
// names the URL's port. rabbitmq-c 0.12 moved its headers to rabbitmq-c/ (and warns on the old
// names); Debian 12 has 0.11, which has only the old ones.
#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_tcp_socket.h>
#endif
#else
#include <amqp.h>
#include <amqp_tcp_socket.h>
#endif
#include <ctype.h>
#include <dirent.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define CHANNEL 1
#define CONFIRM_TIMEOUT_S 60

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double self_cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// utime + stime of `pid` in clock ticks, or -1.
static long long proc_ticks(long pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');  // the command name may hold spaces
  if (p == NULL) return -1;
  unsigned long long utime, stime;
  // After ")": state (3), ppid .. cmajflt (4-13), utime (14), stime (15).
  if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) !=
      2) {
    return -1;
  }
  return (long long)(utime + stime);
}

// Whether the NUL-separated file /proc/<pid>/<name> holds `needle`.
static int proc_file_has(long pid, const char *name, const char *needle) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/%s", pid, name);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  for (size_t i = 0; i < n; i++) {
    if (buf[i] == '\0') buf[i] = ' ';
  }
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

// The beam.smp process of the broker on `port`: the only one, or the one naming the port.
static long find_beam(int port) {
  DIR *d = opendir("/proc");
  if (d == NULL) return -1;
  long found[64];
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && count < 64) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    long pid = strtol(e->d_name, NULL, 10);
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    if (fgets(comm, sizeof comm, f) == NULL) comm[0] = '\0';
    fclose(f);
    if (strcmp(comm, "beam.smp\n") == 0) found[count++] = pid;
  }
  closedir(d);
  if (count == 1) return found[0];
  char env_port[64], arg_port[32];
  snprintf(env_port, sizeof env_port, "RABBITMQ_NODE_PORT=%d", port);
  snprintf(arg_port, sizeof arg_port, "%d", port);
  for (int i = 0; i < count; i++) {
    if (proc_file_has(found[i], "environ", env_port) ||
        proc_file_has(found[i], "cmdline", arg_port)) {
      return found[i];
    }
  }
  return -1;
}

static void die_reply(amqp_rpc_reply_t r, const char *what) {
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return;
  char why[512];
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
    snprintf(why, sizeof why, "%s", amqp_error_string2(r.library_error));
  } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
             r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    amqp_channel_close_t *m = (amqp_channel_close_t *)r.reply.decoded;
    snprintf(why, sizeof why, "channel closed: %u %.*s", m->reply_code, (int)m->reply_text.len,
             (const char *)m->reply_text.bytes);
  } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
             r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    amqp_connection_close_t *m = (amqp_connection_close_t *)r.reply.decoded;
    snprintf(why, sizeof why, "connection closed: %u %.*s", m->reply_code, (int)m->reply_text.len,
             (const char *)m->reply_text.bytes);
  } else {
    snprintf(why, sizeof why, "reply type %d", (int)r.reply_type);
  }
  printf("{\"error\": \"%s: %s\"}\n", what, why);
  exit(1);
}

static void die(const char *what, int status) {
  printf("{\"error\": \"%s: %s\"}\n", what, amqp_error_string2(status));
  exit(1);
}

// Confirms: settled[tag] for tags 1..n; `low` is the lowest tag not settled yet.
struct confirms {
  unsigned char *settled;
  uint64_t low, count, acked, nacked;
};

static void settle(struct confirms *c, uint64_t tag, int multiple, int ack, uint64_t n) {
  if (tag > n) tag = n;  // never: the broker confirms only tags it was given
  uint64_t from = multiple ? c->low : tag;
  for (uint64_t t = from; t <= tag; t++) {
    if (c->settled[t]) continue;
    c->settled[t] = 1;
    c->count++;
    if (ack) {
      c->acked++;
    } else {
      c->nacked++;
    }
  }
  while (c->settled[c->low]) c->low++;
}

// What the command line asked for.
struct args {
  const char *url, *type;
  long n, window, size, beam;
};

// 0 with *a filled, or 2 (usage) after a message on stderr.
static int parse_args(int argc, char **argv, struct args *a) {
  const char *url = getenv("QB_TEST_AMQP_URL");
  *a = (struct args){
      url != NULL ? url : "amqp://guest:guest@127.0.0.1:56729/", "classic", 40000, 100, 1024, 0};
  static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                       {"type", required_argument, NULL, 't'},
                                       {"n", required_argument, NULL, 'n'},
                                       {"window", required_argument, NULL, 'w'},
                                       {"size", required_argument, NULL, 's'},
                                       {"beam-pid", required_argument, NULL, 'p'},
                                       {NULL, 0, NULL, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "u:t:n:w:s:p:", opts, NULL)) != -1) {
    switch (opt) {
      case 'u':
        a->url = optarg;
        break;
      case 't':
        a->type = optarg;
        break;
      case 'n':
        a->n = strtol(optarg, NULL, 10);
        break;
      case 'w':
        a->window = strtol(optarg, NULL, 10);
        break;
      case 's':
        a->size = strtol(optarg, NULL, 10);
        break;
      case 'p':
        a->beam = strtol(optarg, NULL, 10);
        break;
      default:
        fprintf(stderr,
                "usage: %s [--url U] [--type classic|cqv2|quorum] [-n N] [-w W] [--size B] "
                "[--beam-pid P]\n",
                argv[0]);
        return 2;
    }
  }
  if (a->n < 1 || a->window < 1 || a->size < 1 ||
      (strcmp(a->type, "classic") != 0 && strcmp(a->type, "cqv2") != 0 &&
       strcmp(a->type, "quorum") != 0)) {
    fprintf(stderr, "need n, window, size >= 1 and type classic, cqv2 or quorum\n");
    return 2;
  }
  return 0;
}

// A logged-in connection with CHANNEL open; exits on failure.
static amqp_connection_state_t open_channel(const struct amqp_connection_info *info) {
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t *sock = amqp_tcp_socket_new(conn);
  if (sock == NULL) die("socket", AMQP_STATUS_NO_MEMORY);
  struct timeval connect_tv = {10, 0};
  int rc = amqp_socket_open_noblock(sock, info->host, info->port, &connect_tv);
  if (rc != AMQP_STATUS_OK) die("connect", rc);
  die_reply(amqp_login(conn, info->vhost[0] ? info->vhost : "/", 0, 131072, 0,
                       AMQP_SASL_METHOD_PLAIN, info->user, info->password),
            "login");
  amqp_channel_open(conn, CHANNEL);
  die_reply(amqp_get_rpc_reply(conn), "channel.open");
  return conn;
}

// Declares a fresh durable queue of `type` (its name into queue[96]) and puts the channel in
// confirm mode; exits on failure.
static void declare_queue(amqp_connection_state_t conn, const char *type, char queue[96]) {
  unsigned rnd = 0;
  FILE *ur = fopen("/dev/urandom", "r");
  if (ur == NULL || fread(&rnd, sizeof rnd, 1, ur) != 1)
    rnd = (unsigned)getpid() ^ (unsigned)time(NULL);
  if (ur != NULL) fclose(ur);
  snprintf(queue, 96, "qb.ceiling.%s.%08x", type, rnd);
  amqp_table_entry_t arg;
  amqp_table_t args = amqp_empty_table;
  if (strcmp(type, "cqv2") == 0) {
    arg.key = amqp_cstring_bytes("x-queue-version");
    arg.value.kind = AMQP_FIELD_KIND_I64;
    arg.value.value.i64 = 2;
    args.num_entries = 1;
    args.entries = &arg;
  } else if (strcmp(type, "quorum") == 0) {
    arg.key = amqp_cstring_bytes("x-queue-type");
    arg.value.kind = AMQP_FIELD_KIND_UTF8;
    arg.value.value.bytes = amqp_cstring_bytes("quorum");
    args.num_entries = 1;
    args.entries = &arg;
  }
  amqp_queue_declare(conn, CHANNEL, amqp_cstring_bytes(queue), /*passive=*/0, /*durable=*/1,
                     /*exclusive=*/0, /*auto_delete=*/0, args);
  die_reply(amqp_get_rpc_reply(conn), "queue.declare");
  amqp_confirm_select(conn, CHANNEL);
  die_reply(amqp_get_rpc_reply(conn), "confirm.select");
}

// One frame awaited (at most CONFIRM_TIMEOUT_S), then whatever else is already there: acks and
// nacks settle into *c, returns are counted; exits on a channel or connection close.
static void read_confirms(amqp_connection_state_t conn, struct confirms *c, uint64_t total,
                          uint64_t *returned) {
  for (int block = 1;; block = 0) {
    struct timeval tv = {block ? CONFIRM_TIMEOUT_S : 0, 0};
    amqp_frame_t frame;
    int rc = amqp_simple_wait_frame_noblock(conn, &frame, &tv);
    if (rc == AMQP_STATUS_TIMEOUT && !block) return;
    if (rc != AMQP_STATUS_OK) die("awaiting confirms", rc);
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *m = (amqp_basic_ack_t *)frame.payload.method.decoded;
        settle(c, m->delivery_tag, m->multiple, 1, total);
        break;
      }
      case AMQP_BASIC_NACK_METHOD: {
        amqp_basic_nack_t *m = (amqp_basic_nack_t *)frame.payload.method.decoded;
        settle(c, m->delivery_tag, m->multiple, 0, total);
        break;
      }
      case AMQP_BASIC_RETURN_METHOD: {
        amqp_message_t msg;
        (*returned)++;
        die_reply(amqp_read_message(conn, frame.channel, &msg, 0), "returned message");
        amqp_destroy_message(&msg);
        break;
      }
      case AMQP_CHANNEL_CLOSE_METHOD:
      case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_rpc_reply_t r;
        memset(&r, 0, sizeof r);
        r.reply_type = AMQP_RESPONSE_SERVER_EXCEPTION;
        r.reply = frame.payload.method;
        die_reply(r, "publishing");
        break;
      }
      default:
        break;
    }
  }
}

// What a run counted beside the confirms.
struct publish_counts {
  uint64_t returned, max_unconfirmed;
};

// Publishes a->n persistent messages of a->size bytes into `queue`, at most a->window
// unconfirmed, until every one is settled in *c.
static struct publish_counts publish_all(amqp_connection_state_t conn, const struct args *a,
                                         const char *queue, struct confirms *c) {
  char *payload = malloc((size_t)a->size);
  memset(payload, 'x', (size_t)a->size);
  payload[0] = '{';
  payload[a->size - 1] = '}';
  amqp_bytes_t body = {(size_t)a->size, payload};
  amqp_basic_properties_t props;
  memset(&props, 0, sizeof props);
  props._flags =
      AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
  props.content_type = amqp_cstring_bytes("application/json");
  props.delivery_mode = 2;
  char id[32];
  struct publish_counts out = {0, 0};
  uint64_t sent = 0;
  const uint64_t total = (uint64_t)a->n, w = (uint64_t)a->window;
  while (c->count < total) {
    while (sent < total && sent - c->count < w) {
      snprintf(id, sizeof id, "m-%llu", (unsigned long long)(sent + 1));
      props.message_id = amqp_cstring_bytes(id);
      int rc = amqp_basic_publish(conn, CHANNEL, amqp_empty_bytes, amqp_cstring_bytes(queue),
                                  /*mandatory=*/1, /*immediate=*/0, &props, body);
      if (rc != AMQP_STATUS_OK) die("basic.publish", rc);
      sent++;
    }
    if (sent - c->count > out.max_unconfirmed) out.max_unconfirmed = sent - c->count;
    read_confirms(conn, c, total, &out.returned);  // then the window is refilled
    amqp_maybe_release_buffers(conn);
  }
  free(payload);
  return out;
}

int main(int argc, char **argv) {
  struct args a;
  if (parse_args(argc, argv, &a) != 0) return 2;
  char *url_copy = strdup(a.url);
  struct amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(url_copy, &info) != AMQP_STATUS_OK) {
    printf("{\"error\": \"not an AMQP URL\"}\n");
    return 1;
  }
  if (a.beam == 0) a.beam = find_beam(info.port);
  amqp_connection_state_t conn = open_channel(&info);
  char queue[96];
  declare_queue(conn, a.type, queue);

  struct confirms c = {calloc((size_t)a.n + 2, 1), 1, 0, 0, 0};
  long long beam0 = a.beam > 0 ? proc_ticks(a.beam) : -1;
  double cpu0 = self_cpu_s(), t0 = now_s();
  struct publish_counts counts = publish_all(conn, &a, queue, &c);
  double seconds = now_s() - t0, client_cpu = self_cpu_s() - cpu0;
  long long beam1 = a.beam > 0 ? proc_ticks(a.beam) : -1;

  amqp_queue_delete(conn, CHANNEL, amqp_cstring_bytes(queue), 0, 0);
  die_reply(amqp_get_rpc_reply(conn), "queue.delete");
  amqp_channel_close(conn, CHANNEL, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);

  printf(
      "{\"queue_type\": \"%s\", \"n\": %ld, \"window\": %ld, \"size\": %ld, \"seconds\": %.3f, "
      "\"msg_per_s\": %.1f, \"acked\": %llu, \"nacked\": %llu, \"returned\": %llu, "
      "\"max_unconfirmed\": %llu, \"client_cpu_s\": %.3f, \"client_cpu_us_per_msg\": %.1f, ",
      a.type, a.n, a.window, a.size, seconds, (double)a.n / seconds, (unsigned long long)c.acked,
      (unsigned long long)c.nacked, (unsigned long long)counts.returned,
      (unsigned long long)counts.max_unconfirmed, client_cpu, client_cpu * 1e6 / (double)a.n);
  if (beam0 >= 0 && beam1 >= 0) {
    double broker = (double)(beam1 - beam0) / (double)sysconf(_SC_CLK_TCK);
    printf("\"beam_pid\": %ld, \"broker_cpu_s\": %.2f, \"broker_cpu_us_per_msg\": %.1f}\n", a.beam,
           broker, broker * 1e6 / (double)a.n);
  } else {
    printf("\"beam_pid\": null, \"broker_cpu_s\": null, \"broker_cpu_us_per_msg\": null}\n");
  }
  free(c.settled);
  free(url_copy);
  return c.nacked > 0 || counts.returned > 0 ? 3 : 0;
}
