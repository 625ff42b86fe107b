#include <rex/swebench/html_report.hpp>

#include <fmt/format.h>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace rex::swebench {

// Named, not anonymous: the project builds its sources in unity batches.
namespace html_detail {

namespace json = boost::json;

constexpr std::string_view replacement_char = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view none_text = "\xE2\x80\x94";         // an em dash: no value

// Appends `text` escaped for both HTML text and quoted attribute values. Valid UTF-8 passes
// through; a byte that is not, and a code point HTML forbids (controls, noncharacters), becomes
// U+FFFD, so untrusted ids, reasons and test names cannot break the page or its validity.
void append_escaped(std::string& out, std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F)
            out += replacement_char;
          else
            out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    std::size_t len = 0;
    char32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = len != 0 && i + len <= text.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      ok = (d & 0xC0) == 0x80;
      cp = (cp << 6) | (d & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      out += replacement_char;  // one byte at a time, as decoders do
      ++i;
      continue;
    }
    const bool forbidden =
        (cp >= 0x80 && cp <= 0x9F) || (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE;
    if (forbidden)
      out += replacement_char;
    else
      out.append(text.substr(i, len));
    i += len;
  }
}

std::string esc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text);
  return out;
}

// `text` escaped, or an em dash when empty.
std::string esc_or_none(std::string_view text) {
  return text.empty() ? std::string(none_text) : esc(text);
}

// A relative path as a URL path: every byte but the unreserved ones and '/' percent-encoded, so
// a name with '#', '?', '%', ':' or non-ASCII still links to the file (and never to a scheme).
std::string url_path(std::string_view path) {
  std::string out;
  for (const char ch : path) {
    const auto c = static_cast<unsigned char>(ch);
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (keep)
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

// A reason for a table cell: a long one cut (at a character's start) with an ellipsis, whole in
// the cell's tooltip, so one runaway error line does not take over the page.
std::string reason_cell(std::string_view reason) {
  constexpr std::size_t longest = 300;  // bytes
  if (reason.size() <= longest)
    return fmt::format("<td class=\"reason\">{}</td>", esc(reason));
  std::size_t cut = longest;
  while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80)
    --cut;
  return fmt::format("<td class=\"reason\" title=\"{}\">{}\xE2\x80\xA6</td>", esc(reason),
                     esc(reason.substr(0, cut)));
}

// Seconds for people: "42.3 s", "2m 05s (125 s)", "1h 02m 03s (3723 s)".
std::string duration(double s) {
  if (!std::isfinite(s) || s < 0)
    return std::string(none_text);
  if (s < 60)
    return fmt::format("{:.1f} s", s);
  const auto total = static_cast<std::uint64_t>(std::llround(s));
  const auto h = total / 3600, m = total / 60 % 60, sec = total % 60;
  if (h > 0)
    return fmt::format("{}h {:02}m {:02}s ({} s)", h, m, sec, total);
  return fmt::format("{}m {:02}s ({} s)", m, sec, total);
}

// ---- the summary JSON, read leniently: a missing or odd key counts as nothing ----

std::optional<std::uint64_t> count_of(const json::object& summary, std::string_view key) {
  const json::value* v = summary.if_contains(key);
  if (v == nullptr)
    return std::nullopt;
  if (v->is_uint64())
    return v->get_uint64();
  if (v->is_int64())
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v->get_int64()));
  if (v->is_double() && std::isfinite(v->get_double()) && v->get_double() >= 0)
    return static_cast<std::uint64_t>(v->get_double());
  if (v->is_array())
    return v->get_array().size();
  if (v->is_object())
    return v->get_object().size();
  return std::nullopt;
}

std::string text_of(const json::value& v) {
  if (v.is_string())
    return std::string(v.get_string());
  return json::serialize(v);
}

std::set<std::string> id_set(const json::object& summary, std::string_view key) {
  std::set<std::string> ids;
  if (const json::value* v = summary.if_contains(key); v != nullptr && v->is_array())
    for (const json::value& id : v->get_array())
      ids.insert(text_of(id));
  return ids;
}

std::map<std::string, std::string> failure_reasons(const json::object& summary) {
  std::map<std::string, std::string> reasons;
  if (const json::value* v = summary.if_contains("failure_reasons"); v != nullptr && v->is_object())
    for (const auto& [id, reason] : v->get_object())
      reasons.emplace(std::string(id), text_of(reason));
  return reasons;
}

