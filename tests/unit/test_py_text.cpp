// Python's str and re semantics over UTF-8 (src/swebench/py_text.hpp): where they differ from
// Boost.Regex's defaults and from byte-wise string handling.
#include "swebench/py_text.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace rex::swebench::py {
namespace {

std::vector<std::string> strings(const std::vector<std::string_view>& views) {
  return {views.begin(), views.end()};
}

std::vector<std::string> all_str(const std::vector<Match>& matches, std::size_t group = 0) {
  std::vector<std::string> out;
  for (const Match& m : matches)
    out.emplace_back(m.str(group));
  return out;
}

TEST(PyText, DotIsOneCodePointAndOnlyExcludesNewline) {
  const Regex dot("^.$");
  EXPECT_TRUE(dot.match("\xc3\xa9"));          // é: two bytes, one code point
  EXPECT_TRUE(dot.match("\xf0\x9f\x98\x80"));  // U+1F600
  EXPECT_TRUE(dot.match("\r"));
  EXPECT_TRUE(dot.match("\xc2\x85"));      // U+0085
  EXPECT_TRUE(dot.match("\xe2\x80\xa8"));  // U+2028
  EXPECT_TRUE(dot.match(std::string_view("\0", 1)));
  EXPECT_FALSE(dot.match("\n"));
  EXPECT_TRUE(Regex("^.$", dotall).match("\n"));
  EXPECT_TRUE(Regex("a(?s:.)b").search("xa\nb"));
  EXPECT_EQ(Regex("^.{3}$").match("a\xc3\xa9z")->str(), "a\xc3\xa9z");
}

TEST(PyText, AnchorsAreNotMultilineByDefault) {
  // $ matches at the end and just before a final newline, nowhere else.
  EXPECT_TRUE(Regex("ok$").search("ok\n"));
  EXPECT_FALSE(Regex("ok$").search("ok\n\n"));
  EXPECT_FALSE(Regex("ok$").search("ok\nmore"));
  EXPECT_FALSE(Regex("ok$").search("ok\r"));
  EXPECT_FALSE(Regex("ok\\Z").search("ok\n"));
  EXPECT_TRUE(Regex("ok\\Z").search("ok"));
  EXPECT_FALSE(Regex("^b").search("a\nb"));
  // Multiline: lines end at \n only (not \r, U+2028, U+0085).
  EXPECT_TRUE(Regex("^b$", multiline).search("a\nb\nc"));
  EXPECT_FALSE(Regex("^b", multiline).search("a\rb"));
  EXPECT_FALSE(Regex("a$", multiline).search("a\xe2\x80\xa8"));
  EXPECT_EQ(all_str(Regex("^(\\w+)$", multiline).findall("one\ntwo\r\nthree")),
            (std::vector<std::string>{"one", "three"}));
}

TEST(PyText, PosKeepsAnchorsAndLookbehindOnTheWholeString) {
  const Regex caret("^b");
  EXPECT_FALSE(caret.match("ab", 1));
  EXPECT_FALSE(caret.search("ab", 1));
  EXPECT_TRUE(Regex("^b", multiline).match("a\nb", 2));
  EXPECT_TRUE(Regex("(?<=a)b").match("ab", 1));
  EXPECT_FALSE(Regex("\\bb").match("ab", 1));
  EXPECT_EQ(Regex("b+").search("abb\xc3\xa9", 2)->start(), 2u);
}

TEST(PyText, ClassesAreUnicode) {
  const Regex space("^\\s$");
  for (std::string_view ws :
       {" ", "\t", "\x0b", "\x1c", "\x1f", "\xc2\x85", "\xc2\xa0", "\xe2\x80\xa8", "\xe3\x80\x80"})
    EXPECT_TRUE(space.match(ws)) << ws;
  EXPECT_FALSE(space.match("\xe2\x80\x8b"));       // U+200B is not whitespace
  EXPECT_TRUE(Regex("^\\d$").match("\xd9\xa3"));   // ARABIC-INDIC DIGIT THREE
  EXPECT_FALSE(Regex("^\\d$").match("\xc2\xb2"));  // superscript two: isdigit, not decimal
  EXPECT_TRUE(
      Regex("^\\w+$").match("na\xc3\xafve_\xce\xbb"
                            "2"));
  EXPECT_FALSE(Regex("^\\w$").match("-"));
  EXPECT_TRUE(Regex("\\bx\\b").search("\xc3\xa9 x \xc3\xa9"));
  EXPECT_FALSE(Regex("\\bx").search("\xc3\xa9x"));
  // A negated class inside a set, and Unicode ranges.
  const Regex horizontal("^[^\\S\\r\\n]+$");
  EXPECT_TRUE(horizontal.match(" \t\xc2\xa0"));
  EXPECT_FALSE(horizontal.match(" \r"));
  EXPECT_TRUE(Regex("^[\\S\\D]$").match("5"));  // not space OR not digit
  EXPECT_TRUE(Regex("^[\\u00e0-\\u00ff]$").match("\xc3\xa9"));
  EXPECT_TRUE(Regex("^[\xe2\x9c\x93\xe2\x9c\x95]$").match("\xe2\x9c\x95"));
}

TEST(PyText, SetsAndEscapesFollowPythonSyntax) {
  // No POSIX classes in Python: a set of "[:alph" then a literal "]".
  EXPECT_TRUE(Regex("^[[:alpha:]]$").match(":]"));
  EXPECT_FALSE(Regex("^[[:alpha:]]$").match("b"));
  EXPECT_TRUE(Regex("^[]a]$").match("]"));
  EXPECT_TRUE(Regex("^[^]]$").match("a"));
  EXPECT_TRUE(Regex("^[a-]$").match("-"));
  EXPECT_TRUE(Regex("^[\\b]$").match("\b"));
  EXPECT_TRUE(Regex("^\\x1B\\101\\0$")
                  .match(std::string_view("\x1b"
                                          "A\0",
                                          3)));
  EXPECT_TRUE(Regex("^a{,2}$").match("aa"));
  EXPECT_TRUE(Regex("^a{$").match("a{"));  // not a quantifier: a literal
  EXPECT_TRUE(Regex("^x{}$").match("x{}"));
  EXPECT_TRUE(Regex("^\\v$").match("\x0b"));
  EXPECT_TRUE(Regex("a # comment\n b", verbose).match("ab"));
  EXPECT_TRUE(Regex("(?i)abc").match("ABC"));
  EXPECT_TRUE(Regex("\\_\\:\\/").match("_:/"));
  for (std::string_view bad : {"(", ")", "[a", "a**", "*", "\\q", "a{3,2}", "(?P<1>x)", "\\1(a)",
                               "(a\\1)", "(?<n>x)", "[z-a]", "(?P=nope)", "x(?i)", "\\"})
    EXPECT_THROW(Regex{bad}, std::invalid_argument) << bad;
}

TEST(PyText, GroupsAndNames) {
  const Regex re("(?P<status>ok|err)(x)?(?P=status)");
  const std::optional<Match> m = re.match("okok");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->groups(), 2u);
  EXPECT_EQ(m->group("status"), "ok");
  EXPECT_EQ(m->group(2), std::nullopt);
  EXPECT_EQ(m->str(2), "");
  EXPECT_EQ(m->start(2), std::string_view::npos);
  EXPECT_THROW((void)m->group(3), std::out_of_range);
  EXPECT_THROW((void)m->group("nope"), std::out_of_range);
  EXPECT_TRUE(Regex("<(\\w+)>.*</\\1>").search("<a>x</a>"));
  EXPECT_TRUE(Regex("^(a)?(?(1)b|c)$").match("c"));
}

