// tests/cpp/publish/kafka_mock_broker.cc: a test-only Kafka cluster: librdkafka's mock cluster
// (rdkafka_mock.h) in a process of its own, so that the real `dblog publish` can run against
// it as another process and be SIGKILLed and restarted while the cluster keeps what it stored.
// No Kafka broker package exists on Debian 12; this is the stand-in (docs/publish.md says what
// it does not prove).
//
// Usage: kafka_mock_broker [BROKERS]   (default 3)
// Prints "bootstrap HOST:PORT,..." on stdout, then reads commands on stdin, one per line, and
// answers each with "ok" or "error ...":
//   error API_KEY ERROR COUNT   the next COUNT requests of API_KEY (0: Produce) fail with ERROR
//                               (rd_kafka_mock_push_request_errors)
//   down BROKER_ID / up BROKER_ID   a broker's listener down or up again
//   topic NAME PARTITIONS       create a topic, replicated on every broker (the mock cluster
//                               does not implement CreateTopics: the test creates them here)
// Exits at the end of stdin (its parent gone).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const int brokers = argc > 1 ? std::atoi(argv[1]) : 3;
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!rk) {
    std::fprintf(stderr, "rd_kafka_new: %s\n", errstr);
    return 1;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (!cluster) {
    std::fprintf(stderr, "rd_kafka_mock_cluster_new failed\n");
    return 1;
  }
  std::printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(cluster));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (command == "error") {
      int api = 0, code = 0, count = 0;
      in >> api >> code >> count;
      std::vector<rd_kafka_resp_err_t> errors(static_cast<std::size_t>(count),
                                              static_cast<rd_kafka_resp_err_t>(code));
      rd_kafka_mock_push_request_errors_array(cluster, static_cast<std::int16_t>(api),
                                              errors.size(), errors.data());
    } else if (command == "down" || command == "up") {
      int id = 0;
      in >> id;
      err = command == "down" ? rd_kafka_mock_broker_set_down(cluster, id)
                              : rd_kafka_mock_broker_set_up(cluster, id);
    } else if (command == "topic") {
      std::string name;
      int partitions = 1;
      in >> name >> partitions;
      err = rd_kafka_mock_topic_create(cluster, name.c_str(), partitions, brokers);
    } else {
      std::printf("error unknown command '%s'\n", command.c_str());
      std::fflush(stdout);
      continue;
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
      std::printf("error %s\n", rd_kafka_err2str(err));
    else
      std::printf("ok\n");
    std::fflush(stdout);
  }
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(rk);
  return 0;
}
