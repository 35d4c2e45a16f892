// tcp_forwarder.h: a loopback TCP port that forwards every connection to another loopback port,
// for tests where a real server must appear on a port only later (a broker that is "not up yet"
// at relay start) without stopping the shared test servers. Until Start() nothing listens on
// the port (connection refused); Stop() closes the listener and every forwarded connection;
// HoldReplies() keeps the server's bytes from the client.
//
// Thread-safety: Start and Stop from one thread; the forwarding runs on its own threads.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "queuebox/status.h"

namespace queuebox::testing {

class TcpForwarder {
 public:
  // Listens on 127.0.0.1:listen_port (once started) and connects each client to
  // 127.0.0.1:target_port.
  TcpForwarder(int listen_port, int target_port);
  ~TcpForwarder();  // Stop()
  TcpForwarder(const TcpForwarder&) = delete;
  TcpForwarder& operator=(const TcpForwarder&) = delete;

  // kUnavailable when the port cannot be bound.
  Status Start();
  void Stop();
  // While held, nothing the server sends reaches the client (it waits in the socket buffers);
  // what the client sends still reaches the server. For a server that "does not answer" (e.g.
  // RabbitMQ publisher confirms that do not come) while the connection stays up.
  void HoldReplies(bool hold) { hold_replies_ = hold; }

 private:
  void AcceptLoop();
  void Pump(int client, int server);

  const int listen_port_, target_port_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends every poll at Stop
  std::atomic<bool> stopping_{false};
  std::atomic<bool> hold_replies_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;  // guarded by mu_
};

}  // namespace queuebox::testing
