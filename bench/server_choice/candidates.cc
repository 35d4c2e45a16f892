// candidates.cc: the data-port HTTP server candidates of issue 14, each serving the same two
// routes, for bench/server_choice.sh:
//   GET /             200 "QueueBox is running!"
//   POST /inbox/<p>   body read under a cap (declared Content-Length over it: 413 before
//                     reading; chunked: counted while reading), then 202 {"messageId":"..."}
// Usage: server_candidates <httplib|mhd|evhttp> <port> [threads] [cap_bytes]
// Prints "listening <port>" once it serves; runs until SIGTERM/SIGINT.
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <httplib.h>
#include <microhttpd.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
size_t g_cap = 1 << 20;
constexpr char kAccepted[] = R"({"messageId":"0b1f5d1e-2f3a-4c4d-9e8f-001122334455"})";
constexpr char kRunning[] = "QueueBox is running!";

std::string TooLargeBody() {
  return R"({"error":"Request body exceeds )" + std::to_string(g_cap) + R"( bytes"})";
}

void WaitForSignal() {
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGINT, [](int) { g_stop = true; });
  while (!g_stop) usleep(100000);
}

// cpp-httplib 0.11 (Debian), tuned: a pool of `threads` workers, keep-alive for up to 10,000
// requests per connection, 5 s read timeout.
int RunHttplib(int port, int threads) {
  httplib::Server s;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_keep_alive_max_count(10000);
  s.set_keep_alive_timeout(5);
  s.set_read_timeout(5, 0);
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kRunning, "text/plain");
  });
  s.Post(R"(/inbox/.*)", [](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
    if (req.has_header("Content-Length") &&
        std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > g_cap) {
      res.status = 413;
      res.set_content(TooLargeBody(), "application/json");
      return;
    }
    std::string body;
    bool big = false;
    reader([&](const char* d, size_t n) {
      if (body.size() + n > g_cap) {
        big = true;
        return false;
      }
      body.append(d, n);
      return true;
    });
    res.status = big ? 413 : 202;
    res.set_content(big ? TooLargeBody() : std::string(kAccepted), "application/json");
  });
  if (!s.bind_to_port("127.0.0.1", port)) return 1;
  std::thread t([&] { s.listen_after_bind(); });
  std::printf("listening %d\n", port);
  std::fflush(stdout);
  WaitForSignal();
  s.stop();
  t.join();
  return 0;
}

// libmicrohttpd 0.9.75: epoll in `threads` internal threads (each its own epoll set), 10 s idle
// timeout, incremental body callbacks.
struct MhdRequest {
  size_t n = 0;
  bool big = false;
  std::string body;
};

MHD_Result Queue(MHD_Connection* c, unsigned code, const std::string& body, const char* type) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", type);
  MHD_Result q = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return q;
}

MHD_Result MhdHandler(void*, MHD_Connection* c, const char* url, const char* method, const char*,
                      const char* upload, size_t* upload_size, void** cls) {
  // A response queued before the request is fully received closes the connection: answer on
  // the last call, except for a refusal of the body.
  auto* rq = static_cast<MhdRequest*>(*cls);
  if (rq == nullptr) {
    const char* cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl != nullptr && std::strtoull(cl, nullptr, 10) > g_cap) {
      return Queue(c, 413, TooLargeBody(), "application/json");
    }
    *cls = new MhdRequest;
    return MHD_YES;
  }
  if (*upload_size != 0) {
    rq->n += *upload_size;
    if (rq->n > g_cap) {
      rq->big = true;  // keep counting, drop the bytes; answer when the body ends
      rq->body.clear();
      rq->body.shrink_to_fit();
    } else {
      rq->body.append(upload, *upload_size);
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (std::strcmp(method, "GET") == 0 && std::strcmp(url, "/") == 0) {
    return Queue(c, 200, kRunning, "text/plain");
  }
  if (std::strcmp(method, "POST") != 0 || std::strncmp(url, "/inbox/", 7) != 0) {
    return Queue(c, 404, "{}", "application/json");
  }
  return rq->big ? Queue(c, 413, TooLargeBody(), "application/json")
                 : Queue(c, 202, kAccepted, "application/json");
}

void MhdCompleted(void*, MHD_Connection*, void** cls, MHD_RequestTerminationCode) {
  delete static_cast<MhdRequest*>(*cls);
  *cls = nullptr;
}

int RunMhd(int port, int threads) {
  MHD_Daemon* d = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, static_cast<uint16_t>(port), nullptr,
      nullptr, &MhdHandler, nullptr, MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(threads),
      MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT, 16000u,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_NOTIFY_COMPLETED, &MhdCompleted, nullptr,
      MHD_OPTION_END);
  if (d == nullptr) return 1;
  std::printf("listening %d\n", port);
  std::fflush(stdout);
  WaitForSignal();
  MHD_stop_daemon(d);
  return 0;
}