// ---- statuses ----

// The table's order: errors first, then unresolved, then the rest, resolved last.
int status_rank(std::string_view status) {
  if (status == "error")
    return 0;
  if (status == "unresolved")
    return 1;
  if (status == "empty_patch")
    return 3;
  if (status == "incomplete")
    return 4;
  if (status == "resolved")
    return 5;
  return 2;
}

// The text label of a status: the verdict is never told by colour alone.
std::string status_label(std::string_view status) {
  if (status == "resolved")
    return "Resolved";
  if (status == "unresolved")
    return "Unresolved";
  if (status == "error")
    return "Error";
  if (status == "empty_patch")
    return "Empty patch";
  if (status == "incomplete")
    return "Incomplete";
  return status.empty() ? "Unknown" : std::string(status);
}

// The badge's colour class; a partial resolution gets its own.
std::string_view status_class(const ReportRow& row) {
  if (row.status == "unresolved" && row.verdict == "RESOLVED_PARTIAL")
    return "s-partial";
  if (row.status == "resolved")
    return "s-resolved";
  if (row.status == "unresolved")
    return "s-unresolved";
  if (row.status == "error")
    return "s-error";
  if (row.status == "empty_patch")
    return "s-empty";
  if (row.status == "incomplete")
    return "s-incomplete";
  return "s-other";
}

// ---- statistics ----

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  const auto rank =
      static_cast<std::size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

struct Histogram {
  double step = 0;
  int decimals = 0;  // for the edge labels
  std::vector<std::size_t> counts;
};

// Bins from 0 of a round width (1, 2 or 5 times a power of ten), at most as many as the larger of
// Sturges' and the square-root rule ask, and 30: few enough to read, enough to show a tail.
Histogram histogram(const std::vector<double>& times) {
  Histogram h;
  const double max = *std::max_element(times.begin(), times.end());
  const auto n = static_cast<double>(times.size());
  const double target =
      std::clamp(std::max(std::ceil(std::log2(n)) + 1, std::ceil(std::sqrt(n))), 1.0, 30.0);
  const double raw = std::max(max / target, 1e-3);  // a millisecond at the finest
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / power;
  h.step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
  h.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(h.step) + 1e-9)));
  const auto bins =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(max / h.step - 1e-9)));
  h.counts.assign(bins, 0);
  for (const double t : times) {
    const auto bin = static_cast<std::size_t>(std::floor(t / h.step));
    ++h.counts[std::min(bin, bins - 1)];  // the maximum goes in the last bin
  }
  return h;
}

// ---- the page ----

using Out = std::back_insert_iterator<std::string>;

constexpr std::string_view style = R"(
:root{--ok:#1a7f37;--bad:#cf222e;--part:#9a6700;--err:#8250df;--grey:#6e7781;
--muted:#57606a;--line:#d0d7de;--alt:#f6f8fa}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
background:#fff;max-width:1280px;margin:0 auto;padding:0 16px 32px}
h1{font-size:1.5em;margin:.8em 0 .3em}
h2{font-size:1.2em;margin:1.6em 0 .5em;padding-bottom:.2em;border-bottom:1px solid var(--line)}
h3{font-size:1em;margin:1.2em 0 .4em}
nav{margin:.6em 0}nav a{margin-right:1em}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0}
.headline{font-size:1.6em;margin:.2em 0 .5em}
dl.tiles{display:flex;flex-wrap:wrap;gap:8px;margin:0}
.tile{border:1px solid var(--line);border-radius:6px;padding:4px 12px;min-width:7em}
.tile dt{color:var(--muted);font-size:.85em}.tile dd{margin:0;font-size:1.4em;font-weight:600}
.tile.t-resolved dd{color:var(--ok)}.tile.t-unresolved dd{color:var(--bad)}
.tile.t-error dd{color:var(--err)}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
thead th{position:sticky;top:0;background:var(--alt)}
tbody tr:nth-child(even){background:var(--alt)}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.id,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.92em;
word-break:break-all}
.badge{display:inline-block;padding:0 7px;border-radius:10px;color:#fff;font-weight:600;
font-size:.85em;white-space:nowrap}
.s-resolved{background:var(--ok)}.s-unresolved{background:var(--bad)}
.s-partial{background:var(--part)}.s-error{background:var(--err)}
.s-empty,.s-incomplete,.s-other{background:var(--grey)}
.vcode{color:var(--muted);font-size:.78em;margin-left:4px}
.reason{overflow-wrap:anywhere;max-width:32em}td.verdict{white-space:nowrap}
table.compact{width:auto}
.logs a{margin-right:6px;white-space:nowrap}
.warn{border:1px solid var(--bad);background:#fff5f5;padding:6px 12px;border-radius:6px}
.muted{color:var(--muted)}
figure{margin:0}figcaption{color:var(--muted)}svg{max-width:100%;height:auto}
ul.tests{margin:0;padding-left:1.2em}
#reason-table td.reason{min-width:14em}td.ids .id{white-space:nowrap;word-break:normal}
)";

