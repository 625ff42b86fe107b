#include <rex/aws/client.hpp>
#include <rex/backends/fargate/fargate_deployment.hpp>
#include <rex/core/backoff.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/core/random.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/runtime/remote_runtime.hpp>

#include "backends/fargate/fargate_calls.hpp"
#include "core/clock.hpp"
#include "deployment/hand_over.hpp"

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>

namespace rex {

namespace json = boost::json;
using aws::AwsClient;
using aws::AwsError;
using aws::XmlElement;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kSandbox = "sandbox";
constexpr const char* kInstall = "rex-server-install";
constexpr const char* kVolume = "rex-server";
constexpr const char* kServerDir = "/rex";
constexpr const char* kTaskExecutionPolicy =
    "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy";
constexpr const char* kRegistryReadOnlyPolicy =
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly";
constexpr const char* kLogsPolicyName = "RexLogs";

// A name made of a prefix and the hash of what it names: the same content gets the same name,
// so a second start reuses what the first made.
std::string name_hash(const std::string& prefix, const json::value& content,
                      std::size_t max_length) {
  std::string name = prefix + "-" + aws::sha256_hex(json::serialize(content)).substr(0, 12);
  if (name.size() > max_length)
    throw DeploymentConfigError(
        fmt::format("fargate: the prefix \"{}\" is too long for a name "
                    "of at most {} characters",
                    prefix, max_length));
  return name;
}

json::object trust_policy() {
  return json::object{
      {"Version", "2012-10-17"},
      {"Statement",
       json::array{json::object{{"Effect", "Allow"},
                                {"Principal", json::object{{"Service", "ecs-tasks.amazonaws.com"}}},
                                {"Action", "sts:AssumeRole"}}}}};
}

json::object logs_policy() {
  return json::object{
      {"Version", "2012-10-17"},
      {"Statement", json::array{json::object{
                        {"Effect", "Allow"},
                        {"Action", json::array{"logs:CreateLogGroup", "logs:CreateLogStream",
                                               "logs:PutLogEvents", "logs:DescribeLogStreams"}},
                        {"Resource", "*"}}}}};
}

// The text of every `member` under a Query answer's list element.
std::vector<std::string> members(const XmlElement* list, std::string_view field = {}) {
  std::vector<std::string> out;
  if (list == nullptr)
    return out;
  for (const auto& m : list->children)
    out.push_back(field.empty() ? m.text : m.text_at(field));
  return out;
}

// The task as ECS describes it, or nothing when ECS does not know it (any more).
asio::awaitable<std::optional<json::object>> find_fargate_task(AwsClient& aws, std::string cluster,
                                                               std::string task_arn) {
  auto describe_tasks = aws.json_call(
      aws::kEcs, "DescribeTasks",
      json::object{{"cluster", cluster}, {"tasks", json::array{json::value(task_arn)}}});
  const json::object got = co_await std::move(describe_tasks);
  const json::array* list = got.if_contains("tasks") ? got.at("tasks").if_array() : nullptr;
  if (list == nullptr || list->empty() || !list->front().is_object())
    co_return std::nullopt;
  co_return list->front().as_object();
}

asio::awaitable<json::object> describe_fargate_task(AwsClient& aws, std::string cluster,
                                                    std::string task_arn) {
  auto finding = find_fargate_task(aws, std::move(cluster), task_arn);
  std::optional<json::object> task = co_await std::move(finding);
  if (!task)
    throw DeploymentStartupError("fargate: ECS does not know the task " + task_arn);
  co_return std::move(*task);
}

std::string stopped_reason(const json::object& task) {
  std::string why = field_text(task, {"stoppedReason"});
  if (const auto* containers = task.if_contains("containers"); containers && containers->is_array())
    for (const auto& c : containers->as_array()) {
      if (!c.is_object())
        continue;
      const std::string reason = field_text(c.as_object(), {"reason"});
      if (!reason.empty())
        why += fmt::format("; {}: {}", field_text(c.as_object(), {"name"}), reason);
    }
  return why.empty() ? "no reason given" : why;
}

struct TaskStart {
  asio::any_io_executor executor;
  FargateDeploymentConfig config;
  std::string id = random_hex(8);
  std::string token;
  std::unique_ptr<AwsClient> aws;
  std::string cluster_arn;
  std::string sandbox_id;
  std::string url;
  std::unique_ptr<RemoteRuntime> runtime;
  // Told each stage of the start.
  std::function<void(DeploymentStage, std::string)> report;

