// amqp_queue.h: a test's own connection to the shared RabbitMQ, to declare an exchange and a
// queue bound to it, count the queue's messages and delete both. Header-only; the tests that
// include it link rabbitmq-c through qb_destinations.
#pragma once

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace queuebox::testing {

// A connection to the shared RabbitMQ for the test's own exchange and queue.
class AmqpQueues {
 public:
  explicit AmqpQueues(const std::string& url) {
    std::vector<char> buf(url.begin(), url.end());
    buf.push_back('\0');
    amqp_connection_info info;
    amqp_parse_url(buf.data(), &info);
    port_ = info.port;
    std::string vhost = *info.vhost ? info.vhost : "/";
    c_ = amqp_new_connection();
    amqp_socket_t* sock = amqp_tcp_socket_new(c_);
    EXPECT_EQ(amqp_socket_open(sock, info.host, info.port), AMQP_STATUS_OK);
    EXPECT_EQ(amqp_login(c_, vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                         info.password)
                  .reply_type,
              AMQP_RESPONSE_NORMAL);
    amqp_channel_open(c_, 1);
  }
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
  void Delete(const std::string& exchange, const std::string& queue) {
    amqp_queue_delete(c_, 1, amqp_cstring_bytes(queue.c_str()), 0, 0);
    amqp_exchange_delete(c_, 1, amqp_cstring_bytes(exchange.c_str()), 0);
  }

 private:
  amqp_connection_state_t c_ = nullptr;
  int port_ = 0;
};

}  // namespace queuebox::testing
