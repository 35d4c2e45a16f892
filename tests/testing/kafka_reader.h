// kafka_reader.h: a test's own librdkafka clients of a (mock) cluster: a silent client, the
// records of a topic read from the beginning, a partition's stored count and a group's committed
// offsets. Header-only; the tests that include it link librdkafka through qb_destinations.
#pragma once
#if defined(QB_WITH_KAFKA)

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace queuebox::testing {

// A client of `type` with `props` (a property librdkafka refuses fails the test); logs nothing.
inline rd_kafka_t* NewKafkaClient(rd_kafka_type_t type,
                                  const std::map<std::string, std::string>& props) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      ADD_FAILURE() << k << ": " << err;
    }
  }
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  EXPECT_NE(rk, nullptr) << err;
  return rk;
}

struct KafkaRecord {
  std::optional<std::string> key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;  // in record order
  int32_t partition = 0;
};

// Reads `count` records from all `partitions` of `topic` from the beginning (assign(), not
// subscribe()). Gives up after `wait`.
inline std::vector<KafkaRecord> ConsumeKafka(
    const std::string& bootstraps, const std::string& topic, size_t count, int partitions = 1,
    std::chrono::milliseconds wait = std::chrono::seconds(20)) {
  rd_kafka_t* c = NewKafkaClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstraps},
                                                     {"group.id", "qb-test"},
                                                     {"enable.auto.commit", "false"}});
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(c, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  std::vector<KafkaRecord> out;
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c, 100);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      KafkaRecord r;
      if (m->key) r.key = std::string(static_cast<const char*>(m->key), m->key_len);
      r.value.assign(static_cast<const char*>(m->payload), m->len);
      r.partition = m->partition;
      rd_kafka_headers_t* h = nullptr;
      if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* val;
        size_t size;
        for (size_t i = 0;
             rd_kafka_header_get_all(h, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
          r.headers.emplace_back(name, std::string(static_cast<const char*>(val), size));
        }
      }
      out.push_back(std::move(r));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(c);
  rd_kafka_destroy(c);
  return out;
}

// The number of records partition `partition` of `topic` holds (its high watermark; -1 on
// error): "no other record" without waiting out a deadline.
inline int64_t StoredKafkaRecords(const std::string& bootstraps, const std::string& topic,
                                  int32_t partition = 0) {
  rd_kafka_t* c = NewKafkaClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstraps}});
  int64_t low = -1, high = -1;
  if (rd_kafka_query_watermark_offsets(c, topic.c_str(), partition, &low, &high, 10000) !=
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    high = -1;
  }
  rd_kafka_destroy(c);
  return high;
}

// The offsets `group` has committed for partitions 0..partitions-1 of `topic` (0 where none; -1
// each when the cluster does not answer).
inline std::vector<int64_t> CommittedKafkaOffsets(const std::string& bootstraps,
                                                  const std::string& group,
                                                  const std::string& topic, int partitions) {
  rd_kafka_t* c =
      NewKafkaClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstraps}, {"group.id", group}});
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  std::vector<int64_t> out(partitions, -1);
  if (rd_kafka_committed(c, list, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < list->cnt; ++i) {
      out[list->elems[i].partition] = std::max<int64_t>(list->elems[i].offset, 0);
    }
  }
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(c);
  return out;
}

}  // namespace queuebox::testing

#endif  // QB_WITH_KAFKA
