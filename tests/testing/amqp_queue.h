// amqp_queue.h: a test's own connections to the shared RabbitMQ (or a private one): AmqpQueues
// declares an exchange and a durable queue bound to it, counts and takes the queue's messages and
// deletes both; AmqpTestQueue reads what reaches an exclusive queue bound to an exchange, message
// properties and headers included.
// Header-only; the tests that include it link rabbitmq-c through qb_destinations.
#pragma once

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "testing/broker_testing.h"

namespace queuebox::testing {

// A connection to `url` (amqp://user:password@host:port/vhost) logged in, with channel 1 opened
// (the caller checks that reply); `port` receives the URL's port. The test fails where the URL,
// the socket or the login does.
inline amqp_connection_state_t OpenAmqp(const std::string& url, int* port = nullptr) {
  std::vector<char> buf(url.begin(), url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  EXPECT_EQ(amqp_parse_url(buf.data(), &info), AMQP_STATUS_OK);
  if (port != nullptr) *port = info.port;
  const std::string vhost = *info.vhost ? info.vhost : "/";
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn);
  EXPECT_EQ(amqp_socket_open(socket, info.host, info.port), AMQP_STATUS_OK);
  EXPECT_EQ(amqp_login(conn, vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                       info.password)
                .reply_type,
            AMQP_RESPONSE_NORMAL);
  amqp_channel_open(conn, 1);
  return conn;
}

inline std::string AmqpText(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

// A message as a RabbitMQ consumer sees it.
struct AmqpReceived {
  std::string routing_key, exchange, body, message_id, content_type;
  int delivery_mode = 0;
  std::map<std::string, std::string> string_headers;
  std::map<std::string, int64_t> int_headers;
  std::vector<std::string> header_order;
};

inline AmqpReceived ReadAmqpMessage(const amqp_message_t& message) {
  AmqpReceived m;
  m.body = AmqpText(message.body);
  const amqp_basic_properties_t& p = message.properties;
  if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) m.message_id = AmqpText(p.message_id);
  if (p._flags & AMQP_BASIC_CONTENT_TYPE_FLAG) m.content_type = AmqpText(p.content_type);
  if (p._flags & AMQP_BASIC_DELIVERY_MODE_FLAG) m.delivery_mode = p.delivery_mode;
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
    for (int i = 0; i < p.headers.num_entries; ++i) {
      const amqp_table_entry_t& e = p.headers.entries[i];
      std::string key = AmqpText(e.key);
      m.header_order.push_back(key);
      if (e.value.kind == AMQP_FIELD_KIND_UTF8 || e.value.kind == AMQP_FIELD_KIND_BYTES) {
        m.string_headers[key] = AmqpText(e.value.value.bytes);
      } else if (e.value.kind == AMQP_FIELD_KIND_I32) {
        m.int_headers[key] = e.value.value.i32;
      }
    }
  }
  return m;
}

// A connection to the shared RabbitMQ for the test's own exchange and queue.
class AmqpQueues {
 public:
  explicit AmqpQueues(const std::string& url) { c_ = OpenAmqp(url, &port_); }
  ~AmqpQueues() {
    amqp_channel_close(c_, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c_);
  }
  int port() const { return port_; }
  // A durable topic exchange and a queue bound to it with "#".
  void Bind(const std::string& exchange, const std::string& queue) {
    amqp_exchange_declare(c_, 1, amqp_cstring_bytes(exchange.c_str()), amqp_cstring_bytes("topic"),
                          0, 1, 0, 0, amqp_empty_table);
    amqp_queue_declare(c_, 1, amqp_cstring_bytes(queue.c_str()), 0, 1, 0, 0, amqp_empty_table);
    amqp_queue_bind(c_, 1, amqp_cstring_bytes(queue.c_str()), amqp_cstring_bytes(exchange.c_str()),
                    amqp_cstring_bytes("#"), amqp_empty_table);
    EXPECT_EQ(amqp_get_rpc_reply(c_).reply_type, AMQP_RESPONSE_NORMAL);
  }
  uint32_t Messages(const std::string& queue) {
    amqp_queue_declare_ok_t* ok =
        amqp_queue_declare(c_, 1, amqp_cstring_bytes(queue.c_str()), 1, 1, 0, 0, amqp_empty_table);
    return ok != nullptr ? ok->message_count : 0;
  }
  // One message taken (and acked) from `queue` with basic.get: {routing key, body}; nullopt
  // when the queue is empty.
  std::optional<std::pair<std::string, std::string>> Get(const std::string& queue) {
    amqp_maybe_release_buffers(c_);
    amqp_rpc_reply_t r = amqp_basic_get(c_, 1, amqp_cstring_bytes(queue.c_str()), /*no_ack=*/1);
    if (r.reply_type != AMQP_RESPONSE_NORMAL || r.reply.id != AMQP_BASIC_GET_OK_METHOD) {
      return std::nullopt;
    }
    auto* ok = static_cast<amqp_basic_get_ok_t*>(r.reply.decoded);
    std::string key(static_cast<const char*>(ok->routing_key.bytes), ok->routing_key.len);
    amqp_message_t message;
    if (amqp_read_message(c_, 1, &message, 0).reply_type != AMQP_RESPONSE_NORMAL) {
      return std::nullopt;
    }
    std::string body(static_cast<const char*>(message.body.bytes), message.body.len);
    amqp_destroy_message(&message);
    return std::make_pair(key, body);
  }
  // Every message `queue` holds now, in queue order, taken (and acked) with basic.get.
  std::vector<AmqpReceived> TakeAll(const std::string& queue) {
    std::vector<AmqpReceived> out;
    while (true) {
      amqp_maybe_release_buffers(c_);
      amqp_rpc_reply_t r = amqp_basic_get(c_, 1, amqp_cstring_bytes(queue.c_str()), /*no_ack=*/1);
      if (r.reply_type != AMQP_RESPONSE_NORMAL || r.reply.id != AMQP_BASIC_GET_OK_METHOD) break;
      auto* ok = static_cast<amqp_basic_get_ok_t*>(r.reply.decoded);
      std::string routing_key = AmqpText(ok->routing_key);
      amqp_message_t message;
      if (amqp_read_message(c_, 1, &message, 0).reply_type != AMQP_RESPONSE_NORMAL) break;
      out.push_back(ReadAmqpMessage(message));
      out.back().routing_key = std::move(routing_key);
      amqp_destroy_message(&message);
    }
    return out;
  }
  void Delete(const std::string& exchange, const std::string& queue) {
    amqp_queue_delete(c_, 1, amqp_cstring_bytes(queue.c_str()), 0, 0);
    amqp_exchange_delete(c_, 1, amqp_cstring_bytes(exchange.c_str()), 0);
  }

