// E2B's template build API on the gateway: E2B's SDKs (Template.build) create a template, upload
// the files of its COPY steps by content hash, start a build and poll its status and logs; the
// gateway builds the image on its engine (the docker or podman provider, the Engine API's build)
// and the ready build is an environment Sandbox.create(name) starts sandboxes of.
//
//   POST /v3/templates                         {name, tags, cpuCount, memoryMB} -> 202
//   GET  /templates/{id}/files/{hash}          {present, url}: where to PUT the archive
//   PUT  /template-uploads/{ticket}            the archive (the ticket is the credential)
//   POST /v2/templates/{id}/builds/{build}     the steps (TemplateBuildStartV2) -> 202
//   GET  /templates/{id}/builds/{build}/status {status, logEntries, reason} (logsOffset, limit)
//   GET  /templates/{id}/builds/{build}/logs   {logs}
//   GET  /templates/aliases/{name}             {templateID, public}; 403 another tenant's
//   GET  /templates, GET /templates/{id}        the caller's templates
//   DELETE /templates/{id}                      (e2b_api.cpp, which also deletes snapshots)
//
// Builds are content-addressed: a build whose base and steps (files included, by hash) equal a
// ready one's takes its image at once, and builds of equal steps under way at once become one
// build whose result each gets. A failed build names its step and keeps its log; it leaves no
// image (the engine removes its intermediate containers) and no environment.
#include <rex/core/log.hpp>
#include <rex/core/outcome.hpp>
#include <rex/core/random.hpp>
#include <rex/core/text.hpp>
#include <rex/core/timeout.hpp>
#include <rex/protocol/python_text.hpp>
#include <rex/runtime/archive.hpp>

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <system_error>

#include "gateway/api_error.hpp"
#include "gateway/gateway_impl.hpp"
#include "gateway/notebook_kernel_py.hpp"
#include "gateway/template_record.hpp"

namespace rex::gateway {

namespace json = boost::json;
namespace bhttp = boost::beast::http;
using server::Answer;
using server::Request;

namespace {

constexpr std::size_t kMaxLogLines = 20000;
constexpr std::size_t kMaxLogLine = 4096;
constexpr std::size_t kStatusPage = 100;
constexpr double kTicketLifetime = 3600;
constexpr std::uint64_t kMaxTemplateUpload = 2ull << 30;  // one COPY step's files, compressed
constexpr int kCodeInterpreterPort = 49999;

Answer e2b_json(unsigned status, const json::value& body) {
  return server::json_answer(status, body);
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 128)
    return false;
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  };
  return ok(n[0]) && n[0] != '.' && n[0] != '-' && std::all_of(n.begin(), n.end(), ok);
}

bool valid_hash(std::string_view h) {
  return h.size() == 64 && h.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

json::object entry_json(const BuildLogLine& l) {
  json::object o{{"timestamp", iso_time(l.time)}, {"level", l.level}, {"message", l.message}};
  if (!l.step.empty())
    o["step"] = l.step;
  return o;
}

std::string text_field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr || v->is_null())
    return {};
  if (!v->is_string())
    throw ApiError(400, "request.invalid", fmt::format("{}: expected a string", name));
  return std::string(v->get_string());
}

std::optional<std::int64_t> whole_field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr || v->is_null())
    return std::nullopt;
  if (!(v->is_int64() || v->is_uint64()))
    throw ApiError(400, "request.invalid", fmt::format("{}: expected a whole number", name));
  return v->to_number<std::int64_t>();
}

// A build's id, as E2B's are: a UUID (version 4).
std::string random_uuid() {
  std::string h = random_hex(16);
  h[12] = '4';
  h[16] = "89ab"[h[16] % 4];
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4),
                     h.substr(16, 4), h.substr(20));
}

// The caller's files are kept apart from other tenants': a file's presence says nothing
// across tenants.
std::string tenant_dir(const std::string& tenant) {
  return sha256_hex("template-files\n" + tenant).substr(0, 24);
}

}  // namespace

fs::path Gateway::Impl::template_file(const std::string& tenant, const std::string& hash) const {
  return storage / "template-files" / tenant_dir(tenant) / hash;
}

const Environment* Gateway::Impl::find_environment(std::string_view name) const {
  if (const Environment* env = registry.find(name))
    return env;
  const auto it = template_env.find(name);
  return it == template_env.end() ? nullptr : it->second;
}

TemplateRecord* Gateway::Impl::template_named(std::string_view name_or_id) {
  if (const auto it = templates.find(name_or_id); it != templates.end())
    return &it->second;
  for (auto& [id, t] : templates) {
    if (std::find(t.names.begin(), t.names.end(), name_or_id) != t.names.end())
      return &t;
  }
  return nullptr;
}

std::optional<std::string> Gateway::Impl::template_environment(const Caller& who,
                                                               std::string_view name) {
  std::string_view base = name;
  std::string_view tag;
  if (const auto colon = name.rfind(':'); colon != std::string_view::npos) {
    base = name.substr(0, colon);
    tag = name.substr(colon + 1);
  }
  TemplateRecord* t = template_named(base);
  if (t == nullptr || t->tenant != who.tenant)
    return std::nullopt;
  const TemplateBuild* b = nullptr;
  if (!tag.empty() && tag != "default") {
    const auto it = t->tags.find(std::string(tag));
    if (it == t->tags.end())
      throw ApiError(
          404, "template.not_found",
          fmt::format("template {} has no tag {:?}", t->names.empty() ? t->id : t->names[0], tag));
    b = t->build(it->second);
  } else {
    b = t->current();
  }
  if (b == nullptr || b->status != "ready")
    throw ApiError(400, "template.not_ready",
                   fmt::format("template {} has no finished build yet", t->id));
  // Each build's environment is made once and kept: a launch holds a reference to it.
  const std::string env_name = b == t->current() ? t->id : t->id + ":" + std::string(tag);
  const auto it = template_env.find(env_name);
  if (it == template_env.end() || it->second->image != b->image) {
    template_environments.push_back(t->environment(*b, env_name));
    template_env[env_name] = &template_environments.back();
  }
  t->spawn_count += 1;
  t->last_spawned_at = unix_now();
  return env_name;
}