void head(std::string& out, const ReportMeta& meta) {
  fmt::format_to(Out(out),
                 "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                 // Nothing may be fetched or run: the page is whole as written.
                 "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                 "style-src 'unsafe-inline'\">\n"
                 "<meta name=\"generator\" content=\"rex swebench\">\n"
                 "<title>SWE-bench run {}{}{}</title>\n<style>{}</style>\n</head>\n<body>\n",
                 esc_or_none(meta.run_id), meta.model.empty() ? "" : " \xE2\x80\x93 ",
                 esc(meta.model), style);
}

void header(std::string& out, const json::object& summary, const ReportMeta& meta,
            const std::vector<std::pair<std::string_view, std::string_view>>& sections) {
  fmt::format_to(Out(out),
                 "<header>\n<h1>SWE-bench evaluation <span class=\"id\">{}</span></h1>\n"
                 "<dl class=\"meta\" id=\"meta\">\n",
                 esc_or_none(meta.run_id));
  const auto item = [&](std::string_view name, std::string_view html) {
    fmt::format_to(Out(out), "<dt>{}</dt><dd>{}</dd>\n", name, html);
  };
  item("Run id", fmt::format("<span class=\"id\">{}</span>", esc_or_none(meta.run_id)));
  item("Model", fmt::format("<span class=\"id\">{}</span>", esc_or_none(meta.model)));
  item("Dataset", esc_or_none(meta.dataset));
  item("Deployment", esc_or_none(meta.deployment));
  item("Generated", meta.generated_at.empty()
                        ? std::string(none_text)
                        : fmt::format("<time datetime=\"{0}\">{0}</time>", esc(meta.generated_at)));
  item("Wall time", duration(meta.wall_seconds));
  item("Workers",
       meta.max_workers == 0 ? std::string(none_text) : fmt::format("{}", meta.max_workers));
  item("Repeats", fmt::format("{}", meta.repeats));
  if (const json::value* v = summary.if_contains("schema_version"))
    item("Summary schema", esc(text_of(*v)));
  out += "</dl>\n<nav aria-label=\"Sections\">";
  for (const auto& [anchor, title] : sections)
    fmt::format_to(Out(out), "<a href=\"#{}\">{}</a>", anchor, title);
  out += "</nav>\n</header>\n<main>\n";
}

