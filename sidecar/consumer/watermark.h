// sidecar/consumer/watermark.h: the markers that delimit a repair window in the log. A window's
// low and high watermarks are transactional logical messages with prefix
// "dblog.watermark/<consumer>" and content "lo:<window id>" or "hi:<window id>".
// pg_logical_emit_message is open to every role and the WAL is shared by every consumer, so a
// pipeline meets markers that are not its own: Classify says which are (and why the others are
// not). Owns: the marker's format, parsing and classification. Pure: no I/O.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace dblog::consumer {

// The prefix every watermark starts with (the plugin forwards messages with it).
inline constexpr const char* kWatermarkPrefix = "dblog.watermark";

struct Watermark {
  enum class Kind { kLow, kHigh };
  Kind kind = Kind::kLow;
  std::string window_id;

  // "dblog.watermark/<consumer>": the prefix of one consumer's markers.
  static std::string Prefix(const std::string& consumer);
  // "lo:<id>" or "hi:<id>".
  std::string Content() const;
  // The marker a content names; nullopt unless it is "lo:" or "hi:" and a non-empty id.
  static std::optional<Watermark> Parse(std::string_view content);
};

// What a message whose prefix starts with kWatermarkPrefix is to one consumer's pipeline.
enum class MarkerKind {
  kOurs,             // the open window's own low or high watermark
  kOtherConsumer,    // "dblog.watermark/<another consumer>"
  kNoConsumer,       // the prefix names no consumer (someone wrote it by hand)
  kAbandonedWindow,  // ours, of a window this pipeline gave up (its markers may be replayed)
  kUnknownWindow,    // our prefix, but no window of ours (forged, or not transactional)
};
const char* MarkerKindName(MarkerKind kind);  // for logs: "other_consumer", ...

struct MarkerContext {
  std::string consumer;
  std::optional<std::string> open_window;  // the window this pipeline has open, if any
  const std::set<std::string>* abandoned = nullptr;
};

// `prefix` must start with kWatermarkPrefix. Only a transactional message can be ours (a
// window's markers are written inside its transaction's order).
MarkerKind Classify(std::string_view prefix, bool transactional, std::string_view content,
                    const MarkerContext& context);

}  // namespace dblog::consumer