void Gateway::Impl::publish_template(const TemplateRecord& t) {
  auto publish = [&](const TemplateBuild& b, const std::string& name) {
    const auto it = template_env.find(name);
    if (it == template_env.end() || it->second->image != b.image) {
      template_environments.push_back(t.environment(b, name));
      template_env[name] = &template_environments.back();
    }
  };
  if (const TemplateBuild* b = t.current())
    publish(*b, t.id);
  // Each tag's too, so a session of a tagged build knows its environment after a restart.
  for (const auto& [tag, build_id] : t.tags) {
    const TemplateBuild* b = t.build(build_id);
    if (b != nullptr && b->status == "ready" && tag != "default")
      publish(*b, t.id + ":" + tag);
  }
}

asio::awaitable<void> Gateway::Impl::save_template(const TemplateRecord& t, bool removed) {
  Change change;
  if (removed) {
    change.removed_templates.push_back(t.id);
  } else {
    const std::string state = t.builds.empty() ? std::string("waiting") : t.builds.back().status;
    change.templates.push_back(StoredTemplate{t.id, t.tenant, state, t.to_json()});
  }
  auto commit = [change = std::move(change)](Store& st) mutable { st.commit(change); };
  co_await on_db(std::move(commit));
}

asio::awaitable<void> Gateway::Impl::load_templates() {
  auto query = [](Store& st) { return st.load_templates(); };
  auto stored = co_await on_db(std::move(query));
  for (auto& row : stored) {
    try {
      TemplateRecord t = TemplateRecord::from_json(row.record);
      bool cut = false;
      for (auto& b : t.builds) {
        if (b.status == "waiting" || b.status == "building") {
          b.status = "error";
          b.reason = "the gateway stopped while the build was under way; build again";
          b.finished_at = unix_now();
          cut = true;
        }
      }
      publish_template(t);
      const std::string id = t.id;
      templates[id] = std::move(t);
      if (cut) {
        auto saving = save_template(templates[id]);
        co_await std::move(saving);
      }
    } catch (const std::exception& x) {
      logging::error("gateway: skipping the damaged record of template {}: {}", row.id, x.what());
    }
  }  // Images of this gateway's builds that no template records (a template deleted while the
  // engine was out of reach, a build the gateway was killed in): removed.
  std::set<std::string> recorded;
  for (const auto& [id, t] : templates) {
    for (const auto& b : t.builds) {
      if (!b.image.empty())
        recorded.insert(b.image);
    }
  }
  for (auto& [name, p] : providers) {
    if (!p->can(SandboxOperation::build))
      continue;
    std::vector<SandboxInfo> images;
    try {
      auto listing = p->list_built_images();
      images = co_await std::move(listing);
    } catch (const std::exception& x) {
      logging::warn("gateway: cannot list the template images of {}: {}", name, x.what());
      continue;
    }
    for (const auto& image : images) {
      if (recorded.contains(image.id))
        continue;
      auto removing = capture(p->remove_checkpoint(image.id));
      const auto removed = co_await std::move(removing);
      if (removed)
        logging::info("gateway: removed template image {} that no template records", image.id);
      else
        logging::warn("gateway: cannot remove template image {}: {}", image.id,
                      removed.error_message());
    }
  }
}

namespace {

struct TemplatesApi {
  std::shared_ptr<Gateway::Impl> s;

  TemplateRecord& mine(const Caller& who, std::string_view id) const {
    TemplateRecord* t = s->template_named(id);
    if (t == nullptr || t->tenant != who.tenant)
      throw ApiError(404, "template.not_found", fmt::format("template '{}' not found", id));
    return *t;
  }

  // The provider builds run on: docker, else podman, else any that builds.
  Provider& builder() const {
    for (const char* name : {"docker", "podman"}) {
      if (Provider* p = s->provider(name); p != nullptr && p->can(SandboxOperation::build))
        return *p;
    }
    for (auto& [name, p] : s->providers) {
      if (p->can(SandboxOperation::build))
        return *p;
    }
    throw ApiError(400, "template.no_builder",
                   "this gateway has no provider that builds images: templates need a docker or "
                   "podman provider");
  }

  static json::object template_json(const TemplateRecord& t) {
    const TemplateBuild* b = t.current();
    const TemplateBuild* newest = t.builds.empty() ? nullptr : &t.builds.back();
    json::array names;
    for (const auto& n : t.names)
      names.emplace_back(n);
    return json::object{
        {"templateID", t.id},
        {"buildID", b != nullptr ? b->id : (newest != nullptr ? newest->id : std::string())},
        {"cpuCount", t.cpu_count},
        {"memoryMB", t.memory_mb},
        {"diskSizeMB", 0},
        {"public", false},
        {"aliases", names},
        {"names", names},
        {"createdAt", iso_time(t.created_at)},
        {"updatedAt", iso_time(t.updated_at)},
        {"createdBy", nullptr},
        {"lastSpawnedAt",
         t.last_spawned_at > 0 ? json::value(iso_time(t.last_spawned_at)) : json::value(nullptr)},
        {"spawnCount", t.spawn_count},
        {"buildCount", t.builds.size()},
        {"envdVersion", "0.5.2"},
        {"buildStatus", b != nullptr ? "ready" : (newest != nullptr ? newest->status : "waiting")}};
  }

