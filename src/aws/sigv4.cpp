#include <rex/aws/sigv4.hpp>

#include <fmt/core.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <stdexcept>

namespace rex::aws {

namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xf]);
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A header's value as signed: outer whitespace gone, inner runs of it one space.
std::string trimmed(std::string_view value) {
  std::string out;
  bool space = false;
  for (const char c : value) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      space = !out.empty();
      continue;
    }
    if (space)
      out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string date_only(std::string_view amz) {
  return std::string(amz.substr(0, 8));
}

}  // namespace

std::string uri_encode(std::string_view text, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 0xf]);
    }
  }
  return out;
}

std::string canonical_query(const Headers& pairs) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(pairs.size());
  for (const auto& [name, value] : pairs)
    encoded.emplace_back(uri_encode(name), uri_encode(value));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty())
      out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  return hex(digest, n);
}

std::string amz_date(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

namespace detail {

SigningParts signing_parts(const SigningRequest& request, const Credentials& credentials,
                           const Scope& scope, std::chrono::system_clock::time_point now) {
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty())
    throw std::invalid_argument("AWS credentials need an access key id and a secret access key");
  if (scope.region.empty() || scope.service.empty())
    throw std::invalid_argument("an AWS signature needs a region and a service");
  const std::string date = amz_date(now);

  // Signed headers: every one given, Host, X-Amz-Date and the session token; a name given twice
  // has its values joined by commas, in order.
  std::map<std::string, std::string> canonical;
  auto add = [&canonical](std::string_view name, std::string_view value) {
    auto [it, fresh] = canonical.try_emplace(lower(name), trimmed(value));
    if (!fresh)
      it->second += "," + trimmed(value);
  };
  for (const auto& [name, value] : request.headers) {
    const std::string key = lower(name);
    if (key == "host" || key == "x-amz-date" || key == "authorization" ||
        (key == "x-amz-security-token" && !credentials.session_token.empty()))
      continue;  // set here
    add(name, value);
  }
  add("host", request.host);
  add("x-amz-date", date);
  if (!credentials.session_token.empty())
    add("x-amz-security-token", credentials.session_token);

  SigningParts p;
  std::string header_block;
  for (const auto& [name, value] : canonical) {
    header_block += name + ":" + value + "\n";
    if (!p.signed_headers.empty())
      p.signed_headers.push_back(';');
    p.signed_headers += name;
  }
  const std::string path = request.path.empty() ? "/" : request.path;
  p.canonical_request = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method,
                                    uri_encode(path, true), canonical_query(request.query),
                                    header_block, p.signed_headers, sha256_hex(request.body));
  const std::string credential_scope =
      fmt::format("{}/{}/{}/aws4_request", date_only(date), scope.region, scope.service);
  p.string_to_sign = fmt::format("{}\n{}\n{}\n{}", kAlgorithm, date, credential_scope,
                                 sha256_hex(p.canonical_request));
  std::string key = hmac("AWS4" + credentials.secret_access_key, date_only(date));
  key = hmac(key, scope.region);
  key = hmac(key, scope.service);
  key = hmac(key, "aws4_request");
  const std::string mac = hmac(key, p.string_to_sign);
  p.signature = hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());
  return p;
}

}  // namespace detail

Headers sign_v4(const SigningRequest& request, const Credentials& credentials, const Scope& scope,
                std::chrono::system_clock::time_point now) {
  const detail::SigningParts p = detail::signing_parts(request, credentials, scope, now);
  const std::string date = amz_date(now);
  Headers out;
  out.emplace_back("X-Amz-Date", date);
  if (!credentials.session_token.empty())
    out.emplace_back("X-Amz-Security-Token", credentials.session_token);
  out.emplace_back("Authorization",
                   fmt::format("{} Credential={}/{}/{}/{}/aws4_request, SignedHeaders={}, "
                               "Signature={}",
                               kAlgorithm, credentials.access_key_id, date_only(date), scope.region,
                               scope.service, p.signed_headers, p.signature));
  return out;
}

}  // namespace rex::aws
