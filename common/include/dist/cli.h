// dist/cli.h — the command line every chapter shares, and its own flags.
//
//   dist::Cli cli("ch04_all_reduce", "All-reduce a tensor with every reduce op.");
//   int size = 2;
//   cli.add_int("--size", &size, "elements per tensor", 1, 1 << 20);
//   if (!cli.parse(argc, argv)) return dist::kExitOk;   // --help was printed
//   dist::init_process_group(cli.init_options());
//
// Every chapter accepts the same four flags (DESIGN.md), so a reader learns them once:
//   --backend gloo|nccl|auto   which library moves the data (default gloo: runs anywhere)
//   --init-method URL          env:// (default), tcp://HOST:PORT or file:///PATH
//   --timeout SECONDS          the deadline for every wait (default 60)
//   --help
// A flag that is unknown, misspelt, missing its value or out of range is a ConfigError (exit 2)
// that names the flag and says what it accepts.
//
// Taught in: chapter 01 (and used by every chapter after it).
// Built in: common/src/init/cli.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dist/init.h"

namespace dist {

class Cli {
 public:
  Cli(std::string program, std::string summary);

  // Chapter flags. Each writes into `target` (whose current value is the default shown by
  // --help) when the flag is given.
  void add_int(const std::string& name, int* target, const std::string& help, long long min,
               long long max);
  // A real number in [min, max], e.g. a learning rate; written as C++'s strtod reads it (0.01,
  // 1e-3). Not a number, trailing characters, inf and nan are ConfigErrors naming the flag.
  void add_double(const std::string& name, double* target, const std::string& help, double min,
                  double max);
  void add_string(const std::string& name, std::string* target, const std::string& help);
  // A switch: "--name" sets *target to true. With `negation` ("--no-shuffle"), that spelling
  // sets it to false.
  void add_flag(const std::string& name, bool* target, const std::string& help,
                const std::string& negation = "");
  // Words after the flags, e.g. a case name; `help` names them in the usage line.
  void allow_positional(std::vector<std::string>* target, const std::string& help);

  // Replaces the usage line "Run it under a launcher, e.g. ddprun ..." for programs that are
  // started another way (chapter 03's, one per terminal).
  void set_run_hint(std::string hint) { run_hint_ = std::move(hint); }

  // Parses argv. Returns false after printing --help (the program should exit 0); throws
  // dist::ConfigError on bad input.
  bool parse(int argc, char** argv);

  // What --backend, --init-method and --timeout asked for.
  InitOptions init_options() const;
  std::string usage() const;

 private:
  struct Flag {
    std::string name, negation, help, shown_default;
    bool takes_value = true;
    std::function<void(const std::string&)> set;
  };
  void add(Flag flag);

  std::string program_, summary_, run_hint_;
  std::vector<Flag> flags_;
  std::string backend_ = "gloo";
  std::string init_method_;
  int timeout_seconds_ = static_cast<int>(kDefaultTimeout.count());
  std::vector<std::string>* positional_ = nullptr;
  std::string positional_help_;
};

}  // namespace dist
