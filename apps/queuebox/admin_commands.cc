// migrate, check-config: commands that need no running relay.
#include <iostream>

#include "commands.h"
#include "common.h"
#include "config/load.h"
#include "core/log.h"
#include "store/open_store.h"
#include "transforms.h"

namespace queuebox::app {

int Migrate(const GlobalOptions& global, std::optional<int> baseline) {
  auto config = LoadOrExplain(global);
  if (!config) return 1;
  InitRelayLog(*config);
  auto store = OpenAndWait(*config);
  if (!store) return 1;
  auto report = store->Migrate(baseline);
  if (!report.ok()) {
    log::Error("The migration failed.", {{"reason", report.status().message()}});
    std::cerr << "The migration failed. " << report.status().message() << "\n";
    return 1;
  }
  LogMigrations(*report);
  return 0;
}

int CheckConfig(const GlobalOptions& global) {
  auto config = LoadOrExplain(global);
  if (!config) return 1;
  // The expressions compile as at start (QueueBox reference §13.6 step 2).
  if (Status s = CheckTransforms(*config); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  // `run` refuses to migrate a renamed schema before it connects: so does the check.
  if (config->database.migrate) {
    if (Status s = store::RequireDefaultSchema(config->database); !s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
  }
  std::cout << "# Read from: " << DescribeOrigin(config->origin) << "\n";
  std::cout << RenderMasked(*config);
  std::cout << "The configuration is valid.\n";
  return 0;
}

}  // namespace queuebox::app
