// Who hung where, from the ranks' flight records (flight.h).
#include "flight.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "report.h"

namespace ddprun {
namespace {

// ---- A reader for the recorder's own JSON: flat objects of numbers and strings
// -------------------

// The number after `"key": ` in `text` from `from` on, up to `to`.
std::optional<long long> number_field(const std::string& text, const std::string& key,
                                      std::size_t from = 0, std::size_t to = std::string::npos) {
  const std::size_t at = text.find("\"" + key + "\": ", from);
  if (at == std::string::npos || at >= to) return std::nullopt;
  const char* start = text.c_str() + at + key.size() + 4;
  char* end = nullptr;
  const long long value = std::strtoll(start, &end, 10);
  if (end == start) return std::nullopt;
  return value;
}

// The string after `"key": "`, with \" and \\ read back.
std::optional<std::string> string_field(const std::string& text, const std::string& key,
                                        std::size_t from = 0, std::size_t to = std::string::npos) {
  const std::size_t at = text.find("\"" + key + "\": \"", from);
  if (at == std::string::npos || at >= to) return std::nullopt;
  std::string out;
  for (std::size_t i = at + key.size() + 5; i < text.size(); ++i) {
    if (text[i] == '"') return out;
    if (text[i] == '\\' && i + 1 < text.size()) ++i;
    out += text[i];
  }
  return std::nullopt;  // no closing quote: a truncated file
}

// ---- The diagnosis
// -------------------------------------------------------------------------------

bool finished(const FlightCall& c) {
  return c.state == "completed";
}

// "all_reduce #4 (SUM, torch.float32, 1 elements)", as the library's errors name a call.
std::string describe(const FlightCall& c) {
  std::string details = c.reduce_op.empty() ? "" : c.reduce_op + ", ";
  if (!c.dtype.empty()) details += c.dtype + ", " + std::to_string(c.numel) + " elements";
  return c.op + " #" + std::to_string(c.seq) + (details.empty() ? "" : " (" + details + ")");
}

// The call without its number, to compare what ranks did in the same call.
std::string fingerprint(const FlightCall& c) {
  const std::string call = describe(c);
  const std::size_t hash = call.find(" #");
  const std::size_t space = call.find(' ', hash + 2);
  return call.substr(0, hash) + (space == std::string::npos ? "" : call.substr(space));
}

// "rank 2", "ranks 0, 1, 3".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// Where one rank was in one group when it wrote its record.
struct Position {
  std::optional<FlightCall> in;        // the call it had not finished
  std::optional<FlightCall> finished;  // the last call it had finished before that
};

Position position_of(const std::vector<FlightCall>& calls) {
  Position p;
  for (const FlightCall& c : calls) {
    if (finished(c)) {
      p.finished = c;
      p.in.reset();
    } else {
      p.in = c;
    }
  }
  return p;
}

// The lines for one group's ranks.
void diagnose_group(const std::map<int, std::vector<FlightCall>>& calls_by_rank,
                    const std::string& prefix, std::vector<std::string>& lines) {
  // Ranks in the same place, told apart by a key that says where.
  std::map<std::string, std::vector<int>> same_place;
  std::map<std::string, Position> place;
  for (const auto& [rank, calls] : calls_by_rank) {
    const Position p = position_of(calls);
    const std::string key = (p.in ? "in " + describe(*p.in) : "idle") + " after " +
                            (p.finished ? std::to_string(p.finished->seq) : "none");
    same_place[key].push_back(rank);
    place[key] = p;
  }
  // The biggest crowd first (ties: the one with the lowest rank): the others are the odd ones out.
  std::vector<std::string> keys;
  for (const auto& [key, ranks] : same_place) keys.push_back(key);
  std::sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    const auto &ra = same_place[a], &rb = same_place[b];
    return ra.size() != rb.size() ? ra.size() > rb.size() : ra.front() < rb.front();
  });
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::vector<int>& ranks = same_place[keys[i]];
    const Position& p = place[keys[i]];
    const bool one = ranks.size() == 1;
    const std::string who = prefix + rank_list(ranks);
    const std::string last =
        p.finished ? "last finished #" + std::to_string(p.finished->seq) : "finished no collective";
    if (i == 0 && p.in) {
      lines.push_back(who + (one ? " waits in " : " wait in ") + describe(*p.in));
    } else if (p.in) {
      lines.push_back(who + " " + last + " and " + (one ? "is" : "are") + " in " + describe(*p.in));
    } else {
      lines.push_back(who + " " + last + " and " + (one ? "is" : "are") +
                      " in no collective (in the program's own code, or in a send/recv)");
    }
  }
  // Ranks inside the same call number, but not the same call: the mistake itself.
  std::map<std::uint64_t, std::map<std::string, std::vector<int>>> by_seq;
  for (const auto& [key, ranks] : same_place) {
    const Position& p = place[key];
    if (!p.in) continue;
    auto& calls = by_seq[p.in->seq][fingerprint(*p.in)];
    calls.insert(calls.end(), ranks.begin(), ranks.end());
  }
  for (auto& [seq, calls] : by_seq) {
    if (calls.size() < 2) continue;
    std::vector<std::pair<std::vector<int>, std::string>> sorted;
    for (auto& [call, ranks] : calls) {
      std::sort(ranks.begin(), ranks.end());
      sorted.emplace_back(ranks, call);
    }
    std::sort(sorted.begin(), sorted.end());
    std::string line = prefix + "call #" + std::to_string(seq) + " differs across ranks: ";
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      line += (i ? "; " : "") + rank_list(sorted[i].first) + " " + sorted[i].second;
    }
    lines.push_back(line);
  }
}

}  // namespace