  void emit(DeploymentStage stage, std::string message) const {
    if (report)
      report(stage, std::move(message));
  }

  // The calls, each an awaitable to name before awaiting it (g++ 12 and temporaries in
  // co_await expressions).
  asio::awaitable<json::object> ecs(std::string operation, json::object params) {
    return aws->json_call(aws::kEcs, std::move(operation), std::move(params));
  }
  asio::awaitable<XmlElement> ec2(std::string operation, aws::Headers params) {
    return aws->query_call(aws::kEc2, std::move(operation), std::move(params));
  }
  asio::awaitable<XmlElement> iam(std::string operation, aws::Headers params) {
    return aws->query_call(aws::kIam, std::move(operation), std::move(params));
  }

  // What rex makes once and shares (the cluster, task definitions): only where it came from.
  static json::array shared_tags() {
    return json::array{json::object{{"key", "origin"}, {"value", "rex-fargate"}}};
  }

  // A task's tags: rex's labels (gc.hpp), by which `rex gc --fargate` finds and judges it.
  json::array tags() const {
    std::map<std::string, std::string> l = config.labels;
    for (auto& [k, v] : owner_labels())
      l[k] = v;
    l[std::string(labels::managed)] = "1";
    l[std::string(labels::deployment)] = id;
    const auto now = rex::detail::unix_seconds();
    const auto expires = now + static_cast<std::int64_t>(config.container_timeout.count()) + 60;
    l[std::string(labels::expires)] = std::to_string(expires);
    // When the task was asked for, for a lister whose answer has no createdAt (an emulator's).
    l[std::string(labels::created)] = std::to_string(now);
    json::array out;
    for (const auto& [k, v] : l)
      out.push_back(json::object{{"key", k}, {"value", v}});
    return out;
  }

  asio::awaitable<std::string> execution_role() {
    const json::object inline_policy = logs_policy();
    const std::string role = name_hash(config.execution_role_prefix, inline_policy, 64);
    std::string arn;
    try {
      auto get_role = iam("GetRole", {{"RoleName", role}});
      const XmlElement got = co_await std::move(get_role);
      arn = got.text_at("GetRoleResult/Role/Arn");
    } catch (const AwsError& e) {
      if (e.code() != "NoSuchEntity")
        throw;
    }
    if (arn.empty()) {
      auto create_role =
          iam("CreateRole", {{"RoleName", role},
                             {"AssumeRolePolicyDocument", json::serialize(trust_policy())},
                             {"Description", "Execution role of rex's Fargate tasks"},
                             {"Tags.member.1.Key", "origin"},
                             {"Tags.member.1.Value", "rex-fargate"}});
      const XmlElement made = co_await std::move(create_role);
      arn = made.text_at("CreateRoleResult/Role/Arn");
    }
    auto list_attached = iam("ListAttachedRolePolicies", {{"RoleName", role}});
    const XmlElement attached = co_await std::move(list_attached);
    const auto arns =
        members(attached.at("ListAttachedRolePoliciesResult/AttachedPolicies"), "PolicyArn");
    for (const char* policy : {kTaskExecutionPolicy, kRegistryReadOnlyPolicy}) {
      if (std::find(arns.begin(), arns.end(), policy) != arns.end())
        continue;
      auto attach = iam("AttachRolePolicy", {{"RoleName", role}, {"PolicyArn", policy}});
      co_await std::move(attach);
    }
    auto list_inline = iam("ListRolePolicies", {{"RoleName", role}});
    const XmlElement inline_list = co_await std::move(list_inline);
    const auto names = members(inline_list.at("ListRolePoliciesResult/PolicyNames"));
    if (std::find(names.begin(), names.end(), kLogsPolicyName) == names.end()) {
      auto put_policy = iam("PutRolePolicy", {{"RoleName", role},
                                              {"PolicyName", kLogsPolicyName},
                                              {"PolicyDocument", json::serialize(inline_policy)}});
      co_await std::move(put_policy);
    }
    if (arn.empty())
      throw DeploymentStartupError("fargate: IAM answered no ARN for the role " + role);
    co_return arn;
  }