TEST(PyText, OffsetsAreBytes) {
  const std::string text = "\xc3\xa9t\xc3\xa9 test_x ok";
  const std::optional<Match> m = Regex("(test_\\w+)").search(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->start(1), 6u);
  EXPECT_EQ(m->end(1), 12u);
  EXPECT_EQ(m->str(1), "test_x");
}

TEST(PyText, FindallAndFinditerFollowPythonRules) {
  EXPECT_EQ(all_str(Regex("\\d+").findall("a1b22")), (std::vector<std::string>{"1", "22"}));
  // One group: that group (empty where it did not take part).
  const std::vector<Match> one = Regex("a(b)?").findall("aab");
  EXPECT_EQ(all_str(one), (std::vector<std::string>{"", "b"}));
  EXPECT_EQ(all_str(one, 1), (std::vector<std::string>{"", "b"}));
  const std::vector<Match> two = Regex("(\\w)=(\\d)?").findall("a=1 b=");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].str(1), "b");
  EXPECT_EQ(two[1].str(2), "");
  // Empty matches: allowed right after a non-empty one, never twice at one place.
  EXPECT_EQ(all_str(Regex("x*").finditer("axxb")), (std::vector<std::string>{"", "xx", "", ""}));
  EXPECT_EQ(Regex("x*").sub("-", "abxd"), "-a-b--d-");
  EXPECT_EQ(Regex("\\b").findall("ab cd").size(), 4u);
}

