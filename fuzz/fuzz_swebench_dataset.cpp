// SWE-bench datasets and predictions as `rex swebench` reads them (rex/swebench/dataset.hpp):
// the input is written as a .jsonl file and read as both, then as a .json file.
//
// Properties: reading succeeds or throws InputError (nothing else, no crash); every problem
// names the file; what is read has unique ids, known log parsers and, for predictions, ids.
#include <rex/swebench/dataset.hpp>
#include <rex/swebench/log_parsers.hpp>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>

#include "fuzz_support.hpp"

namespace {

using rex::fuzz::check;
namespace swebench = rex::swebench;

void write(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void problems_name_the_file(const swebench::InputError& e, const std::string& file) {
  check(!e.problems().empty(), "a refusal lists its problems");
  for (const auto& p : e.problems())
    check(p.starts_with(file) || p.starts_with("..."), "every problem names the file");
}

void read_as(const std::string& path, const std::string& file) {
  try {
    std::set<std::string> ids;
    for (const auto& i : swebench::load_dataset(path)) {
      check(ids.insert(i.instance_id).second, "instance ids are unique");
      check(swebench::find_log_parser(i.log_parser) != nullptr, "log parsers are known");
    }
  } catch (const swebench::InputError& e) {
    problems_name_the_file(e, file);
  }
  try {
    std::set<std::string> ids;
    for (const auto& p : swebench::load_predictions(path))
      check(!p.instance_id.empty() && ids.insert(p.instance_id).second,
            "predictions have unique ids");
  } catch (const swebench::InputError& e) {
    check(!e.problems().empty(), "a refusal lists its problems");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto dir = rex::fuzz::scratch_dir();
  const std::string jsonl = (dir / "dataset.jsonl").string();
  const std::string json = (dir / "dataset.json").string();
  write(jsonl, data, size);
  write(json, data, size);
  read_as(jsonl, "dataset.jsonl");
  read_as(json, "dataset.json");
  return 0;
}
