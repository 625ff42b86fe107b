#include <rex/eval/eval_result.hpp>

#include <fmt/format.h>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <ctime>

namespace rex {

namespace json = boost::json;

namespace {

constexpr std::string_view status_names[] = {"passed", "failed", "timeout", "error"};

json::value optional_seconds(const std::optional<double>& v) {
  return v ? json::value(std::round(*v * 1000) / 1000) : json::value(nullptr);
}

// Boost.JSON writes doubles in exponent form; records are read by people too.
void write_compact(std::string& out, const json::value& v) {
  switch (v.kind()) {
    case json::kind::double_:
      if (std::isfinite(v.get_double())) {
        out += fmt::format("{}", v.get_double());
        return;
      }
      break;
    case json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.get_object()) {
        if (!first)
          out += ',';
        first = false;
        out += json::serialize(json::string(key));
        out += ':';
        write_compact(out, value);
      }
      out += '}';
      return;
    }
    case json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v.get_array()) {
        if (!first)
          out += ',';
        first = false;
        write_compact(out, item);
      }
      out += ']';
      return;
    }
    default:
      break;
  }
  out += json::serialize(v);
}

json::value optional_string(const std::optional<std::string>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

// Reads a record's fields; each error names the field.
class Fields {
 public:
  explicit Fields(const json::object& object) : object_(object) {}

  const json::value* find(std::string_view key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->value().is_null() ? nullptr : &it->value();
  }

  std::string string(std::string_view key, std::string fallback = {}) const {
    const json::value* v = find(key);
    if (!v)
      return fallback;
    if (!v->is_string())
      fail(key, "a string");
    return std::string(v->as_string());
  }

  std::optional<std::string> optional_string(std::string_view key) const {
    const json::value* v = find(key);
    if (!v)
      return std::nullopt;
    return string(key);
  }

  std::optional<double> optional_number(std::string_view key) const {
    const json::value* v = find(key);
    if (!v)
      return std::nullopt;
    if (!v->is_number())
      fail(key, "a number");
    return v->to_number<double>();
  }

  std::optional<int> optional_int(std::string_view key) const {
    const json::value* v = find(key);
    if (!v)
      return std::nullopt;
    if (!v->is_int64())
      fail(key, "an integer");
    return static_cast<int>(v->as_int64());
  }

  bool boolean(std::string_view key) const {
    const json::value* v = find(key);
    if (!v)
      return false;
    if (!v->is_bool())
      fail(key, "true or false");
    return v->as_bool();
  }

  const json::array* array(std::string_view key) const {
    const json::value* v = find(key);
    if (!v)
      return nullptr;
    if (!v->is_array())
      fail(key, "an array");
    return &v->as_array();
  }

  const json::object* object(std::string_view key) const {
    const json::value* v = find(key);
    if (!v)
      return nullptr;
    if (!v->is_object())
      fail(key, "an object");
    return &v->as_object();
  }

  [[noreturn]] static void fail(std::string_view key, std::string_view expected) {
    throw EvalResultError(fmt::format("result record: {}: expected {}", key, expected));
  }

 private:
  const json::object& object_;
};

}  // namespace

std::string_view to_string(EvalStatus status) noexcept {
  return status_names[static_cast<std::size_t>(status)];
}

std::optional<EvalStatus> eval_status_from_string(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(status_names); ++i) {
    if (status_names[i] == name)
      return static_cast<EvalStatus>(i);
  }
  return std::nullopt;
}

json::value to_json(const EvalResult& r) {
  json::array setup_codes;
  for (int code : r.setup_exit_codes)
    setup_codes.emplace_back(code);
  json::array artifacts;
  for (const auto& a : r.artifacts) {
    json::object item{{"path", a.path}, {"saved", optional_string(a.saved)}};
    if (a.error)
      item["error"] = *a.error;
    artifacts.emplace_back(std::move(item));
  }
  json::value error = nullptr;
  if (r.error)
    error = json::object{
        {"phase", r.error->phase}, {"type", r.error->type}, {"message", r.error->message}};
  // Field order is the order people read a record in.
  json::object o;
  o["id"] = r.id;
  o["status"] = to_string(r.status);
  o["exit_code"] = r.exit_code ? json::value(*r.exit_code) : json::value(nullptr);
  o["setup_exit_codes"] = std::move(setup_codes);
  o["error"] = std::move(error);
  o["times"] = json::object{{"start", optional_seconds(r.times.start)},
                            {"setup", optional_seconds(r.times.setup)},
                            {"run", optional_seconds(r.times.run)},
                            {"teardown", optional_seconds(r.times.teardown)}};
  o["started"] = r.started;
  o["finished"] = r.finished;
  o["artifacts"] = std::move(artifacts);
  o["output_truncated"] = r.output_truncated;
  o["output"] = r.output;
  return o;
}

std::string to_json_line(const EvalResult& result) {
  std::string line;
  write_compact(line, to_json(result));
  return line;
}

EvalResult eval_result_from_json(const json::value& value) {
  if (!value.is_object())
    throw EvalResultError("result record: expected a JSON object");
  const Fields f(value.as_object());
  EvalResult r;
  r.id = f.string("id");
  if (r.id.empty())
    throw EvalResultError("result record: id: required");
  const std::string status = f.string("status");
  const auto parsed = eval_status_from_string(status);
  if (!parsed)
    throw EvalResultError(fmt::format(
        "result record {}: status: expected passed, failed, timeout or error, got \"{}\"", r.id,
        status));
  r.status = *parsed;
  r.exit_code = f.optional_int("exit_code");
  if (const auto* codes = f.array("setup_exit_codes")) {
    for (const auto& c : *codes) {
      if (!c.is_int64())
        Fields::fail("setup_exit_codes", "an array of integers");
      r.setup_exit_codes.push_back(static_cast<int>(c.as_int64()));
    }
  }
  r.output = f.string("output");
  r.output_truncated = f.boolean("output_truncated");
  if (const auto* e = f.object("error")) {
    const Fields ef(*e);
    r.error = EvalError{ef.string("phase"), ef.string("type"), ef.string("message")};
  }
  if (const auto* t = f.object("times")) {
    const Fields tf(*t);
    r.times.start = tf.optional_number("start");
    r.times.setup = tf.optional_number("setup");
    r.times.run = tf.optional_number("run");
    r.times.teardown = tf.optional_number("teardown");
  }
  if (const auto* artifacts = f.array("artifacts")) {
    for (const auto& item : *artifacts) {
      if (!item.is_object())
        Fields::fail("artifacts", "an array of objects");
      const Fields af(item.as_object());
      r.artifacts.push_back(EvalArtifact{af.string("path"), af.optional_string("saved"),
                                         af.optional_string("error")});
    }
  }
  r.started = f.string("started");
  r.finished = f.string("finished");
  return r;
}

std::string tail_of_output(std::string_view text, std::size_t limit, bool& truncated) {
  truncated = text.size() > limit;
  if (!truncated)
    return std::string(text);
  std::size_t begin = text.size() - limit;
  // Skip UTF-8 continuation bytes so the tail starts on a whole character.
  while (begin < text.size() && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80)
    ++begin;
  return std::string(text.substr(begin));
}

std::string format_utc_timestamp(std::chrono::system_clock::time_point when) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

}  // namespace rex
