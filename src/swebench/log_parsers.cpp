#include <rex/swebench/log_parsers.hpp>

#include "swebench/parsers.hpp"

#include <algorithm>
#include <array>

namespace rex::swebench {

void StatusMap::set(std::string_view name, std::string_view status) {
  if (auto it = index_.find(name); it != index_.end()) {
    entries_[it->second].second = std::string(status);
    return;
  }
  index_.emplace(std::string(name), entries_.size());
  entries_.emplace_back(std::string(name), std::string(status));
}

const std::string* StatusMap::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

bool StatusMap::erase(std::string_view name) {
  auto it = index_.find(name);
  if (it == index_.end())
    return false;
  const std::size_t at = it->second;
  index_.erase(it);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(at));
  for (auto& [key, position] : index_)
    if (position > at)
      --position;
  return true;
}

namespace {

struct Registered {
  std::string_view name;
  LogParser parser;
};

// swebench 5.0.2's PARSER_REGISTRY, in its order; several names share one parser there too.
constexpr Registered registry[] = {
    {"parse_log_pytest", &parsers::parse_log_pytest},
    {"parse_log_pytest_options", &parsers::parse_log_pytest_options},
    {"parse_log_django", &parsers::parse_log_django},
    {"parse_log_pytest_v2", &parsers::parse_log_pytest_v2},
    {"parse_log_seaborn", &parsers::parse_log_seaborn},
    {"parse_log_sympy", &parsers::parse_log_sympy},
    {"parse_log_matplotlib", &parsers::parse_log_matplotlib},
    {"parse_log_astroid", &parsers::parse_log_pytest},
    {"parse_log_flask", &parsers::parse_log_pytest},
    {"parse_log_marshmallow", &parsers::parse_log_pytest},
    {"parse_log_pvlib", &parsers::parse_log_pytest},
    {"parse_log_pyvista", &parsers::parse_log_pytest},
    {"parse_log_sqlfluff", &parsers::parse_log_pytest},
    {"parse_log_xarray", &parsers::parse_log_pytest},
    {"parse_log_pydicom", &parsers::parse_log_pytest_options},
    {"parse_log_requests", &parsers::parse_log_pytest_options},
    {"parse_log_pylint", &parsers::parse_log_pytest_options},
    {"parse_log_astropy", &parsers::parse_log_pytest_v2},
    {"parse_log_scikit", &parsers::parse_log_pytest_v2},
    {"parse_log_sphinx", &parsers::parse_log_pytest_v2},
    {"parse_log_calypso", &parsers::parse_log_calypso},
    {"parse_log_bpmn_js", &parsers::parse_log_bpmn_js},
    {"parse_log_carbon", &parsers::parse_log_carbon},
    {"parse_log_eslint", &parsers::parse_log_eslint},
    {"parse_log_grommet", &parsers::parse_log_grommet},
    {"parse_log_highlightjs", &parsers::parse_log_highlightjs},
    {"parse_log_lighthouse", &parsers::parse_log_lighthouse},
    {"parse_log_next", &parsers::parse_log_next},
    {"parse_log_openlayers", &parsers::parse_log_openlayers},
    {"parse_log_prismjs", &parsers::parse_log_prismjs},
    {"parse_log_quarto_cli", &parsers::parse_log_quarto_cli},
    {"parse_log_chart_js", &parsers::parse_log_chart_js},
    {"parse_log_marked", &parsers::parse_log_marked},
    {"parse_log_p5js", &parsers::parse_log_p5js},
    {"parse_log_react_pdf", &parsers::parse_log_react_pdf},
    {"parse_log_jest", &parsers::parse_log_jest},
    {"parse_log_jest_json", &parsers::parse_log_jest_json},
    {"parse_log_vitest", &parsers::parse_log_vitest},
    {"parse_log_karma", &parsers::parse_log_karma},
    {"parse_log_tap", &parsers::parse_log_tap},
    {"parse_log_immutable_js", &parsers::parse_log_immutable_js},
    {"parse_log_redis", &parsers::parse_log_redis},
    {"parse_log_jq", &parsers::parse_log_jq},
    {"parse_log_doctest", &parsers::parse_log_doctest},
    {"parse_log_micropython_test", &parsers::parse_log_micropython_test},
    {"parse_log_googletest", &parsers::parse_log_googletest},
    {"parse_log_gotest", &parsers::parse_log_gotest},
    {"parse_log_maven", &parsers::parse_log_maven},
    {"parse_log_ant", &parsers::parse_log_ant},
    {"parse_log_gradle_custom", &parsers::parse_log_gradle_custom},
    {"parse_log_phpunit", &parsers::parse_log_phpunit},
    {"parse_log_minitest", &parsers::parse_log_minitest},
    {"parse_log_cucumber", &parsers::parse_log_cucumber},
    {"parse_log_ruby_unit", &parsers::parse_log_ruby_unit},
    {"parse_log_rspec_transformed_json", &parsers::parse_log_rspec_transformed_json},
    {"parse_log_jekyll", &parsers::parse_log_jekyll},
    {"parse_log_cargo", &parsers::parse_log_cargo},
};

constexpr std::array names = [] {
  std::array<std::string_view, std::size(registry)> out{};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = registry[i].name;
  return out;
}();

}  // namespace

LogParser find_log_parser(std::string_view name) noexcept {
  for (const Registered& r : registry)
    if (r.name == name)
      return r.parser;
  return nullptr;
}

std::span<const std::string_view> log_parser_names() noexcept {
  return names;
}

}  // namespace rex::swebench
