// kafka_mock_rtt.c: the round time of librdkafka's mock cluster alone (3 brokers, 12 partitions,
// acks=all), `per` messages with random keys produced, then every delivery report awaited, 200
// rounds after 20 warm-up rounds. Explains the Kafka sink's rate at QueueBox's defaults in
// bench/defaults_ab.sh (bench/README.md, "Kafka at the defaults").
//   gcc -O2 bench/kafka_mock_rtt.c -lrdkafka -o /tmp/kafka_mock_rtt
//   /tmp/kafka_mock_rtt <idempotence 0|1> <linger.ms> <per>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static int pending;
static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *o) { pending--; }
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
int main(int argc, char **argv) {
  int idem = atoi(argv[1]);
  const char *linger = argv[2];
  int per = atoi(argv[3]);
  char err[512];
  rd_kafka_conf_t *mc = rd_kafka_conf_new();  // the mock cluster needs a client handle
  rd_kafka_t *mrk = rd_kafka_new(RD_KAFKA_PRODUCER, mc, err, sizeof err);
  rd_kafka_mock_cluster_t *cl = rd_kafka_mock_cluster_new(mrk, 3);
  rd_kafka_mock_topic_create(cl, "t", 12, 1);
  rd_kafka_conf_t *c = rd_kafka_conf_new();
  rd_kafka_conf_set(c, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(cl), err, sizeof err);
  rd_kafka_conf_set(c, "enable.idempotence", idem ? "true" : "false", err, sizeof err);
  rd_kafka_conf_set(c, "acks", "all", err, sizeof err);
  rd_kafka_conf_set(c, "linger.ms", linger, err, sizeof err);
  rd_kafka_conf_set_dr_msg_cb(c, dr);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
  char key[32];
  for (int warm = 0; warm < 2; warm++) {
    double t0 = now();
    int rounds = warm ? 200 : 20;
    for (int r = 0; r < rounds; r++) {
      for (int i = 0; i < per; i++) {
        snprintf(key, sizeof key, "k%d", rand() % 1000);
        pending++;
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("t"), RD_KAFKA_V_KEY(key, strlen(key)),
                          RD_KAFKA_V_VALUE("x", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_END);
      }
      while (pending > 0) rd_kafka_poll(rk, 50);
    }
    if (warm)
      printf("idem=%d linger=%s per=%d: %.2f ms/round\n", idem, linger, per, (now() - t0) / rounds);
  }
  rd_kafka_destroy(rk);
  rd_kafka_mock_cluster_destroy(cl);
  rd_kafka_destroy(mrk);
}
