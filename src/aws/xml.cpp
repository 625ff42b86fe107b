#include <rex/aws/xml.hpp>

#include <expat.h>
#include <fmt/core.h>

#include <climits>
#include <memory>

namespace rex::aws {

namespace {

constexpr std::size_t kMaxDepth = 256;
constexpr char kNsSeparator = '\x01';

struct Builder {
  XML_Parser parser = nullptr;
  XmlElement root;
  std::vector<XmlElement*> open;  // the path from the root to the element being read
  bool has_root = false;
  std::string failure;  // set by a handler that stops the parse

  void stop(std::string why) {
    if (failure.empty())
      failure = std::move(why);
    XML_StopParser(parser, XML_FALSE);
  }
};

void on_start(void* data, const XML_Char* name, const XML_Char** /*attributes*/) {
  auto& b = *static_cast<Builder*>(data);
  if (b.open.size() >= kMaxDepth)
    return b.stop(fmt::format("elements nest deeper than {}", kMaxDepth));
  XmlElement* e = nullptr;
  if (b.open.empty()) {
    b.has_root = true;
    e = &b.root;
  } else {
    e = &b.open.back()->children.emplace_back();
  }
  // With namespace processing a name comes as "URI<kNsSeparator>local": the local part is kept.
  const std::string_view full(name);
  const std::size_t sep = full.rfind(kNsSeparator);
  e->name = std::string(sep == std::string_view::npos ? full : full.substr(sep + 1));
  b.open.push_back(e);
}

void on_end(void* data, const XML_Char* /*name*/) {
  auto& b = *static_cast<Builder*>(data);
  if (!b.open.empty())
    b.open.pop_back();
}

void on_text(void* data, const XML_Char* s, int len) {
  auto& b = *static_cast<Builder*>(data);
  if (!b.open.empty())
    b.open.back()->text.append(s, static_cast<std::size_t>(len));
}

void on_doctype(void* data, const XML_Char* /*name*/, const XML_Char* /*sysid*/,
                const XML_Char* /*pubid*/, int /*has_internal_subset*/) {
  static_cast<Builder*>(data)->stop("a document type declaration (DTD) is not accepted");
}

}  // namespace

const XmlElement* XmlElement::child(std::string_view child_name) const {
  for (const auto& c : children)
    if (c.name == child_name)
      return &c;
  return nullptr;
}

const XmlElement* XmlElement::at(std::string_view path) const {
  const XmlElement* e = this;
  while (e != nullptr && !path.empty()) {
    const std::size_t slash = path.find('/');
    e = e->child(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  return e;
}

std::string XmlElement::text_at(std::string_view path) const {
  const XmlElement* e = at(path);
  return e != nullptr ? e->text : std::string();
}

const XmlElement* XmlElement::find(std::string_view descendant) const {
  for (const auto& c : children) {
    if (c.name == descendant)
      return &c;
    if (const XmlElement* below = c.find(descendant))
      return below;
  }
  return nullptr;
}

XmlElement parse_xml(std::string_view text) {
  if (text.size() > static_cast<std::size_t>(INT_MAX))
    throw XmlError("an XML document larger than 2 GiB");
  std::unique_ptr<std::remove_pointer_t<XML_Parser>, decltype(&XML_ParserFree)> parser(
      XML_ParserCreateNS("UTF-8", kNsSeparator), &XML_ParserFree);
  if (!parser)
    throw XmlError("cannot create an XML parser");
  Builder b;
  b.parser = parser.get();
  XML_SetUserData(parser.get(), &b);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);
  XML_SetStartDoctypeDeclHandler(parser.get(), on_doctype);
  const XML_Status status =
      XML_Parse(parser.get(), text.data(), static_cast<int>(text.size()), XML_TRUE);
  if (status != XML_STATUS_OK || !b.failure.empty()) {
    const std::string why =
        b.failure.empty() ? XML_ErrorString(XML_GetErrorCode(parser.get())) : b.failure;
    throw XmlError(fmt::format("not well-formed XML at line {}, column {}: {}",
                               XML_GetCurrentLineNumber(parser.get()),
                               XML_GetCurrentColumnNumber(parser.get()), why));
  }
  if (!b.has_root)
    throw XmlError("an XML document without an element");
  return std::move(b.root);
}

}  // namespace rex::aws
