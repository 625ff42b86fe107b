#include "gateway/template_record.hpp"

#include <rex/runtime/archive.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <boost/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <memory>

#include "gateway/api_error.hpp"

namespace rex::gateway {

namespace json = boost::json;

std::string sha256_hex(std::string_view data);  // gateway_impl.hpp's

namespace {

std::string text_of(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

double number_of(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  return v != nullptr && v->is_number() ? v->to_number<double>() : 0.0;
}

json::object log_json(const BuildLogLine& l) {
  return json::object{
      {"time", l.time}, {"level", l.level}, {"message", l.message}, {"step", l.step}};
}

json::object build_json(const TemplateBuild& b) {
  json::array logs;
  for (const auto& l : b.logs)
    logs.push_back(log_json(l));
  return json::object{{"id", b.id},
                      {"status", b.status},
                      {"key", b.key},
                      {"image", b.image},
                      {"provider", b.provider},
                      {"start_cmd", b.start_cmd},
                      {"ready_cmd", b.ready_cmd},
                      {"user", b.user},
                      {"working_dir", b.working_dir},
                      {"created_at", b.created_at},
                      {"finished_at", b.finished_at},
                      {"reason", b.reason},
                      {"reason_step", b.reason_step},
                      {"tags",
                       [&] {
                         json::array a;
                         for (const auto& t : b.tags)
                           a.emplace_back(t);
                         return a;
                       }()},
                      {"logs", std::move(logs)}};
}

TemplateBuild build_from_json(const json::object& o) {
  TemplateBuild b;
  b.id = text_of(o, "id");
  b.status = text_of(o, "status");
  b.key = text_of(o, "key");
  b.image = text_of(o, "image");
  b.provider = text_of(o, "provider");
  b.start_cmd = text_of(o, "start_cmd");
  b.ready_cmd = text_of(o, "ready_cmd");
  b.user = text_of(o, "user");
  b.working_dir = text_of(o, "working_dir");
  b.created_at = number_of(o, "created_at");
  b.finished_at = number_of(o, "finished_at");
  b.reason = text_of(o, "reason");
  b.reason_step = text_of(o, "reason_step");
  if (const auto* tags = o.if_contains("tags"); tags != nullptr && tags->is_array()) {
    for (const auto& v : tags->get_array()) {
      if (v.is_string())
        b.tags.emplace_back(v.get_string());
    }
  }
  if (const auto* logs = o.if_contains("logs"); logs != nullptr && logs->is_array()) {
    for (const auto& v : logs->get_array()) {
      if (!v.is_object())
        continue;
      const auto& l = v.get_object();
      b.logs.push_back(BuildLogLine{number_of(l, "time"), text_of(l, "level"),
                                    text_of(l, "message"), text_of(l, "step")});
    }
  }
  return b;
}

// A step's arguments as strings; TemplateError naming the step otherwise.
std::vector<std::string> args_of(const json::object& step, const std::string& name) {
  std::vector<std::string> out;
  const auto* args = step.if_contains("args");
  if (args == nullptr || args->is_null())
    return out;
  if (!args->is_array())
    throw TemplateError(fmt::format("step {}: args: expected a list of strings", name), name);
  for (const auto& a : args->get_array()) {
    if (!a.is_string())
      throw TemplateError(fmt::format("step {}: args: expected a list of strings", name), name);
    out.emplace_back(a.get_string());
  }
  return out;
}

// A name the Dockerfile takes as it is (a user, a path): no newline, not empty.
std::string plain(std::string_view value, std::string_view what, const std::string& step) {
  if (value.empty() || value.find_first_of("\n\r") != std::string_view::npos)
    throw TemplateError(fmt::format("step {}: {}: expected one line of text, got {}", step, what,
                                    json::serialize(json::string(value))),
                        step);
  return std::string(value);
}

std::string json_words(const std::vector<std::string>& words) {
  json::array a;
  for (const auto& w : words)
    a.emplace_back(w);
  return json::serialize(a);
}

// A value of ENV k="v": quoted for the Dockerfile, its `$` not expanded.
std::string env_value(std::string_view v, const std::string& step) {
  if (v.find_first_of("\n\r") != std::string_view::npos)
    throw TemplateError(fmt::format("step {}: ENV: a value may not hold a line break", step), step);
  std::string out = "\"";
  for (const char c : v) {
    if (c == '"' || c == '\\' || c == '$')
      out += '\\';
    out += c;
  }
  return out + '"';
}

bool valid_env_name(std::string_view k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9'))
    return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool valid_user(std::string_view u) {
  return !u.empty() && u.size() <= 32 && std::all_of(u.begin(), u.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// The shell command that makes account `u` (home /home/u) unless the image has it.
std::string ensure_user(const std::string& u) {
  return fmt::format(
      "id -u {0} >/dev/null 2>&1 || useradd -m -s /bin/bash {0} 2>/dev/null || adduser -D {0}; "
      "home=$(getent passwd {0} | cut -d: -f6); mkdir -p \"${{home:-/home/{0}}}\" && "
      "chown {0} \"${{home:-/home/{0}}}\"",
      u);
}

}  // namespace

TemplateBuild* TemplateRecord::build(std::string_view id) {
  for (auto& b : builds) {
    if (b.id == id)
      return &b;
  }
  return nullptr;
}

const TemplateBuild* TemplateRecord::build(std::string_view id) const {
  return const_cast<TemplateRecord*>(this)->build(id);
}

const TemplateBuild* TemplateRecord::current() const {
  if (const auto it = tags.find("default"); it != tags.end()) {
    if (const TemplateBuild* b = build(it->second); b != nullptr && b->status == "ready")
      return b;
  }
  for (auto it = builds.rbegin(); it != builds.rend(); ++it) {
    if (it->status == "ready")
      return &*it;
  }
  return nullptr;
}

Environment TemplateRecord::environment(const TemplateBuild& b, const std::string& name) const {
  Environment env;
  env.name = name;
  env.description = fmt::format("template {} (build {})", id, b.id);
  env.provider = b.provider;
  env.image = b.image;
  env.working_dir = b.working_dir;
  env.user = b.user;
  env.start_cmd = b.start_cmd;
  env.ready_cmd = b.ready_cmd;
  env.memory = fmt::format("{}m", memory_mb);
  env.cpus = static_cast<double>(cpu_count);
  env.own_image = true;
  return env;
}

json::object TemplateRecord::to_json() const {
  json::array n;
  for (const auto& name : names)
    n.emplace_back(name);
  json::object t;
  for (const auto& [tag, build_id] : tags)
    t[tag] = build_id;
  json::array b;
  for (const auto& build : builds)
    b.push_back(build_json(build));
  return json::object{{"id", id},
                      {"tenant", tenant},
                      {"names", std::move(n)},
                      {"tags", std::move(t)},
                      {"cpu_count", cpu_count},
                      {"memory_mb", memory_mb},
                      {"created_at", created_at},
                      {"updated_at", updated_at},
                      {"last_spawned_at", last_spawned_at},
                      {"spawn_count", spawn_count},
                      {"builds", std::move(b)}};
}

TemplateRecord TemplateRecord::from_json(const json::object& o) {
  TemplateRecord r;
  r.id = text_of(o, "id");
  r.tenant = text_of(o, "tenant");
  if (r.id.empty())
    throw std::invalid_argument("template record: id is missing");
  if (const auto* n = o.if_contains("names"); n != nullptr && n->is_array()) {
    for (const auto& v : n->get_array()) {
      if (v.is_string())
        r.names.emplace_back(v.get_string());
    }
  }
  if (const auto* t = o.if_contains("tags"); t != nullptr && t->is_object()) {
    for (const auto& [k, v] : t->get_object()) {
      if (v.is_string())
        r.tags[std::string(k)] = std::string(v.get_string());
    }
  }
  r.cpu_count = static_cast<int>(number_of(o, "cpu_count"));
  r.memory_mb = static_cast<int>(number_of(o, "memory_mb"));
  r.created_at = number_of(o, "created_at");
  r.updated_at = number_of(o, "updated_at");
  r.last_spawned_at = number_of(o, "last_spawned_at");
  r.spawn_count = static_cast<std::uint64_t>(number_of(o, "spawn_count"));
  if (const auto* b = o.if_contains("builds"); b != nullptr && b->is_array()) {
    for (const auto& v : b->get_array()) {
      if (v.is_object())
        r.builds.push_back(build_from_json(v.get_object()));
    }
  }
  return r;
}

DockerfilePlan plan_dockerfile(const json::object& request, std::string_view base) {
  DockerfilePlan plan;
  std::vector<std::string> lines;
  auto instruction = [&](std::string line, const std::string& step) {
    lines.push_back(std::move(line));
    plan.step_of_instruction.push_back(step);
  };
  instruction(fmt::format("FROM {}", base), "base");
  instruction("USER root", "base");
  instruction(fmt::format("RUN {}", json_words({"/bin/sh", "-c", ensure_user("user")})), "base");
  instruction("WORKDIR /home/user", "base");
  if (const auto* f = request.if_contains("force"); f != nullptr && f->is_bool() && f->get_bool())
    plan.force = true;

  std::string user = "root";  // who the next RUN runs as (the Dockerfile's USER)
  std::string final_user;     // the last USER step's, else E2B's default `user`
  std::string workdir;        // the last WORKDIR step's
  const auto* steps = request.if_contains("steps");
  if (steps != nullptr && !steps->is_null() && !steps->is_array())
    throw TemplateError("steps: expected a list of steps");
  std::size_t index = 0;
  for (const auto& v : steps != nullptr && steps->is_array() ? steps->get_array() : json::array{}) {
    const std::string name = std::to_string(++index);
    if (!v.is_object())
      throw TemplateError(fmt::format("step {}: expected an object", name), name);
    const json::object& step = v.get_object();
    const std::string type = text_of(step, "type");
    const std::vector<std::string> args = args_of(step, name);
    if (const auto* f = step.if_contains("force"); f != nullptr && f->is_bool() && f->get_bool())
      plan.force = true;
    auto as_user = [&](const std::string& who) {
      if (who != user) {
        instruction(fmt::format("USER {}", who), name);
        user = who;
      }
    };
    if (type == "RUN") {
      if (args.empty() || args[0].empty())
        throw TemplateError(fmt::format("step {}: RUN: no command", name), name);
      const std::string previous = user;
      const std::string who =
          args.size() > 1 && !args[1].empty() ? plain(args[1], "RUN's user", name) : user;
      if (!valid_user(who))
        throw TemplateError(fmt::format("step {}: RUN: invalid user {:?}", name, who), name);
      as_user(who);
      instruction(fmt::format("RUN {}", json_words({"/bin/bash", "-c", args[0]})), name);
      as_user(previous);
    } else if (type == "COPY") {
      if (args.size() < 2 || args[0].empty() || args[1].empty())
        throw TemplateError(fmt::format("step {}: COPY: expected a source and a destination", name),
                            name);
      const std::string hash = text_of(step, "filesHash");
      if (hash.size() != 64 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw TemplateError(
            fmt::format("step {}: COPY {}: filesHash: expected 64 hexadecimal digits", name,
                        args[0]),
            name);
      std::string src = args[0];
      while (src.starts_with("./"))
        src.erase(0, 2);
      if (src.starts_with('/') || src == ".." || src.starts_with("../") ||
          src.find("/../") != std::string::npos || src.ends_with("/.."))
        throw TemplateError(
            fmt::format("step {}: COPY {}: the source must stay inside the context", name, args[0]),
            name);
      const std::string dest = plain(args[1], "COPY's destination", name);
      const std::string owner = args.size() > 2 ? args[2] : std::string();
      if (!owner.empty() && !valid_user(owner))
        throw TemplateError(fmt::format("step {}: COPY: invalid user {:?}", name, owner), name);
      std::string mode = args.size() > 3 ? args[3] : std::string();
      if (!mode.empty() &&
          (mode.size() > 5 || mode.find_first_not_of("01234567") != std::string::npos))
        throw TemplateError(fmt::format("step {}: COPY: invalid mode {:?}", name, mode), name);
      plan.copies.push_back(DockerfilePlan::Copy{hash, args[0], args[1], name});
      if (std::find(plan.file_hashes.begin(), plan.file_hashes.end(), hash) ==
          plan.file_hashes.end())
        plan.file_hashes.push_back(hash);
      const std::string from = fmt::format("files/{}/{}", hash, src);
      const std::string was = user;
      as_user("root");
      instruction(fmt::format("COPY {}{}", owner.empty() ? "" : fmt::format("--chown={} ", owner),
                              json_words({from, dest})),
                  name);
      if (!mode.empty()) {
        std::string target = dest;
        // A directory's contents land in the destination; a file lands in it by its name.
        if (target.ends_with('/') && !src.ends_with('/')) {
          std::string leaf = src;
          while (leaf.ends_with('/'))
            leaf.pop_back();
          target += leaf.substr(leaf.find_last_of('/') + 1);
        }
        instruction(fmt::format("RUN {}",
                                json_words({"/bin/sh", "-c", "chmod " + mode + " \"$0\"", target})),
                    name);
      }
      as_user(was);
    } else if (type == "ENV") {
      if (args.empty() || args.size() % 2 != 0)
        throw TemplateError(fmt::format("step {}: ENV: expected pairs of name and value", name),
                            name);
      std::string line = "ENV";
      for (std::size_t i = 0; i < args.size(); i += 2) {
        if (!valid_env_name(args[i]))
          throw TemplateError(
              fmt::format("step {}: ENV: invalid variable name {:?}", name, args[i]), name);
        line += fmt::format(" {}={}", args[i], env_value(args[i + 1], name));
      }
      instruction(std::move(line), name);
    } else if (type == "WORKDIR") {
      if (args.empty())
        throw TemplateError(fmt::format("step {}: WORKDIR: no directory", name), name);
      workdir = plain(args[0], "WORKDIR", name);
      instruction(fmt::format("WORKDIR {}", workdir), name);
    } else if (type == "USER") {
      if (args.empty() || !valid_user(args[0]))
        throw TemplateError(
            fmt::format("step {}: USER: invalid user {:?}", name, args.empty() ? "" : args[0]),
            name);
      const std::string who = args[0];
      if (who != "root" && who != "user") {
        as_user("root");
        instruction(fmt::format("RUN {}", json_words({"/bin/sh", "-c", ensure_user(who)})), name);
      }
      as_user(who);
      final_user = who;
    } else {
      throw TemplateError(
          fmt::format("step {}: unknown step type {:?} (known: RUN, COPY, ENV, WORKDIR, USER)",
                      name, type),
          name);
    }
  }
  // The sandbox's server runs as root and runs commands as the template's user.
  if (user != "root")
    instruction("USER root", "finalize");
  plan.user = final_user.empty() ? "user" : final_user;
  plan.working_dir = workdir.empty() ? "/home/user" : workdir;
  plan.start_cmd = text_of(request, "startCmd");
  plan.ready_cmd = text_of(request, "readyCmd");
  for (const auto& l : lines)
    plan.dockerfile += l + '\n';
  return plan;
}

std::string build_key(const json::object& request, std::string_view base_id) {
  json::object what{{"base", base_id}};
  for (const char* field : {"steps", "startCmd", "readyCmd"}) {
    if (const auto* v = request.if_contains(field))
      what[field] = *v;
  }
  return sha256_hex(json::serialize(what));
}

std::optional<std::string> e2b_files_hash(const std::filesystem::path& archive,
                                          std::string_view src, std::string_view dest) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("cannot hash: no SHA-256");
  auto update = [&](std::string_view bytes) {
    EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size());
  };
  update(fmt::format("COPY {} {}", src, dest));
  bool unverifiable = false;
  read_archive_entries(
      archive,
      [&](const ArchiveEntry& e) {
        std::string path = e.path;
        while (path.starts_with("./"))
          path.erase(0, 2);
        while (path.size() > 1 && path.ends_with('/'))
          path.pop_back();
        update(path);
        unverifiable = unverifiable || e.hard_link;
        const unsigned type = e.mode & S_IFMT;
        update(std::to_string(e.mode));
        if (type == S_IFLNK) {
          update(std::to_string(e.link_target.size()));
          update(e.link_target);
        } else if (type != S_IFDIR) {
          update(std::to_string(e.size));
        }
      },
      update);
  if (unverifiable)
    return std::nullopt;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::optional<std::string> step_of_line(const DockerfilePlan& plan, std::string_view line) {
  constexpr std::string_view kStep = "Step ";  // Podman's: "STEP 2/5: RUN ..."
  if (!line.starts_with(kStep) && !line.starts_with("STEP "))
    return std::nullopt;
  std::size_t n = 0;
  const char* first = line.data() + kStep.size();
  const auto [end, ec] = std::from_chars(first, line.data() + line.size(), n);
  if (ec != std::errc() || end == line.data() + line.size() || *end != '/' || n == 0 ||
      n > plan.step_of_instruction.size())
    return std::nullopt;
  return plan.step_of_instruction[n - 1];
}

}  // namespace rex::gateway