  json::object task_definition(const std::string& role_arn) const {
    const std::string server_image =
        config.server_image.empty() ? default_server_image() : config.server_image;
    const int memory = std::max(128, std::atoi(config.memory.c_str()));
    json::object install{
        {"name", kInstall},
        {"image", server_image},
        {"essential", false},
        {"memory", 64},
        {"entryPoint", json::array{"/rex-server"}},
        {"command", json::array{"--install", fmt::format("{}/rex-server", kServerDir)}},
        {"mountPoints",
         json::array{json::object{{"sourceVolume", kVolume}, {"containerPath", kServerDir}}}},
    };
    json::object sandbox{
        {"name", kSandbox},
        {"image", config.image},
        {"essential", true},
        {"memory", memory - 64},
        {"portMappings",
         json::array{json::object{
             {"containerPort", config.port}, {"hostPort", config.port}, {"protocol", "tcp"}}}},
        {"entryPoint", json::array{fmt::format("{}/rex-server", kServerDir)}},
        {"command",
         json::array{"--host", "0.0.0.0", "--port", std::to_string(config.port), "--max-lifetime",
                     fmt::format("{:g}", config.container_timeout.count())}},
        {"mountPoints",
         json::array{json::object{
             {"sourceVolume", kVolume}, {"containerPath", kServerDir}, {"readOnly", true}}}},
        {"dependsOn",
         json::array{json::object{{"containerName", kInstall}, {"condition", "SUCCESS"}}}},
    };
    if (!config.log_group.empty()) {
      json::object log{{"logDriver", "awslogs"},
                       {"options", json::object{{"awslogs-group", config.log_group},
                                                {"awslogs-region", aws->config().region},
                                                {"awslogs-stream-prefix", "rex"},
                                                {"awslogs-create-group", "true"}}}};
      sandbox["logConfiguration"] = log;
      install["logConfiguration"] = std::move(log);
    }
    return json::object{
        {"executionRoleArn", role_arn},
        {"networkMode", "awsvpc"},
        {"requiresCompatibilities", json::array{"FARGATE"}},
        {"cpu", config.cpu},
        {"memory", config.memory},
        {"volumes", json::array{json::object{{"name", kVolume}}}},
        {"containerDefinitions", json::array{std::move(install), std::move(sandbox)}},
    };
  }

  asio::awaitable<std::string> task_definition_arn(const std::string& role_arn) {
    json::object definition = task_definition(role_arn);
    const std::string family = name_hash(config.task_definition_prefix, definition, 255);
    try {
      auto describe_definition =
          ecs("DescribeTaskDefinition", json::object{{"taskDefinition", family}});
      const json::object got = co_await std::move(describe_definition);
      const std::string arn =
          field_text(got.at("taskDefinition").as_object(), {"taskDefinitionArn"});
      if (!arn.empty())
        co_return arn;
    } catch (const AwsError& e) {
      if (e.code() != "ClientException")
        throw;
    }
    definition["family"] = family;
    definition["tags"] = shared_tags();
    auto register_definition = ecs("RegisterTaskDefinition", std::move(definition));
    const json::object made = co_await std::move(register_definition);
    co_return field_text(made.at("taskDefinition").as_object(), {"taskDefinitionArn"});
  }

