#include <rex/swebench/dataset.hpp>
#include <rex/swebench/log_parsers.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace rex::swebench {

namespace json = boost::json;

namespace {

constexpr std::size_t max_problems = 50;

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    if (!out.empty())
      out += '\n';
    out += line;
  }
  return out;
}

std::string read_whole(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError({fmt::format("{}: {} is a directory, not a file", path, what)});
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError({fmt::format("{}: cannot read the {} file", path, what)});
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

const char* kind_of(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "a list";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

// One JSON document of the file: a line of JSON lines, or an element of a JSON list.
struct Record {
  json::value value;
  std::string where;
};

// The records of a .json (a list, or for predictions an object keyed by id) or .jsonl file.
std::vector<Record> read_records(const std::string& path, std::string_view what,
                                 bool object_allowed, std::vector<std::string>& problems) {
  const std::string text = read_whole(path, what);
  std::vector<Record> out;
  const std::string name = std::filesystem::path(path).filename().string();
  if (ends_with(path, ".jsonl")) {
    std::size_t line_no = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos)
        end = text.size();
      ++line_no;
      std::string_view line(text.data() + start, end - start);
      if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
      const std::string where = fmt::format("{}:{}", name, line_no);
      if (line.find_first_not_of(" \t") != std::string_view::npos) {
        json::error_code ec;
        json::value v = json::parse(line, ec);
        if (ec)
          problems.push_back(fmt::format("{}: not JSON: {}", where, ec.message()));
        else
          out.push_back({std::move(v), where});
      }
      start = end + 1;
    }
    return out;
  }
  json::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) {
    problems.push_back(fmt::format("{}: not JSON: {}", name, ec.message()));
    return out;
  }
  if (v.is_array()) {
    std::size_t i = 0;
    for (auto& item : v.as_array())
      out.push_back({std::move(item), fmt::format("{}: item {}", name, i++)});
  } else if (object_allowed && v.is_object()) {
    for (auto& [key, item] : v.as_object())
      out.push_back({std::move(item), fmt::format("{}: \"{}\"", name, std::string_view(key))});
  } else {
    problems.push_back(fmt::format("{}: expected a list{}, got {}", name,
                                   object_allowed ? " or an object keyed by instance id" : "",
                                   kind_of(v)));
  }
  return out;
}

class Fields {
 public:
  Fields(const json::object& o, std::string where, std::vector<std::string>& problems)
      : o_(o), where_(std::move(where)), problems_(problems) {}

  void problem(std::string_view field, std::string_view message) {
    problems_.push_back(fmt::format("{}: {}: {}", where_, field, message));
  }

  std::string string(std::string_view field, std::string_view hint = {}) {
    const json::value* v = o_.if_contains(field);
    if (!v) {
      problem(field, hint.empty() ? std::string("missing") : fmt::format("missing ({})", hint));
      return {};
    }
    if (!v->is_string()) {
      problem(field, fmt::format("expected a string, got {}", kind_of(*v)));
      return {};
    }
    return std::string(v->get_string());
  }

  // A list of test names, or the JSON text of one (as the published datasets store them).
  std::vector<std::string> tests(std::string_view field) {
    const json::value* v = o_.if_contains(field);
    if (!v) {
      problem(field, "missing");
      return {};
    }
    json::value parsed;
    if (v->is_string()) {
      json::error_code ec;
      parsed = json::parse(v->get_string(), ec);
      if (ec || !parsed.is_array()) {
        problem(field, "a string that is not the JSON text of a list of test names");
        return {};
      }
      v = &parsed;
    }
    if (!v->is_array()) {
      problem(field, fmt::format("expected a list of test names, got {}", kind_of(*v)));
      return {};
    }
    std::vector<std::string> out;
    for (const auto& item : v->as_array()) {
      if (!item.is_string()) {
        problem(field, fmt::format("expected test names (strings), found {}", kind_of(item)));
        return {};
      }
      out.emplace_back(item.get_string());
    }
    return out;
  }

  const std::string& where() const { return where_; }

 private:
  const json::object& o_;
  std::string where_;
  std::vector<std::string>& problems_;
};

constexpr std::string_view needs_5x =
    "SWE-bench 5.x instances name their image, eval_script, log_parser and eval_type; a 4.x "
    "dataset has to be converted (swebench 5.x's tooling writes these fields)";

