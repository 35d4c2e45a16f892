// queuebox: the composition root. Parses the command line, loads the configuration, builds the
// store, destinations, relay and admin server, and runs until SIGTERM/SIGINT.
//
// Exit codes (QueueBox reference §13.5): 0 OK, 1 failed (start, migration, command), 2 usage.
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "commands.h"

namespace {

CLI::App* AddReplay(CLI::App& app, queuebox::app::ReplayOptions& options) {
  auto* replay = app.add_subcommand(
      "replay", "Move sent/dead outbox rows (or processed/dead inbox rows) back to pending");
  replay->add_option("--table", options.table, "outbox (default) or inbox")
      ->check(CLI::IsMember({"outbox", "inbox"}));
  replay->add_option("--ids", options.ids, "Row ids (UUIDs)")->delimiter(',');
  replay->add_option("--topic", options.topic, "One topic");
  replay->add_option("--topics", options.topics, "Several topics")->delimiter(',');
  replay->add_option("--destination", options.destination,
                     "Rows whose topic routes to this destination");
  replay->add_option("--source", options.source, "One inbox source (--table inbox)");
  replay->add_option("--sources", options.sources, "Several inbox sources (--table inbox)")
      ->delimiter(',');
  replay->add_option("--created-after", options.created_after, "ISO-8601 instant (strict >)");
  replay->add_option("--created-before", options.created_before, "ISO-8601 instant (strict <)");
  return replay;
}

// The container health check (packaging/image): no shell or curl in the image.
CLI::App* AddProbe(CLI::App& app, queuebox::app::ProbeOptions& options) {
  auto* probe = app.add_subcommand(
      "probe", "Ask the running relay's health route; exit 0 on 200, else 1 (a health check)");
  probe->add_option("--path", options.path, "Route to ask (default /health/ready)");
  probe->add_option("--timeout-ms", options.timeout_ms, "Connect and read timeout (default 5000)");
  return probe;
}

CLI::App* AddVerify(CLI::App& app, queuebox::app::VerifyOptions& options) {
  auto* verify = app.add_subcommand(
      "verify", "Check the outbox's invariants; exit 0 all hold, 1 one is broken, 2 cannot check");
  verify->add_option("--since", options.since, "Rows created at or after this ISO-8601 instant");
  verify->add_option("--topic", options.topic, "Rows of this topic");
  verify->add_option("--key", options.key, "Rows of this key");
  verify->add_option("--received", options.received,
                     "JSON lines of `queuebox receive`: every sent row received, in key order");
  verify
      ->add_option("--ordering", options.ordering,
                   "strict or sequence (default: outbox.ordering of the configuration)")
      ->check(CLI::IsMember({"strict", "sequence"}));
  verify
      ->add_option("--stall-threshold-s", options.stall_threshold_s,
                   "A due row may wait this long with no replica alive (default 300)")
      ->check(CLI::PositiveNumber);
  verify->add_option("--max-rows", options.max_rows, "Rows listed per check (default 20)")
      ->check(CLI::PositiveNumber);
  verify->add_flag("--json", options.json, "JSON output");
  return verify;
}

CLI::App* AddReceive(CLI::App& app, queuebox::app::ReceiveOptions& options) {
  auto* receive = app.add_subcommand(
      "receive", "An HTTP destination stand-in: answers 204, records each delivery as a JSON line");
  receive->add_option("--listen", options.listen, "host:port (default 127.0.0.1:8080)");
  receive->add_option("--out", options.out, "File the JSON lines are appended to")->required();
  return receive;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc gives each thread that allocates its own arena (up to 8 per core) and keeps freed
  // memory in each: with 16 publish workers, the pollers and the client libraries' threads that
  // is most of the relay's RSS. One arena serves a relay well: it spends its time waiting on the
  // database and the network, and small allocations are served from per-thread caches without
  // the arena's lock. Measured (bench/README.md "Memory"): 64 arenas 62.8 MB, 2 arenas 29.5 MB,
  // 1 arena 27.2 MB peak RSS at the same throughput. MALLOC_ARENA_MAX set in the environment is
  // left alone.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
  // Block the stop signals in every thread; the main thread waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"QueueBox C++: a transactional outbox relay"};
  app.require_subcommand(0, 1);
  // Options of the top level (--config) are accepted after a subcommand too:
  // `queuebox migrate --config x.yml` as well as `queuebox --config x.yml migrate`.
  app.fallthrough();
  app.set_version_flag("--version", std::string("queuebox ") + QUEUEBOX_VERSION);
  queuebox::app::GlobalOptions global;
  app.add_option("-c,--config", global.config_file,
                 "YAML configuration file (default: $QUEUEBOX_CONFIG_FILE, else "
                 "/etc/queuebox/queuebox.yml when it exists)");

  queuebox::app::RunOptions run_opts;
  auto* run = app.add_subcommand("run", "Run the relay (the default command)");
  run->add_flag("--until-idle", run_opts.until_idle,
                "Stop once nothing is claimable and nothing is in flight");
  run->add_option("--idle-timeout-ms", run_opts.idle_timeout_ms,
                  "With --until-idle: give up after this many ms (default 60000)");

  std::optional<int> baseline;
  auto* migrate = app.add_subcommand("migrate", "Apply the bundled migrations and exit");
  migrate->add_option("--baseline", baseline,
                      "Record <version> as applied by hand, then apply the later files");

  auto* check = app.add_subcommand(
      "check-config", "Validate the configuration without connecting, print it masked");

  bool json = false;
  auto* status = app.add_subcommand("status", "Rows per state, oldest pending age, dead per topic");
  status->add_flag("--json", json, "JSON output");

  queuebox::app::ReplayOptions replay_opts;
  auto* replay = AddReplay(app, replay_opts);

  auto* dead = app.add_subcommand("dead", "Dead-lettered rows");
  dead->require_subcommand(1);
  int dead_limit = 100;
  auto* dead_list = dead->add_subcommand("list", "List dead rows, newest first");
  dead_list->add_flag("--json", json, "JSON output");
  dead_list->add_option("--limit", dead_limit, "At most this many rows (default 100)");
  std::string dead_table = "outbox";
  dead_list->add_option("--table", dead_table, "outbox (default) or inbox")
      ->check(CLI::IsMember({"outbox", "inbox"}));

  queuebox::app::ProbeOptions probe_opts;
  auto* probe = AddProbe(app, probe_opts);

  std::string envelope_path = "-";
  bool canonical = false;
  auto* envelope = app.add_subcommand(
      "envelope", "Validate a BabelQueue envelope (file or stdin) or re-encode it canonically");
  envelope->add_option("file", envelope_path, "Envelope file, or - for standard input");
  envelope->add_flag("--canonical", canonical, "Print the canonical encoding");

  queuebox::app::VerifyOptions verify_opts;
  auto* verify = AddVerify(app, verify_opts);
  queuebox::app::ReceiveOptions receive_opts;
  auto* receive = AddReceive(app, receive_opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  if (*migrate) return queuebox::app::Migrate(global, baseline);
  if (*check) return queuebox::app::CheckConfig(global);
  if (*status) return queuebox::app::ShowStatus(global, json);
  if (*replay) return queuebox::app::Replay(global, replay_opts);
  if (*dead_list) return queuebox::app::DeadList(global, json, dead_limit, dead_table);
  if (*probe) return queuebox::app::Probe(global, probe_opts);
  if (*verify) return queuebox::app::Verify(global, verify_opts);
  if (*receive) return queuebox::app::Receive(receive_opts, stop_signals);
  if (*envelope) return queuebox::app::Envelope(envelope_path, canonical);
  return queuebox::app::Run(global, run_opts, stop_signals);
}