  // The subnet and its VPC: the one given, or the first of the default VPC.
  asio::awaitable<std::pair<std::string, std::string>> subnet() {
    if (!config.subnet_id.empty()) {
      auto describe_subnet = ec2("DescribeSubnets", {{"SubnetId.1", config.subnet_id}});
      const XmlElement got = co_await std::move(describe_subnet);
      co_return std::pair{config.subnet_id, got.text_at("subnetSet/item/vpcId")};
    }
    auto describe_vpcs =
        ec2("DescribeVpcs", {{"Filter.1.Name", "is-default"}, {"Filter.1.Value.1", "true"}});
    const XmlElement vpcs = co_await std::move(describe_vpcs);
    const std::string vpc = vpcs.text_at("vpcSet/item/vpcId");
    if (vpc.empty())
      throw DeploymentStartupError(
          "fargate: this account has no default VPC in " + aws->config().region +
          ": set subnet_id (and security_group_id) in the deployment config");
    auto describe_subnets =
        ec2("DescribeSubnets", {{"Filter.1.Name", "vpc-id"}, {"Filter.1.Value.1", vpc}});
    const XmlElement subnets = co_await std::move(describe_subnets);
    const std::string id = subnets.text_at("subnetSet/item/subnetId");
    if (id.empty())
      throw DeploymentStartupError("fargate: the default VPC " + vpc + " has no subnet");
    co_return std::pair{id, vpc};
  }

  asio::awaitable<std::string> security_group(const std::string& vpc) {
    if (!config.security_group_id.empty())
      co_return config.security_group_id;
    const json::object rule{{"IpProtocol", "tcp"},
                            {"FromPort", config.port},
                            {"ToPort", config.port},
                            {"CidrIp", config.ingress_cidr},
                            {"VpcId", vpc}};
    const std::string name = name_hash(config.security_group_prefix, rule, 255);
    auto describe_groups = ec2("DescribeSecurityGroups", {{"Filter.1.Name", "group-name"},
                                                          {"Filter.1.Value.1", name},
                                                          {"Filter.2.Name", "vpc-id"},
                                                          {"Filter.2.Value.1", vpc}});
    const XmlElement found = co_await std::move(describe_groups);
    if (std::string id = found.text_at("securityGroupInfo/item/groupId"); !id.empty())
      co_return id;
    auto create_group =
        ec2("CreateSecurityGroup",
            {{"GroupName", name},
             {"GroupDescription", "rex-server of rex's Fargate sandboxes"},
             {"VpcId", vpc},
             {"TagSpecification.1.ResourceType", "security-group"},
             {"TagSpecification.1.Tag.1.Key", "origin"},
             {"TagSpecification.1.Tag.1.Value", "rex-fargate"},
             // for `rex gc --fargate`, which spares a group this young
             {"TagSpecification.1.Tag.2.Key", std::string(labels::created)},
             {"TagSpecification.1.Tag.2.Value", std::to_string(rex::detail::unix_seconds())}});
    const XmlElement made = co_await std::move(create_group);
    const std::string id = made.text_at("groupId");
    auto authorize = ec2("AuthorizeSecurityGroupIngress",
                         {{"GroupId", id},
                          {"IpPermissions.1.IpProtocol", "tcp"},
                          {"IpPermissions.1.FromPort", std::to_string(config.port)},
                          {"IpPermissions.1.ToPort", std::to_string(config.port)},
                          {"IpPermissions.1.IpRanges.1.CidrIp", config.ingress_cidr}});
    co_await std::move(authorize);
    co_return id;
  }

  asio::awaitable<json::object> describe_task() {
    return describe_fargate_task(*aws, cluster_arn, sandbox_id);
  }

  // The address of the task's network interface, as connect asks.
  asio::awaitable<std::string> address(const json::object& task) {
    std::string eni;
    if (const auto* attachments = task.if_contains("attachments");
        attachments && attachments->is_array())
      for (const auto& a : attachments->as_array())
        if (a.is_object() && a.as_object().if_contains("details"))
          for (const auto& d : a.at("details").as_array())
            if (d.is_object() && field_text(d.as_object(), {"name"}) == "networkInterfaceId")
              eni = field_text(d.as_object(), {"value"});
    if (eni.empty())
      throw DeploymentStartupError("fargate: the task " + sandbox_id + " has no network interface");
    auto describe_interface = ec2("DescribeNetworkInterfaces", {{"NetworkInterfaceId.1", eni}});
    const XmlElement got = co_await std::move(describe_interface);
    const XmlElement* item = got.at("networkInterfaceSet/item");
    if (item == nullptr)
      throw DeploymentStartupError("fargate: EC2 does not know the network interface " + eni);
    if (config.connect == "private_ip")
      co_return item->text_at("privateIpAddress");
    const std::string ip = item->text_at("association/publicIp");
    if (ip.empty())
      throw DeploymentStartupError(
          "fargate: the task's network interface " + eni +
          " has no public address (assign_public_ip is off, or the subnet gives none): set "
          "connect to private_ip to reach it inside its VPC");
    co_return ip;
  }

