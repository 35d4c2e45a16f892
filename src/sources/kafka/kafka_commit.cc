#include "sources/kafka/kafka_commit.h"

#include <chrono>

namespace queuebox::sources {

rd_kafka_resp_err_t CommitWithin(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* offsets,
                                 int timeout_ms) {
  // The answer comes as an RD_KAFKA_EVENT_OFFSET_COMMIT event on a queue of our own.
  rd_kafka_queue_t* answers = rd_kafka_queue_new(rk);
  rd_kafka_resp_err_t err = rd_kafka_commit_queue(rk, offsets, answers, nullptr, nullptr);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_event_t* answer = rd_kafka_queue_poll(answers, timeout_ms);
    err = answer == nullptr ? RD_KAFKA_RESP_ERR__TIMED_OUT : rd_kafka_event_error(answer);
    if (answer != nullptr) rd_kafka_event_destroy(answer);
  }
  rd_kafka_queue_destroy(answers);  // a late answer is dropped with it
  return err;
}

bool CloseWithin(rd_kafka_t* rk, int timeout_ms) {
  // The close runs in librdkafka's threads; its rebalance callbacks come on `events`, served
  // here until it is done or the time is up.
  rd_kafka_queue_t* events = rd_kafka_queue_new(rk);
  rd_kafka_error_t* error = rd_kafka_consumer_close_queue(rk, events);
  bool closed = false;
  if (error != nullptr) {
    rd_kafka_error_destroy(error);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!(closed = rd_kafka_consumer_closed(rk) != 0) &&
           std::chrono::steady_clock::now() < deadline) {
      rd_kafka_queue_poll_callback(events, 100);
    }
  }
  rd_kafka_queue_destroy(events);
  return closed;
}

}  // namespace queuebox::sources
