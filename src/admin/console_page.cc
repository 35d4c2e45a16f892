#include "admin/console_page.h"

#include <httplib.h>

#include <string>

namespace queuebox {

std::string_view ConsoleAsset(std::string_view name);  // embedded_console.cc

void ServeConsoleFile(std::string_view file, httplib::Response& res) {
  std::string_view body = ConsoleAsset(file);
  if (body.empty()) {
    res.status = 404;
    return;
  }
  const char* type = file.ends_with(".js")    ? "text/javascript; charset=utf-8"
                     : file.ends_with(".css") ? "text/css; charset=utf-8"
                                              : "text/html; charset=utf-8";
  res.status = 200;
  res.set_content(std::string(body), type);
  res.set_header("Content-Security-Policy", std::string(kConsoleCsp));
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Cache-Control", "no-store");
}

}  // namespace queuebox
