// The XML answers of AWS's Query APIs (EC2, IAM) as a small tree, read with expat.
//
// Names are the local names, whatever namespace or prefix they were written with; text is the
// concatenated character data directly inside an element, as written (expat has decoded
// entities and CDATA). No DTDs: a document with one is refused, so no entity can expand.
//
// Threading: pure functions.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex::aws {

class XmlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct XmlElement {
  std::string name;
  std::string text;
  std::vector<XmlElement> children;

  /// The first child of that name, or nullptr.
  const XmlElement* child(std::string_view child_name) const;
  /// The text of the element at a path of child names ("a/b/c") below this one; empty when
  /// there is none.
  std::string text_at(std::string_view path) const;
  /// The element at a path of child names, or nullptr.
  const XmlElement* at(std::string_view path) const;
  /// The first element of that name at any depth below this one (this one excluded), or
  /// nullptr.
  const XmlElement* find(std::string_view descendant) const;
};

/// The document's root element. Throws XmlError (with expat's message, line and column) for
/// text that is not well-formed XML, holds a DTD, or nests deeper than 256 elements.
XmlElement parse_xml(std::string_view text);

}  // namespace rex::aws
