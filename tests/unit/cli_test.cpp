// dist::Cli, the chapters' shared command line: defaults, both spellings of a value, switches
// and their negations, positional words, --help, and every kind of bad input as a ConfigError
// that names the flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using dist::testing::contains;

// Parses `args` (after the program name) with a Cli that has one flag of each kind.
struct Parsed {
  bool went_on = false;
  int size = 7;
  std::string name = "x";
  double lr = 0.01;
  bool shuffle = true;
  bool verbose = false;
  std::vector<std::string> words;
  dist::InitOptions init;
};

Parsed parse(std::vector<std::string> args) {
  Parsed p;
  dist::Cli cli("prog", "A test program.");
  cli.add_int("--size", &p.size, "elements", 1, 100);
  cli.add_string("--name", &p.name, "a name");
  cli.add_double("--lr", &p.lr, "a rate", 1e-6, 10);
  cli.add_flag("--shuffle", &p.shuffle, "shuffle", "--no-shuffle");
  cli.add_flag("--verbose", &p.verbose, "say more");
  cli.allow_positional(&p.words, "[CASE]");
  std::vector<char*> argv = {const_cast<char*>("prog")};
  for (std::string& a : args) argv.push_back(a.data());
  p.went_on = cli.parse(static_cast<int>(argv.size()), argv.data());
  p.init = cli.init_options();
  return p;
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const dist::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Cli, DefaultsAreTheInitialValuesAndGlooOnEnvWithTheDefaultTimeout) {
  const Parsed p = parse({});
  EXPECT_TRUE(p.went_on);
  EXPECT_EQ(p.size, 7);
  EXPECT_EQ(p.name, "x");
  EXPECT_EQ(p.lr, 0.01);
  EXPECT_TRUE(p.shuffle);
  EXPECT_FALSE(p.verbose);
  EXPECT_EQ(p.init.backend, "gloo");
  EXPECT_EQ(p.init.init_method, "");
  EXPECT_EQ(p.init.timeout, dist::kDefaultTimeout);
}

TEST(Cli, ValuesComeSeparateOrAfterAnEqualsSign) {
  const Parsed p = parse({"--size", "12", "--name=abc", "--backend=auto", "--timeout", "5",
                          "--init-method", "file:///tmp/x", "--no-shuffle", "--verbose", "case1"});
  EXPECT_EQ(p.size, 12);
  EXPECT_EQ(p.name, "abc");
  EXPECT_EQ(parse({"--lr", "0.25"}).lr, 0.25);
  EXPECT_EQ(parse({"--lr=1e-3"}).lr, 1e-3);
  EXPECT_FALSE(p.shuffle);
  EXPECT_TRUE(p.verbose);
  EXPECT_EQ(p.words, std::vector<std::string>{"case1"});
  EXPECT_EQ(p.init.backend, "auto");
  EXPECT_EQ(p.init.init_method, "file:///tmp/x");
  EXPECT_EQ(p.init.timeout, std::chrono::seconds(5));
  EXPECT_TRUE(parse({"--no-shuffle", "--shuffle"}).shuffle) << "the last spelling wins";
}

TEST(Cli, HelpPrintsEveryFlagWithItsDefaultAndStops) {
  testing::internal::CaptureStdout();
  const Parsed p = parse({"--size", "3", "--help", "--bogus"});
  const std::string text = testing::internal::GetCapturedStdout();
  EXPECT_FALSE(p.went_on);
  for (const char* part :
       {"usage: prog [flags] [CASE]", "A test program.", "--backend VALUE", "(default: gloo)",
        "--init-method VALUE", "(default: env://)", "--timeout VALUE", "(default: 60)",
        "--size VALUE", "(default: 7)", "--lr VALUE", "(default: 0.01)", "--shuffle | --no-shuffle",
        "(default: --shuffle)", "--verbose", "(default: off)", "--help"}) {
    EXPECT_TRUE(contains(text, part)) << part << "\n" << text;
  }
}

TEST(Cli, BadInputNamesTheFlag) {
  EXPECT_TRUE(contains(error_of({"--sise", "3"}), "unknown argument \"--sise\" for prog"));
  EXPECT_TRUE(contains(error_of({"--size"}), "--size needs a value"));
  EXPECT_TRUE(contains(error_of({"--size", "abc"}), "--size=\"abc\" is not an integer"));
  EXPECT_TRUE(contains(error_of({"--size", "0"}), "--size"));
  EXPECT_TRUE(contains(error_of({"--size", "101"}), "--size"));
  EXPECT_TRUE(contains(error_of({"--verbose=1"}), "--verbose takes no value"));
  EXPECT_TRUE(contains(error_of({"--backend", "mpi"}), "--backend mpi is not a backend"));
  EXPECT_TRUE(contains(error_of({"--timeout", "0"}), "--timeout"));
  EXPECT_TRUE(contains(error_of({"--lr", "fast"}), "--lr=\"fast\" is not a number"));
  EXPECT_TRUE(contains(error_of({"--lr", "0.1x"}), "--lr=\"0.1x\" is not a number"));
  EXPECT_TRUE(contains(error_of({"--lr", "nan"}), "--lr=\"nan\" is not a number"));
  EXPECT_TRUE(contains(error_of({"--lr", ""}), "--lr=\"\" is not a number"));
  EXPECT_TRUE(contains(error_of({"--lr", "11"}), "--lr=11 is out of range: it must be between"));
  EXPECT_TRUE(contains(error_of({"--lr", "0"}), "--lr=0 is out of range"));
}

}  // namespace
