// The tokenizer's packed vocabulary tables (runtime/tokenizer/vocab_store.h): strings read
// back exactly, the text -> id index against a std::map built the same way (last id wins),
// and a tokenizer built on a vocabulary with a repeated and an empty text.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/vocab_store.h"

namespace ari::runtime {
namespace {

TEST(PackedStrings, GivesBackEveryStringIncludingEmptyOnes) {
  const std::vector<std::string> in = {
      "", "a", "", "\xE2\x96\x81the", std::string(300, 'x'), std::string("nul\0byte", 8)};
  tok::PackedStrings p;
  p.Reserve(2, 1);  // a reservation too small grows
  for (const std::string& s : in) p.Append(s);
  ASSERT_EQ(p.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(p[i], in[i]) << i;
  p.Clear();
  EXPECT_EQ(p.size(), 0u);
  p.Append("b");
  EXPECT_EQ(p[0], "b");
}

TEST(TokenIndex, AgreesWithAMapOnManyTextsWithRepeats) {
  tok::PackedStrings texts;
  std::map<std::string, int32_t> want;  // last id wins, as std::map assignment in id order
  for (int32_t i = 0; i < 20000; ++i) {
    // Every 7th text repeats an earlier one; the lengths 1..6 give many short texts.
    const std::string t = (i % 7 == 6) ? std::to_string(i / 3) : std::to_string(i * 2654435761u);
    texts.Append(t.substr(0, 1 + static_cast<size_t>(i) % 6));
    want[std::string(texts[static_cast<size_t>(i)])] = i;
  }
  tok::TokenIndex index;
  index.Build(texts);
  for (const auto& [text, id] : want) EXPECT_EQ(index.Find(texts, text), id) << text;
  EXPECT_EQ(index.Find(texts, "not a number"), -1);
  EXPECT_EQ(index.Find(texts, ""), -1);
}

TEST(TokenIndex, EmptyTableFindsNothing) {
  tok::PackedStrings texts;
  tok::TokenIndex unbuilt;
  EXPECT_EQ(unbuilt.Find(texts, "a"), -1);
  tok::TokenIndex built;
  built.Build(texts);
  EXPECT_EQ(built.Find(texts, "a"), -1);
}

TEST(TokenIndex, TokenizerKeepsTheLastOfARepeatedTextAndNamesEmptyOnes) {
  VocabSpec s;
  s.tokens = {"<unk>", "<s>", "</s>", "ab", "", "ab", "c"};
  auto t = Tokenizer::FromSpec(s);
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_EQ((*t)->FindToken("ab"), 5);  // as llama.cpp's token_to_id map
  EXPECT_EQ((*t)->TokenText(4), "[EMPTY_4]");
  EXPECT_EQ((*t)->FindToken("[EMPTY_4]"), 4);
  EXPECT_EQ((*t)->FindToken("c"), 6);
  EXPECT_EQ((*t)->FindToken("d"), -1);
  EXPECT_EQ((*t)->Piece(6), "c");
  EXPECT_EQ((*t)->VocabSize(), 7);
}

}  // namespace
}  // namespace ari::runtime
