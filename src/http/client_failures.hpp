// The failures of a request as rex's HTTP client words them, for the client and for the
// gateway's forward link (runtime/forward_link.hpp), so both report a call alike.
#pragma once

#include <rex/http/client_errors.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rex::http::detail {

/// No complete answer to `method url` within `timeout`.
RequestTimeoutError timed_out(std::string_view method, const std::string& url,
                              std::chrono::steady_clock::duration timeout);

/// A call that failed at `stage` ("reading the answer") after `attempts` attempts: `why` is
/// the failure as told, `error` the error's own message. A ConnectionError, or a
/// SwerexException for an answer that is malformed (the server's fault, not the connection's).
[[noreturn]] void throw_failed(std::string_view method, const std::string& url,
                               std::string_view stage, const std::string& why,
                               const std::string& error, unsigned attempts, bool malformed);

/// An answer too large to keep in memory: by its Content-Length when it gave one larger than the
/// limit, else by what came.
[[noreturn]] void refuse_large_answer(const std::string& url, std::optional<std::uint64_t> length,
                                      std::uint64_t limit);

}  // namespace rex::http::detail
