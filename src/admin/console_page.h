// console_page.h: the console page at /admin/console/ (docs/console.md): its files embedded in
// the binary (embed_console.cmake), served with a strict Content-Security-Policy (no inline
// script or style, nothing from another origin, no framing) and no cookies. The page holds no
// data; it reads /admin/api/ with the token the operator types.
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

namespace httplib {
struct Response;
}

namespace queuebox {

// The Content-Security-Policy of the page and its files.
inline constexpr std::string_view kConsoleCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// Answers `file` ("index.html", "console.js", "console.css") with its type and the security
// headers; 404 for any other name.
void ServeConsoleFile(std::string_view file, httplib::Response& res);

}  // namespace queuebox