TEST(PyText, SubExpandsTemplatesAsPython) {
  const Regex re("(\\w+)=(\\w+)?");
  EXPECT_EQ(re.sub("\\2:\\1", "a=b c="), "b:a :c");
  EXPECT_EQ(re.sub("\\g<1>\\g<0>\\n\\.", "k=v"), "kk=v\n\\.");
  EXPECT_EQ(Regex("(?P<n>x)").sub("[\\g<n>]", "axb"), "a[x]b");
  EXPECT_EQ(Regex("a").sub("b", "aaa", 2), "bba");
  EXPECT_EQ(Regex("\\[(\\d+)m").sub("", "\x1b[31mred\x1b[0m"), "\x1bred\x1b");
  EXPECT_THROW((void)re.sub("\\3", "a=b"), std::invalid_argument);
  EXPECT_THROW((void)re.sub("\\q", "a=b"), std::invalid_argument);
  EXPECT_THROW((void)re.sub("\\g<nope>", "a=b"), std::out_of_range);
}

TEST(PyText, SplitKeepsGroups) {
  EXPECT_EQ(Regex("(,)|;").split("a,b;c"), (std::vector<std::string>{"a", ",", "b", "", "c"}));
  EXPECT_EQ(Regex("\\n[ \\t]*\\d+ passing").split("x\n  3 passing\ny"),
            (std::vector<std::string>{"x", "\ny"}));
  EXPECT_EQ(Regex(",").split("a,b,c", 1), (std::vector<std::string>{"a", "b,c"}));
  EXPECT_EQ(Regex(",").split("a,b", -1), (std::vector<std::string>{"a,b"}));
  EXPECT_EQ(Regex(",").sub(";", "a,b", -1), "a,b");
}

TEST(PyText, FullmatchNeedsTheWholeString) {
  EXPECT_TRUE(Regex("a|ab").fullmatch("ab"));
  EXPECT_FALSE(Regex("a").fullmatch("a\n"));
  EXPECT_TRUE(Regex("a$").fullmatch("a"));
}

TEST(PyText, LongLinesDoNotExhaustTheMatcher) {
  // 1 MB lines through the shapes of the parsers' patterns: no complexity errors.
  const std::string long_name(1 << 20, 'x');
  EXPECT_TRUE(
      Regex("^test\\s+(\\S+)\\s+\\.\\.\\.\\s+(\\w+)$").match("test " + long_name + " ... ok"));
  EXPECT_TRUE(Regex("^\\[(ok|err|skip|ignore)\\]:\\s(.+?)(?:\\s\\((\\d+\\s*m?s)\\))?$")
                  .match("[ok]: " + long_name + " (3 ms)"));
  EXPECT_TRUE(Regex("^--- (PASS|FAIL|SKIP): (.+) \\((.+)\\)$")
                  .match("--- PASS: " + long_name + " (0.00s)"));
  EXPECT_FALSE(
      Regex("^(.*?)\\s\\.\\.\\.\\sInternal\\ Server\\ Error:\\ \\/(.*)\\/\\nok$", multiline)
          .search(long_name + " ... Internal Server Error: /" + long_name));
  EXPECT_EQ(Regex("(a|b)*c").search(std::string(1 << 20, 'a') + "c")->end(), (1u << 20) + 1);
  EXPECT_EQ(Regex("[\\s\\S]*?z").search(std::string(1 << 20, 'y') + "z")->end(), (1u << 20) + 1);
}

