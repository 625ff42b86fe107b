#include "gateway/checkpoint_record.hpp"

#include "gateway/session_record.hpp"

#include <fmt/format.h>
#include <boost/json.hpp>

#include <stdexcept>

namespace rex::gateway {

namespace json = boost::json;

json::object CheckpointRecord::to_json() const {
  return json::object{{"id", id},
                      {"tenant", tenant},
                      {"provider", provider},
                      {"environment", environment},
                      {"session", session},
                      {"state", state},
                      {"parent", parent},
                      {"base", base},
                      {"kind", kind},
                      {"image", image},
                      {"working_dir", working_dir},
                      {"sessions", sessions},
                      {"not_carried", not_carried},
                      {"metadata", metadata},
                      {"created_at", created_at}};
}

json::object CheckpointRecord::public_json() const {
  json::array names;
  for (const auto& s : sessions) {
    if (const auto* o = s.if_object(); o != nullptr && o->contains("session"))
      names.push_back(o->at("session"));
  }
  json::object out{{"checkpoint_id", id},
                   {"session_id", session},
                   {"provider", provider},
                   {"environment", environment},
                   {"state", state},
                   {"kind", kind},
                   {"parent", parent.empty() ? json::value(nullptr) : json::value(parent)},
                   {"sessions", std::move(names)},
                   {"not_carried", not_carried},
                   {"metadata", metadata},
                   {"created_at", iso_time(created_at)}};
  return out;
}

namespace {

std::string text(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (v == nullptr || !v->is_string())
    throw std::invalid_argument(
        fmt::format("checkpoint record: {} is missing or not a string", name));
  return std::string(v->get_string());
}

}  // namespace

CheckpointRecord CheckpointRecord::from_json(const json::object& o) {
  CheckpointRecord r;
  r.id = text(o, "id");
  r.tenant = text(o, "tenant");
  r.provider = text(o, "provider");
  r.environment = text(o, "environment");
  r.session = text(o, "session");
  r.state = text(o, "state");
  r.parent = text(o, "parent");
  r.base = text(o, "base");
  r.kind = text(o, "kind");
  r.image = text(o, "image");
  if (const auto* w = o.if_contains("working_dir"); w != nullptr && w->is_string())
    r.working_dir = std::string(w->get_string());
  if (const auto* v = o.if_contains("sessions"); v != nullptr && v->is_array())
    r.sessions = v->get_array();
  if (const auto* v = o.if_contains("not_carried"); v != nullptr && v->is_array())
    r.not_carried = v->get_array();
  if (const auto* v = o.if_contains("metadata"); v != nullptr && v->is_object())
    r.metadata = v->get_object();
  const auto* at = o.if_contains("created_at");
  if (at == nullptr || !at->is_number())
    throw std::invalid_argument("checkpoint record: created_at is missing or not a number");
  r.created_at = at->to_number<double>();
  return r;
}

}  // namespace rex::gateway
