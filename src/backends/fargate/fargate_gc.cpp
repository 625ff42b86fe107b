#include <rex/aws/client.hpp>
#include <rex/aws/xml.hpp>
#include <rex/backends/fargate/fargate_gc.hpp>
#include <rex/core/object_fields.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>

#include "core/clock.hpp"

namespace rex {

namespace json = boost::json;

namespace {

std::map<std::string, std::string> tags_of(const json::object& task) {
  std::map<std::string, std::string> tags;
  if (const json::value* list = task.if_contains("tags"); list != nullptr && list->is_array())
    for (const auto& t : list->get_array())
      if (t.is_object())
        tags[field_text(t.get_object(), {"key"})] = field_text(t.get_object(), {"value"});
  return tags;
}

}  // namespace

asio::awaitable<std::vector<FargateTask>> list_fargate_tasks(aws::AwsClient& client,
                                                             std::string cluster) {
  std::vector<FargateTask> out;
  std::vector<std::string> arns;
  std::string next;
  do {
    json::object params{{"cluster", cluster}, {"desiredStatus", "RUNNING"}};
    if (!next.empty())
      params["nextToken"] = next;
    json::object page;
    try {
      auto list = client.json_call(aws::kEcs, "ListTasks", std::move(params));
      page = co_await std::move(list);
    } catch (const aws::AwsError& e) {
      if (e.code() == "ClusterNotFoundException")
        co_return out;
      throw;
    }
    if (const json::value* a = page.if_contains("taskArns"); a != nullptr && a->is_array())
      for (const auto& arn : a->get_array())
        if (arn.is_string())
          arns.emplace_back(arn.get_string());
    next = field_text(page, {"nextToken"});
  } while (!next.empty());

  // DescribeTasks takes up to 100 tasks a call.
  for (std::size_t at = 0; at < arns.size(); at += 100) {
    json::array batch;
    for (std::size_t i = at; i < std::min(arns.size(), at + 100); ++i)
      batch.emplace_back(arns[i]);
    auto describe = client.json_call(
        aws::kEcs, "DescribeTasks",
        json::object{{"cluster", cluster}, {"tasks", std::move(batch)}, {"include", {"TAGS"}}});
    const json::object described = co_await std::move(describe);
    const json::value* tasks = described.if_contains("tasks");
    if (tasks == nullptr || !tasks->is_array())
      continue;
    for (const auto& t : tasks->get_array()) {
      if (!t.is_object())
        continue;
      FargateTask task;
      task.arn = field_text(t.get_object(), {"taskArn"});
      task.tags = tags_of(t.get_object());
      task.last_status = field_text(t.get_object(), {"lastStatus"});
      if (const json::value* c = t.get_object().if_contains("createdAt"); c && c->is_number())
        task.created_at = c->to_number<double>();
      else if (const auto tag = task.tags.find(std::string(labels::created));
               tag != task.tags.end())
        task.created_at = std::strtod(tag->second.c_str(), nullptr);  // rex's own tag
      out.push_back(std::move(task));
    }
  }
  co_return out;
}

asio::awaitable<GcReport> collect_fargate_garbage(aws::AwsClient& client,
                                                  FargateGcOptions options) {
  GcReport report;
  const std::int64_t now = rex::detail::unix_seconds();
  auto listing = list_fargate_tasks(client, options.cluster);
  std::vector<FargateTask> tasks = co_await std::move(listing);
  for (auto& task : tasks) {
    if (task.tags.count(std::string(labels::managed)) == 0)
      continue;  // not rex's
    GcEntry entry;
    entry.name = task.arn;
    entry.reason = gc_reason(task.tags, now, options.gc);
    if (entry.reason.empty()) {
      entry.reason = gc_keep_reason(task.tags);
      report.kept.push_back(std::move(entry));
      continue;
    }
    if (!options.gc.dry_run) {
      try {
        auto stop = client.json_call(aws::kEcs, "StopTask",
                                     json::object{{"cluster", options.cluster},
                                                  {"task", entry.name},
                                                  {"reason", "rex gc: " + entry.reason}});
        co_await std::move(stop);
      } catch (const aws::AwsError& e) {
        report.errors.push_back(fmt::format("{}: {}", entry.name, e.what()));
        continue;
      }
    }
    report.removed.push_back(std::move(entry));
  }

  // The security groups FargateDeployment made, once no network interface uses them.
  auto groups =
      client.query_call(aws::kEc2, "DescribeSecurityGroups",
                        {{"Filter.1.Name", "tag:origin"}, {"Filter.1.Value.1", "rex-fargate"}});
  const aws::XmlElement found = co_await std::move(groups);
  const aws::XmlElement* set = found.child("securityGroupInfo");
  for (const auto& g : set ? set->children : std::vector<aws::XmlElement>{}) {
    GcEntry entry;
    entry.id = g.text_at("groupId");
    entry.name = entry.id;
    std::int64_t created = 0;
    if (const aws::XmlElement* tags = g.child("tagSet"))
      for (const auto& t : tags->children)
        if (t.text_at("key") == labels::created)
          created = std::strtoll(t.text_at("value").c_str(), nullptr, 10);
    if (!options.gc.all && created > 0 && now - created < options.group_grace.count()) {
      entry.reason = fmt::format("security group made {} s ago", now - created);
      report.kept.push_back(std::move(entry));
      continue;
    }
    auto users = client.query_call(aws::kEc2, "DescribeNetworkInterfaces",
                                   {{"Filter.1.Name", "group-id"}, {"Filter.1.Value.1", entry.id}});
    const aws::XmlElement interfaces = co_await std::move(users);
    const aws::XmlElement* used = interfaces.child("networkInterfaceSet");
    if (used != nullptr && !used->children.empty()) {
      entry.reason =
          fmt::format("security group used by {} network interfaces", used->children.size());
      report.kept.push_back(std::move(entry));
      continue;
    }
    entry.reason = "security group no network interface uses";
    if (!options.gc.dry_run) {
      try {
        auto deleting =
            client.query_call(aws::kEc2, "DeleteSecurityGroup", {{"GroupId", entry.id}});
        co_await std::move(deleting);
      } catch (const aws::AwsError& e) {
        // DependencyViolation: something took it meanwhile; it stays.
        report.errors.push_back(fmt::format("{}: {}", entry.id, e.what()));
        continue;
      }
    }
    report.removed.push_back(std::move(entry));
  }
  co_return report;
}

}  // namespace rex
