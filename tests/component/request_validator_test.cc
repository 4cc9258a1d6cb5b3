#include "component/node/request_validator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "component/client/client.h"

namespace ari::component {
namespace {

ari_Request Good() {
  AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = 16;
  ari_Request r{};
  EXPECT_TRUE(EncodeRequest(p, "c-1-abc", "c", &r).has_value());
  return r;
}

RequestLimits Limits() {
  RequestLimits l;
  l.max_prompt_bytes = 100;
  l.min_max_tokens = 1;
  l.max_max_tokens = 64;
  return l;
}

void SetPrompt(ari_Request& r, std::string_view text) {
  std::memset(r.prompt, 0, sizeof r.prompt);
  std::memcpy(r.prompt, text.data(), text.size());
  r.prompt_len = static_cast<uint32_t>(text.size());
}

TEST(RequestValidator, AcceptsAWellFormedRequest) {
  EXPECT_TRUE(ValidateRequest(Good(), Limits()).ok());
}

TEST(RequestValidator, EmptyAndOversizedPrompt) {
  ari_Request r = Good();
  SetPrompt(r, "");
  auto v = ValidateRequest(r, Limits());
  EXPECT_EQ(v.status, ari_STATUS_INVALID);
  EXPECT_NE(v.message.find("empty prompt"), std::string::npos) << v.message;
  SetPrompt(r, std::string(101, 'a'));
  v = ValidateRequest(r, Limits());
  EXPECT_EQ(v.status, ari_STATUS_INVALID);
  EXPECT_NE(v.message.find("limit"), std::string::npos) << v.message;
  r.prompt_len = ari_kPromptLen + 5;  // lies about its length: must not read past the array
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
}

TEST(RequestValidator, MaxTokensRange) {
  ari_Request r = Good();
  r.max_tokens = 0;
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
  r.max_tokens = 65;
  auto v = ValidateRequest(r, Limits());
  EXPECT_EQ(v.status, ari_STATUS_INVALID);
  EXPECT_NE(v.message.find("max_tokens"), std::string::npos);
  r.max_tokens = 64;
  EXPECT_TRUE(ValidateRequest(r, Limits()).ok());
}

TEST(RequestValidator, UnknownUrgencyAndRole) {
  ari_Request r = Good();
  int32_t bad = 7;
  std::memcpy(&r.urgency, &bad, sizeof bad);
  auto v = ValidateRequest(r, Limits());
  EXPECT_EQ(v.status, ari_STATUS_INVALID);
  EXPECT_NE(v.message.find("urgency"), std::string::npos);

  ari_Request t = Good();
  t.prompt_len = 0;
  t.n_turns = 1;
  t.turns[0].text_len = 2;
  std::memcpy(t.turns[0].text, "hi", 2);
  EXPECT_TRUE(ValidateRequest(t, Limits()).ok());
  bad = -1;
  std::memcpy(&t.turns[0].role, &bad, sizeof bad);
  EXPECT_EQ(ValidateRequest(t, Limits()).status, ari_STATUS_INVALID);
}

TEST(RequestValidator, PromptAndTurnsAreExclusiveAndBounded) {
  ari_Request r = Good();
  r.n_turns = 1;
  r.turns[0].text_len = 1;
  r.turns[0].text[0] = 'x';
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
  r.prompt_len = 0;
  r.n_turns = ari_kMaxTurns + 1;
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
}

TEST(RequestValidator, InvalidUtf8) {
  ari_Request r = Good();
  SetPrompt(r, "ok \xff bad");
  auto v = ValidateRequest(r, Limits());
  EXPECT_EQ(v.status, ari_STATUS_INVALID);
  EXPECT_NE(v.message.find("UTF-8"), std::string::npos);
}

TEST(RequestValidator, IdsMustBeTerminatedAndPrintable) {
  ari_Request r = Good();
  std::memset(r.request_id, 'x', sizeof r.request_id);  // no NUL
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
  r = Good();
  r.client_id[0] = '\0';
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
  r = Good();
  r.request_id[1] = ' ';
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
}

TEST(RequestValidator, SamplingValues) {
  ari_Request r = Good();
  r.sampling.temperature = NAN;
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
  r = Good();
  r.sampling.top_p = 1.5f;
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
}

TEST(RequestValidator, ResponseFormatFields) {
  ari_Request r = Good();
  EXPECT_TRUE(ValidateRequest(r, Limits()).ok());  // kind NONE
  r.response_format.kind = ari_RESPONSE_FORMAT_SCHEMA_NAME;
  EXPECT_NE(ValidateRequest(r, Limits()).message.find("schema_name empty"), std::string::npos);
  std::memset(r.response_format.schema_name, 'a', sizeof r.response_format.schema_name);
  EXPECT_NE(ValidateRequest(r, Limits()).message.find("not NUL-terminated"), std::string::npos);
  std::memcpy(r.response_format.schema_name, "nav\0", 4);
  EXPECT_TRUE(ValidateRequest(r, Limits()).ok());
  r.response_format.kind = ari_RESPONSE_FORMAT_GRAMMAR;
  EXPECT_NE(ValidateRequest(r, Limits()).message.find("text_len 0"), std::string::npos);
  r.response_format.text_len = ari_kFormatTextLen + 1;
  EXPECT_EQ(ValidateRequest(r, Limits()).status, ari_STATUS_INVALID);
  r.response_format.text_len = 3;
  EXPECT_TRUE(ValidateRequest(r, Limits()).ok());
  r.response_format.kind = static_cast<ari_ResponseFormatKind>(9);
  EXPECT_NE(ValidateRequest(r, Limits()).message.find("unknown response_format.kind 9"),
            std::string::npos);
}

TEST(RequestValidator, ArbitraryBytesNeverCrash) {
  ari_Request r{};
  uint64_t x = 88172645463325252ull;
  auto* bytes = reinterpret_cast<unsigned char*>(&r);
  for (int round = 0; round < 2000; ++round) {
    for (size_t i = 0; i < sizeof r; i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(bytes + i, &x, std::min<size_t>(8, sizeof r - i));
    }
    (void)ValidateRequest(r, Limits());
  }
}

TEST(RateLimiter, TokenBucketRefills) {
  RateLimiter rl(2.0, 3);  // 2 per second, burst 3
  const int64_t s = 1'000'000'000;
  EXPECT_TRUE(rl.Allow("a", 0));
  EXPECT_TRUE(rl.Allow("a", 0));
  EXPECT_TRUE(rl.Allow("a", 0));
  EXPECT_FALSE(rl.Allow("a", 0));
  EXPECT_TRUE(rl.Allow("b", 0));  // per client
  EXPECT_FALSE(rl.Allow("a", s / 4));
  EXPECT_TRUE(rl.Allow("a", s / 2));  // one token after 0.5 s
  EXPECT_FALSE(rl.Allow("a", s / 2));
  EXPECT_TRUE(rl.Allow("a", 100 * s));
  RateLimiter off(0.0, 1);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(off.Allow("a", 0));
}

TEST(RecentIds, DetectsDuplicatesWithinCapacity) {
  RecentIds ids(2);
  EXPECT_TRUE(ids.Insert("a"));
  EXPECT_FALSE(ids.Insert("a"));
  EXPECT_TRUE(ids.Insert("b"));
  EXPECT_TRUE(ids.Insert("c"));  // forgets "a"
  EXPECT_TRUE(ids.Insert("a"));
  EXPECT_FALSE(ids.Insert("c"));
}

}  // namespace
}  // namespace ari::component
