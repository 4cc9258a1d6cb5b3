// Shipped config files are found without being run from the repo root
// (qos/shipped_config.h).
#include "qos/shipped_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "qos/policy.h"
#include "tests/common/test_util.h"

namespace ari::qos {
namespace {

namespace fs = std::filesystem;

TEST(ShippedConfig, DefaultPolicyIsFoundFromAnyWorkingFolder) {
  const fs::path cwd = fs::current_path();
  fs::current_path("/");
  ::unsetenv("ARI_CONFIG_DIR");
  auto p = FindShippedConfig("policy_default.textproto");
  fs::current_path(cwd);
  ASSERT_TRUE(p.has_value()) << p.error().ToString();
  EXPECT_TRUE(p->is_absolute()) << *p;
  EXPECT_TRUE(LoadPolicyFile(*p).has_value());
}

TEST(ShippedConfig, EnvironmentFolderComesFirst) {
  const fs::path dir = ari::testing::TempDir("shipped_config");
  std::ofstream(dir / "tune_space.textproto") << "# mine\n";
  ::setenv("ARI_CONFIG_DIR", dir.c_str(), 1);
  auto p = FindShippedConfig("tune_space.textproto");
  ::unsetenv("ARI_CONFIG_DIR");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, dir / "tune_space.textproto");
}

TEST(ShippedConfig, MissingFileNamesEveryPlaceTried) {
  auto p = FindShippedConfig("no_such_file.textproto");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, ErrorCode::kIo);
  EXPECT_NE(p.error().message.find("share/ari/no_such_file.textproto"), std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find("ARI_CONFIG_DIR"), std::string::npos);
}

}  // namespace
}  // namespace ari::qos