Instance read_instance(const Record& record, std::vector<std::string>& problems) {
  Instance out;
  out.where = record.where;
  if (!record.value.is_object()) {
    problems.push_back(fmt::format("{}: expected an instance (an object), got {}", record.where,
                                   kind_of(record.value)));
    return out;
  }
  const json::object& o = record.value.as_object();
  Fields f(o, record.where, problems);
  out.instance_id = f.string("instance_id");
  if (!out.instance_id.empty())
    out.where = fmt::format("{} ({})", record.where, out.instance_id);
  Fields g(o, out.where, problems);
  out.repo = g.string("repo");
  out.version = g.string("version");
  out.base_commit = g.string("base_commit");
  out.patch = g.string("patch");
  out.test_patch = g.string("test_patch");
  out.fail_to_pass = g.tests("FAIL_TO_PASS");
  out.pass_to_pass = g.tests("PASS_TO_PASS");
  out.image = g.string("image", needs_5x);
  out.eval_script = g.string("eval_script", needs_5x);
  out.log_parser = g.string("log_parser", needs_5x);
  if (!out.log_parser.empty() && !find_log_parser(out.log_parser))
    g.problem("log_parser", fmt::format("unknown parser \"{}\" (swebench 5.0.2 has {} parsers: "
                                        "parse_log_pytest, parse_log_django, parse_log_jest, ...)",
                                        out.log_parser, log_parser_names().size()));
  const std::string eval_type = g.string("eval_type", needs_5x);
  if (eval_type == "fail_only")
    out.eval_type = EvalType::fail_only;
  else if (!eval_type.empty() && eval_type != "pass_and_fail")
    g.problem("eval_type",
              fmt::format("expected \"pass_and_fail\" or \"fail_only\", got \"{}\"", eval_type));
  if (out.image.empty() && o.contains("image"))
    g.problem("image", "empty");
  if (const json::value* assets = o.if_contains("image_assets"); assets && !assets->is_null()) {
    json::value parsed;
    if (assets->is_string() && !assets->get_string().empty()) {
      json::error_code ec;
      parsed = json::parse(assets->get_string(), ec);
      if (ec)
        g.problem("image_assets", "a string that is not JSON");
      assets = &parsed;
    }
    if (assets->is_object()) {
      out.image_assets = assets->as_object();
    } else if (!(assets->is_string() && assets->get_string().empty())) {
      g.problem("image_assets", fmt::format("expected an object, got {}", kind_of(*assets)));
    }
  }
  return out;
}

void check_capped(std::vector<std::string>& problems) {
  if (problems.size() > max_problems) {
    const std::size_t more = problems.size() - max_problems;
    problems.resize(max_problems);
    problems.push_back(fmt::format("... and {} more", more));
  }
  if (!problems.empty())
    throw InputError(std::move(problems));
}

}  // namespace

InputError::InputError(std::vector<std::string> problems)
    : std::invalid_argument(join_lines(problems)), problems_(std::move(problems)) {}

std::vector<Instance> load_dataset(const std::string& path, std::string_view /*split*/) {
  if (!ends_with(path, ".json") && !ends_with(path, ".jsonl")) {
    if (ends_with(path, ".parquet"))
      throw InputError({fmt::format(
          "{}: parquet is not read here; export it to JSON lines first, e.g. python3 -c "
          "\"import pandas; pandas.read_parquet('{}').to_json('dataset.jsonl', "
          "orient='records', lines=True)\"",
          path, path)});
    throw InputError({fmt::format(
        "{}: not a local .json or .jsonl file; a Hugging Face dataset has to be exported to "
        "JSON lines first, e.g. python3 -c \"import datasets; datasets.load_dataset('{}', "
        "split='test').to_json('dataset.jsonl')\"",
        path, path)});
  }
  std::vector<std::string> problems;
  std::vector<Record> records = read_records(path, "dataset", false, problems);
  std::vector<Instance> out;
  std::map<std::string, std::string> seen;  // id -> where
  for (const Record& record : records) {
    Instance instance = read_instance(record, problems);
    if (!instance.instance_id.empty()) {
      auto [it, fresh] = seen.emplace(instance.instance_id, record.where);
      if (!fresh)
        problems.push_back(fmt::format("{}: instance_id \"{}\" is already used at {}", record.where,
                                       instance.instance_id, it->second));
    }
    out.push_back(std::move(instance));
  }
  check_capped(problems);
  return out;
}

std::vector<Prediction> load_predictions(const std::string& path) {
  if (!ends_with(path, ".json") && !ends_with(path, ".jsonl"))
    throw InputError({fmt::format(
        "{}: predictions must be a .json or .jsonl file (or \"gold\" for the dataset's own "
        "patches)",
        path)});
  std::vector<std::string> problems;
  std::vector<Record> records = read_records(path, "predictions", true, problems);
  std::vector<Prediction> out;
  std::map<std::string, std::string> seen;
  for (const Record& record : records) {
    if (!record.value.is_object()) {
      problems.push_back(fmt::format("{}: expected a prediction (an object), got {}", record.where,
                                     kind_of(record.value)));
      continue;
    }
    const json::object& o = record.value.as_object();
    Fields f(o, record.where, problems);
    Prediction p;
    p.where = record.where;
    p.instance_id = f.string("instance_id");
    p.model_name_or_path = f.string("model_name_or_path");
    if (const json::value* patch = o.if_contains("model_patch"); !patch)
      f.problem("model_patch", "missing (null or \"\" for no patch)");
    else if (patch->is_string())
      p.model_patch = std::string(patch->get_string());
    else if (!patch->is_null())
      f.problem("model_patch", fmt::format("expected a string or null, got {}", kind_of(*patch)));
    if (!p.instance_id.empty()) {
      auto [it, fresh] = seen.emplace(p.instance_id, record.where);
      if (!fresh)
        problems.push_back(fmt::format("{}: a second prediction for \"{}\" (the first is at {})",
                                       record.where, p.instance_id, it->second));
    }
    out.push_back(std::move(p));
  }
  if (records.empty() && problems.empty())
    problems.push_back(fmt::format("{}: no predictions", path));
  check_capped(problems);
  return out;
}

std::vector<Prediction> gold_predictions(const std::vector<Instance>& dataset) {
  std::vector<Prediction> out;
  for (const auto& instance : dataset)
    out.push_back({instance.instance_id, "gold", instance.patch, instance.where});
  return out;
}

std::string model_directory(std::string_view model_name_or_path) {
  std::string out;
  for (char c : model_name_or_path) {
    if (c == '/')
      out += "__";
    else
      out += c;
  }
  return out;
}

}  // namespace rex::swebench
