#include <rex/aws/credentials.hpp>

#include <fmt/core.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace rex::aws {

namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A file of the CLI's, or nothing when it does not exist.
std::optional<IniFile> load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return std::nullopt;
    throw CredentialsError(fmt::format("{}: cannot be read: {}", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_ini(text.str(), path);
}

struct Files {
  std::string credentials;
  std::string config;
};

Files files_of(const EnvLookup& env) {
  const std::string home = env("HOME").value_or("");
  Files f;
  f.credentials = env("AWS_SHARED_CREDENTIALS_FILE").value_or(home + "/.aws/credentials");
  f.config = env("AWS_CONFIG_FILE").value_or(home + "/.aws/config");
  return f;
}

std::string profile_of(const std::string& named, const EnvLookup& env) {
  if (!named.empty())
    return named;
  const auto from_env = env("AWS_PROFILE");
  return from_env && !from_env->empty() ? *from_env : "default";
}

// The config file's section of a profile: [profile NAME], or [default] for the default one.
const std::map<std::string, std::string>* config_section(const IniFile& config,
                                                         const std::string& profile) {
  if (auto it = config.find("profile " + profile); it != config.end())
    return &it->second;
  if (profile == "default")
    if (auto it = config.find("default"); it != config.end())
      return &it->second;
  return nullptr;
}

std::string value_of(const std::map<std::string, std::string>& keys, std::string_view name) {
  const auto it = keys.find(std::string(name));
  return it == keys.end() ? std::string() : it->second;
}

// Keys of one section, or nothing when it holds none; refuses what rex cannot use.
std::optional<Credentials> from_section(const std::map<std::string, std::string>& keys,
                                        const std::string& source) {
  for (const char* unsupported : {"role_arn", "credential_process", "sso_session", "sso_start_url",
                                  "web_identity_token_file"})
    if (keys.count(unsupported) != 0 && keys.count("aws_access_key_id") == 0)
      throw CredentialsError(fmt::format(
          "{}: uses {}, which rex does not support: give it keys (aws_access_key_id and "
          "aws_secret_access_key) or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
          source, unsupported));
  Credentials c;
  c.access_key_id = value_of(keys, "aws_access_key_id");
  c.secret_access_key = value_of(keys, "aws_secret_access_key");
  c.session_token = value_of(keys, "aws_session_token");
  if (c.session_token.empty())
    c.session_token = value_of(keys, "aws_security_token");
  if (c.access_key_id.empty() && c.secret_access_key.empty())
    return std::nullopt;
  if (c.access_key_id.empty() || c.secret_access_key.empty())
    throw CredentialsError(
        fmt::format("{}: has {} but not {}", source,
                    c.access_key_id.empty() ? "aws_secret_access_key" : "aws_access_key_id",
                    c.access_key_id.empty() ? "aws_access_key_id" : "aws_secret_access_key"));
  c.source = source;
  return c;
}

}  // namespace

IniFile parse_ini(std::string_view text, std::string_view file) {
  IniFile out;
  std::map<std::string, std::string>* section = nullptr;
  bool nested = false;  // in the indented lines under a key with an empty value
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view raw = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++number;
    const std::string_view line = strip(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';')
      continue;
    const bool indented = raw.front() == ' ' || raw.front() == '\t';
    if (indented && section != nullptr && nested)
      continue;  // a nested setting (`s3 =` and its keys): not a key of the profile
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3)
        throw CredentialsError(
            fmt::format("{}, line {}: a section header must be [NAME]", file, number));
      const std::string name(strip(line.substr(1, line.size() - 2)));
      if (name.empty())
        throw CredentialsError(fmt::format("{}, line {}: a section has no name", file, number));
      section = &out[name];
      nested = false;
      continue;
    }
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos)
      throw CredentialsError(
          fmt::format("{}, line {}: expected `key = value` or [section]", file, number));
    if (section == nullptr)
      throw CredentialsError(
          fmt::format("{}, line {}: a setting before any [section]", file, number));
    const std::string key(strip(line.substr(0, eq)));
    const std::string value(strip(line.substr(eq + 1)));
    if (key.empty())
      throw CredentialsError(fmt::format("{}, line {}: a setting without a name", file, number));
    nested = value.empty();
    if (!nested)
      (*section)[key] = value;
  }
  return out;
}

Credentials find_credentials(const std::string& profile, const EnvLookup& env) {
  std::vector<std::string> looked;
  if (profile.empty()) {
    const std::string id = env("AWS_ACCESS_KEY_ID").value_or("");
    const std::string secret = env("AWS_SECRET_ACCESS_KEY").value_or("");
    if (!id.empty() || !secret.empty()) {
      if (id.empty() || secret.empty())
        throw CredentialsError(
            fmt::format("the environment has {} but not {}",
                        id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID",
                        id.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY"));
      Credentials c{id, secret, env("AWS_SESSION_TOKEN").value_or(""), "environment"};
      if (c.session_token.empty())
        c.session_token = env("AWS_SECURITY_TOKEN").value_or("");
      return c;
    }
    looked.emplace_back("the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)");
  }
  const std::string name = profile_of(profile, env);
  const Files files = files_of(env);
  bool profile_found = false;
  if (const auto credentials = load(files.credentials)) {
    if (auto it = credentials->find(name); it != credentials->end()) {
      profile_found = true;
      if (auto c = from_section(it->second, files.credentials + ", profile " + name))
        return *c;
    }
  }
  looked.push_back(files.credentials + " [" + name + "]");
  if (const auto config = load(files.config)) {
    if (const auto* keys = config_section(*config, name)) {
      profile_found = true;
      if (auto c = from_section(*keys, files.config + ", profile " + name))
        return *c;
    }
  }
  looked.push_back(files.config + (name == "default" ? " [default]" : " [profile " + name + "]"));
  std::string where;
  for (const auto& place : looked)
    where += (where.empty() ? "" : "; ") + place;
  if (!profile_found && name != "default")
    throw CredentialsError(
        fmt::format("the AWS profile '{}' was not found (looked in {})", name, where));
  throw CredentialsError(fmt::format("no AWS credentials found (looked in {})", where));
}

std::string find_region(const std::string& profile, const EnvLookup& env) {
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"})
    if (auto v = env(name); v && !v->empty())
      return *v;
  const std::string name = profile_of(profile, env);
  const Files files = files_of(env);
  if (const auto config = load(files.config))
    if (const auto* keys = config_section(*config, name))
      if (auto region = value_of(*keys, "region"); !region.empty())
        return region;
  throw CredentialsError(fmt::format(
      "no AWS region set: set AWS_REGION or AWS_DEFAULT_REGION, or `region` in {} for the "
      "profile '{}'",
      files.config, name));
}

}  // namespace rex::aws