  // POST /v3/templates: the template of that name (made when new) and a new build of it.
  asio::awaitable<Answer> request_build(Caller who, Request r) {
    const json::object body = parse_body(r.body);
    std::string name = text_field(body, "name");
    if (name.empty())
      name = text_field(body, "alias");
    std::vector<std::string> tags;
    if (const auto colon = name.find(':'); colon != std::string::npos) {
      tags.push_back(name.substr(colon + 1));
      name.resize(colon);
    }
    if (!valid_name(name))
      throw ApiError(400, "request.invalid",
                     fmt::format("name: expected letters, digits, '-', '_' and '.' (at most 128), "
                                 "got {:?}",
                                 name));
    if (const auto* t = body.if_contains("tags"); t != nullptr && !t->is_null()) {
      if (!t->is_array())
        throw ApiError(400, "request.invalid", "tags: expected a list of strings");
      for (const auto& v : t->get_array()) {
        if (!v.is_string() || !valid_name(v.get_string()))
          throw ApiError(400, "request.invalid", "tags: expected a list of names");
        tags.emplace_back(v.get_string());
      }
    }
    if (tags.empty())
      tags.emplace_back("default");
    const auto cpus = whole_field(body, "cpuCount");
    const auto memory = whole_field(body, "memoryMB");
    if (cpus && (*cpus < 1 || *cpus > 64))
      throw ApiError(400, "request.invalid", "cpuCount: expected 1 to 64");
    if (memory && (*memory < 128 || *memory > 1 << 20))
      throw ApiError(400, "request.invalid", "memoryMB: expected 128 to 1048576");

    TemplateRecord* t = s->template_named(name);
    if (t != nullptr && t->tenant != who.tenant)
      throw ApiError(409, "template.name_taken",
                     fmt::format("the template name '{}' is taken by another team", name));
    const double now = unix_now();
    if (t == nullptr) {
      TemplateRecord fresh;
      fresh.id = random_hex(10);
      fresh.tenant = who.tenant;
      fresh.names.push_back(name);
      fresh.created_at = now;
      t = &s->templates.emplace(fresh.id, std::move(fresh)).first->second;
    }
    if (cpus)
      t->cpu_count = static_cast<int>(*cpus);
    if (memory)
      t->memory_mb = static_cast<int>(*memory);
    t->updated_at = now;
    TemplateBuild b;
    b.id = random_uuid();
    b.created_at = now;
    b.tags = tags;
    t->builds.push_back(b);
    const std::string id = t->id;
    auto saving = s->save_template(*t);
    co_await std::move(saving);
    json::array tag_list;
    for (const auto& tag : tags)
      tag_list.emplace_back(tag);
    const TemplateRecord& saved = s->templates.at(id);
    json::array names;
    for (const auto& n : saved.names)
      names.emplace_back(n);
    co_return e2b_json(202, json::object{{"templateID", id},
                                         {"buildID", b.id},
                                         {"public", false},
                                         {"names", names},
                                         {"aliases", names},
                                         {"tags", std::move(tag_list)}});
  }

  // GET /templates/{id}/files/{hash}: whether the archive of that hash is here, else where to
  // PUT it (a ticket in the path is its credential: the SDKs send no key with the upload).
  asio::awaitable<Answer> file_link(Caller who, Request r) {
    TemplateRecord& t = mine(who, r.param("id"));
    const std::string hash(r.param("hash"));
    if (!valid_hash(hash))
      throw ApiError(400, "request.invalid",
                     fmt::format("hash: expected 64 lowercase hexadecimal digits, got {:?}", hash));
    std::error_code ec;
    if (fs::exists(s->template_file(t.tenant, hash), ec))
      co_return e2b_json(201, json::object{{"present", true}});
    const std::string ticket = random_hex(24);
    const double now = unix_now();
    std::erase_if(s->upload_tickets, [now](const auto& kv) { return kv.second.expires < now; });
    s->upload_tickets[ticket] = UploadTicket{t.tenant, hash, now + kTicketLifetime};
    std::string host = "127.0.0.1";
    if (const auto h = r.field("Host"))
      host = std::string(*h);
    const std::string scheme = "http";  // the gateway serves plain HTTP (TLS ends before it)
    co_return e2b_json(
        201,
        json::object{{"present", false},
                     {"url", fmt::format("{}://{}/template-uploads/{}", scheme, host, ticket)}});
  }

