// The parsers of log_parsers.hpp, one function per swebench registry name, grouped by the file
// that holds them (parsers_<language>.cpp).
#pragma once

#include <rex/swebench/log_parsers.hpp>

namespace rex::swebench::parsers {

// parsers_python.cpp
StatusMap parse_log_pytest(std::string_view log, const ParseContext& context);
StatusMap parse_log_pytest_options(std::string_view log, const ParseContext& context);
StatusMap parse_log_django(std::string_view log, const ParseContext& context);
StatusMap parse_log_pytest_v2(std::string_view log, const ParseContext& context);
StatusMap parse_log_seaborn(std::string_view log, const ParseContext& context);
StatusMap parse_log_sympy(std::string_view log, const ParseContext& context);
StatusMap parse_log_matplotlib(std::string_view log, const ParseContext& context);

// parsers_javascript.cpp
StatusMap parse_log_calypso(std::string_view log, const ParseContext& context);
StatusMap parse_log_bpmn_js(std::string_view log, const ParseContext& context);
StatusMap parse_log_carbon(std::string_view log, const ParseContext& context);
StatusMap parse_log_eslint(std::string_view log, const ParseContext& context);
StatusMap parse_log_grommet(std::string_view log, const ParseContext& context);
StatusMap parse_log_highlightjs(std::string_view log, const ParseContext& context);
StatusMap parse_log_lighthouse(std::string_view log, const ParseContext& context);
StatusMap parse_log_next(std::string_view log, const ParseContext& context);
StatusMap parse_log_openlayers(std::string_view log, const ParseContext& context);
StatusMap parse_log_prismjs(std::string_view log, const ParseContext& context);
StatusMap parse_log_quarto_cli(std::string_view log, const ParseContext& context);
StatusMap parse_log_chart_js(std::string_view log, const ParseContext& context);
StatusMap parse_log_marked(std::string_view log, const ParseContext& context);
StatusMap parse_log_p5js(std::string_view log, const ParseContext& context);
StatusMap parse_log_react_pdf(std::string_view log, const ParseContext& context);
StatusMap parse_log_jest(std::string_view log, const ParseContext& context);
StatusMap parse_log_jest_json(std::string_view log, const ParseContext& context);
StatusMap parse_log_vitest(std::string_view log, const ParseContext& context);
StatusMap parse_log_karma(std::string_view log, const ParseContext& context);
StatusMap parse_log_tap(std::string_view log, const ParseContext& context);
StatusMap parse_log_immutable_js(std::string_view log, const ParseContext& context);

// parsers_c.cpp
StatusMap parse_log_redis(std::string_view log, const ParseContext& context);
StatusMap parse_log_jq(std::string_view log, const ParseContext& context);
StatusMap parse_log_doctest(std::string_view log, const ParseContext& context);
StatusMap parse_log_micropython_test(std::string_view log, const ParseContext& context);
StatusMap parse_log_googletest(std::string_view log, const ParseContext& context);

// parsers_go.cpp
StatusMap parse_log_gotest(std::string_view log, const ParseContext& context);

// parsers_java.cpp
StatusMap parse_log_maven(std::string_view log, const ParseContext& context);
StatusMap parse_log_ant(std::string_view log, const ParseContext& context);
StatusMap parse_log_gradle_custom(std::string_view log, const ParseContext& context);

// parsers_php.cpp
StatusMap parse_log_phpunit(std::string_view log, const ParseContext& context);

// parsers_ruby.cpp
StatusMap parse_log_minitest(std::string_view log, const ParseContext& context);
StatusMap parse_log_cucumber(std::string_view log, const ParseContext& context);
StatusMap parse_log_ruby_unit(std::string_view log, const ParseContext& context);
StatusMap parse_log_rspec_transformed_json(std::string_view log, const ParseContext& context);
StatusMap parse_log_jekyll(std::string_view log, const ParseContext& context);

// parsers_rust.cpp
StatusMap parse_log_cargo(std::string_view log, const ParseContext& context);

}  // namespace rex::swebench::parsers