void summary_section(std::string& out, const json::object& summary,
                     const std::vector<ReportRow>& rows) {
  // The rows stand in for a summary without counts (a run that wrote none yet).
  const auto rows_with = [&](std::string_view status) {
    return static_cast<std::uint64_t>(std::count_if(
        rows.begin(), rows.end(), [&](const ReportRow& r) { return r.status == status; }));
  };
  const std::uint64_t total = count_of(summary, "total_instances").value_or(rows.size());
  const std::uint64_t resolved =
      count_of(summary, "resolved_instances").value_or(rows_with("resolved"));
  const std::string pct = total == 0
                              ? std::string(none_text)
                              : fmt::format("{:.1f}%", 100.0 * static_cast<double>(resolved) /
                                                           static_cast<double>(total));
  fmt::format_to(
      Out(out),
      "<section id=\"summary\" aria-labelledby=\"summary-h\">\n"
      "<h2 id=\"summary-h\">Summary</h2>\n"
      "<p class=\"headline\" id=\"headline\">Resolved <strong><span id=\"resolved-count\">{}"
      "</span> of <span id=\"total-count\">{}</span></strong> = "
      "<span id=\"resolved-pct\">{}</span></p>\n<dl class=\"tiles\">\n",
      resolved, total, pct);
  const auto tile = [&](std::string_view key, std::string_view label, std::uint64_t n) {
    fmt::format_to(Out(out),
                   "<div class=\"tile t-{0}\"><dt>{1}</dt><dd id=\"n-{0}\">{2}</dd></div>\n", key,
                   label, n);
  };
  tile("total", "Total instances", total);
  tile("submitted", "Submitted", count_of(summary, "submitted_instances").value_or(0));
  tile("completed", "Completed", count_of(summary, "completed_instances").value_or(0));
  tile("resolved", "Resolved", resolved);
  tile("unresolved", "Unresolved",
       count_of(summary, "unresolved_instances").value_or(rows_with("unresolved")));
  tile("error", "Errors", count_of(summary, "error_instances").value_or(rows_with("error")));
  tile("empty_patch", "Empty patches",
       count_of(summary, "empty_patch_instances").value_or(rows_with("empty_patch")));
  tile("incomplete", "Incomplete",
       count_of(summary, "incomplete_ids").value_or(rows_with("incomplete")));
  tile("infra", "Infra failures", count_of(summary, "infra_failure_instances").value_or(0));
  tile("ambiguous", "Ambiguous failures",
       count_of(summary, "ambiguous_failure_instances").value_or(0));
  out += "</dl>\n";

  // What the run left behind (sandboxes it could not remove), and apart from it the instance
  // images still on the engine (the harness's unremoved_images: with local images, all of them).
  std::string leftovers;
  std::string images;
  for (const auto& [key, label] :
       {std::pair{"unstopped_instances", "unstopped instances"},
        std::pair{"unstopped_containers", "unstopped containers"},
        std::pair{"unremoved_images", "instance images on the engine"}}) {
    const json::value* v = summary.if_contains(key);
    const std::uint64_t n = count_of(summary, key).value_or(0);
    if (v == nullptr || n == 0)
      continue;
    std::string& into = std::string_view(key) == "unremoved_images" ? images : leftovers;
    fmt::format_to(Out(into), "<li>{} {}", n, label);
    if (v->is_array()) {
      into += ": ";
      bool first = true;
      for (const json::value& name : v->get_array()) {
        fmt::format_to(Out(into), "{}<code>{}</code>", first ? "" : ", ", esc(text_of(name)));
        first = false;
      }
    }
    into += "</li>\n";
  }
  if (!images.empty())
    fmt::format_to(Out(out), "<ul class=\"images\">\n{}</ul>\n", images);
  if (!leftovers.empty())
    fmt::format_to(
        Out(out),
        "<div class=\"warn\" id=\"leftovers\"><strong>Left behind by this run:</strong>\n"
        "<ul>\n{}</ul></div>\n",
        leftovers);
  out += "</section>\n";
}

// "3/4", or a dash for a row that was not graded.
std::string passed_of(const ReportRow& row, std::size_t passed, std::size_t total) {
  if (row.verdict.empty() && total == 0 && passed == 0)
    return std::string(none_text);
  return fmt::format("{}/{}", passed, total);
}

std::string reason_of(const ReportRow& row, const std::map<std::string, std::string>& reasons) {
  if (!row.reason.empty())
    return row.reason;
  const auto found = reasons.find(row.instance_id);
  return found == reasons.end() ? std::string() : found->second;
}

