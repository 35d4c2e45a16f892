// amqp_connection.h: what the rabbitmq destination and the rabbitmq source share over
// rabbitmq-c: the AMQP URI, opening a logged-in connection with one channel, and readable
// reasons for failed RPCs and broker closes. No reason names the URI (it may hold a password).
//
// Thread-safety: the functions keep no state; a connection is used by one thread at a time.
#pragma once

#include <amqp.h>
#include <sys/time.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "queuebox/status.h"

namespace queuebox::amqp {

// The parts of amqp://user:password@host:port/vhost (amqps:// for TLS).
struct AmqpUrl {
  std::string user = "guest", password = "guest", host = "localhost", vhost = "/";
  int port = 5672;
  bool ssl = false;
};

// kInvalidArgument "not a valid AMQP URI (...)" (without the URI) when `url` does not parse.
// "amqp://host/" (the empty vhost, which RabbitMQ never has) means the default "/".
Result<AmqpUrl> ParseAmqpUrl(const std::string& url);

// `ms` (negative counts as 0) as a timeval for rabbitmq-c's timeouts.
timeval ToTimeval(int64_t ms);

// The bytes as a string (empty for an empty amqp_bytes_t).
std::string BytesText(amqp_bytes_t bytes);

// "<what>: <why>" for a failed RPC reply (library error, connection or channel close).
std::string RpcError(const amqp_rpc_reply_t& reply, std::string_view what);

// "connection|channel closed by the broker: <code> <text>" for a connection.close or
// channel.close method frame.
std::string CloseReason(const amqp_frame_t& frame);

// A new connection: socket (TLS when url.ssl) opened within `timeout_ms` (also the handshake and
// RPC timeout), logged in with PLAIN and `heartbeat_s` (0: none), channel `channel` open.
// kUnavailable naming the step that failed ("connect: ...", "login: ...", "channel.open: ...");
// nothing is left open then. The caller owns the state (amqp_destroy_connection).
Result<amqp_connection_state_t> OpenConnection(const AmqpUrl& url, int64_t timeout_ms,
                                               int heartbeat_s, amqp_channel_t channel);

}  // namespace queuebox::amqp