std::optional<FlightRecord> parse_flight_record(const std::string& text, std::string* error) {
  const auto fail = [&](const std::string& why) -> std::optional<FlightRecord> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  if (string_field(text, "format").value_or("") != "dist flight recorder") {
    return fail(
        "not a flight record of the dist library (no \"format\": \"dist flight recorder\")");
  }
  if (text.find("]}") == std::string::npos) return fail("the file ends early");
  FlightRecord record;
  const std::size_t entries = text.find("\"entries\": [");
  record.rank = static_cast<int>(number_field(text, "rank", 0, entries).value_or(-1));
  record.world_size = static_cast<int>(number_field(text, "world_size", 0, entries).value_or(0));
  record.reason = string_field(text, "reason", 0, entries).value_or("");
  if (entries == std::string::npos || record.rank < 0) return fail("no rank or no entries");
  for (std::size_t at = text.find("{\"record\": ", entries); at != std::string::npos;
       at = text.find("{\"record\": ", at + 1)) {
    const std::size_t end = text.find('}', at);
    const auto seq = number_field(text, "seq", at, end);
    const auto op = string_field(text, "op", at, end);
    const auto state = string_field(text, "state", at, end);
    if (!seq || !op || !state) return fail("an entry without seq, op or state");
    record.calls.push_back({static_cast<int>(number_field(text, "group", at, end).value_or(0)),
                            static_cast<std::uint64_t>(*seq), *op,
                            string_field(text, "reduce_op", at, end).value_or(""),
                            string_field(text, "dtype", at, end).value_or(""), *state,
                            number_field(text, "numel", at, end).value_or(0)});
  }
  return record;
}

namespace {

// Why a rank wrote no record, from how it ended (a waitpid() status; none: ddprun did not see it
// end). A rank writes one when a collective of its own fails or times out, at SIGTERM, SIGUSR1
// and at a crash signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE), once it has made its process group.
// `others_wait`: another rank's record ends in a call that did not finish.
std::string why_no_record(std::optional<int> status, bool others_wait) {
  if (!status) {
    return "it ended on its own (an exit code), was killed with SIGKILL, or never made its "
           "process group; the summary above says how it ended";
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) {
    return std::string(
               "it exited with code 0: it finished its program, and a rank that ends "
               "normally writes none") +
           (others_wait ? "; the calls the others wait in are ones it never made (a collective "
                          "called on some ranks only?)"
                        : "");
  }
  if (WIFEXITED(*status)) {
    return "it exited with code " + std::to_string(WEXITSTATUS(*status)) +
           " on an error of its own before any collective of its own failed (or before it made "
           "its process group): its error line says why";
  }
  const int signal = WTERMSIG(*status);
  if (signal == SIGKILL) return "it was killed by SIGKILL, which leaves no time to write one";
  const std::string name = "signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  if (signal == SIGTERM || signal == SIGUSR1 || signal == SIGSEGV || signal == SIGBUS ||
      signal == SIGABRT || signal == SIGFPE) {
    return "it was killed by " + name + " before it had made its process group";
  }
  return "it was killed by " + name + ", at which a rank writes nothing";
}

}  // namespace

