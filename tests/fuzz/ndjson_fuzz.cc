// tests/fuzz/ndjson_fuzz.cc: NDJSON rendering (client::RenderEvent) of arbitrary StreamEvents:
// the input is an EventBatch (protobuf bytes, as a server might send), rendered event by event
// with the Relations seen so far, as `dblog tail` does, with and without --relations.
// Properties: each rendered event is one line of valid JSON in valid UTF-8 (json_check.h),
// starting with "position"; a value renders as valid JSON too.
#include <cstdint>
#include <string>

#include "client/ndjson.h"
#include "client/relation_cache.h"
#include "fuzz_util.h"
#include "json_check.h"

using dblog::fuzz::Check;
using dblog::fuzz::JsonCheck;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dblog::v1::EventBatch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
  dblog::client::RelationCache relations;
  for (const dblog::v1::StreamEvent& event : batch.events()) {
    relations.Observe(event);
    for (bool show_relations : {false, true}) {
      dblog::client::RenderOptions options;
      options.relations = show_relations;
      std::string line;
      if (!dblog::client::RenderEvent(event, relations, options, &line)) {
        Check(line.empty(), "nothing appended for an event not printed");
        continue;
      }
      Check(!line.empty() && line.back() == '\n', "a line ends with a newline");
      line.pop_back();
      Check(line.find('\n') == std::string::npos, "one line per event");
      Check(line.rfind("{\"position\":", 0) == 0, "a line starts with position");
      Check(JsonCheck::Valid(line), "a line is valid JSON");
    }
  }
  for (const auto& event : batch.events()) {
    if (!event.has_change()) continue;
    for (const auto& value : event.change().new_row().values())
      Check(JsonCheck::Valid(dblog::client::ValueToJson(value)), "a value is valid JSON");
  }
  return 0;
}
