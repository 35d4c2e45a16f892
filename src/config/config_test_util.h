// config_test_util.h: a test fixture with a private temporary folder for YAML and secret files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "config/load.h"
#include "queuebox/config.h"

namespace queuebox::testing {

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("qb_config_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to <dir>/<name>; returns the path.
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // LoadConfig of `yaml` written to a file, with `env` as the environment.
  Result<Config> Load(const std::string& yaml, std::map<std::string, std::string> env = {}) {
    ConfigSource source;
    source.file = Write("queuebox.yml", yaml);
    source.env = std::move(env);
    source.default_file = (dir_ / "no-default.yml").string();  // never this host's /etc file
    return LoadConfig(source);
  }

  std::filesystem::path dir_;
};

}  // namespace queuebox::testing
