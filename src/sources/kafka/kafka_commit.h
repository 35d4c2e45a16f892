// kafka_commit.h: a synchronous Kafka offset commit and a consumer close, each with a bound on
// its wait.
//
// rd_kafka_commit(rk, offsets, 0) waits for the group coordinator without a limit: with the
// coordinator's broker down it blocked past 145 s in a measurement with librdkafka 2.0.2, and a
// consumer thread blocked in a rebalance callback serves no error events (health stays up) and
// holds Stop() behind it. The Kafka source commits synchronously only in rebalance callbacks.
#pragma once

#include <librdkafka/rdkafka.h>

namespace queuebox::sources {

// Commits `offsets` (null: the offsets stored with rd_kafka_offsets_store) of consumer `rk` and
// waits at most `timeout_ms` for the answer. Returns the commit's error (NO_ERROR, _NO_OFFSET when
// there was nothing to commit, ...) or RD_KAFKA_RESP_ERR__TIMED_OUT when no answer came in time;
// the commit may still be made later, or never. Call it from the thread that polls `rk` (a
// rebalance callback included); `offsets` stays the caller's.
rd_kafka_resp_err_t CommitWithin(rd_kafka_t* rk, const rd_kafka_topic_partition_list_t* offsets,
                                 int timeout_ms);

// Closes consumer `rk` as rd_kafka_consumer_close does (revokes its partitions, which serves the
// rebalance callback on this thread, and leaves the group), waiting at most `timeout_ms`. True
// when the close finished; false when it failed or was still under way (then `rk` must be
// destroyed with RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE). rd_kafka_consumer_close itself waits
// without a limit: with librdkafka 2.0.2 and its mock cluster a Stop() was seen blocked in it for
// over 8 minutes, every broker down while the source still counted itself up. Call it from the
// thread that polls `rk`.
bool CloseWithin(rd_kafka_t* rk, int timeout_ms);

}  // namespace queuebox::sources