// libevent 2.1 evhttp: one event base per thread, all accepting on one listening socket; evhttp
// reads the whole body before the callback and enforces the cap itself (its own 413 page).
void EvInbox(evhttp_request* req, void*) {
  evbuffer* out = evbuffer_new();
  evbuffer_add(out, kAccepted, sizeof(kAccepted) - 1);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
  evhttp_send_reply(req, 202, "Accepted", out);
  evbuffer_free(out);
}

void EvGeneric(evhttp_request* req, void*) {
  const char* uri = evhttp_request_get_uri(req);
  if (evhttp_request_get_command(req) == EVHTTP_REQ_GET && std::strcmp(uri, "/") == 0) {
    evbuffer* out = evbuffer_new();
    evbuffer_add(out, kRunning, sizeof(kRunning) - 1);
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
    return;
  }
  if (evhttp_request_get_command(req) == EVHTTP_REQ_POST && std::strncmp(uri, "/inbox/", 7) == 0) {
    return EvInbox(req, nullptr);
  }
  evhttp_send_error(req, 404, nullptr);
}

int RunEvhttp(int port, int threads) {
  evthread_use_pthreads();  // so loopbreak from the main thread wakes the loops
  std::vector<std::thread> workers;
  std::vector<event_base*> bases;
  evutil_socket_t fd = -1;
  for (int i = 0; i < threads; ++i) {
    event_base* base = event_base_new();
    evhttp* http = evhttp_new(base);
    evhttp_set_max_body_size(http, static_cast<ev_ssize_t>(g_cap));
    evhttp_set_timeout(http, 10);
    evhttp_set_gencb(http, &EvGeneric, nullptr);
    if (i == 0) {
      evhttp_bound_socket* b = evhttp_bind_socket_with_handle(http, "127.0.0.1", port);
      if (b == nullptr) return 1;
      fd = evhttp_bound_socket_get_fd(b);
    } else if (evhttp_accept_socket(http, fd) != 0) {
      return 1;
    }
    bases.push_back(base);
  }
  for (event_base* b : bases) workers.emplace_back([b] { event_base_dispatch(b); });
  std::printf("listening %d\n", port);
  std::fflush(stdout);
  WaitForSignal();
  for (event_base* b : bases) event_base_loopbreak(b);
  for (auto& t : workers) t.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <httplib|mhd|evhttp> <port> [threads] [cap]\n", argv[0]);
    return 2;
  }
  std::string which = argv[1];
  int port = std::atoi(argv[2]);
  int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  if (argc > 4) g_cap = std::strtoull(argv[4], nullptr, 10);
  signal(SIGPIPE, SIG_IGN);
  if (which == "httplib") return RunHttplib(port, threads);
  if (which == "mhd") return RunMhd(port, threads);
  if (which == "evhttp") return RunEvhttp(port, threads);
  std::fprintf(stderr, "unknown server %s\n", which.c_str());
  return 2;
}