void instance_table(std::string& out, const std::vector<const ReportRow*>& sorted,
                    const std::map<std::string, std::string>& reasons) {
  out +=
      "<section id=\"instances\" aria-labelledby=\"instances-h\">\n"
      "<h2 id=\"instances-h\">Instances</h2>\n";
  if (sorted.empty()) {
    out += "<p id=\"no-instances\">No instances in this run.</p>\n</section>\n";
    return;
  }
  fmt::format_to(
      Out(out),
      "<p class=\"muted\">{} instances: errors first, then unresolved, then resolved. "
      "F2P: FAIL_TO_PASS tests passing of all; P2P: PASS_TO_PASS.</p>\n"
      "<table id=\"instance-table\">\n<thead><tr><th scope=\"col\">Instance</th>"
      "<th scope=\"col\">Verdict</th><th scope=\"col\" class=\"num\">F2P</th>"
      "<th scope=\"col\" class=\"num\">P2P</th><th scope=\"col\" class=\"num\">Time (s)</th>"
      "<th scope=\"col\">Reason</th><th scope=\"col\">Logs</th></tr></thead>\n<tbody>\n",
      sorted.size());
  std::size_t index = 0;
  for (const ReportRow* row : sorted) {
    ++index;
    const std::string id = esc(row->instance_id);
    fmt::format_to(
        Out(out),
        "<tr id=\"row-{}\" data-instance=\"{}\" data-status=\"{}\" data-verdict=\"{}\">"
        "<td class=\"id\">{}</td><td class=\"verdict\"><span class=\"badge {}\">{}</span>",
        index, id, esc(row->status), esc(row->verdict), id, status_class(*row),
        esc(status_label(row->status)));
    if (!row->verdict.empty())
      fmt::format_to(Out(out), " <span class=\"vcode\">{}</span>", esc(row->verdict));
    fmt::format_to(Out(out), "</td><td class=\"num f2p\">{}</td><td class=\"num p2p\">{}</td>",
                   passed_of(*row, row->f2p_passed, row->f2p_total),
                   passed_of(*row, row->p2p_passed, row->p2p_total));

    // The time, its phases in a tooltip.
    if (row->seconds && std::isfinite(*row->seconds)) {
      std::string phases;
      for (const auto& [name, value] :
           {std::pair{"start", row->start_seconds}, std::pair{"patch", row->patch_seconds},
            std::pair{"eval", row->eval_seconds}, std::pair{"stop", row->stop_seconds}})
        if (value)
          fmt::format_to(Out(phases), "{}{} {:.1f} s", phases.empty() ? "" : ", ", name, *value);
      fmt::format_to(Out(out), "<td class=\"num time\" data-seconds=\"{:.3f}\"{}>{:.1f}</td>",
                     *row->seconds, phases.empty() ? "" : fmt::format(" title=\"{}\"", phases),
                     *row->seconds);
    } else {
      fmt::format_to(Out(out), "<td class=\"num time\">{}</td>", none_text);
    }
    fmt::format_to(Out(out), "{}<td class=\"logs\">", reason_cell(reason_of(*row, reasons)));

    // The log folder and the harness's files in it; report.json and test_output.txt exist only
    // for a graded instance.
    if (!row->log_dir.empty()) {
      std::string dir = url_path(row->log_dir);
      if (dir.back() != '/')
        dir += '/';
      fmt::format_to(
          Out(out),
          "<a class=\"log\" href=\"{0}\">folder</a><a class=\"log\" href=\"{0}run_instance.log\">"
          "run_instance.log</a>",
          dir);
      if (!row->verdict.empty())
        fmt::format_to(Out(out),
                       "<a class=\"log\" href=\"{0}test_output.txt\">test_output.txt</a>"
                       "<a class=\"log\" href=\"{0}report.json\">report.json</a>",
                       dir);
    }
    out += "</td></tr>\n";
  }
  out += "</tbody>\n</table>\n</section>\n";
}

