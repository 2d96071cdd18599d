// sidecar/consumer/watermark.cc: see watermark.h.
#include "consumer/watermark.h"

namespace dblog::consumer {

std::string Watermark::Prefix(const std::string& consumer) {
  return std::string(kWatermarkPrefix) + "/" + consumer;
}

std::string Watermark::Content() const {
  return (kind == Kind::kLow ? "lo:" : "hi:") + window_id;
}

std::optional<Watermark> Watermark::Parse(std::string_view content) {
  if (content.size() <= 3) return std::nullopt;
  Watermark w;
  if (content.substr(0, 3) == "lo:")
    w.kind = Kind::kLow;
  else if (content.substr(0, 3) == "hi:")
    w.kind = Kind::kHigh;
  else
    return std::nullopt;
  w.window_id = std::string(content.substr(3));
  return w;
}

const char* MarkerKindName(MarkerKind kind) {
  switch (kind) {
    case MarkerKind::kOurs: return "ours";
    case MarkerKind::kOtherConsumer: return "other_consumer";
    case MarkerKind::kNoConsumer: return "no_consumer";
    case MarkerKind::kAbandonedWindow: return "abandoned_window";
    case MarkerKind::kUnknownWindow: return "unknown_window";
  }
  return "unknown_window";
}

MarkerKind Classify(std::string_view prefix, bool transactional, std::string_view content,
                    const MarkerContext& context) {
  if (prefix != Watermark::Prefix(context.consumer)) {
    const std::string any_consumer = std::string(kWatermarkPrefix) + "/";
    return prefix.substr(0, any_consumer.size()) == any_consumer ? MarkerKind::kOtherConsumer
                                                                 : MarkerKind::kNoConsumer;
  }
  const std::optional<Watermark> marker = Watermark::Parse(content);
  if (marker && transactional && context.open_window &&
      marker->window_id == *context.open_window)
    return MarkerKind::kOurs;
  // any content: a window id is what follows the first three characters
  if (content.size() > 3 && context.abandoned &&
      context.abandoned->count(std::string(content.substr(3))))
    return MarkerKind::kAbandonedWindow;
  return MarkerKind::kUnknownWindow;
}

}  // namespace dblog::consumer