  // The task this start ran, when it failed.
  asio::awaitable<void> remove() {
    if (sandbox_id.empty() || !aws)
      co_return;
    auto stopping =
        stop_fargate_task(*aws, cluster_arn, sandbox_id, "rex: the sandbox's start failed");
    co_await std::move(stopping);
  }

  asio::awaitable<void> start() {
    aws = std::make_unique<AwsClient>(executor,
                                      aws::config_from_environment(config.profile, config.region));
    token = random_hex(16);

    emit(DeploymentStage::creating, "ECS cluster " + config.cluster_name);
    auto create_cluster = ecs("CreateCluster", json::object{{"clusterName", config.cluster_name},
                                                            {"tags", shared_tags()}});
    const json::object cluster = co_await std::move(create_cluster);
    cluster_arn = field_text(cluster.at("cluster").as_object(), {"clusterArn"});
    const std::string role = co_await execution_role();
    const std::string definition = co_await task_definition_arn(role);
    const auto [subnet_id, vpc] = co_await subnet();
    const std::string group = co_await security_group(vpc);

    json::array environment{json::object{{"name", "REX_AUTH_TOKEN"}, {"value", token}}};
    for (const auto& [k, v] : config.env)
      environment.push_back(json::object{{"name", k}, {"value", v}});
    json::object overrides{
        {"containerOverrides",
         json::array{json::object{{"name", kSandbox}, {"environment", std::move(environment)}}}}};
    for (const auto& [k, v] : config.fargate_args)
      overrides[k] = v;
    emit(DeploymentStage::starting, "ECS RunTask on " + config.cluster_name);
    auto run_task =
        ecs("RunTask",
            json::object{
                {"cluster", cluster_arn},
                {"taskDefinition", definition},
                {"launchType", "FARGATE"},
                {"count", 1},
                {"networkConfiguration",
                 json::object{{"awsvpcConfiguration",
                               json::object{{"subnets", json::array{json::value(subnet_id)}},
                                            {"securityGroups", json::array{json::value(group)}},
                                            {"assignPublicIp",
                                             config.assign_public_ip ? "ENABLED" : "DISABLED"}}}}},
                {"overrides", std::move(overrides)},
                {"tags", tags()},
                {"startedBy", "rex-" + id}});
    const json::object ran = co_await std::move(run_task);
    const json::array* started_tasks =
        ran.if_contains("tasks") ? ran.at("tasks").if_array() : nullptr;
    if (started_tasks == nullptr || started_tasks->empty()) {
      std::string why;
      if (const auto* failures = ran.if_contains("failures"); failures && failures->is_array())
        for (const auto& f : failures->as_array())
          if (f.is_object())
            why += (why.empty() ? "" : "; ") + field_text(f.as_object(), {"reason"}) + " " +
                   field_text(f.as_object(), {"detail"});
      throw DeploymentStartupError("fargate: RunTask started no task: " +
                                   (why.empty() ? std::string("no reason given") : why));
    }
    sandbox_id = field_text(started_tasks->front().as_object(), {"taskArn"});

    emit(DeploymentStage::waiting, "waiting for the task " + sandbox_id + " to run");
    const auto until = Clock::now() + rex::detail::seconds_to_ms(config.startup_timeout);
    asio::steady_timer pause(executor);
    json::object task;
    // DescribeTasks from 0.2 s apart, doubling up to 6 s.
    const Backoff poll{std::chrono::milliseconds(200), std::chrono::seconds(6), 2.0, 0.0};
    for (unsigned attempt = 1;; ++attempt) {
      auto look = describe_task();
      task = co_await std::move(look);
      const std::string status = field_text(task, {"lastStatus"});
      if (status == "RUNNING")
        break;
      if (status == "STOPPED" || status == "DEPROVISIONING" || status == "STOPPING")
        throw DeploymentStartupError(fmt::format("fargate: the task {} stopped before it ran: {}",
                                                 sandbox_id, stopped_reason(task)));
      if (Clock::now() > until)
        throw DeploymentStartupError(fmt::format(
            "fargate: the task {} was not running after {:g} s (last status {})", sandbox_id,
            config.startup_timeout.count(), status.empty() ? "unknown" : status));
      pause.expires_after(
          std::chrono::duration_cast<Clock::duration>(backoff_delay(poll, attempt, 0.0)));
      co_await pause.async_wait(asio::use_awaitable);
    }
    const std::string ip = co_await address(task);
    url = fmt::format("http://{}:{}", ip, config.port);
    RemoteRuntimeConfig rc;
    rc.url = url;
    rc.auth_token = token;
    runtime = std::make_unique<RemoteRuntime>(executor, std::move(rc));
    emit(DeploymentStage::waiting, "waiting for rex-server at " + url);
    try {
      co_await runtime->wait_until_alive(rex::detail::seconds_to_ms(config.runtime_timeout));
    } catch (const std::exception& e) {
      throw DeploymentStartupError(
          fmt::format("fargate: rex-server at {} (task {}) did not answer within {:g} s: {}", url,
                      sandbox_id, config.runtime_timeout.count(), e.what()));
    }
  }
};

}  // namespace

