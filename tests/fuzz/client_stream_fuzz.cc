// tests/fuzz/client_stream_fuzz.cc: what the client does with a server's bytes, without a
// socket (client::StreamReader, as Client::Connect and Client::Next use it): the first frame is
// the answer to Hello, then frames -> items with the client's checks; each event is rendered as
// `dblog tail` renders it (NDJSON, RelationCache) and each Progress as its progress line.
// The first input byte picks the resume position and how the rest is cut into reads.
// Properties: every failure is a ClientError; positions handed out strictly increase; the same
// items however the bytes are cut; rendered lines are valid JSON; the progress line and the
// error line as `dblog tail` shows them are one line without control characters.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/cli/progress_bar.h"
#include "client/ndjson.h"
#include "client/position.h"
#include "client/relation_cache.h"
#include "client/stream_reader.h"
#include "fuzz_util.h"
#include "json_check.h"

using dblog::fuzz::Check;
using dblog::fuzz::JsonCheck;

namespace {

// Reads everything; returns a summary of what came out (one line per item, then the outcome).
std::string Run(const std::vector<std::string_view>& pieces,
                const std::optional<dblog::v1::Position>& resume_after, bool render) {
  // A small arena block: the client's 1 MiB one costs more to map than an input to parse.
  dblog::client::StreamReader reader("dblogd at fuzz:0", 16 * 1024);
  dblog::client::RelationCache relations;
  std::string summary;
  bool welcomed = false;
  std::optional<dblog::v1::Position> last;
  try {
    for (std::string_view piece : pieces) {
      reader.Feed(piece.data(), piece.size());
      if (!welcomed) {
        dblog::v1::ServerMessage answer;
        if (!reader.NextMessage(answer)) continue;
        reader.AcceptWelcome(answer, resume_after);
        welcomed = true;
        summary += "welcome\n";
      }
      dblog::client::ItemRef item;
      while (reader.NextItem(item)) {
        if (const auto* const* e = std::get_if<const dblog::v1::StreamEvent*>(&item)) {
          const dblog::v1::StreamEvent& event = **e;
          if (const auto position = dblog::client::PositionOf(event)) {
            if (last) Check(dblog::client::ComparePositions(*last, *position) < 0,
                            "positions strictly increase");
            last = *position;
          }
          relations.Observe(event);
          summary += "event " + event.SerializeAsString() + "\n";
          if (render) {
            std::string line;
            if (dblog::client::RenderEvent(event, relations, {}, &line)) {
              line.pop_back();
              Check(JsonCheck::Valid(line), "a rendered event is valid JSON");
            }
          }
        } else if (const auto* const* p = std::get_if<const dblog::v1::Progress*>(&item)) {
          summary += "progress\n";
          if (render) {
            const std::string bar = dblog::cli::RenderProgressLine(**p, 80);
            Check(std::none_of(bar.begin(), bar.end(),
                               [](char c) {
                                 return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                               }),
                  "the progress line has no control characters");
          }
        } else {
          summary += "heartbeat\n";
        }
      }
    }
    summary += reader.buffered() == 0 ? "end\n" : "cut\n";
  } catch (const dblog::client::ClientError& e) {
    summary += std::string("error ") + e.what() + "\n";
    if (render) {  // as `dblog tail` prints it
      const std::string shown = dblog::cli::PrintableText(e.what());
      Check(std::none_of(shown.begin(), shown.end(),
                         [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }),
            "the error line has no control characters");
    }
  }
  return summary;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  std::optional<dblog::v1::Position> resume;
  if (control & 1) resume = dblog::client::MakePosition(0x100, control >> 4);
  const std::string whole = Run({bytes}, resume, true);
  const std::string cut = Run(dblog::fuzz::Pieces(bytes, control >> 1), resume, false);
  Check(whole == cut, "the same items however the bytes are cut");
  return 0;
}