// The histogram of instance times as an SVG with a bar per bin (zero-height when empty), its
// counts above the bars and the bin edges in seconds below; the same counts in a table.
void histogram_svg(std::string& out, const std::vector<double>& times) {
  const Histogram h = histogram(times);
  const std::size_t bins = h.counts.size();
  const std::size_t top = *std::max_element(h.counts.begin(), h.counts.end());
  constexpr double width = 760, height = 280, left = 56, right = 36, upper = 24, lower = 52;
  const double plot_w = width - left - right, plot_h = height - upper - lower;
  const double bar_w = plot_w / static_cast<double>(bins);
  const auto edge = [&](std::size_t i) {
    return fmt::format("{:.{}f}", static_cast<double>(i) * h.step, h.decimals);
  };
  fmt::format_to(Out(out),
                 "<figure>\n<svg id=\"time-histogram\" xmlns=\"http://www.w3.org/2000/svg\" "
                 "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
                 "aria-labelledby=\"hist-title\" data-bins=\"{2}\" font-family=\"sans-serif\" "
                 "font-size=\"11\">\n<title id=\"hist-title\">Histogram of instance times: {3} "
                 "instances in {2} bins of {4} s</title>\n",
                 width, height, bins, times.size(), edge(1));
  // Axes.
  fmt::format_to(Out(out),
                 "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#57606a\"/>\n"
                 "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#57606a\"/>\n",
                 left, upper + plot_h, left + plot_w, upper);
  // The count axis: 0, the middle and the top, whole numbers.
  std::set<std::size_t> ticks{0, top};
  if (top >= 4)
    ticks.insert(top / 2);
  for (const std::size_t t : ticks) {
    const double y = upper + plot_h - plot_h * static_cast<double>(t) / static_cast<double>(top);
    fmt::format_to(Out(out),
                   "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" "
                   "stroke=\"#d0d7de\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" "
                   "fill=\"#1f2328\">{5}</text>\n",
                   left - 4, y, left + plot_w, left - 7, y + 4, t);
  }
  // The bars, each with its range and count for a tooltip.
  for (std::size_t i = 0; i < bins; ++i) {
    const std::size_t n = h.counts[i];
    const double bar_h = plot_h * static_cast<double>(n) / static_cast<double>(top);
    const double x = left + bar_w * static_cast<double>(i);
    fmt::format_to(
        Out(out),
        "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"#4a7bd0\" data-count=\"{}\"><title>{}\xE2\x80\x93{} s: {} "
        "instance{}</title></rect>\n",
        x + 1, upper + plot_h - bar_h, std::max(bar_w - 2, 0.5), bar_h, n, edge(i), edge(i + 1), n,
        n == 1 ? "" : "s");
    if (n > 0)
      fmt::format_to(Out(out),
                     "<text class=\"count\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
                     "fill=\"#1f2328\">{}</text>\n",
                     x + bar_w / 2, upper + plot_h - bar_h - 4, n);
  }
  // Bin edges in seconds, at most about 12 labels.
  const std::size_t every = (bins + 11) / 12;
  for (std::size_t i = 0; i <= bins; i += every)
    fmt::format_to(
        Out(out),
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#57606a\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\" fill=\"#1f2328\">{4}</text>\n",
        left + bar_w * static_cast<double>(i), upper + plot_h, upper + plot_h + 4,
        upper + plot_h + 16, edge(i));
  fmt::format_to(Out(out),
                 "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#1f2328\">"
                 "Instance time (seconds)</text>\n"
                 "<text x=\"14\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#1f2328\" "
                 "transform=\"rotate(-90 14 {:.1f})\">Instances</text>\n</svg>\n",
                 left + plot_w / 2, height - 10, upper + plot_h / 2, upper + plot_h / 2);
  fmt::format_to(Out(out),
                 "<figcaption>Instance times in bins of {} s.</figcaption>\n</figure>\n"
                 "<details><summary>Bin counts</summary>\n<table id=\"bin-table\" "
                 "class=\"compact\">\n<thead><tr>"
                 "<th scope=\"col\">Seconds</th><th scope=\"col\" class=\"num\">Instances</th>"
                 "</tr></thead>\n<tbody>\n",
                 edge(1));
  for (std::size_t i = 0; i < bins; ++i)
    fmt::format_to(Out(out), "<tr><td>{}\xE2\x80\x93{}</td><td class=\"num\">{}</td></tr>\n",
                   edge(i), edge(i + 1), h.counts[i]);
  out += "</tbody>\n</table>\n</details>\n";
}

// Median and maximum of each phase that has times, as a table and as bars.
void phases(std::string& out, const std::vector<const ReportRow*>& rows) {
  struct Phase {
    std::string_view name;
    std::vector<double> values;
  };
  std::vector<Phase> list{{"start", {}}, {"patch", {}}, {"eval", {}}, {"stop", {}}};
  for (const ReportRow* row : rows) {
    const std::optional<double>* times[] = {&row->start_seconds, &row->patch_seconds,
                                            &row->eval_seconds, &row->stop_seconds};
    for (std::size_t i = 0; i < list.size(); ++i)
      if (*times[i] && std::isfinite(**times[i]))
        list[i].values.push_back(**times[i]);
  }
  std::erase_if(list, [](const Phase& p) { return p.values.empty(); });
  if (list.empty())
    return;
  double longest = 0;
  for (const Phase& p : list)
    longest = std::max(longest, median(p.values));
  out +=
      "<h3 id=\"phases-h\">Phases</h3>\n<table id=\"phase-table\" class=\"compact\">\n<thead><tr>"
      "<th scope=\"col\">Phase</th><th scope=\"col\" class=\"num\">Median (s)</th>"
      "<th scope=\"col\" class=\"num\">Max (s)</th><th scope=\"col\" class=\"num\">Instances</th>"
      "<th scope=\"col\">Median, to scale</th></tr></thead>\n<tbody>\n";
  for (const Phase& p : list) {
    const double med = median(p.values);
    const double bar = longest > 0 ? 200 * med / longest : 0;
    fmt::format_to(Out(out),
                   "<tr data-phase=\"{0}\"><td>{0}</td><td class=\"num\">{1:.1f}</td>"
                   "<td class=\"num\">{2:.1f}</td><td class=\"num\">{3}</td><td>"
                   "<svg width=\"204\" height=\"12\" viewBox=\"0 0 204 12\" role=\"img\" "
                   "aria-label=\"median {1:.1f} s\"><rect x=\"0\" y=\"1\" width=\"{4:.1f}\" "
                   "height=\"10\" fill=\"#4a7bd0\"/></svg></td></tr>\n",
                   p.name, med, *std::max_element(p.values.begin(), p.values.end()),
                   p.values.size(), bar);
  }
  out += "</tbody>\n</table>\n";
}

