// Instances files: strict decoding of each line, then the checks that need the whole file
// (unique ids) or the file system (upload sources).
#include <rex/eval/eval_instance.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/json_kind.hpp"

namespace rex {

namespace json = boost::json;

namespace {

constexpr std::size_t max_problems = 50;

// One line's problem; the loader collects them.
class LineError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

[[noreturn]] void wrong(std::string_view where, std::string_view field, std::string_view expected,
                        const json::value& got) {
  throw LineError(fmt::format("{}: {}: expected {}, got {}", where, field, expected,
                              detail::json_kind_phrase(got)));
}

std::string string_field(std::string_view where, std::string_view field, const json::value& v) {
  if (!v.is_string())
    wrong(where, field, "a string", v);
  return std::string(v.as_string());
}

std::vector<std::string> string_list(std::string_view where, std::string_view field,
                                     const json::value& v) {
  if (!v.is_array())
    wrong(where, field, "an array of strings", v);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.as_array().size(); ++i) {
    const auto& item = v.as_array()[i];
    const std::string name = fmt::format("{}[{}]", field, i);
    out.push_back(string_field(where, name, item));
    if (out.back().empty())
      throw LineError(fmt::format("{}: {}: must not be empty", where, name));
  }
  return out;
}

void check_id(std::string_view where, const std::string& id) {
  // The id names a directory (DIR/artifacts/<id>/, a local working directory).
  if (id.empty() || id == "." || id == ".." || id.size() > 200)
    throw LineError(
        fmt::format("{}: id: must be 1 to 200 characters and not \".\" or \"..\"", where));
  for (unsigned char c : id) {
    if (c == '/' || c < 0x20 || c == 0x7f)
      throw LineError(fmt::format(
          "{}: id: \"{}\" holds '/' or a control character (ids name directories)", where, id));
  }
}

EvalUpload parse_upload(std::string_view where, std::size_t index, const json::value& v,
                        std::string_view base_dir) {
  const std::string name = fmt::format("upload[{}]", index);
  if (!v.is_object())
    wrong(where, name, "an object {\"source\": ..., \"target\": ...}", v);
  EvalUpload upload;
  bool has_source = false, has_target = false;
  for (const auto& [key, value] : v.as_object()) {
    if (key == "source") {
      upload.source = string_field(where, name + ".source", value);
      has_source = true;
    } else if (key == "target") {
      upload.target = string_field(where, name + ".target", value);
      has_target = true;
    } else {
      throw LineError(fmt::format("{}: {}: unknown field \"{}\" (known: source, target)", where,
                                  name, std::string_view(key)));
    }
  }
  if (!has_source || upload.source.empty())
    throw LineError(fmt::format("{}: {}.source: required, a non-empty path", where, name));
  if (!has_target || upload.target.empty())
    throw LineError(fmt::format("{}: {}.target: required, a non-empty path", where, name));
  std::filesystem::path source(upload.source);
  if (source.is_relative())
    source = std::filesystem::path(base_dir) / source;
  upload.source = source.lexically_normal().string();
  return upload;
}

}  // namespace

EvalInstanceError::EvalInstanceError(std::vector<std::string> problems)
    : std::invalid_argument([&] {
        std::string text;
        for (const auto& p : problems)
          text += (text.empty() ? "" : "\n") + p;
        return text;
      }()),
      problems_(std::move(problems)) {}