TEST(PyText, SplitAndStripKnowUnicodeWhitespace) {
  EXPECT_EQ(strings(split(" a\xc2\xa0"
                          "b\xe2\x80\xa8"
                          "c\x1d"
                          "d\t")),
            (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(strings(split("\xe2\x80\x8b"
                          "a")),
            (std::vector<std::string>{"\xe2\x80\x8b"
                                      "a"}));
  EXPECT_EQ(strings(split_ws("  a b  c  ", 1)), (std::vector<std::string>{"a", "b  c  "}));
  EXPECT_EQ(strings(split("a - b - c", " - ")), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(strings(split("", "\n")), (std::vector<std::string>{""}));
  EXPECT_TRUE(split("").empty());
  EXPECT_EQ(strings(rsplit("a ... b ... c", " ... ", 1)),
            (std::vector<std::string>{"a ... b", "c"}));
  EXPECT_EQ(strip("\xc2\x85\xe3\x80\x80 x \xc2\xa0\r\n"), "x");
  EXPECT_EQ(strip("xxaxx", "x"), "a");
  EXPECT_EQ(rstrip("a\xc3\xa9\xc3\xa9", "\xc3\xa9"), "a");
  EXPECT_EQ(strings(splitlines("a\r\nb\rc\x0b"
                               "d\xc2\x85"
                               "e\xe2\x80\xa9"
                               "f\n")),
            (std::vector<std::string>{"a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ(strings(splitlines("a\r\nb", true)), (std::vector<std::string>{"a\r\n", "b"}));
  EXPECT_TRUE(is_space(0x1F));
  EXPECT_FALSE(is_space(0x200B));
}

TEST(PyText, OtherStrMethods) {
  EXPECT_EQ(replace("a - b - c", " - ", " "), "a b c");
  EXPECT_EQ(replace("ab", "", "-"), "-a-b-");
  EXPECT_EQ(replace("a\xc3\xa9", "", "|", 2), "|a|\xc3\xa9");
  EXPECT_EQ(replace("aaa", "a", "b", 2), "bba");
  EXPECT_TRUE(isdigit("\xc2\xb2"));
  EXPECT_FALSE(isdecimal("\xc2\xb2"));
  EXPECT_TRUE(
      isdecimal("\xd9\xa3"
                "1"));
  EXPECT_FALSE(isdigit(""));
  EXPECT_TRUE(isalpha("\xc3\xa9t\xc3\xa9"));
  EXPECT_TRUE(isalnum("x1"));
  EXPECT_EQ(to_int(" 42\n"), 42);
  EXPECT_EQ(to_int("-1_000"), -1000);
  EXPECT_EQ(to_int("\xd9\xa3"), 3);
  EXPECT_EQ(to_int("\xc2\xa0"
                   "7\xe2\x80\xa8"),
            7);
  EXPECT_EQ(to_int("\x1c"
                   "1"),
            std::nullopt);  // not whitespace to int()
  EXPECT_EQ(to_int("1__0"), std::nullopt);
  EXPECT_EQ(to_int("_1"), std::nullopt);
  EXPECT_EQ(to_int("- 1"), std::nullopt);
  EXPECT_EQ(to_int("\xc2\xb2"), std::nullopt);
  EXPECT_EQ(to_int("99999999999999999999"), std::nullopt);
  EXPECT_EQ(length("a\xc3\xa9\xf0\x9f\x98\x80"), 3u);
  EXPECT_EQ(slice("a\xc3\xa9z", 1, 2), "\xc3\xa9");
  EXPECT_EQ(slice("a\xc3\xa9z", -1), "z");
  EXPECT_EQ(slice("abc", 5), "");
  EXPECT_EQ(slice("abc", 0, -5), "");
}

}  // namespace
}  // namespace rex::swebench::py