void times_section(std::string& out, const std::vector<const ReportRow*>& rows) {
  out +=
      "<section id=\"times\" aria-labelledby=\"times-h\">\n<h2 id=\"times-h\">Instance "
      "times</h2>\n";
  std::vector<double> times;
  for (const ReportRow* row : rows)
    if (row->seconds && std::isfinite(*row->seconds))
      times.push_back(std::max(0.0, *row->seconds));
  if (times.empty()) {
    out += "<p id=\"no-times\">No instance times recorded.</p>\n";
  } else {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    fmt::format_to(Out(out),
                   "<p id=\"time-stats\">{} instance{} timed: median {}, 90th percentile {}, "
                   "longest {}.</p>\n",
                   sorted.size(), sorted.size() == 1 ? "" : "s", duration(median(sorted)),
                   duration(percentile(sorted, 90)), duration(sorted.back()));
    histogram_svg(out, times);
  }
  phases(out, rows);
  out += "</section>\n";
}

// The failure reasons, most frequent first: each with its kind(s), count and instances (linked
// to their rows).
void failures_section(std::string& out, const json::object& summary,
                      const std::vector<const ReportRow*>& sorted,
                      const std::map<std::string, std::string>& reasons) {
  const std::set<std::string> infra = id_set(summary, "infra_failure_ids");
  const std::set<std::string> ambiguous = id_set(summary, "ambiguous_failure_ids");
  struct Group {
    std::set<std::string> kinds;
    std::vector<std::pair<std::string, std::size_t>> ids;  // id, its row's index (0: none)
  };
  std::map<std::string, Group> groups;
  std::set<std::string> seen;
  const auto add = [&](const std::string& id, const std::string& reason, std::string kind,
                       std::size_t index) {
    Group& g = groups[reason];
    g.kinds.insert(infra.contains(id)       ? "infrastructure"
                   : ambiguous.contains(id) ? "ambiguous"
                                            : std::move(kind));
    g.ids.emplace_back(id, index);
    seen.insert(id);
  };
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (std::string reason = reason_of(*sorted[i], reasons); !reason.empty())
      add(sorted[i]->instance_id, reason, status_label(sorted[i]->status), i + 1);
  for (const auto& [id, reason] : reasons)  // the summary's, for instances without a row
    if (!seen.contains(id) && !reason.empty())
      add(id, reason, "not in the table", 0);

  out +=
      "<section id=\"failures\" aria-labelledby=\"failures-h\">\n"
      "<h2 id=\"failures-h\">Failure reasons</h2>\n";
  if (groups.empty()) {
    out += "<p id=\"no-failures\">No failure reasons recorded.</p>\n</section>\n";
    return;
  }
  std::vector<const std::pair<const std::string, Group>*> order;
  for (const auto& entry : groups)
    order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return a->second.ids.size() > b->second.ids.size(); });
  out +=
      "<table id=\"reason-table\">\n<thead><tr><th scope=\"col\">Reason</th>"
      "<th scope=\"col\">Kind</th><th scope=\"col\" class=\"num\">Count</th>"
      "<th scope=\"col\">Instances</th></tr></thead>\n<tbody>\n";
  for (const auto* entry : order) {
    const Group& g = entry->second;
    std::string kinds, ids;
    for (const std::string& kind : g.kinds)
      fmt::format_to(Out(kinds), "{}{}", kinds.empty() ? "" : ", ", esc(kind));
    for (const auto& [id, index] : g.ids) {
      if (!ids.empty())
        ids += ", ";
      if (index > 0)
        fmt::format_to(Out(ids), "<a class=\"id\" href=\"#row-{}\">{}</a>", index, esc(id));
      else
        fmt::format_to(Out(ids), "<span class=\"id\">{}</span>", esc(id));
    }
    // A long list folds away (no script: <details>), so the reasons stay one screen.
    if (g.ids.size() > 12)
      ids = fmt::format("<details><summary>{} instances</summary>{}</details>", g.ids.size(), ids);
    fmt::format_to(Out(out),
                   "<tr>{}<td>{}</td><td class=\"num\">{}</td><td class=\"ids\">{}</td></tr>\n",
                   reason_cell(entry->first), kinds, g.ids.size(), ids);
  }
  out += "</tbody>\n</table>\n</section>\n";
}