  // POST /v2/templates/{id}/builds/{build}: checks the steps and starts the build.
  asio::awaitable<Answer> start_build(Caller who, Request r) {
    TemplateRecord& t = mine(who, r.param("id"));
    TemplateBuild* b = t.build(r.param("build"));
    if (b == nullptr)
      throw ApiError(404, "template.build_not_found",
                     fmt::format("build '{}' of template '{}' not found", r.param("build"), t.id));
    if (b->status != "waiting")
      throw ApiError(400, "template.build_started",
                     fmt::format("build '{}' was started already ({})", b->id, b->status));
    const json::object body = parse_body(r.body);
    std::string base = text_field(body, "fromImage");
    const std::string from_template = text_field(body, "fromTemplate");
    if (body.contains("fromImageRegistry") && !body.at("fromImageRegistry").is_null())
      throw ApiError(400, "request.invalid",
                     "fromImageRegistry: this gateway builds from its engine's own images only "
                     "(no registry is reached)");
    if (base.empty() && from_template.empty())
      throw ApiError(400, "request.invalid", "expected fromImage or fromTemplate");
    if (!base.empty() && !from_template.empty())
      throw ApiError(400, "request.invalid", "expected fromImage or fromTemplate, not both");
    if (!from_template.empty()) {
      TemplateRecord* parent = s->template_named(from_template);
      const TemplateBuild* pb =
          parent != nullptr && parent->tenant == who.tenant ? parent->current() : nullptr;
      if (pb == nullptr)
        throw ApiError(400, "request.invalid",
                       fmt::format("fromTemplate: no finished template '{}'", from_template));
      base = pb->image;
    }
    DockerfilePlan plan;
    try {
      plan = plan_dockerfile(body, base);
    } catch (const TemplateError& e) {
      throw ApiError(400, "request.invalid", e.what());
    }
    for (const auto& hash : plan.file_hashes) {
      std::error_code ec;
      if (!fs::exists(s->template_file(t.tenant, hash), ec))
        throw ApiError(400, "template.files_missing",
                       fmt::format("the files of hash {} (a COPY step) were not uploaded: ask "
                                   "GET /templates/{}/files/{} for where to upload them",
                                   hash, t.id, hash));
    }
    Provider& p = builder();
    b->status = "building";
    b->provider = std::string(p.name());
    b->user = plan.user;
    b->working_dir = plan.working_dir;
    b->start_cmd = plan.start_cmd;
    b->ready_cmd = plan.ready_cmd;
    const std::string tid = t.id;
    const std::string bid = b->id;
    auto saving = s->save_template(t);
    co_await std::move(saving);
    s->build_done[bid] = std::make_shared<Event>(s->ex);
    s->spawn(s->build_and_signal(tid, bid, body, std::move(plan), base),
             "building template " + tid);
    Answer a;
    a.status = 202;
    co_return a;
  }

  const TemplateBuild& build_of(const Caller& who, const Request& r) const {
    TemplateRecord& t = mine(who, r.param("id"));
    const TemplateBuild* b = t.build(r.param("build"));
    if (b == nullptr)
      throw ApiError(404, "template.build_not_found",
                     fmt::format("build '{}' of template '{}' not found", r.param("build"), t.id));
    return *b;
  }

  asio::awaitable<Answer> status(Caller who, Request r) {
    // A build under way answers when it ends, or after a second with the lines so far: the
    // SDKs poll with a pause between calls, and an answer held until the end saves that pause.
    if (const TemplateBuild& running = build_of(who, r);
        running.status == "building" || running.status == "waiting") {
      if (const auto it = s->build_done.find(running.id); it != s->build_done.end()) {
        const std::shared_ptr<Event> done = it->second;
        auto waiting = with_timeout(done->wait(), std::chrono::seconds(1));
        co_await std::move(waiting);
      }
    }
    const TemplateBuild& b = build_of(who, r);
    std::size_t offset = 0;
    std::size_t limit = kStatusPage;
    if (const auto o = r.query("logsOffset"))
      offset =
          static_cast<std::size_t>(std::max(0L, std::strtol(std::string(*o).c_str(), nullptr, 10)));
    if (const auto l = r.query("limit"))
      limit = std::clamp<std::size_t>(
          static_cast<std::size_t>(std::max(0L, std::strtol(std::string(*l).c_str(), nullptr, 10))),
          0, kStatusPage);
    json::array entries;
    json::array lines;
    for (std::size_t i = offset; i < b.logs.size() && entries.size() < limit; ++i) {
      entries.push_back(entry_json(b.logs[i]));
      lines.emplace_back(fmt::format("[{}] {}", iso_time(b.logs[i].time), b.logs[i].message));
    }
    json::object out{{"templateID", std::string(r.param("id"))},
                     {"buildID", b.id},
                     {"status", b.status},
                     {"logs", std::move(lines)},
                     {"logEntries", std::move(entries)}};
    if (b.status == "error") {
      json::object reason{{"message", b.reason}};
      if (!b.reason_step.empty())
        reason["step"] = b.reason_step;
      json::array tail;
      const std::size_t from = b.logs.size() > 20 ? b.logs.size() - 20 : 0;
      for (std::size_t i = from; i < b.logs.size(); ++i)
        tail.push_back(entry_json(b.logs[i]));
      reason["logEntries"] = std::move(tail);
      out["reason"] = std::move(reason);
    }
    // The id the path named may be a name: answer with the template's id.
    out["templateID"] = mine(who, r.param("id")).id;
    co_return e2b_json(200, out);
  }

  asio::awaitable<Answer> logs(Caller who, Request r) {
    const TemplateBuild& b = build_of(who, r);
    json::array entries;
    for (const auto& l : b.logs)
      entries.push_back(entry_json(l));
    co_return e2b_json(200, json::object{{"logs", std::move(entries)}});
  }

  // The caller's template named in `target` ("name" or "name:tag") and its build of that tag.
  std::pair<TemplateRecord*, const TemplateBuild*> tagged(const Caller& who,
                                                          std::string_view target) const {
    std::string_view name = target;
    std::string_view tag = "default";
    if (const auto colon = target.rfind(':'); colon != std::string_view::npos) {
      name = target.substr(0, colon);
      tag = target.substr(colon + 1);
    }
    TemplateRecord& t = mine(who, name);
    const TemplateBuild* b = nullptr;
    if (const auto it = t.tags.find(std::string(tag)); it != t.tags.end())
      b = t.build(it->second);
    else if (tag == "default")
      b = t.current();
    if (b == nullptr || b->status != "ready")
      throw ApiError(404, "template.not_found",
                     fmt::format("template '{}' has no finished build tagged '{}'", name, tag));
    return {&t, b};
  }

  static std::vector<std::string> tag_list(const json::object& body) {
    std::vector<std::string> out;
    const auto* tags = body.if_contains("tags");
    if (tags == nullptr || !tags->is_array() || tags->get_array().empty())
      throw ApiError(400, "request.invalid", "tags: expected a list of tags");
    for (const auto& v : tags->get_array()) {
      if (!v.is_string() || !valid_name(v.get_string()))
        throw ApiError(400, "request.invalid",
                       "tags: expected letters, digits, '-', '_' and '.' (at most 128)");
      out.emplace_back(v.get_string());
    }
    return out;
  }

