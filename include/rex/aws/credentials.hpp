// AWS credentials and region, found as the AWS CLI finds them.
//
// Credentials, first found wins:
// 1. The environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or the
//    older AWS_SECURITY_TOKEN). Skipped when a profile is named explicitly (as the CLI's
//    --profile skips them); AWS_PROFILE only picks the profile of the files.
// 2. The shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials),
//    section [NAME]: aws_access_key_id, aws_secret_access_key, aws_session_token.
// 3. The config file (AWS_CONFIG_FILE, else ~/.aws/config), section [profile NAME] ([default]
//    for the default profile): the same keys.
// The profile: the one named, else AWS_PROFILE, else "default".
// Region: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's `region` in the config file.
//
// Guarantees: what cannot be used fails here, not at the first call, with a CredentialsError
// that names the source: half a key pair, a file that does not parse (its line), a profile
// that is not there, a profile that asks for what rex does not do (role_arn, credential_process,
// SSO: named), or nothing found anywhere (every place looked at listed).
#pragma once

#include <rex/aws/sigv4.hpp>
#include <rex/core/environment.hpp>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rex::aws {

class CredentialsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An INI file of the AWS CLI: section name -> key -> value.
using IniFile = std::map<std::string, std::map<std::string, std::string>>;

/// Parses the AWS CLI's INI dialect: `[section]` lines, `key = value` lines, comments starting
/// with '#' or ';', blank lines; an indented line continues the key above it (the CLI's nested
/// settings, such as `s3 =` with its own keys), and is kept out of the profile's own keys.
/// Throws CredentialsError naming `file` and the line for anything else.
IniFile parse_ini(std::string_view text, std::string_view file);

using rex::EnvLookup;
using rex::process_environment;

/// The credentials (see above). `profile` empty: AWS_PROFILE, else "default".
Credentials find_credentials(const std::string& profile = {},
                             const EnvLookup& env = process_environment());

/// The region (see above). Throws CredentialsError when none is set anywhere.
std::string find_region(const std::string& profile = {},
                        const EnvLookup& env = process_environment());

}  // namespace rex::aws
