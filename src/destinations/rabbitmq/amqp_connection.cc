#include "destinations/rabbitmq/amqp_connection.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include <algorithm>
#include <vector>

namespace queuebox::amqp {

Result<AmqpUrl> ParseAmqpUrl(const std::string& url) {
  std::vector<char> buf(url.begin(), url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (url.empty() || amqp_parse_url(buf.data(), &info) != AMQP_STATUS_OK) {
    // The URL itself is not repeated: it may hold a password.
    return InvalidArgument("not a valid AMQP URI (amqp://user:password@host:port/vhost)");
  }
  AmqpUrl p;
  p.user = info.user;
  p.password = info.password;
  p.host = info.host;
  p.vhost = info.vhost;
  if (p.vhost.empty()) p.vhost = "/";
  p.port = info.port;
  p.ssl = info.ssl != 0;
  return p;
}

timeval ToTimeval(int64_t ms) {
  ms = std::max<int64_t>(ms, 0);
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

std::string BytesText(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

std::string RpcError(const amqp_rpc_reply_t& r, std::string_view what) {
  std::string out(what);
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return out + ": ok";
    case AMQP_RESPONSE_NONE:
      return out + ": no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      return out + ": " + amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
        return out + ": connection closed by the broker: " + std::to_string(m->reply_code) + " " +
               BytesText(m->reply_text);
      }
      if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
        return out + ": channel closed by the broker: " + std::to_string(m->reply_code) + " " +
               BytesText(m->reply_text);
      }
      return out + ": unexpected broker method";
  }
  return out + ": unknown error";
}

std::string CloseReason(const amqp_frame_t& frame) {
  if (frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* m = static_cast<amqp_connection_close_t*>(frame.payload.method.decoded);
    return "connection closed by the broker: " + std::to_string(m->reply_code) + " " +
           BytesText(m->reply_text);
  }
  auto* m = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
  return "channel closed by the broker: " + std::to_string(m->reply_code) + " " +
         BytesText(m->reply_text);
}

Result<amqp_connection_state_t> OpenConnection(const AmqpUrl& url, int64_t timeout_ms,
                                               int heartbeat_s, amqp_channel_t channel) {
  amqp_connection_state_t state = amqp_new_connection();
  if (state == nullptr) return Unavailable("cannot create an AMQP connection");
  auto fail = [state](std::string why) -> Result<amqp_connection_state_t> {
    amqp_destroy_connection(state);
    return Unavailable(std::move(why));
  };
  amqp_socket_t* socket = url.ssl ? amqp_ssl_socket_new(state) : amqp_tcp_socket_new(state);
  if (socket == nullptr) return fail("cannot create a socket");
  timeval tv = ToTimeval(timeout_ms);
  int rc = amqp_socket_open_noblock(socket, url.host.c_str(), url.port, &tv);
  if (rc != AMQP_STATUS_OK) return fail(std::string("connect: ") + amqp_error_string2(rc));
  amqp_set_handshake_timeout(state, &tv);
  amqp_set_rpc_timeout(state, &tv);
  amqp_rpc_reply_t r = amqp_login(state, url.vhost.c_str(), 0, 131072, heartbeat_s,
                                  AMQP_SASL_METHOD_PLAIN, url.user.c_str(), url.password.c_str());
  if (r.reply_type != AMQP_RESPONSE_NORMAL) return fail(RpcError(r, "login"));
  amqp_channel_open(state, channel);
  r = amqp_get_rpc_reply(state);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    std::string why = RpcError(r, "channel.open");
    amqp_connection_close(state, AMQP_REPLY_SUCCESS);
    return fail(why);
  }
  return state;
}

}  // namespace queuebox::amqp
