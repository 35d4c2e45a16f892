// http_ceiling.c: what one HTTP/1.1 client thread costs per message on this machine, without the
// relay and without PostgreSQL: the floor under the relay's CPU per message (issue 38 item 2).
// C kept-alive connections to the sink (nginx answering 204), each carrying D requests at a time:
// D = 1 is what the relay's `http://` transport does (one request, its answer, then the next);
// D > 1 writes D requests with one sendmsg and reads their answers in order (pipelining, which
// the relay does not do). Each request is the relay's shape: the request line, Host, User-Agent,
// Accept, Content-Type, X-Message-Id, X-Topic, X-Attempt, X-Message-Key, Content-Length and a
// body of SIZE bytes. One thread, one poll over the connections, non-blocking sockets: the
// relay's publishing loop without the relay.
//   --peek        an empty recv(MSG_PEEK) on a kept connection before each reuse, as
//                 Http1Client::TakeIdle does
//   --rate R      paced as the relay is fed: bursts of --burst B requests (a claimed batch,
//                 default 100), the k-th allowed k × B / R seconds after the start, sleeping in
//                 between; without it, as fast as the sink answers
// The CPU a message depends on the rate (fewer messages share each wake-up of the client and of
// nginx at a lower rate), so bench/http_ceiling.sh paces it at the relay's own rate.
// Prints one JSON line: messages, seconds, rate, and this process's user and system CPU per
// message (µs, getrusage). Exit 1 when the sink closes a connection or a kept connection is
// readable before reuse.
//   gcc -O2 -Wall -o /tmp/http_ceiling bench/http_ceiling.c
//   http_ceiling --port P [-n 200000] [-c 8] [-d 1] [--size 1024] [--peek]
//                [--rate R [--burst B]]
// The answers are counted by their header block's end: nginx's 204 carries no body.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct conn {
  int fd;
  int outstanding;  // requests written whose answers are not read whole
  int match;        // how much of "\r\n\r\n" the last bytes read matched
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(const struct timeval* tv) {
  return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("connect");
    exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Non-blocking from here, as the relay's sockets.
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) exit(1);
  return fd;
}

// Counts the answers that end in buf (each ends with an empty line), carrying a partial match.
static int count_answers(struct conn* c, const char* buf, ssize_t n) {
  static const char end[] = "\r\n\r\n";
  int done = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == end[c->match]) {
      if (++c->match == 4) {
        ++done;
        c->match = 0;
      }
    } else {
      c->match = buf[i] == '\r' ? 1 : 0;
    }
  }
  return done;
}