bool any_flaky(const std::vector<const ReportRow*>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](auto* r) { return !r->flaky_tests.empty(); });
}

// The tests whose status differed between repeats, by instance.
void flaky_section(std::string& out, const std::vector<const ReportRow*>& sorted,
                   const ReportMeta& meta) {
  out +=
      "<section id=\"flaky\" aria-labelledby=\"flaky-h\">\n<h2 id=\"flaky-h\">Flaky tests</h2>\n";
  const std::string repeats =
      meta.repeats > 1 ? fmt::format("the {} repeats", meta.repeats) : std::string("repeats");
  if (!any_flaky(sorted)) {
    fmt::format_to(Out(out), "<p>No test's status differed between {}.</p>\n</section>\n", repeats);
    return;
  }
  std::vector<const ReportRow*> flaky;
  std::size_t tests = 0;
  for (const ReportRow* row : sorted)
    if (!row->flaky_tests.empty()) {
      flaky.push_back(row);
      tests += row->flaky_tests.size();
    }
  std::stable_sort(flaky.begin(), flaky.end(),
                   [](auto* a, auto* b) { return a->instance_id < b->instance_id; });
  fmt::format_to(Out(out),
                 "<p>{} test{} in {} instance{} changed status between {}.</p>\n"
                 "<table id=\"flaky-table\">\n<thead><tr><th scope=\"col\">Instance</th>"
                 "<th scope=\"col\">Tests</th></tr></thead>\n<tbody>\n",
                 tests, tests == 1 ? "" : "s", flaky.size(), flaky.size() == 1 ? "" : "s", repeats);
  for (const ReportRow* row : flaky) {
    fmt::format_to(Out(out), "<tr><td class=\"id\">{}</td><td><ul class=\"tests\">",
                   esc(row->instance_id));
    for (const std::string& test : row->flaky_tests)
      fmt::format_to(Out(out), "<li><code>{}</code></li>", esc(test));
    out += "</ul></td></tr>\n";
  }
  out += "</tbody>\n</table>\n</section>\n";
}

std::string render(const json::object& summary, const std::vector<ReportRow>& rows,
                   const ReportMeta& meta) {
  std::vector<const ReportRow*> sorted;
  sorted.reserve(rows.size());
  for (const ReportRow& row : rows)
    sorted.push_back(&row);
  std::stable_sort(sorted.begin(), sorted.end(), [](const ReportRow* a, const ReportRow* b) {
    const int ra = status_rank(a->status), rb = status_rank(b->status);
    return ra != rb ? ra < rb : a->instance_id < b->instance_id;
  });
  const std::map<std::string, std::string> reasons = failure_reasons(summary);
  const bool show_flaky = any_flaky(sorted) || meta.repeats > 1;

  // The long table last, so the overview stays on the first screens of a 2,000-instance run.
  std::vector<std::pair<std::string_view, std::string_view>> sections{
      {"summary", "Summary"}, {"times", "Times"}, {"failures", "Failure reasons"}};
  if (show_flaky)
    sections.emplace_back("flaky", "Flaky tests");
  sections.emplace_back("instances", "Instances");

  std::string out;
  out.reserve(16384 + rows.size() * 700);
  head(out, meta);
  header(out, summary, meta, sections);
  summary_section(out, summary, rows);
  times_section(out, sorted);
  failures_section(out, summary, sorted, reasons);
  if (show_flaky)
    flaky_section(out, sorted, meta);
  instance_table(out, sorted, reasons);
  out +=
      "</main>\n<footer>\n<p class=\"muted\">Written by rex swebench beside the harness's summary "
      "JSON. The page is whole: it runs no script and fetches nothing.</p>\n</footer>\n"
      "</body>\n</html>\n";
  return out;
}

}  // namespace html_detail

std::string render_html_report(const boost::json::object& summary,
                               const std::vector<ReportRow>& rows, const ReportMeta& meta) {
  return html_detail::render(summary, rows, meta);
}

}  // namespace rex::swebench
