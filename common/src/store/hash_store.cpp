// HashStore: a store in this process's memory (see dist/store.h). One map under one mutex; every
// change wakes the waiters, which check their keys again, each with its own deadline.
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <system_error>

#include "dist/check.h"
#include "dist/store.h"

namespace dist {

struct HashStore::Map {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> data;

  bool has_all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys) {
      if (data.count(k) == 0) return false;
    }
    return true;
  }
};

namespace {

// A key as messages show it: quoted, and cut short if long.
std::string quoted(const std::string& key) {
  constexpr std::size_t kShown = 80;
  return "\"" + (key.size() <= kShown ? key : key.substr(0, kShown) + "...") + "\"";
}

}  // namespace

HashStore::HashStore(Millis timeout) : Store(timeout), map_(std::make_unique<Map>()) {}

HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const std::string& value) {
  check_key(key);
  check_value(value);
  {
    std::lock_guard<std::mutex> lock(map_->mutex);
    map_->data[key] = value;
  }
  map_->changed.notify_all();
}

std::string HashStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::lock_guard<std::mutex> lock(map_->mutex);
  const auto it = map_->data.find(key);
  if (it == map_->data.end()) throw Error("key " + quoted(key) + " was deleted while being read");
  return it->second;
}

std::int64_t HashStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  std::int64_t next = 0;
  {
    std::lock_guard<std::mutex> lock(map_->mutex);
    std::int64_t current = 0;
    if (const auto it = map_->data.find(key); it != map_->data.end()) {
      const std::string& text = it->second;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || end != text.data() + text.size()) {
        throw Error("key " + quoted(key) + " in the in-memory store does not hold an integer");
      }
    }
    // Wraps around at the ends of int64, as the other stores do, instead of overflowing.
    next = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) +
                                     static_cast<std::uint64_t>(delta));
    map_->data[key] = std::to_string(next);
  }
  map_->changed.notify_all();
  return next;
}

std::string HashStore::compare_set(const std::string& key, const std::string& expected,
                                   const std::string& desired) {
  check_key(key);
  check_value(desired);
  {
    std::lock_guard<std::mutex> lock(map_->mutex);
    const auto it = map_->data.find(key);
    if (it == map_->data.end()) {
      if (!expected.empty()) return expected;
    } else if (it->second != expected) {
      return it->second;
    }
    map_->data[key] = desired;
  }
  map_->changed.notify_all();
  return desired;
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& k : keys) check_key(k);
  const auto deadline = std::chrono::steady_clock::now() + checked_timeout(timeout);
  std::unique_lock<std::mutex> lock(map_->mutex);
  if (map_->changed.wait_until(lock, deadline, [&] { return map_->has_all(keys); })) return;
  std::string missing;
  for (const auto& k : keys) {
    if (map_->data.count(k) == 0) missing += " " + quoted(k);
  }
  throw TimeoutError("the in-memory store: timed out after " + std::to_string(timeout.count()) +
                     " ms waiting for" + missing);
}

bool HashStore::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key(k);
  std::lock_guard<std::mutex> lock(map_->mutex);
  return map_->has_all(keys);
}

bool HashStore::delete_key(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(map_->mutex);
  return map_->data.erase(key) > 0;
}

std::int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(map_->mutex);
  return static_cast<std::int64_t>(map_->data.size());
}

}  // namespace dist
