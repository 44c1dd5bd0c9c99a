// SPDX-License-Identifier: Apache-2.0
// One HTTP(S) request at a time, through libcurl: what the MLflow tracker and `spur runs import mlflow://` speak to
// a tracking server with. Torch-free and Qt-free. A request blocks its thread until the answer, the connection
// fails or the timeout passes; no retries here (the callers decide what a failure means).
//
// Threads: any; each call is independent (one libcurl handle per request, the library initialised once).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <spur/error.h>

namespace spur::http {

struct Request {
  std::string method = "GET";  // GET or POST
  std::string url;
  std::string body;  // sent with POST as application/json
  std::vector<std::pair<std::string, std::string>> headers;
  /// Basic authentication (user and password), when `user` is not empty.
  std::string user, password;
  /// A CA bundle to verify the server's certificate with. Default: empty, the system's.
  std::string ca_file;
  /// Skip the TLS certificate check (a test server's self-signed certificate). Default: false.
  bool insecure = false;
  /// Default: 10 s to connect, 30 s for the whole request.
  std::chrono::milliseconds connect_timeout{10000}, timeout{30000};
};

struct Response {
  long status = 0;  // the HTTP status code
  std::string body;
};

/// The transport failed (no connection, a timeout, a TLS error): the message says which and names the URL.
class TransportError : public Error {
 public:
  using Error::Error;
};

/// Sends `request`; any HTTP status is a Response (the caller judges it). Throws TransportError.
Response send(const Request& request);

/// `text` percent-encoded for a URL's query.
std::string url_encode(const std::string& text);

/// `url` without a user name or password in it (for messages: scheme://user:password@host/ shows as
/// scheme://host/).
std::string without_credentials(const std::string& url);

}  // namespace spur::http
