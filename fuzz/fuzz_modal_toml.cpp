// Modal's settings file (~/.modal.toml), read as rex reads it.
//
// Properties: a file either parses or is refused with a DeploymentConfigError naming the file
// and its line (nothing else, no crash); a boolean is "true" or "false". The same text as the
// settings file then gives a profile (one of its tables, or "default" with no settings) or a
// DeploymentConfigError naming the file.
#include <rex/backends/modal/modal_profile.hpp>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;
using namespace rex;

void run(std::string_view text) {
  ModalToml parsed;
  try {
    parsed = parse_modal_toml(text, "config");
    for (const auto& [name, keys] : parsed)
      for (const auto& [key, value] : keys)
        if (value.kind == ModalTomlValue::Kind::boolean)
          check(value.text == (value.flag ? "true" : "false"), "a boolean's text is its value");
  } catch (const DeploymentConfigError& e) {
    check(std::string_view(e.what()).starts_with("config, line "),
          "a refused file names itself and its line");
    return;
  }
  const auto path = rex::fuzz::scratch_dir() / "modal.toml";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  const auto env = [&path](const std::string& name) -> std::optional<std::string> {
    if (name == "MODAL_CONFIG_PATH")
      return path.string();
    return std::nullopt;
  };
  try {
    const auto profile = find_modal_profile(env);
    check(profile.has_value(), "a settings file that is there gives a profile");
    check(parsed.count(profile->name) == 1 ||
              (profile->name == "default" && profile->settings.empty()),
          "the profile is one of the file's tables, or an empty default");
  } catch (const DeploymentConfigError& e) {
    check(std::string_view(e.what()).find(path.string()) != std::string_view::npos,
          "a refused profile names the file");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
