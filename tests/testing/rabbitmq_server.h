// rabbitmq_server.h: a private RabbitMQ node for one test that restarts its broker (the shared
// one of scripts/services.sh is never stopped). Its own node name (qbtest<pid>-<n>@localhost),
// AMQP and distribution ports on loopback and its own mnesia folder; it registers with the
// machine's epmd on 4369 (the shared node's; started by the first node when absent), so it
// leaves no epmd of its own behind. Stop() then Start() brings the same durable exchanges,
// queues and persistent messages back on the same port. Started as scripts/services.sh starts
// the shared node (rabbitmq-server -detached as root, which runs as user rabbitmq); needs root.
// A cold start takes 10 to 20 s on 2 loaded cores.
//
// Thread-safety: one owner thread.
#pragma once

#include <map>
#include <string>

#include "queuebox/status.h"

namespace queuebox::testing {

class PrivateRabbitMq {
 public:
  PrivateRabbitMq();
  ~PrivateRabbitMq();  // stops the node, removes its folder
  PrivateRabbitMq(const PrivateRabbitMq&) = delete;
  PrivateRabbitMq& operator=(const PrivateRabbitMq&) = delete;

  // Starts the node and waits until it accepts AMQP connections; kUnavailable with the log's
  // tail when it does not within 120 s.
  Status Start();
  // A clean stop (SIGTERM, waited for): persistent messages of durable queues stay.
  Status Stop();
  int port() const { return amqp_port_; }
  // amqp://guest:guest@127.0.0.1:<port>/ (guest may log in over loopback).
  std::string url() const;

 private:
  Status Ctl(const std::string& args) const;
  std::map<std::string, std::string> Env() const;

  std::string dir_, node_;
  int amqp_port_ = 0, dist_port_ = 0;
  bool running_ = false;
};

}  // namespace queuebox::testing
