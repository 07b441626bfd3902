// The shared command line of the chapters (dist/cli.h).
#include "dist/cli.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "dist/check.h"
#include "dist/env.h"
#include "dist/log.h"

namespace dist {

Cli::Cli(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  add_string("--backend", &backend_,
             "gloo (CPU, any machine), nccl (one GPU per rank) or auto (nccl when every rank has "
             "a GPU of its own, else gloo)");
  add_string("--init-method", &init_method_,
             "how ranks meet: env:// (MASTER_ADDR/MASTER_PORT, the default), tcp://HOST:PORT or "
             "file:///PATH");
  flags_.back().shown_default = "env://";
  add_int("--timeout", &timeout_seconds_, "seconds every wait may take before it fails", 1,
          7 * 24 * 3600);
}

void Cli::add(Flag flag) {
  flags_.push_back(std::move(flag));
}

void Cli::add_int(const std::string& name, int* target, const std::string& help, long long min,
                  long long max) {
  add({name, "", help, std::to_string(*target), true,
       [=](const std::string& value) { *target = parse_int(name, value, min, max); }});
}

void Cli::add_double(const std::string& name, double* target, const std::string& help, double min,
                     double max) {
  std::ostringstream shown;
  shown << *target;
  add({name, "", help, shown.str(), true, [=](const std::string& value) {
         char* end = nullptr;
         errno = 0;
         const double parsed = value.empty() ? 0 : std::strtod(value.c_str(), &end);
         if (value.empty() || end != value.c_str() + value.size() || errno == ERANGE ||
             !std::isfinite(parsed)) {
           throw ConfigError(name + "=\"" + value +
                             "\" is not a number: write it like 0.01 or 1e-3");
         }
         if (parsed < min || parsed > max) {
           std::ostringstream range;
           range << min << " and " << max;
           throw ConfigError(name + "=" + value + " is out of range: it must be between " +
                             range.str());
         }
         *target = parsed;
       }});
}

void Cli::add_string(const std::string& name, std::string* target, const std::string& help) {
  add({name, "", help, *target, true, [=](const std::string& value) { *target = value; }});
}

void Cli::add_flag(const std::string& name, bool* target, const std::string& help,
                   const std::string& negation) {
  const std::string shown = *target ? name : (negation.empty() ? "off" : negation);
  add({name, negation, help, shown, false,
       [=](const std::string& value) { *target = value == name; }});
}

void Cli::allow_positional(std::vector<std::string>* target, const std::string& help) {
  positional_ = target;
  positional_help_ = help;
}

std::string Cli::usage() const {
  std::string text =
      "usage: " + program_ + " [flags]" + (positional_ != nullptr ? " " + positional_help_ : "") +
      "\n" + summary_ + "\n" +
      (run_hint_.empty()
           ? "Run it under a launcher, e.g. ddprun --standalone --nproc-per-node 2 " + program_
           : run_hint_) +
      "\n\nflags:\n";
  for (const Flag& f : flags_) {
    std::string spelling = f.name + (f.takes_value ? " VALUE" : "");
    if (!f.negation.empty()) spelling += " | " + f.negation;
    text += "  " + spelling + "\n      " + f.help;
    text += f.takes_value
                ? " (default: " + (f.shown_default.empty() ? "none" : f.shown_default) + ")"
                : " (default: " + f.shown_default + ")";
    text += "\n";
  }
  return text + "  --help\n      print this and exit\n";
}

bool Cli::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      write_stdout(usage());
      return false;
    }
    std::string value;
    bool has_value = false;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      has_value = true;
    }
    const auto it = std::find_if(flags_.begin(), flags_.end(), [&](const Flag& f) {
      return f.name == arg || (!f.negation.empty() && f.negation == arg);
    });
    if (it == flags_.end()) {
      if (positional_ != nullptr && arg.rfind("--", 0) != 0) {
        positional_->push_back(arg);
        continue;
      }
      throw ConfigError("unknown argument \"" + arg + "\" for " + program_ +
                        ": see --help for the flags it accepts");
    }
    if (!it->takes_value) {
      if (has_value) throw ConfigError(arg + " takes no value: write just " + arg);
      it->set(arg);
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw ConfigError(arg + " needs a value: " + it->help);
      value = argv[++i];
    }
    it->set(value);
  }
  if (backend_ != "gloo" && backend_ != "nccl" && backend_ != "auto") {
    throw ConfigError("--backend " + backend_ + " is not a backend: use gloo, nccl or auto");
  }
  return true;
}

InitOptions Cli::init_options() const {
  InitOptions o;
  o.backend = backend_;
  o.init_method = init_method_;
  o.timeout = std::chrono::seconds(timeout_seconds_);
  return o;
}

}  // namespace dist
