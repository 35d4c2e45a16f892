#include "sources/kafka/kafka_commit.h"

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

}  // namespace queuebox::sources
