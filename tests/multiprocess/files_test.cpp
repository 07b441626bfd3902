// dist::write_file_atomically (dist/files.h) against a process killed at any moment.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "dist/files.h"

namespace {

using namespace std::chrono_literals;

TEST(WriteFileAtomically, AProcessKilledAtAnyMomentLeavesTheOldFileOrTheNewNeverAPart) {
  // A child rewrites one 16 MiB file over and over, each version a header (its number) and a
  // payload of one repeated byte; it is killed (SIGKILL) at a moment drawn at random, 12 times.
  // After every kill the file is absent (no write finished yet) or one whole version.
  const std::string path = "/tmp/dist_atomic_kill_" + std::to_string(::getpid());
  constexpr std::size_t kBytes = 16u << 20;
  const auto whole = [&](std::string* why) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return true;  // absent: killed before the first rename
    std::string data(static_cast<std::size_t>(in.tellg()), '\0');
    in.seekg(0);
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    if (data.size() != 16 + kBytes) {
      *why = std::to_string(data.size()) + " bytes";
      return false;
    }
    const int version = std::stoi(data.substr(0, 16));
    const char fill = static_cast<char>(version % 251);
    if (data.find_first_not_of(fill, 16) != std::string::npos) {
      *why = "version " + std::to_string(version) + " has another version's bytes";
      return false;
    }
    return true;
  };
  std::mt19937 random(20261123);
  int versions_seen = 0;
  for (int kill = 0; kill < 12; ++kill) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int version = 1 + kill * 1000;; ++version) {
        std::string data(16, ' ');
        const std::string number = std::to_string(version);
        data.replace(0, number.size(), number);
        data.append(kBytes, static_cast<char>(version % 251));
        dist::write_file_atomically(path, data);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 400));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    std::string why;
    EXPECT_TRUE(whole(&why)) << "after kill " << kill << ": " << why;
    versions_seen += std::ifstream(path).good();
  }
  EXPECT_GT(versions_seen, 0) << "no write ever finished: the kills came too early to test";
  std::filesystem::remove(path);
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().string().starts_with(path + ".tmp-")) std::filesystem::remove(entry.path());
  }
}

}  // namespace
