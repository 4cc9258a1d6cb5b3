// UTF-8 helpers (runtime/core/utf8.h), the one implementation behind request validation,
// drive-log checks, chunk truncation and the tokenizers' decoders.
#include "runtime/core/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace ari::runtime {
namespace {

TEST(Utf8, ValidationRules) {
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x9a\x97"));
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8(std::string_view("a\0b", 3)));
  EXPECT_TRUE(IsValidUtf8("\xef\xbf\xbd"));       // U+FFFD itself
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xf0\x80\x80\xaf"));  // overlong 4-byte
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xf5\x80\x80\x80"));  // lead > F4
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("ok \xff bad"));
}

TEST(Utf8, DecodeGivesCodePointAndLength) {
  const std::string_view s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x9a\x97\xff";
  Utf8Decoded d = DecodeUtf8At(s, 0);
  EXPECT_TRUE(d.valid);
  EXPECT_EQ(d.code_point, 0x61u);
  EXPECT_EQ(d.length, 1u);
  d = DecodeUtf8At(s, 1);
  EXPECT_EQ(d.code_point, 0xE9u);
  EXPECT_EQ(d.length, 2u);
  d = DecodeUtf8At(s, 3);
  EXPECT_EQ(d.code_point, 0x20ACu);
  EXPECT_EQ(d.length, 3u);
  d = DecodeUtf8At(s, 6);
  EXPECT_EQ(d.code_point, 0x1F697u);
  EXPECT_EQ(d.length, 4u);
  d = DecodeUtf8At(s, 10);  // invalid byte: one byte, not valid
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.length, 1u);
  d = DecodeUtf8At("\xe2\x82", 0);  // truncated at the end of the text
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.length, 1u);
}

TEST(Utf8, LeadAndContinuationTables) {
  EXPECT_EQ(Utf8LeadLength(0x41), 1u);
  EXPECT_EQ(Utf8LeadLength(0x80), 0u);
  EXPECT_EQ(Utf8LeadLength(0xC1), 0u);
  EXPECT_EQ(Utf8LeadLength(0xC2), 2u);
  EXPECT_EQ(Utf8LeadLength(0xEF), 3u);
  EXPECT_EQ(Utf8LeadLength(0xF4), 4u);
  EXPECT_EQ(Utf8LeadLength(0xF5), 0u);
  EXPECT_FALSE(Utf8ValidContinuation(0xE0, 1, 0x9F));
  EXPECT_TRUE(Utf8ValidContinuation(0xE0, 1, 0xA0));
  EXPECT_TRUE(Utf8ValidContinuation(0xE0, 2, 0x80));  // only the second byte is special
  EXPECT_FALSE(Utf8ValidContinuation(0xED, 1, 0xA0));
  EXPECT_FALSE(Utf8ValidContinuation(0xF0, 1, 0x8F));
  EXPECT_FALSE(Utf8ValidContinuation(0xF4, 1, 0x90));
  EXPECT_FALSE(Utf8ValidContinuation(0xC3, 1, 0xC0));
}

TEST(Utf8, PrefixNeverEndsInsideASequence) {
  const std::string s = "ab\xe2\x82\xac";  // 2 ASCII + a 3-byte euro sign
  EXPECT_EQ(Utf8Prefix(s, 10), s.size());
  EXPECT_EQ(Utf8Prefix(s, 5), 5u);
  EXPECT_EQ(Utf8Prefix(s, 4), 2u);
  EXPECT_EQ(Utf8Prefix(s, 3), 2u);
  EXPECT_EQ(Utf8Prefix(s, 2), 2u);
  EXPECT_EQ(Utf8Prefix("\xe2\x82\xac\xe2\x82\xac", 2), 2u);  // nothing would be left
}

TEST(Utf8, AppendRoundTripsEveryScalarValueClass) {
  for (uint32_t cp :
       {0x24u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, s);
    const Utf8Decoded d = DecodeUtf8At(s, 0);
    EXPECT_TRUE(d.valid) << cp;
    EXPECT_EQ(d.code_point, cp);
    EXPECT_EQ(d.length, s.size());
  }
}

TEST(Utf8, SeqLenIsLenientLikeLlamaCpp) {
  EXPECT_EQ(Utf8SeqLen('a'), 1u);
  EXPECT_EQ(Utf8SeqLen('\x80'), 1u);  // continuation: 1
  EXPECT_EQ(Utf8SeqLen('\xc0'), 2u);  // judged by high bits only
  EXPECT_EQ(Utf8SeqLen('\xe2'), 3u);
  EXPECT_EQ(Utf8SeqLen('\xff'), 4u);
}

}  // namespace
}  // namespace ari::runtime
