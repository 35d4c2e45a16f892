// config_yaml_fuzz: the configuration file (config/load.h): the input is written as the YAML
// file and loaded with no QUEUEBOX_* variable, as `queuebox --config <file>` does.
// Properties: LoadConfig never throws and never reports kInternal (its catch-all for a broken
// invariant: a value of the wrong type after validation); a loaded configuration renders
// (check-config) without a secret: no database password appears in RenderMasked.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "config/load.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // tmpfs when there is one: a file on disk spent 12% of each run in the file system.
  static const std::string path =
      std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
      "/queuebox_config_yaml_fuzz." + std::to_string(::getpid()) + ".yml";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  Require(f != nullptr, "the fuzz file opens");
  Require(std::fwrite(data, 1, size, f) == size, "the fuzz file is written");
  std::fclose(f);

  queuebox::ConfigSource source;
  source.file = path;
  source.default_file = "/nonexistent/queuebox.yml";
  queuebox::Result<queuebox::Config> config = queuebox::LoadConfig(source);
  if (!config.ok()) {
    Require(config.status().code() != queuebox::StatusCode::kInternal,
            "LoadConfig reports no broken invariant");
    return 0;
  }
  // Each line whose key is `password` holds a mask, never the password itself. (A line that only
  // mentions it, e.g. a topic pattern holding "password: <the password>", is the user's own text.)
  std::string rendered = queuebox::RenderMasked(*config);
  const std::string& password = config->database.password;
  if (password.size() >= 4) {
    size_t start = 0;
    while (start < rendered.size()) {
      size_t end = rendered.find('\n', start);
      if (end == std::string::npos) end = rendered.size();
      std::string_view line(rendered.data() + start, end - start);
      size_t key = line.find_first_not_of(" -");
      if (key != std::string_view::npos && line.substr(key).starts_with("password:")) {
        Require(line.find(password) == std::string_view::npos,
                "RenderMasked hides the database password");
      }
      start = end + 1;
    }
  }
  return 0;
}
