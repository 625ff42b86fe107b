// The AWS CLI's INI files (credentials and config), read as rex reads them.
//
// Properties: a file either parses or is refused with a CredentialsError naming the file and
// its line (nothing else, no crash); what parses has named sections and named keys. The same
// text as a shared credentials file then either gives credentials with both halves of a key
// pair, naming where they came from, or a CredentialsError.
#include <rex/aws/credentials.hpp>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;
using namespace rex::aws;

void run(std::string_view text) {
  try {
    const IniFile f = parse_ini(text, "config");
    for (const auto& [name, keys] : f) {
      check(!name.empty(), "a section has a name");
      for (const auto& [key, value] : keys)
        check(!key.empty() && !value.empty(), "a setting has a name and a value");
    }
  } catch (const CredentialsError& e) {
    check(std::string_view(e.what()).starts_with("config, line "),
          "a refused file names itself and its line");
    return;
  }
  const auto dir = rex::fuzz::scratch_dir();
  std::ofstream(dir / "credentials", std::ios::binary | std::ios::trunc) << text;
  const auto env = [&dir](const std::string& name) -> std::optional<std::string> {
    if (name == "AWS_SHARED_CREDENTIALS_FILE")
      return (dir / "credentials").string();
    if (name == "AWS_CONFIG_FILE")
      return (dir / "no-config").string();
    return std::nullopt;
  };
  try {
    const Credentials c = find_credentials({}, env);
    check(!c.access_key_id.empty() && !c.secret_access_key.empty(), "both halves of a key pair");
    check(!c.source.empty(), "credentials name their source");
  } catch (const CredentialsError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
