#include "store/postgres/capture/capture_state.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace queuebox::store::capture {
namespace {

constexpr const char* kOffsetsHeader = "# QueueBox C++ change capture: the WAL position handled";

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  auto end = s.find_last_not_of(ws);
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

// Reads a whole file; nullopt when it does not exist.
Result<std::optional<std::string>> ReadWhole(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Unavailable(Errno("Cannot read the capture state file", path));
  }
  std::string text;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Unavailable(Errno("Cannot read the capture state file", path));
      close(fd);
      return s;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return std::optional<std::string>(std::move(text));
}

}  // namespace

std::string CaptureFingerprint(const FingerprintInput& in) {
  std::string text;
  text += "connector.class=io.debezium.connector.postgresql.PostgresConnector\n";
  text += "database.hostname=" + in.host + "\n";
  text += "database.port=" + in.port + "\n";
  text += "database.dbname=" + in.database + "\n";
  text += "database.names=\n";
  // java.util.regex.Pattern.quote of "<schema>.<table>" (neither holds "\E": identifiers).
  text += "table.include.list=\\Q" + in.schema + "." + in.table + "\\E\n";
  text += "slot.name=" + in.slot + "\n";
  text += "publication.name=" + in.publication;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

int64_t CaptureLockKey(const std::string& identity) {
  const std::string resource = "queuebox_capture_" + identity;
  uint32_t h = 0;  // Java int arithmetic: wraps modulo 2^32
  for (unsigned char c : resource) h = 31 * h + c;
  return static_cast<int64_t>(static_cast<int32_t>(h));
}

Result<std::optional<std::string>> StateDirectory::ReadIdentity() const {
  QB_ASSIGN_OR_RETURN(auto text, ReadWhole(path_ + "/" + kIdentityFile));
  if (!text) return std::optional<std::string>();
  return std::optional<std::string>(Trim(*text));
}

Status StateDirectory::WriteIdentity(const std::string& state_id) const {
  return WriteFile(kIdentityFile, state_id);
}

Result<StateDirectory::Offsets> StateDirectory::ReadOffsets() const {
  QB_ASSIGN_OR_RETURN(auto text, ReadWhole(path_ + "/" + kOffsetsFile));
  Offsets out;
  if (!text) return out;
  out.present = true;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    line = Trim(line);
    if (line.rfind("lsn=", 0) == 0) out.lsn = ParseLsn(line.substr(4));
  }
  return out;
}

Status StateDirectory::WriteOffsets(Lsn lsn) const {
  return WriteFile(kOffsetsFile, std::string(kOffsetsHeader) + "\nlsn=" + FormatLsn(lsn) + "\n");
}

Status StateDirectory::WriteFile(const std::string& name, const std::string& text) const {
  std::error_code ec;
  std::filesystem::create_directories(path_, ec);
  if (ec) {
    return Unavailable("Cannot create the capture state directory '" + path_ +
                       "': " + ec.message());
  }
  const std::string target = path_ + "/" + name;
  const std::string temp = target + ".tmp";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return Unavailable(Errno("Cannot write the capture state file", temp));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Unavailable(Errno("Cannot write the capture state file", temp));
      close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    Status s = Unavailable(Errno("Cannot sync the capture state file", temp));
    close(fd);
    return s;
  }
  close(fd);
  if (rename(temp.c_str(), target.c_str()) != 0) {
    return Unavailable(Errno("Cannot replace the capture state file", target));
  }
  int dir = open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)fsync(dir);
    close(dir);
  }
  return Status::Ok();
}

StateDecision DecideState(const std::optional<RegistryRow>& row,
                          const std::optional<std::string>& identity_file, bool offsets_present,
                          const std::string& fingerprint, const std::string& identity,
                          const std::string& directory) {
  StateDecision d;
  if (row) {
    if (row->fingerprint != fingerprint) {
      d.verdict = StateVerdict::kRecover;
      d.reason =
          "The capture settings changed after the recorded state: the host, port, "
          "database, schema, table, slot or publication differs from the settings that "
          "queuebox_capture_state recorded for identity '" +
          identity + "', so the recorded position means nothing for them.";
    } else if (!identity_file || !offsets_present) {
      d.verdict = StateVerdict::kRecover;
      d.reason =
          "The persistent capture state is missing: queuebox_capture_state says that "
          "capture identity '" +
          identity + "' ran before, but the state directory '" + directory + "' has no " +
          (!identity_file ? std::string(kIdentityFile) : std::string(kOffsetsFile)) +
          " file (a missing or empty volume?).";
    } else if (*identity_file != row->state_id) {
      d.verdict = StateVerdict::kRecover;
      d.reason = "The capture state files belong to another instance: the identity file in '" +
                 directory + "' holds state id " + *identity_file +
                 ", but queuebox_capture_state records " + row->state_id + " for identity '" +
                 identity + "'.";
    } else {
      d.verdict = StateVerdict::kResume;
    }
    return d;
  }
  if (identity_file || offsets_present) {
    d.verdict = StateVerdict::kRecover;
    d.reason = "Capture state files exist without a registry row: the state directory '" +
               directory +
               "' holds capture files, but queuebox_capture_state has no row for "
               "identity '" +
               identity + "' (files of another database, or a deleted row).";
    return d;
  }
  d.verdict = StateVerdict::kCreate;
  return d;
}

}  // namespace queuebox::store::capture
