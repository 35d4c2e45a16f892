// http1_response.h: reads an HTTP/1.x answer fed in pieces as they arrive (RFC 9112): the status
// line, the header fields that matter to the relay (Content-Length, Transfer-Encoding, Connection,
// Retry-After), and the body by length, chunked, or to the end of the connection. Interim 1xx
// answers are skipped. Pure and allocation-bounded: the head may be at most 64 KiB, the body
// kept at most body_cap bytes (the rest is read and dropped). fuzz/http1_response_fuzz.cc.
// Not thread-safe; one per exchange, reused with Reset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "destinations/http/http1_client.h"

namespace queuebox {

class Http1ResponseParser {
 public:
  static constexpr size_t kMaxHead = 64 * 1024;  // bytes of status line and header fields

  // Starts a new answer, keeping the first body_cap bytes of its body.
  void Reset(size_t body_cap);
  // Consumes bytes of the answer; returns how many (fewer than data.size() only once done():
  // the rest belongs to no answer). Sets `problem` (non-empty) when the answer is malformed.
  size_t Feed(std::string_view data, std::string& problem);
  // The connection ended: true when that ends the answer (a body read to the end of the
  // connection); then done().
  bool EndOfStream();

  bool done() const { return state_ == State::kDone; }
  bool has_status() const { return status_ != 0; }
  // The connection can carry the next request: HTTP/1.1 without "Connection: close", or 1.0
  // with "Connection: keep-alive", and a body with a known end.
  bool keep_alive() const { return keep_alive_; }
  size_t body_cap() const { return body_cap_; }
  // The answer (kAnswered) once done().
  Http1Answer TakeAnswer();

 private:
  enum class State {
    kStatus,
    kHeaders,
    kBody,
    kChunkSize,
    kChunkData,
    kChunkEnd,
    kTrailers,
    kToClose,
    kDone
  };
  // One head line (without its line end). Sets problem_ on a malformed line.
  void HeadLine(std::string_view line);
  void Field(std::string_view name, std::string_view value);
  void EndOfHead();
  void KeepBody(std::string_view data);

  State state_ = State::kStatus;
  size_t body_cap_ = 0;
  std::string line_;  // a head or chunk line read so far
  size_t head_bytes_ = 0;
  std::string problem_;
  int status_ = 0;
  int minor_ = 1;  // HTTP/1.<minor>
  std::string reason_;
  std::string body_;
  int64_t retry_after_s_ = 0;
  bool keep_alive_ = true;
  bool chunked_ = false;
  bool transfer_to_close_ = false;  // a Transfer-Encoding that does not end in chunked
  bool close_ = false;              // "Connection: close"
  bool has_length_ = false;
  uint64_t length_ = 0;     // Content-Length
  uint64_t remaining_ = 0;  // of the body or of the chunk
};

}  // namespace queuebox
