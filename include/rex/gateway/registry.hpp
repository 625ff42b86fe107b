// Registry: what the gateway offers, read once at start from `--registry DIR` (shared/GATEWAY.md,
// "Registry"): the environments sessions are made from, and the agents/, tools/ and prompts/
// data it serves read-only to the agents outside. Declarative YAML, no logic.
//
//   DIR/environments/NAME.yaml   one Environment per file (*.yaml or *.yml)
//   DIR/agents/*, tools/*, prompts/*
//                                *.yaml, *.yml and *.json converted to JSON, any other file
//                                (*.md, *.txt...) as a JSON string; keyed by the file's name
//                                without its extension
//
// Guarantees: the built-in environments ("local", "Python3") exist with or without a directory,
// and a file's environment of the same name replaces one. Every file is checked when loaded:
// an unknown field, a wrong type or a bad value is a GatewayConfigError naming the file, the
// line and the field, so a typo never becomes a silent default. Files whose names start with
// '.' and subdirectories are ignored.
//
// Threading: load() blocks on the disk. A Registry is immutable once made, so any number of
// threads may read it; pointers it returns live as long as it does.
#pragma once

#include <rex/gateway/environment.hpp>
#include <rex/gateway/gateway_config.hpp>

#include <boost/json/value.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rex::gateway {

class Registry {
 public:
  /// The built-in environments only: "local" (provider local) and "Python3" (provider docker,
  /// image `python_image`), both with Environment's default lifetimes.
  explicit Registry(std::string python_image = "rex-python:3.11");

  /// The built-ins, then the directory's environments over them, and its data. A missing `dir`
  /// is an error, missing subdirectories are not. Two environments of one name, or two data
  /// files of one kind and name ("a.yaml" and "a.json"), are an error naming both files.
  static Registry load(const std::filesystem::path& dir,
                       std::string python_image = "rex-python:3.11");

  /// The environment named exactly `name`, or null.
  const Environment* find(std::string_view name) const;
  /// Every environment, sorted by name.
  std::vector<const Environment*> environments() const;
  /// "agents", "tools" or "prompts": name -> data (empty for any other kind).
  const std::map<std::string, boost::json::value>& data(std::string_view kind) const;

 private:
  std::map<std::string, Environment, std::less<>> environments_;
  std::map<std::string, boost::json::value> agents_;
  std::map<std::string, boost::json::value> tools_;
  std::map<std::string, boost::json::value> prompts_;
};

/// Parses one environment file's YAML text. `source` names it in messages; `stem` is the name
/// when the file sets none. The fields are Environment's; numbers are finite and not negative
/// (cpus above 0), memory a size docker accepts, env a mapping of scalars (their text), mounts
/// and collect lists of non-empty strings, and name [A-Za-z0-9][A-Za-z0-9._-]{0,62}. An empty
/// document is an environment of the defaults.
Environment parse_environment(std::string_view yaml_text, std::string_view source,
                              std::string_view stem);

/// One agents/, tools/ or prompts/ file's content as JSON, by its extension (with the dot,
/// any case): ".yaml" and ".yml" converted (YAML 1.2's core types: null, booleans, integers,
/// floats, other scalars and quoted ones strings), ".json" parsed, anything else the text as a
/// string, which must be UTF-8. Mapping keys are unique; nesting stops at 64 levels and aliases
/// may expand to a million values at most.
boost::json::value parse_data_file(std::string_view text, std::string_view source,
                                   std::string_view extension);

}  // namespace rex::gateway