 private:
  amqp_connection_state_t c_ = nullptr;
  int port_ = 0;
};

// Fails the test when the last reply on `conn` is not normal; `what` names the call.
inline void ExpectAmqpOk(amqp_connection_state_t conn, const char* what) {
  EXPECT_EQ(amqp_get_rpc_reply(conn).reply_type, AMQP_RESPONSE_NORMAL) << what;
}

// After OpenAmqp, on channel 1: a durable topic exchange `exchange` and an exclusive queue named
// by the server; returns the queue's name ("" and a test failure when none was declared).
inline std::string DeclareExchangeAndQueue(amqp_connection_state_t conn,
                                           const std::string& exchange) {
  ExpectAmqpOk(conn, "channel.open");
  amqp_exchange_declare(conn, 1, amqp_cstring_bytes(exchange.c_str()), amqp_cstring_bytes("topic"),
                        0, 1, 0, 0, amqp_empty_table);
  ExpectAmqpOk(conn, "exchange.declare");
  amqp_queue_declare_ok_t* q =
      amqp_queue_declare(conn, 1, amqp_empty_bytes, 0, 0, 1, 1, amqp_empty_table);
  ExpectAmqpOk(conn, "queue.declare");
  if (q == nullptr) {
    ADD_FAILURE() << "queue.declare returned no queue";
    return "";
  }
  return AmqpText(q->queue);
}

// A test's own connection: an exclusive queue bound to `exchange` with `binding`, read with
// basic.get (after a publisher confirm the message is in the queue: no waiting).
class AmqpTestQueue {
 public:
  AmqpTestQueue(const std::string& url, const std::string& exchange, const std::string& binding)
      : exchange_(exchange), binding_(binding) {
    conn_ = OpenAmqp(url);
    queue_ = DeclareExchangeAndQueue(conn_, exchange);
    if (queue_.empty()) return;
    Bind();
  }
  ~AmqpTestQueue() {
    amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn_);
  }

  void Bind() {
    amqp_queue_bind(conn_, 1, amqp_cstring_bytes(queue_.c_str()),
                    amqp_cstring_bytes(exchange_.c_str()), amqp_cstring_bytes(binding_.c_str()),
                    amqp_empty_table);
    Check("queue.bind");
  }
  // With no queue bound, a mandatory publish comes back unroutable.
  void Unbind() {
    amqp_queue_unbind(conn_, 1, amqp_cstring_bytes(queue_.c_str()),
                      amqp_cstring_bytes(exchange_.c_str()), amqp_cstring_bytes(binding_.c_str()),
                      amqp_empty_table);
    Check("queue.unbind");
  }

  // Up to `count` messages: what the queue holds, waiting at most `wait` for the rest.
  std::vector<AmqpReceived> Take(size_t count,
                                 std::chrono::milliseconds wait = std::chrono::seconds(10)) {
    std::vector<AmqpReceived> out;
    WaitUntil(
        [&] {
          for (AmqpReceived& m : Drain()) out.push_back(std::move(m));
          return out.size() >= count;
        },
        wait);
    return out;
  }

  // Takes every message the queue holds now.
  std::vector<AmqpReceived> Drain() {
    std::vector<AmqpReceived> out;
    while (true) {
      amqp_maybe_release_buffers(conn_);
      amqp_rpc_reply_t r = amqp_basic_get(conn_, 1, amqp_cstring_bytes(queue_.c_str()), 1);
      if (r.reply_type != AMQP_RESPONSE_NORMAL || r.reply.id != AMQP_BASIC_GET_OK_METHOD) break;
      auto* ok = static_cast<amqp_basic_get_ok_t*>(r.reply.decoded);
      std::string routing_key = AmqpText(ok->routing_key);
      std::string exchange = AmqpText(ok->exchange);
      amqp_message_t message;
      if (amqp_read_message(conn_, 1, &message, 0).reply_type != AMQP_RESPONSE_NORMAL) break;
      AmqpReceived m = ReadAmqpMessage(message);
      m.routing_key = std::move(routing_key);
      m.exchange = std::move(exchange);
      amqp_destroy_message(&message);
      out.push_back(std::move(m));
    }
    return out;
  }

 private:
  void Check(const char* what) { ExpectAmqpOk(conn_, what); }
  amqp_connection_state_t conn_ = nullptr;
  std::string exchange_, binding_, queue_;
};

}  // namespace queuebox::testing