std::string eval_artifact_name(std::string_view path) {
  std::string p(path);
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

namespace {

EvalInstance parse_line(std::string_view text, std::string_view base_dir, std::string_view where) {
  json::value doc;
  boost::system::error_code ec;
  doc = json::parse(text, ec);
  if (ec)
    throw LineError(fmt::format("{}: not valid JSON: {}", where, ec.message()));
  if (!doc.is_object())
    throw LineError(
        fmt::format("{}: expected a JSON object, got {}", where, detail::json_kind_phrase(doc)));
  EvalInstance instance;
  bool has_id = false, has_run = false;
  for (const auto& [key_view, value] : doc.as_object()) {
    const std::string_view key = key_view;
    if (key == "id") {
      instance.id = string_field(where, key, value);
      has_id = true;
    } else if (key == "image") {
      instance.image = string_field(where, key, value);
      if (instance.image->empty())
        throw LineError(fmt::format("{}: image: must not be empty", where));
    } else if (key == "deployment") {
      if (!value.is_object())
        wrong(where, key, "a deployment config object", value);
      try {
        instance.deployment = deployment_config_from_json(value);
      } catch (const DeploymentConfigError& e) {
        throw LineError(fmt::format("{}: deployment: {}", where, e.what()));
      }
    } else if (key == "upload") {
      if (!value.is_array())
        wrong(where, key, "an array of {\"source\", \"target\"} objects", value);
      for (std::size_t i = 0; i < value.as_array().size(); ++i)
        instance.upload.push_back(parse_upload(where, i, value.as_array()[i], base_dir));
    } else if (key == "setup") {
      instance.setup = string_list(where, key, value);
    } else if (key == "run") {
      instance.run = string_field(where, key, value);
      has_run = true;
    } else if (key == "timeout") {
      if (!value.is_number() || value.to_number<double>() <= 0)
        throw LineError(
            fmt::format("{}: timeout: expected a positive number of seconds, got {}", where,
                        value.is_number() ? "a number <= 0" : detail::json_kind_phrase(value)));
      instance.timeout = value.to_number<double>();
    } else if (key == "artifacts") {
      instance.artifacts = string_list(where, key, value);
    } else {
      throw LineError(fmt::format(
          "{}: unknown field \"{}\" (known: id, image, deployment, upload, setup, run, timeout, "
          "artifacts)",
          where, key));
    }
  }
  if (!has_id)
    throw LineError(fmt::format("{}: id: required", where));
  check_id(where, instance.id);
  if (!has_run || instance.run.find_first_not_of(" \t\r\n") == std::string::npos)
    throw LineError(fmt::format("{}: run: required, a command or script", where));
  if (instance.image && instance.deployment)
    throw LineError(fmt::format(
        "{}: image and deployment: give one (an image goes into the deployment's \"image\")",
        where));
  std::map<std::string, std::string> names;  // artifact file name -> its path
  for (const auto& path : instance.artifacts) {
    const std::string name = eval_artifact_name(path);
    if (name.empty() || name == "/" || name == "." || name == "..")
      throw LineError(
          fmt::format("{}: artifacts: \"{}\" has no file name to save it under", where, path));
    if (name == eval_setup_log || name == eval_run_log)
      throw LineError(
          fmt::format("{}: artifacts: \"{}\" would be saved as {}, which holds rex's "
                      "log; copy it to another name in run",
                      where, path, name));
    auto [it, fresh] = names.emplace(name, path);
    if (!fresh)
      throw LineError(fmt::format("{}: artifacts: \"{}\" and \"{}\" would both be saved as \"{}\"",
                                  where, it->second, path, name));
  }
  return instance;
}

}  // namespace

EvalInstance parse_eval_instance(std::string_view text, std::string_view base_dir,
                                 std::string_view where) {
  try {
    return parse_line(text, base_dir, where);
  } catch (const LineError& e) {
    throw EvalInstanceError({e.what()});
  }
}

std::vector<EvalInstance> load_eval_instances(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw EvalInstanceError({fmt::format("{}: cannot open the instances file", path)});
  std::error_code ec;
  const std::string base_dir =
      std::filesystem::absolute(std::filesystem::path(path), ec).parent_path().string();
  std::vector<EvalInstance> instances;
  std::vector<std::string> problems;
  std::map<std::string, int> first_line;  // id -> the line that used it first
  std::string text;
  int number = 0;
  auto note = [&](std::string problem) {
    if (problems.size() < max_problems)
      problems.push_back(std::move(problem));
  };
  while (std::getline(in, text)) {
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = fmt::format("{}:{}", path, number);
    try {
      EvalInstance instance = parse_line(text, base_dir, where);
      instance.line = number;
      auto [it, fresh] = first_line.emplace(instance.id, number);
      if (!fresh) {
        note(fmt::format("{}: id \"{}\" is already used on line {}", where, instance.id,
                         it->second));
        continue;
      }
      for (std::size_t i = 0; i < instance.upload.size(); ++i) {
        if (!std::filesystem::exists(instance.upload[i].source, ec))
          note(fmt::format("{}: upload[{}].source: no such file or directory: {}", where, i,
                           instance.upload[i].source));
      }
      instances.push_back(std::move(instance));
    } catch (const LineError& e) {
      note(e.what());
    }
  }
  if (in.bad())
    note(fmt::format("{}: read error after line {}", path, number));
  if (!problems.empty())
    throw EvalInstanceError(std::move(problems));
  if (instances.empty())
    throw EvalInstanceError({fmt::format("{}: no instances (one JSON object per line)", path)});
  return instances;
}

}  // namespace rex