  // POST /templates/tags {"target": "name[:tag]", "tags"}: the target's build gets the tags.
  asio::awaitable<Answer> assign_tags(Caller who, Request r) {
    const json::object body = parse_body(r.body);
    const auto [t, b] = tagged(who, text_field(body, "target"));
    const std::vector<std::string> tags = tag_list(body);
    json::array given;
    for (const auto& tag : tags) {
      t->tags[tag] = b->id;
      given.emplace_back(tag);
    }
    const std::string build_id = b->id;
    t->updated_at = unix_now();
    s->publish_template(*t);
    auto saving = s->save_template(*t);
    co_await std::move(saving);
    co_return e2b_json(201, json::object{{"buildID", build_id}, {"tags", std::move(given)}});
  }

  // DELETE /templates/tags {"name", "tags"}: the tags go (their builds stay).
  asio::awaitable<Answer> remove_tags(Caller who, Request r) {
    const json::object body = parse_body(r.body);
    TemplateRecord& t = mine(who, text_field(body, "name"));
    for (const auto& tag : tag_list(body))
      t.tags.erase(tag);
    t.updated_at = unix_now();
    auto saving = s->save_template(t);
    co_await std::move(saving);
    Answer a;
    a.status = 204;
    co_return a;
  }

  asio::awaitable<Answer> list_tags(Caller who, Request r) {
    const TemplateRecord& t = mine(who, r.param("id"));
    json::array out;
    for (const auto& [tag, build_id] : t.tags) {
      const TemplateBuild* b = t.build(build_id);
      out.push_back(json::object{
          {"tag", tag},
          {"buildID", build_id},
          {"createdAt", iso_time(b != nullptr ? std::max(b->finished_at, b->created_at) : 0)}});
    }
    co_return e2b_json(200, out);
  }

  asio::awaitable<Answer> alias(Caller who, Request r) {
    const std::string name(r.param("alias"));
    TemplateRecord* t = s->template_named(name);
    if (t == nullptr)
      co_return e2b_error(404, fmt::format("template alias '{}' not found", name));
    if (t->tenant != who.tenant)
      co_return e2b_error(403, fmt::format("template alias '{}' belongs to another team", name));
    co_return e2b_json(200, json::object{{"templateID", t->id}, {"public", false}});
  }

  asio::awaitable<Answer> list(Caller who, Request) {
    json::array out;
    for (const auto& [id, t] : s->templates) {
      if (t.tenant == who.tenant)
        out.push_back(template_json(t));
    }
    co_return e2b_json(200, out);
  }

  asio::awaitable<Answer> get(Caller who, Request r) {
    const TemplateRecord& t = mine(who, r.param("id"));
    json::array builds;
    for (const auto& b : t.builds)
      builds.push_back(
          json::object{{"buildID", b.id},
                       {"status", b.status},
                       {"createdAt", iso_time(b.created_at)},
                       {"updatedAt", iso_time(std::max(b.created_at, b.finished_at))},
                       {"finishedAt", b.finished_at > 0 ? json::value(iso_time(b.finished_at))
                                                        : json::value(nullptr)},
                       {"cpuCount", t.cpu_count},
                       {"memoryMB", t.memory_mb}});
    json::object out = template_json(t);
    out["builds"] = std::move(builds);
    co_return e2b_json(200, out);
  }
};

// The archive of one hash as it arrives, into a file beside where it is kept; renamed into
// place once it is whole and is a tar. Too big, not a tar, a broken write: removed.
class TemplateUpload final : public server::BodyReceiver {
 public:
  TemplateUpload(std::shared_ptr<Gateway::Impl> s, std::string ticket, fs::path file)
      : s_(std::move(s)),
        ticket_(std::move(ticket)),
        file_(std::move(file)),
        part_(file_.string() + ".part-" + random_hex(4)) {}
  ~TemplateUpload() override {
    if (!done_) {
      std::error_code ec;
      fs::remove(part_, ec);
    }
  }

  asio::awaitable<std::optional<Answer>> receive(std::string_view piece, bool) override {
    size_ += piece.size();
    if (size_ > kMaxTemplateUpload)
      co_return e2b_error(
          413, fmt::format("the upload is larger than {} MiB", kMaxTemplateUpload >> 20));
    if (head_.size() < 262)
      head_.append(piece.substr(0, 262 - head_.size()));
    std::string failure;
    auto write = [this, data = std::string(piece)] {
      if (!out_.is_open()) {
        fs::create_directories(part_.parent_path());
        out_.open(part_, std::ios::binary | std::ios::trunc);
      }
      out_.write(data.data(), static_cast<std::streamsize>(data.size()));
      if (!out_)
        throw std::runtime_error("cannot write " + part_.string());
    };
    try {
      co_await rex::detail::offload(s_->file_threads, s_->ex, std::move(write));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty())
      co_return e2b_error(500, "cannot keep the upload: " + failure);
    co_return std::nullopt;
  }

  asio::awaitable<Answer> finish() override {
    const bool gzip = head_.size() >= 2 && static_cast<unsigned char>(head_[0]) == 0x1f &&
                      static_cast<unsigned char>(head_[1]) == 0x8b;
    const bool tar = head_.size() >= 262 && std::string_view(head_).substr(257, 5) == "ustar";
    if (!gzip && !tar)
      co_return e2b_error(400, "the upload is not a tar archive (plain or gzip-compressed)");
    std::string failure;
    // A tar's first bytes came (262 of them), so the file is open.
    auto keep = [this] {
      out_.close();
      if (!out_)
        throw std::runtime_error("cannot write " + part_.string());
      fs::rename(part_, file_);
    };
    try {
      co_await rex::detail::offload(s_->file_threads, s_->ex, std::move(keep));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty())
      co_return e2b_error(500, "cannot keep the upload: " + failure);
    done_ = true;
    s_->upload_tickets.erase(ticket_);
    Answer a;
    a.status = 200;
    co_return a;
  }

