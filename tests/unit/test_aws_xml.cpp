// The XML answers of AWS's Query APIs, and the error answers of both protocols.
#include <rex/aws/client.hpp>
#include <rex/aws/xml.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace rex::aws;

TEST(AwsXml, ATreeOfNamesAndTexts) {
  const XmlElement root = parse_xml(
      R"(<?xml version="1.0" encoding="UTF-8"?>
<DescribeVpcsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r-1</requestId>
  <vpcSet>
    <item><vpcId>vpc-1</vpcId><isDefault>false</isDefault></item>
    <item><vpcId>vpc-2</vpcId><isDefault>true</isDefault><note>a &amp; b <![CDATA[<c>]]></note></item>
  </vpcSet>
</DescribeVpcsResponse>)");
  EXPECT_EQ(root.name, "DescribeVpcsResponse");
  EXPECT_EQ(root.text_at("requestId"), "r-1");
  const XmlElement* set = root.child("vpcSet");
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->children.size(), 2u);
  EXPECT_EQ(set->children[1].text_at("vpcId"), "vpc-2");
  EXPECT_EQ(set->children[1].text_at("note"), "a & b <c>");
  EXPECT_EQ(root.text_at("vpcSet/item/vpcId"), "vpc-1");
  EXPECT_EQ(root.at("vpcSet/nothing"), nullptr);
  EXPECT_EQ(root.text_at("nothing"), "");
  ASSERT_NE(root.find("isDefault"), nullptr);
  EXPECT_EQ(root.find("isDefault")->text, "false");
}

TEST(AwsXml, NamesAreLocalWhateverTheirNamespace) {
  const XmlElement root =
      parse_xml(R"(<ns0:R xmlns:ns0="http://ec2.amazonaws.com/doc/2016-11-15/"><ns0:a>1</ns0:a>)"
                R"(<b xmlns="urn:x">2</b></ns0:R>)");
  EXPECT_EQ(root.name, "R");
  EXPECT_EQ(root.text_at("a"), "1");
  EXPECT_EQ(root.text_at("b"), "2");
}

TEST(AwsXml, WhatIsNotWellFormedIsRefusedWithItsPlace) {
  try {
    parse_xml("<a>\n<b></a>");
    FAIL() << "no error";
  } catch (const XmlError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_xml(""), XmlError);
  EXPECT_THROW(parse_xml("just text"), XmlError);
  EXPECT_THROW(parse_xml("<a></a><b></b>"), XmlError);
  // No DTD, so no entity expansion.
  EXPECT_THROW(parse_xml(R"(<!DOCTYPE a [<!ENTITY x "xxxx">]><a>&x;</a>)"), XmlError);
  std::string deep;
  for (int i = 0; i < 300; ++i)
    deep += "<a>";
  EXPECT_THROW(parse_xml(deep), XmlError);
}

TEST(AwsErrors, JsonXmlAndNeither) {
  // ECS: JSON with a qualified __type.
  auto [code, message] = error_of(
      400, R"({"__type":"com.amazonaws.ecs#ClientException","message":"no such cluster"})");
  EXPECT_EQ(code, "ClientException");
  EXPECT_EQ(message, "no such cluster");
  // The X-Amzn-ErrorType header wins, without its suffix.
  std::tie(code, message) =
      error_of(400, R"({"Message":"slow down"})", "ThrottlingException:http://internal/");
  EXPECT_EQ(code, "ThrottlingException");
  EXPECT_EQ(message, "slow down");
  // IAM: ErrorResponse/Error.
  std::tie(code, message) = error_of(
      404,
      "<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error><Type>Sender"
      "</Type><Code>NoSuchEntity</Code><Message>The role rex cannot be found.</Message></Error>"
      "<RequestId>1</RequestId></ErrorResponse>");
  EXPECT_EQ(code, "NoSuchEntity");
  EXPECT_EQ(message, "The role rex cannot be found.");
  // EC2: Response/Errors/Error.
  std::tie(code, message) =
      error_of(400,
               "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit "
               "exceeded.</Message></Error></Errors><RequestID>2</RequestID></Response>");
  EXPECT_EQ(code, "RequestLimitExceeded");
  // Neither: the status, and the body as the message.
  std::tie(code, message) = error_of(502, "Bad Gateway");
  EXPECT_EQ(code, "HTTP 502");
  EXPECT_EQ(message, "Bad Gateway");
}

TEST(AwsErrors, WhichAreRetried) {
  EXPECT_TRUE(is_retryable("ThrottlingException", 400));
  EXPECT_TRUE(is_retryable("RequestLimitExceeded", 503));
  EXPECT_TRUE(is_retryable("HTTP 502", 502));
  EXPECT_TRUE(is_retryable("InternalError", 500));
  EXPECT_FALSE(is_retryable("ClientException", 400));
  EXPECT_FALSE(is_retryable("InvalidParameterException", 400));
  EXPECT_FALSE(is_retryable("ExpiredTokenException", 400));
  EXPECT_TRUE(is_credential_error("ExpiredTokenException"));
  EXPECT_TRUE(is_credential_error("SignatureDoesNotMatch"));
  EXPECT_FALSE(is_credential_error("AccessDeniedException"));
}

}  // namespace
