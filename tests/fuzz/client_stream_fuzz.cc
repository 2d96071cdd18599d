// tests/fuzz/client_stream_fuzz.cc: what the client does with a server's bytes, without a
// socket (client::StreamReader, as Client::Connect and Client::Next use it): the first frame is
// the answer to Hello, then frames -> items with the client's checks; each event is rendered as
// `dblog tail` renders it (NDJSON, RelationCache) and each Progress as its progress line.
// The first input byte picks the resume position and how the rest is cut into reads.
// Properties: every failure is a ClientError; positions handed out strictly increase; the same
// items however the bytes are cut; rendered lines are valid JSON; the progress line and the
// error line as `dblog tail` shows them are one line without control characters. Read with
// NextView (Changes in place, wire/change_view.h), the same items and the same outcome as with
// NextItem, each view's values what the parsed Change holds.
#include <algorithm>
#include <cstdint>
#include <cstring>
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
template <typename T>
std::string Bits(T v) {
  std::string b(sizeof v, '\0');
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

// The event a NextView item stands for: parsed, or the Change read in place (its values checked
// against the message the same bytes parse to).
const dblog::v1::StreamEvent& EventOf(const dblog::client::EventView& view,
                                      dblog::v1::StreamEvent& scratch) {
  if (view.event != nullptr) return *view.event;
  Check(view.change->ParseInto(scratch.mutable_change()), "a Change read in place parses");
  const dblog::v1::Change& c = scratch.change();
  Check(view.change->commit_lsn == c.commit_lsn() && view.change->seq == c.seq() &&
            view.change->kind == c.kind() && view.change->relation_oid == c.relation_oid(),
        "a view's fields are the parsed Change's");
  const std::pair<const dblog::wire::RowView*, const dblog::v1::Row*> rows[] = {
      {&view.change->new_row, &c.new_row()},
      {&view.change->old_key, &c.old_key()},
      {&view.change->old_row, &c.old_row()}};
  for (const auto& [rv, row] : rows) {
    Check(rv->size() == static_cast<std::size_t>(row->values_size()), "a view's row width");
    for (int k = 0; k < row->values_size(); ++k) {
      const dblog::wire::ValueView& v = (*rv)[static_cast<std::size_t>(k)];
      const dblog::v1::Value& m = row->values(k);
      Check(v.kind == m.kind_case(), "a value's member");
      switch (m.kind_case()) {
        case dblog::v1::Value::kTextValue: Check(v.text() == m.text_value(), "text"); break;
        case dblog::v1::Value::kLiteral: Check(v.text() == m.literal(), "a literal"); break;
        case dblog::v1::Value::kBytesValue: Check(v.text() == m.bytes_value(), "bytes"); break;
        case dblog::v1::Value::kUuidValue: Check(v.text() == m.uuid_value(), "a uuid"); break;
        case dblog::v1::Value::kBoolValue:
          Check(v.integer() == (m.bool_value() ? 1 : 0), "a bool");
          break;
        case dblog::v1::Value::kIntValue: Check(v.integer() == m.int_value(), "an int"); break;
        case dblog::v1::Value::kDateValue: Check(v.integer() == m.date_value(), "a date"); break;
        case dblog::v1::Value::kTimestampValue:
          Check(v.integer() == m.timestamp_value(), "a timestamp");
          break;
        case dblog::v1::Value::kTimestamptzValue:
          Check(v.integer() == m.timestamptz_value(), "a timestamptz");
          break;
        case dblog::v1::Value::kFloat4Value:
          Check(Bits(v.float4()) == Bits(m.float4_value()), "a float4, bit for bit");
          break;
        case dblog::v1::Value::kFloat8Value:
          Check(Bits(v.float8()) == Bits(m.float8_value()), "a float8, bit for bit");
          break;
        default:
          Check(v.text().empty() && v.integer() == 0, "no member to read");
          break;
      }
    }
  }
  return scratch;
}

std::string Run(const std::vector<std::string_view>& pieces,
                const std::optional<dblog::v1::Position>& resume_after, bool render,
                bool in_place = false) {
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
      dblog::client::ItemView view;
      dblog::v1::StreamEvent scratch;
      // NextView's items as NextItem's
      const auto next = [&]() -> bool {
        if (!in_place) return reader.NextItem(item);
        if (!reader.NextView(view)) return false;
        if (const auto* e = std::get_if<dblog::client::EventView>(&view))
          item = &EventOf(*e, scratch);
        else if (const auto* const* p = std::get_if<const dblog::v1::Progress*>(&view))
          item = *p;
        else
          item = std::get<const dblog::v1::Heartbeat*>(view);
        return true;
      };
      while (next()) {
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
  const std::string in_place = Run(dblog::fuzz::Pieces(bytes, control >> 1), resume, false, true);
  Check(whole == in_place, "the same items read in place");
  return 0;
}