 private:
  std::shared_ptr<Gateway::Impl> s_;
  std::string ticket_;
  fs::path file_;
  fs::path part_;
  std::ofstream out_;
  std::string head_;  // the first bytes: what kind of archive it is
  std::uint64_t size_ = 0;
  bool done_ = false;
};

// PUT /template-uploads/{ticket}: the archive of one hash, as the SDK sends it (no key: the
// ticket names the tenant and the hash).
server::UploadRoute upload_route(std::shared_ptr<Gateway::Impl> s) {
  return [s](const Request& r) -> std::variant<Answer, std::unique_ptr<server::BodyReceiver>> {
    s->metrics.count_request("/template-uploads/{ticket}");
    const std::string ticket(r.param("ticket"));
    const auto it = s->upload_tickets.find(ticket);
    if (it == s->upload_tickets.end() || it->second.expires < unix_now())
      return e2b_error(404, "this upload link is unknown or has expired: ask for a new one");
    if (const auto length = r.field("Content-Length")) {
      const auto size = std::strtoull(std::string(*length).c_str(), nullptr, 10);
      if (size > kMaxTemplateUpload)
        return e2b_error(413, fmt::format("the upload is larger than {} MiB ({} bytes)",
                                          kMaxTemplateUpload >> 20, size));
    }
    return std::make_unique<TemplateUpload>(s, ticket,
                                            s->template_file(it->second.tenant, it->second.hash));
  };
}

}  // namespace

asio::awaitable<void> Gateway::Impl::build_and_signal(std::string tid, std::string bid,
                                                      json::object request, DockerfilePlan plan,
                                                      std::string base) {
  std::exception_ptr failure;
  try {
    auto building = run_build(tid, bid, std::move(request), std::move(plan), std::move(base));
    co_await std::move(building);
  } catch (...) {
    failure = std::current_exception();
  }
  if (const auto it = build_done.find(bid); it != build_done.end()) {
    it->second->set();
    build_done.erase(it);
  }
  if (failure)
    std::rethrow_exception(failure);
}