void check_fargate_config(const FargateDeploymentConfig& config) {
  if (config.port <= 0 || config.port > 65535)
    throw DeploymentConfigError(fmt::format("fargate.port: {} is not a TCP port", config.port));
  if (config.connect != "public_ip" && config.connect != "private_ip")
    throw DeploymentConfigError("fargate.connect: expected public_ip or private_ip, got " +
                                config.connect);
  if (config.connect == "public_ip" && !config.assign_public_ip)
    throw DeploymentConfigError(
        "fargate: connect public_ip needs assign_public_ip (or connect private_ip)");
}

asio::awaitable<StartedSandbox> create_fargate_task(asio::any_io_executor executor,
                                                    FargateDeploymentConfig config,
                                                    std::string working_dir,
                                                    std::string deployment_id,
                                                    SandboxProgress progress) {
  check_fargate_config(config);
  auto s = std::make_shared<TaskStart>();
  s->executor = std::move(executor);
  s->config = std::move(config);
  if (!deployment_id.empty())
    s->id = std::move(deployment_id);
  // Nothing is left running: a task this start ran is stopped.
  return detail::start_cloud_sandbox("fargate", std::move(s), &TaskStart::remove, "stopping",
                                     std::move(working_dir), std::move(progress));
}

asio::awaitable<std::optional<std::string>> fargate_task_lost(AwsClient& aws, std::string cluster,
                                                              std::string task_arn) {
  auto looking = find_fargate_task(aws, std::move(cluster), task_arn);
  const std::optional<json::object> found = co_await std::move(looking);
  if (!found)
    co_return fmt::format("the task {} is gone (ECS no longer knows it)", task_arn);
  const json::object& task = *found;
  const std::string status = field_text(task, {"lastStatus"});
  if (status == "RUNNING")
    co_return std::nullopt;
  co_return fmt::format("the task {} is {}: {}", task_arn, status, stopped_reason(task));
}

asio::awaitable<void> stop_fargate_task(AwsClient& aws, std::string cluster, std::string task_arn,
                                        std::string reason) {
  try {
    auto stopping = aws.json_call(
        aws::kEcs, "StopTask",
        json::object{{"cluster", cluster}, {"task", task_arn}, {"reason", std::move(reason)}});
    co_await std::move(stopping);
  } catch (const AwsError& e) {
    // A task ECS no longer knows is stopped.
    if (e.code() != "InvalidParameterException" && e.code() != "ClientException")
      throw;
  }
}

FargateDeployment::FargateDeployment(asio::any_io_executor executor, FargateDeploymentConfig config)
    : SandboxDeployment(executor, make_fargate_backend(executor, config, false), SandboxRequest{}),
      config_(std::move(config)) {}

}  // namespace rex
