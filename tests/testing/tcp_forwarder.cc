#include "testing/tcp_forwarder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace queuebox::testing {

TcpForwarder::TcpForwarder(int listen_port, int target_port)
    : listen_port_(listen_port), target_port_(target_port) {}

TcpForwarder::~TcpForwarder() { Stop(); }

Status TcpForwarder::Start() {
  if (::pipe(wake_) != 0) return Unavailable("pipe failed");
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(listen_port_));
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 64) != 0) {
    std::string reason = std::strerror(errno);
    ::close(listener_);
    listener_ = -1;
    return Unavailable("cannot listen on 127.0.0.1:" + std::to_string(listen_port_) + ": " +
                       reason);
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void TcpForwarder::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_[1] >= 0) {
    char c = 'x';
    (void)!::write(wake_[1], &c, 1);
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> pumps;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pumps.swap(pumps_);
  }
  for (std::thread& t : pumps) t.join();
  if (listener_ >= 0) ::close(listener_);
  for (int& fd : wake_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  listener_ = -1;
}

void TcpForwarder::AcceptLoop() {
  while (!stopping_) {
    pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) <= 0) continue;
    if (fds[1].revents != 0) return;
    int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(server);
      ::close(client);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    pumps_.emplace_back([this, client, server] { Pump(client, server); });
  }
}

// Copies bytes both ways until either side closes or Stop.
void TcpForwarder::Pump(int client, int server) {
  char buf[16384];
  bool open = true;
  while (open && !stopping_) {
    // While replies are held the server is not read; poll wakes to see the hold lifted.
    const bool hold = hold_replies_;
    pollfd fds[3] = {{client, POLLIN, 0},
                     {server, static_cast<short>(hold ? 0 : POLLIN), 0},
                     {wake_[0], POLLIN, 0}};
    if (::poll(fds, 3, hold ? 20 : -1) <= 0) continue;
    if (fds[2].revents != 0) break;
    for (int i = 0; i < 2 && open; ++i) {
      if (fds[i].revents == 0 || (i == 1 && hold)) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        open = false;
        break;
      }
      int to = i == 0 ? server : client;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) {
          open = false;
          break;
        }
        off += w;
      }
    }
  }
  ::close(client);
  ::close(server);
}

}  // namespace queuebox::testing