int main(int argc, char** argv) {
  long n = 200000, size = 1024;
  double rate = 0;   // messages/s; 0: as fast as the sink answers
  long burst = 100;  // paced: requests allowed at a time
  int conns = 8, depth = 1, port = 0, peek = 0;
  static struct option opts[] = {
      {"port", required_argument, 0, 'p'},  {"size", required_argument, 0, 's'},
      {"peek", no_argument, 0, 'k'},        {"rate", required_argument, 0, 'r'},
      {"burst", required_argument, 0, 'b'}, {0, 0, 0, 0}};
  for (int o; (o = getopt_long(argc, argv, "n:c:d:", opts, NULL)) != -1;) {
    switch (o) {
      case 'n':
        n = atol(optarg);
        break;
      case 'c':
        conns = atoi(optarg);
        break;
      case 'd':
        depth = atoi(optarg);
        break;
      case 'p':
        port = atoi(optarg);
        break;
      case 's':
        size = atol(optarg);
        break;
      case 'k':
        peek = 1;
        break;
      case 'r':
        rate = atof(optarg);
        break;
      case 'b':
        burst = atol(optarg);
        break;
      default:
        return 2;
    }
  }
  if (port <= 0 || conns < 1 || depth < 1 || n < 1 || burst < 1) {
    fprintf(stderr,
            "usage: http_ceiling --port P [-n N] [-c C] [-d D] [--size B] "
            "[--peek] [--rate R [--burst B]]\n");
    return 2;
  }
  char* body = malloc((size_t)size);
  memset(body, 'x', (size_t)size);
  if (size >= 2) {
    body[0] = '"';
    body[size - 1] = '"';
  }
  char head[1024];
  int head_len = snprintf(head, sizeof head,
                          "POST /hook HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: queuebox\r\n"
                          "Accept: */*\r\nContent-Type: application/json\r\n"
                          "X-Message-Id: 0193a5c6-7e1f-7b2a-9c4d-5e6f708192a3\r\n"
                          "X-Topic: orders.created\r\nX-Attempt: 1\r\nX-Message-Key: key-0042\r\n"
                          "Content-Length: %ld\r\n\r\n",
                          port, size);
  // One iovec pair per pipelined request: a write of D requests is one sendmsg.
  struct iovec* iov = calloc((size_t)depth * 2, sizeof *iov);
  for (int i = 0; i < depth; ++i) {
    iov[2 * i].iov_base = head;
    iov[2 * i].iov_len = (size_t)head_len;
    iov[2 * i + 1].iov_base = body;
    iov[2 * i + 1].iov_len = (size_t)size;
  }
  struct conn* cs = calloc((size_t)conns, sizeof *cs);
  struct pollfd* pfd = calloc((size_t)conns, sizeof *pfd);
  for (int i = 0; i < conns; ++i) cs[i].fd = connect_to(port);

  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  const double t0 = now_s();
  long sent = 0, answered = 0;
  char buf[65536];
  while (answered < n) {
    // Paced: bursts of `burst` requests (a claimed batch), the k-th allowed from k × burst / rate
    // seconds after the start.
    long allowed = rate > 0 ? burst * ((long)(rate * (now_s() - t0)) / burst + 1) : n;
    for (int i = 0; i < conns; ++i) {
      struct conn* c = &cs[i];
      const long left = (n < allowed ? n : allowed) - sent;
      if (c->outstanding > 0 || left <= 0) continue;
      if (peek) {
        char b;
        ssize_t p = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (!(p < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
          fprintf(stderr, "a kept connection was readable before reuse\n");
          return 1;
        }
      }
      const int d = (int)(left < depth ? left : depth);  // never past the burst
      struct msghdr m;
      memset(&m, 0, sizeof m);
      m.msg_iov = iov;
      m.msg_iovlen = (size_t)d * 2;
      ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
      if (w != (ssize_t)d * (head_len + size)) {
        fprintf(stderr, "short write (%zd): raise the socket buffer or lower -d\n", w);
        return 1;
      }
      c->outstanding = d;
      sent += d;
    }
    int live = 0;
    for (int i = 0; i < conns; ++i) {
      if (cs[i].outstanding == 0) continue;
      pfd[live].fd = cs[i].fd;
      pfd[live].events = POLLIN;
      pfd[live].revents = 0;
      ++live;
    }
    if (live == 0) {  // paced: sleeps until the next burst's time (one wake-up a burst)
      const double at = t0 + (double)allowed / rate;
      struct timespec ts = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
      continue;
    }
    if (poll(pfd, (nfds_t)live, 30000) <= 0) {
      fprintf(stderr, "no answer within 30 s\n");
      return 1;
    }
    for (int j = 0; j < live; ++j) {
      if (pfd[j].revents == 0) continue;
      struct conn* c = NULL;
      for (int i = 0; i < conns; ++i)
        if (cs[i].fd == pfd[j].fd) c = &cs[i];
      for (;;) {
        ssize_t r = recv(c->fd, buf, sizeof buf, 0);
        if (r > 0) {
          int got = count_answers(c, buf, r);
          c->outstanding -= got;
          answered += got;
          if (c->outstanding == 0) break;  // the relay stops reading at its answer's end
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        fprintf(stderr, "the sink closed a connection\n");
        return 1;
      }
    }
  }
  const double secs = now_s() - t0;
  getrusage(RUSAGE_SELF, &r1);
  const double user = cpu_s(&r1.ru_utime) - cpu_s(&r0.ru_utime);
  const double sys = cpu_s(&r1.ru_stime) - cpu_s(&r0.ru_stime);
  printf(
      "{\"messages\": %ld, \"connections\": %d, \"depth\": %d, \"peek\": %s, \"size\": %ld, "
      "\"paced\": %.0f, \"seconds\": %.3f, \"rate\": %.0f, \"user_us\": %.2f, \"system_us\": %.2f, "
      "\"cpu_us\": %.2f}\n",
      answered, conns, depth, peek ? "\"recv\"" : "\"none\"", size, rate, secs,
      (double)answered / secs, user * 1e6 / (double)answered, sys * 1e6 / (double)answered,
      (user + sys) * 1e6 / (double)answered);
  return 0;
}