asio::awaitable<void> Gateway::Impl::run_build(std::string tid, std::string bid,
                                               json::object request, DockerfilePlan plan,
                                               std::string base) {
  auto log = [this, tid, bid](std::string message, std::string level = "info",
                              std::string step = {}) {
    const auto it = templates.find(tid);
    if (it == templates.end())
      return;
    TemplateBuild* b = it->second.build(bid);
    if (b == nullptr || b->logs.size() >= kMaxLogLines)
      return;
    if (message.size() > kMaxLogLine)
      message = message.substr(0, kMaxLogLine) + " [...]";
    b->logs.push_back(BuildLogLine{unix_now(), std::move(level), utf8_backslashreplace(message),
                                   std::move(step)});
  };
  auto finish = [this, tid, bid](std::string image, std::string reason, std::string step) {
    const auto it = templates.find(tid);
    if (it == templates.end())
      return;
    TemplateBuild* b = it->second.build(bid);
    if (b == nullptr)
      return;
    b->finished_at = unix_now();
    if (reason.empty()) {
      b->status = "ready";
      b->image = std::move(image);
      for (const auto& tag : b->tags)
        it->second.tags[tag] = bid;
      publish_template(it->second);
    } else {
      b->status = "error";
      b->reason = utf8_backslashreplace(reason);
      b->reason_step = std::move(step);
    }
  };

  const std::string provider_name = templates.at(tid).build(bid)->provider;
  const std::string tenant = templates.at(tid).tenant;
  // The key names the base by its image's id: a base tagged anew is another build. A base the
  // engine lacks has no id; its build fails, saying so.
  std::optional<std::string> base_id;
  if (Provider* p = provider(provider_name)) {
    try {
      auto asking = p->image_id(base);
      base_id = co_await std::move(asking);
    } catch (const std::exception& e) {
      logging::warn("gateway: template {}: cannot look base image {} up: {}", tid, base, e.what());
    }
  }
  const std::string key = build_key(request, base_id.value_or(base));
  if (TemplateBuild* b = templates.at(tid).build(bid))
    b->key = key;
  // A ready build of the same steps: its image, at once.
  if (!plan.force && base_id) {
    for (const auto& [id, t] : templates) {
      if (t.tenant != tenant)
        continue;
      for (const auto& other : t.builds) {
        if (other.status == "ready" && other.key == key && other.provider == provider_name &&
            other.id != bid) {
          log(fmt::format("CACHED: the same steps were built as build {} of template {}", other.id,
                          t.id));
          finish(other.image, {}, {});
          auto saving = save_template(templates.at(tid));
          co_await std::move(saving);
          co_return;
        }
      }
    }
    // The same steps being built now: wait for that build and take its result.
    if (const auto it = builds_by_key.find(key); it != builds_by_key.end()) {
      const auto running = it->second;
      log(fmt::format("waiting for build {} of the same steps", running->build));
      co_await running->done.wait();
      log(running->image.empty() ? "that build failed" : "CACHED: took that build's image",
          running->image.empty() ? "error" : "info");
      finish(running->image, running->reason, running->step);
      auto saving = save_template(templates.at(tid));
      co_await std::move(saving);
      co_return;
    }
  }
  auto running = std::make_shared<RunningBuild>(ex);
  running->build = bid;
  if (!plan.force)
    builds_by_key[key] = running;

  const fs::path dir = storage / "template-builds" / bid;
  const fs::path tar = storage / "template-builds" / (bid + ".tar");
  std::string failure;
  std::string failed_step;
  std::string image;
  try {
    log(fmt::format("building from {} on {}", base, provider_name));
    std::vector<std::pair<std::string, fs::path>> uploads;
    for (const auto& hash : plan.file_hashes)
      uploads.emplace_back(hash, template_file(tenant, hash));
    std::vector<std::pair<DockerfilePlan::Copy, fs::path>> copies;
    for (const auto& copy : plan.copies)
      copies.emplace_back(copy, template_file(tenant, copy.hash));
    // Each COPY step's upload is the files its hash names (E2B's hash, recomputed from the
    // archive): one that is not fails the build at that step, before the engine is asked.
    auto verify = [copies]() -> std::optional<std::pair<std::string, std::string>> {
      for (const auto& [copy, file] : copies) {
        const auto found = e2b_files_hash(file, copy.src, copy.dest);
        if (found && *found != copy.hash)
          return std::pair(copy.step,
                           fmt::format("step {}: COPY {} {}: the upload of hash {} holds other "
                                       "files (they hash to {}): upload them again",
                                       copy.step, copy.src, copy.dest, copy.hash, *found));
      }
      return std::nullopt;
    };
    std::optional<std::pair<std::string, std::string>> mismatch;
    try {
      mismatch = co_await rex::detail::offload(file_threads, ex, std::move(verify));
    } catch (const std::exception& e) {
      failed_step = "base";
      throw std::runtime_error(fmt::format("cannot read an upload: {}", e.what()));
    }
    if (mismatch) {
      failed_step = mismatch->first;
      throw std::runtime_error(mismatch->second);
    }
    auto prepare = [dir, tar, uploads, dockerfile = plan.dockerfile] {
      std::error_code ec;
      fs::remove_all(dir, ec);
      fs::create_directories(dir / "files");
      {
        std::ofstream out(dir / "Dockerfile", std::ios::binary);
        out << dockerfile;
      }
      for (const auto& [hash, file] : uploads)
        extract_archive(file, dir / "files" / hash);
      create_archive(dir, tar, ArchiveFormat::tar);
    };
    try {
      co_await rex::detail::offload(file_threads, ex, std::move(prepare));
    } catch (const std::exception& e) {
      failed_step = "base";
      throw std::runtime_error(fmt::format("cannot prepare the build's files: {}", e.what()));
    }
    Provider* p = provider(provider_name);
    if (p == nullptr)
      throw std::runtime_error(fmt::format("the {} provider is gone", provider_name));
    ImageBuild request;
    request.context_tar = tar.string();
    request.base = base;
    request.tag = fmt::format("rex-template-{}:{}", tid, bid.substr(0, 8));
    request.labels = {{"rex.template", tid}, {"rex.template.build", bid}};
    std::string step;
    request.on_line = [&](std::string_view line) {
      if (auto s = step_of_line(plan, line))
        step = *s;
      log(std::string(line), "info", step);
    };
    std::string build_failure;
    try {
      auto building = p->build_image(std::move(request));
      image = co_await std::move(building);
    } catch (const std::exception& e) {
      build_failure = e.what();
    }
    if (!build_failure.empty()) {
      failed_step = step.empty() ? "base" : step;
      throw std::runtime_error(failed_step == "base" || failed_step == "finalize"
                                   ? build_failure
                                   : fmt::format("step {} failed: {}", failed_step, build_failure));
    }
    log(fmt::format("built image {}", image));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  auto cleanup = [dir, tar] {
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::remove(tar, ec);
  };
  co_await rex::detail::offload(file_threads, ex, std::move(cleanup));
  if (!failure.empty())
    log(failure, "error", failed_step);
  finish(image, failure, failed_step);
  running->image = failure.empty() ? image : std::string();
  running->reason = failure;
  running->step = failed_step;
  if (const auto it = builds_by_key.find(key); it != builds_by_key.end() && it->second == running)
    builds_by_key.erase(it);
  running->done.set();
  if (templates.contains(tid)) {
    auto saving = save_template(templates.at(tid));
    co_await std::move(saving);
  }
}

asio::awaitable<bool> Gateway::Impl::delete_template(const Caller& who, std::string id) {
  TemplateRecord* t = template_named(id);
  if (t == nullptr || t->tenant != who.tenant)
    co_return false;
  const TemplateRecord gone = *t;
  templates.erase(gone.id);
  // Its environments stay for its sessions (a create reaches a template only by its record).
  auto saving = save_template(gone, true);
  co_await std::move(saving);
  // Its images go where nothing uses them; the engine keeps one a sandbox still runs.
  for (const auto& b : gone.builds) {
    if (b.image.empty())
      continue;
    bool shared = false;
    for (const auto& [other_id, other] : templates) {
      for (const auto& ob : other.builds)
        shared = shared || ob.image == b.image;
    }
    Provider* p = provider(b.provider);
    if (shared || p == nullptr)
      continue;
    auto removing = capture(p->remove_checkpoint(b.image));
    if (const auto removed = co_await std::move(removing); !removed)
      logging::warn("gateway: template {}: {}", gone.id, removed.error_message());
  }
  co_return true;
}

asio::awaitable<void> Gateway::Impl::start_commands(Entry& e, const Environment& env) {
  if (env.start_cmd.empty() && env.ready_cmd.empty() && !env.code_interpreter)
    co_return;
  auto live = live_of(e);
  const std::string home = env.working_dir.empty() ? std::string(".") : env.working_dir;
  // As the template's user, in its directory, with the sandbox's environment.
  auto as_user = [&](const std::string& command) {
    if (command.empty())
      return std::string();
    const std::string inner = fmt::format("cd {} 2>/dev/null; {}", shell_quote(home), command);
    if (env.user.empty() || env.user == "root")
      return fmt::format("/bin/bash -c {}", shell_quote(inner));
    return fmt::format("runuser -u {} -- /bin/bash -c {}", shell_quote(env.user),
                       shell_quote(inner));
  };
  // Each command started on its own, then its ready command awaited.
  std::vector<std::pair<std::string, std::string>> starts;
  if (env.code_interpreter) {
    // E2B's code interpreter: the notebook kernel's http mode on port 49999, started first.
    const std::string dir =
        e.rec.scratch_dir.empty() ? std::string(kSandboxScratchDir) : e.rec.scratch_dir;
    const std::string script = dir + "/code_interpreter.py";
    Command mkdir;
    mkdir.command = fmt::format("mkdir -p {0} && chmod 755 {0}", shell_quote(dir));
    mkdir.shell = true;
    mkdir.timeout = 30;
    auto making = live->runtime->execute(std::move(mkdir));
    co_await std::move(making);
    WriteFileRequest write;
    write.path = script;
    write.content = std::string(kNotebookKernel);
    auto writing = live->runtime->write_file(std::move(write));
    co_await std::move(writing);
    starts.emplace_back(
        fmt::format("python3 {} http --port {}", shell_quote(script), kCodeInterpreterPort),
        fmt::format("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {}), 1)\"",
                    kCodeInterpreterPort));
  }
  if (!env.start_cmd.empty() || !env.ready_cmd.empty())
    starts.emplace_back(env.start_cmd, env.ready_cmd);
  constexpr std::string_view kStartLog = "/tmp/.rex-start-cmd.log";
  for (const auto& [start_cmd, ready_cmd] : starts) {
    if (!start_cmd.empty()) {
      Command start;
      // On its own, its output in a file: the call returns while it runs.
      start.command =
          fmt::format("setsid nohup {} >>{} 2>&1 </dev/null &", as_user(start_cmd), kStartLog);
      start.shell = true;
      start.timeout = 30;
      auto starting = live->runtime->execute(std::move(start));
      const CommandResponse started = co_await std::move(starting);
      if (started.exit_code.value_or(1) != 0)
        throw std::runtime_error(fmt::format("the start command could not be started: {}{}",
                                             started.stdout_, started.stderr_));
    }
    if (ready_cmd.empty())
      continue;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    auto pause = std::chrono::milliseconds(50);
    CommandResponse last;
    bool ready = false;
    while (!ready) {
      Command probe;
      probe.command = as_user(ready_cmd);
      probe.shell = true;
      probe.timeout = 30;
      auto checking = live->runtime->execute(std::move(probe));
      last = co_await std::move(checking);
      ready = last.exit_code && *last.exit_code == 0;
      if (ready || std::chrono::steady_clock::now() >= give_up)
        break;
      asio::steady_timer timer(ex, pause);
      co_await timer.async_wait(asio::use_awaitable);
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
    if (ready)
      continue;
    Command tail;
    tail.command = fmt::format("tail -c 2000 {} 2>/dev/null", kStartLog);
    tail.shell = true;
    tail.timeout = 10;
    auto reading = live->runtime->execute(std::move(tail));
    const CommandResponse log = co_await std::move(reading);
    throw std::runtime_error(fmt::format(
        "the ready command {:?} did not succeed within 120 s (last exit code {}; {}){}", ready_cmd,
        last.exit_code.value_or(-1), last.stderr_.substr(0, 500),
        log.stdout_.empty() ? std::string() : "; the start command's output: " + log.stdout_));
  }
}

void add_template_routes(server::RouteTable& t, std::shared_ptr<Gateway::Impl> s) {
  using bhttp::verb;
  auto add = [&](verb method, const std::string& pattern, auto fn) {
    t.add(method, pattern, e2b_route<TemplatesApi>(s, pattern, fn));
  };
  add(verb::post, "/v3/templates", [](TemplatesApi& a, Caller w, Request r) {
    return a.request_build(std::move(w), std::move(r));
  });
  add(verb::get, "/templates/{id}/files/{hash}",
      [](TemplatesApi& a, Caller w, Request r) { return a.file_link(std::move(w), std::move(r)); });
  add(verb::post, "/v2/templates/{id}/builds/{build}", [](TemplatesApi& a, Caller w, Request r) {
    return a.start_build(std::move(w), std::move(r));
  });
  add(verb::get, "/templates/{id}/builds/{build}/status",
      [](TemplatesApi& a, Caller w, Request r) { return a.status(std::move(w), std::move(r)); });
  add(verb::get, "/templates/{id}/builds/{build}/logs",
      [](TemplatesApi& a, Caller w, Request r) { return a.logs(std::move(w), std::move(r)); });
  add(verb::post, "/templates/tags", [](TemplatesApi& a, Caller w, Request r) {
    return a.assign_tags(std::move(w), std::move(r));
  });
  add(verb::delete_, "/templates/tags", [](TemplatesApi& a, Caller w, Request r) {
    return a.remove_tags(std::move(w), std::move(r));
  });
  add(verb::get, "/templates/{id}/tags",
      [](TemplatesApi& a, Caller w, Request r) { return a.list_tags(std::move(w), std::move(r)); });
  add(verb::get, "/templates/aliases/{alias}",
      [](TemplatesApi& a, Caller w, Request r) { return a.alias(std::move(w), std::move(r)); });
  add(verb::get, "/templates",
      [](TemplatesApi& a, Caller w, Request r) { return a.list(std::move(w), std::move(r)); });
  add(verb::get, "/templates/{id}",
      [](TemplatesApi& a, Caller w, Request r) { return a.get(std::move(w), std::move(r)); });
  t.add(verb::put, "/template-uploads/{ticket}", upload_route(s));
}

}  // namespace rex::gateway
