// AWS Signature Version 4: the Authorization header every AWS API call carries.
//
// sign_v4 signs a request as AWS's services check it: the canonical request (method, the path
// URI-encoded once more, the query sorted and encoded, the signed headers lower-cased, trimmed
// and sorted, the SHA-256 of the body), the string to sign over the date, region and service
// (the scope), and the HMAC-SHA256 chain that derives the signing key from the secret. Every
// header given is signed, besides Host and X-Amz-Date (and X-Amz-Security-Token with a session
// token), which it adds.
//
// Not covered: S3's variant (a path encoded once, X-Amz-Content-Sha256), presigned URLs, and
// chunked payload signing; rex's calls (ECS, EC2, IAM) need none of them.
//
// Threading: pure functions.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rex::aws {

using Headers = std::vector<std::pair<std::string, std::string>>;

/// Keys that sign requests, and where they were found ("environment", "FILE, profile NAME").
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials (STS); empty for long-term keys
  std::string source;
};

/// What one signature covers.
struct SigningRequest {
  std::string method;  // "GET", "POST"
  std::string host;    // the Host header's value: "ecs.us-east-1.amazonaws.com", "127.0.0.1:5000"
  std::string path = "/";  // as sent on the wire (already percent-encoded)
  Headers query;           // decoded names and values, in any order
  Headers headers;         // besides Host and X-Amz-Date; all of them are signed
  std::string_view body;
};

/// The credential scope: "DATE/REGION/SERVICE/aws4_request".
struct Scope {
  std::string region;   // "us-east-1"
  std::string service;  // the signing name: "ecs", "ec2", "iam"
};

/// The headers to add to the request: X-Amz-Date, X-Amz-Security-Token (with a session
/// token) and Authorization. Throws std::invalid_argument for credentials without a key id or
/// secret, or a scope without a region or service.
Headers sign_v4(const SigningRequest& request, const Credentials& credentials, const Scope& scope,
                std::chrono::system_clock::time_point now);

/// RFC 3986 percent-encoding as SigV4 wants it: every byte but A-Z a-z 0-9 - _ . ~ as %XX
/// (upper-case hex); '/' kept when `keep_slash`.
std::string uri_encode(std::string_view text, bool keep_slash = false);

/// name=value pairs, each encoded, sorted by name then value, joined by '&' (a request's query
/// string and the Query protocol's body use the same form).
std::string canonical_query(const Headers& pairs);

/// The lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

/// "YYYYMMDDTHHMMSSZ" in UTC.
std::string amz_date(std::chrono::system_clock::time_point t);

namespace detail {
/// The canonical request and the string to sign (for tests and for messages when AWS refuses a
/// signature: its error names the canonical request it computed).
struct SigningParts {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;
  std::string signature;
};
SigningParts signing_parts(const SigningRequest& request, const Credentials& credentials,
                           const Scope& scope, std::chrono::system_clock::time_point now);
}  // namespace detail

}  // namespace rex::aws
