// SWE-bench datasets and predictions as `rex swebench` reads them: the self-describing instances
// of SWE-bench 5.x (each names its image, its eval script, its log parser and how it is graded)
// from a local .json or .jsonl file, and predictions from .json (a list, or an object keyed by
// instance id), .jsonl or "gold" (the dataset's own patches).
//
// Loading is strict and complete before anything starts: every problem is reported with the
// file, the line (for JSON lines) and the field, at most 50 of them.
#pragma once

#include <boost/json/object.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex::swebench {

enum class EvalType { pass_and_fail, fail_only };

struct Instance {
  std::string instance_id{};
  std::string repo{};
  std::string version{};
  std::string base_commit{};
  std::string patch{};       // the gold patch
  std::string test_patch{};  // applied by the eval script itself
  std::vector<std::string> fail_to_pass{};
  std::vector<std::string> pass_to_pass{};
  std::string image{};
  std::string eval_script{};  // as the dataset gives it
  std::string log_parser{};   // a name of log_parser_names()
  EvalType eval_type = EvalType::pass_and_fail;
  boost::json::object image_assets{};  // {"test_patch": [{"path", "url"}], "patch": [...]}
  std::string where{};                 // "dataset.jsonl:4", for messages
};

struct Prediction {
  std::string instance_id{};
  std::string model_name_or_path{};
  std::optional<std::string> model_patch{};  // null in the file: none
  std::string where{};
};

/// Every problem found in a dataset or predictions file, one per line of what().
class InputError : public std::invalid_argument {
 public:
  explicit InputError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  std::vector<std::string> problems_;
};

/// Reads a dataset: a .json file (a list of instances) or .jsonl (one per line, blank lines
/// skipped). A Hugging Face name, a parquet file or anything else is refused with how to export
/// it to JSON lines. Checks every field (5.x's form: a 4.x instance lacking image, eval_script,
/// log_parser or eval_type is refused naming the field), unknown log parsers and duplicate ids.
/// `split` is only checked for instances that carry a "split" field.
std::vector<Instance> load_dataset(const std::string& path, std::string_view split = "test");

/// Reads predictions (.json list or object, .jsonl). Each needs instance_id, model_name_or_path
/// (a string) and model_patch (a string or null). Duplicate ids are refused.
std::vector<Prediction> load_predictions(const std::string& path);

/// The dataset's own patches as predictions of the model "gold".
std::vector<Prediction> gold_predictions(const std::vector<Instance>& dataset);

/// The prediction's model as a directory name: "/" becomes "__" (as the harness does).
std::string model_directory(std::string_view model_name_or_path);

/// True for a prediction the harness does not run: "" or null.
inline bool empty_patch(const Prediction& p) {
  return !p.model_patch || p.model_patch->empty();
}

}  // namespace rex::swebench