std::vector<std::string> diagnose_flight(const std::string& dir,
                                         const std::vector<int>& expected_ranks,
                                         const RankExits& exits) {
  std::map<int, FlightRecord> records;
  std::vector<std::string> unreadable;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank_", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::string why;
    if (auto record = parse_flight_record(text.str(), &why)) {
      records[record->rank] = std::move(*record);
    } else {
      unreadable.push_back(name + " cannot be read: " + why);
    }
  }
  std::vector<std::string> lines;
  if (records.empty()) return unreadable;

  // Each group on its own; a job with one group needs no "group N:" before its lines.
  std::map<int, std::map<int, std::vector<FlightCall>>> by_group;
  for (const auto& [rank, record] : records) {
    by_group[0][rank];  // every rank that wrote a record takes part in the first group
    for (const FlightCall& c : record.calls) by_group[c.group][rank].push_back(c);
  }
  for (const auto& [group, calls_by_rank] : by_group) {
    const std::string prefix = by_group.size() > 1 ? "group " + std::to_string(group) + ": " : "";
    diagnose_group(calls_by_rank, prefix, lines);
  }
  bool others_wait = false;
  for (const auto& [rank, record] : records) {
    if (!record.calls.empty() && !finished(record.calls.back())) others_wait = true;
  }
  // The ranks without a record, grouped by why (in the order of their first rank).
  std::vector<std::pair<std::string, std::vector<int>>> silent;
  for (int rank : expected_ranks) {
    if (records.count(rank) != 0) continue;
    const auto found = exits.find(rank);
    const std::string why = why_no_record(
        found == exits.end() ? std::nullopt : std::optional<int>(found->second), others_wait);
    auto same = std::find_if(silent.begin(), silent.end(),
                             [&](const auto& entry) { return entry.first == why; });
    if (same == silent.end()) {
      silent.push_back({why, {rank}});
    } else {
      same->second.push_back(rank);
    }
  }
  for (const auto& [why, ranks] : silent) {
    lines.push_back(rank_list(ranks) + (ranks.size() == 1 ? " wrote" : " each wrote") +
                    " no record: " + why);
  }
  lines.insert(lines.end(), unreadable.begin(), unreadable.end());
  return lines;
}

FlightDir prepare_flight_dir() {
  const char* exported = std::getenv("DIST_TRACE_DIR");
  if (exported != nullptr && *exported != '\0') return {exported, false};
  // Not inside --log-dir's folders: they keep torchrun's layout (attempt_0/ holds only the
  // ranks' folders), which tools that read torchrun's logs rely on.
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ddprun_flight_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    say("cannot make a folder for the ranks' flight records, '" + pattern + "': " +
        std::strerror(errno) + "; the job runs without them (export DIST_TRACE_DIR to choose one)");
    return {};
  }
  ::setenv("DIST_TRACE_DIR", pattern.c_str(), 1);  // every rank inherits it
  return {pattern, true};
}

namespace {

bool is_record(const std::filesystem::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  return name.rfind("rank_", 0) == 0 && entry.path().extension() == ".json";
}

// The folders report_flight_attempt kept, "attempt_0", "attempt_1", ...: records of attempts that
// failed and were restarted.
bool has_kept_attempts(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().filename().string().rfind("attempt_", 0) == 0) return true;
  }
  return false;
}

}  // namespace

void report_flight_attempt(const FlightDir& dir, int attempt, const std::vector<int>& local_ranks,
                           const RankExits& exits) {
  if (dir.path.empty()) return;
  const std::vector<std::string> lines = diagnose_flight(dir.path, local_ranks, exits);
  if (lines.empty()) return;
  const std::string kept = dir.path + "/attempt_" + std::to_string(attempt);
  say("attempt " + std::to_string(attempt) + ": who was where, from the ranks' flight records (" +
      kept + "):");
  for (const std::string& line : lines) say("  " + line);
  std::error_code error;
  std::filesystem::create_directory(kept, error);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path, error)) {
    if (!is_record(entry)) continue;
    std::filesystem::rename(entry.path(), kept + "/" + entry.path().filename().string(), error);
    if (error) {
      say("could not keep " + entry.path().string() + " in " + kept + ": " + error.message() +
          "; the next attempt may write over it");
    }
  }
}

void report_flight(const FlightDir& dir, int exit_code, const std::vector<int>& local_ranks,
                   const RankExits& exits) {
  if (dir.path.empty()) return;
  const std::vector<std::string> lines =
      exit_code != 0 ? diagnose_flight(dir.path, local_ranks, exits) : std::vector<std::string>{};
  if (!lines.empty()) {
    say("who was where, from the ranks' flight records in " + dir.path + ":");
    for (const std::string& line : lines) say("  " + line);
    return;
  }
  if (has_kept_attempts(dir.path)) {
    say("the flight records of the attempts that failed are kept in " + dir.path + "/attempt_K/");
    return;
  }
  std::error_code ignored;
  if (dir.temporary) std::filesystem::remove_all(dir.path, ignored);
}

}  // namespace ddprun
