// dist/trace.h: Timeline, a Chrome trace of one rank's threads (chapter 09).
#include "dist/trace.h"

#include <functional>
#include <thread>
#include <utility>

#include "dist/files.h"

namespace dist {
namespace {

// JSON string contents: quotes, backslashes and control characters escaped.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Timeline::Timeline(int rank) : rank_(rank), origin_(std::chrono::steady_clock::now()) {}

int Timeline::thread_id() {
  const std::size_t me = std::hash<std::thread::id>{}(std::this_thread::get_id());
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    if (!threads_[i].lane && threads_[i].id == me) return static_cast<int>(i);
  }
  threads_.push_back({me, false, "thread " + std::to_string(threads_.size())});
  return static_cast<int>(threads_.size() - 1);
}

int Timeline::lane_id(const std::string& lane) {
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    if (threads_[i].lane && threads_[i].name == lane) return static_cast<int>(i);
  }
  threads_.push_back({0, true, lane});
  return static_cast<int>(threads_.size() - 1);
}

void Timeline::name_this_thread(const std::string& name) {
  std::lock_guard lock(mu_);
  threads_[static_cast<std::size_t>(thread_id())].name = name;
}

void Timeline::record(std::string name, std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point end, int tid) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  events_.push_back({std::move(name), duration_cast<microseconds>(start - origin_).count(),
                     duration_cast<microseconds>(end - start).count(), tid});
}

void Timeline::add(std::string name, std::chrono::steady_clock::time_point start,
                   std::chrono::steady_clock::time_point end, const std::string& lane) {
  std::lock_guard lock(mu_);
  record(std::move(name), start, end, lane_id(lane));
}

Timeline::Span::Span(Timeline* timeline, std::string name)
    : timeline_(timeline), name_(std::move(name)), start_(std::chrono::steady_clock::now()) {}

Timeline::Span::~Span() {
  if (timeline_ == nullptr) return;
  const auto end = std::chrono::steady_clock::now();
  std::lock_guard lock(timeline_->mu_);
  timeline_->record(std::move(name_), start_, end, timeline_->thread_id());
}

std::string Timeline::json() const {
  std::lock_guard lock(mu_);
  const std::string pid = std::to_string(rank_);
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  out += "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + pid +
         ", \"args\": {\"name\": \"rank " + pid + "\"}}";
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    out += ",\n  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid +
           ", \"tid\": " + std::to_string(i) + ", \"args\": {\"name\": \"" +
           escaped(threads_[i].name) + "\"}}";
  }
  for (const Event& e : events_) {
    out += ",\n  {\"ph\": \"X\", \"name\": \"" + escaped(e.name) + "\", \"pid\": " + pid +
           ", \"tid\": " + std::to_string(e.tid) + ", \"ts\": " + std::to_string(e.start_us) +
           ", \"dur\": " + std::to_string(e.duration_us) + "}";
  }
  return out + "\n]}\n";
}

void Timeline::write(const std::string& path) const {
  write_file_atomically(path, json());
}

std::size_t Timeline::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

}  // namespace dist
