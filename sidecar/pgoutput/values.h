// sidecar/pgoutput/values.h: the one converter of pgoutput mode (issue 23 item 3). A column's
// value as its type's output function prints it, under the output settings below, becomes the
// dblog.v1.Value the extension's encoder (plugin/encoder.c) makes of the same datum.
//
// Why text, and why one converter: in pgoutput mode there is no encoder of ours in the server.
// The log path gets values from pgoutput (`binary 'false'`: each column's output function, run
// by the walsender) and the copy path from an ordinary query (each column's output function,
// run by dblogd's session). Both connections pin the same kOutputSettings, so both paths hold
// the same text for the same datum, and both hand it to FromText: representation agreement
// (the paper's O5) holds by construction, not by keeping two decoders in step. pgoutput's
// `binary 'true'` would need a decoder of every type's send format that also reprints the
// literal kinds exactly as their output functions do (numeric, interval, arrays, composites,
// ranges, geometry...): a second implementation of PostgreSQL's output functions, which is
// exactly what O5 says not to write. docs/pgoutput.md says what text costs (nothing a consumer
// sees but one thing: every NaN arrives as the one quiet NaN, see FromText).
//
// Owns: the kind of a column from its base type (the extension's column_kind_for), the text of
// each kind to its Value, and the settings under which that text is the extension's.
// Must not: do I/O or read the catalog (the caller resolves a domain to its base type).
// Every byte is untrusted: text that is not what the output function prints is a ValueError,
// never a wrong Value. Tested in tests/cpp/pgoutput/ (values_test against hand-written text,
// pgoutput_values_test against the servers 15-18 and the extension's encoder) and fuzzed in
// tests/fuzz/pgoutput_values_fuzz.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"

namespace dblog::pgoutput {

// Text that its kind's output function never prints. what() names the kind and the text.
class ValueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// plugin/encoder.c's ColumnKind, one for one.
enum class ValueKind {
  kBool,
  kInt2,
  kInt4,
  kInt8,
  kOid,
  kFloat4,
  kFloat8,
  kText,  // text, varchar, bpchar (with its padding)
  kName,
  kBytea,
  kUuid,
  kDate,
  kTimestamp,
  kTimestamptz,
  kLiteral,  // every other type: its output text, as is
};

const char* ValueKindName(ValueKind kind);

// The kind of a column whose type is, or is a domain over, base_type_oid.
ValueKind KindOfBaseType(std::uint32_t base_type_oid);

// The settings the extension's encoder prints literals under (output_settings_enter), as
// `name=value` pairs for a connection's `options` (`-c name=value`) or SET. Both the
// replication connection and the copy session of pgoutput mode pin all of them, so that the
// server prints every value as FromText expects. client_encoding UTF8: Values carry UTF-8.
struct OutputSetting {
  const char* name;
  const char* value;
};
inline constexpr OutputSetting kOutputSettings[] = {
    {"DateStyle", "ISO,YMD"},    {"IntervalStyle", "postgres"}, {"extra_float_digits", "3"},
    {"bytea_output", "hex"},     {"TimeZone", "UTC"},           {"client_encoding", "UTF8"},
};

// libpq's `options` value pinning kOutputSettings ("-c DateStyle=ISO,YMD -c ..."): no value
// holds a space, a quote or a backslash, so it goes into a conninfo's '...' as it is.
std::string OutputSettingsOptions();
// The same settings as SET LOCAL statements, for a transaction whose results are read as
// these values (the copy and repair paths of pgoutput mode).
std::string SetLocalOutputSettings();

// Sets *out to the Value of `text`, the output of a column of `kind` under kOutputSettings.
// Infinite dates and timestamps, and timestamps past INT64_MAX microseconds after 1970, become
// literals, as the encoder makes them. A NaN is std::numeric_limits<>::quiet_NaN(): the text
// "NaN" does not say which of the NaNs the datum held, where the extension copies its bits.
void FromText(ValueKind kind, std::string_view text, dblog::v1::Value* out);

// One row of text cells (nullopt: SQL NULL), cell i printed by the output function of a column
// of kinds[i], appended to *row as the encoder's Values: what the copy path of this mode reads
// (a query's text results, or COPY TO's text format through CopyTextParser). Throws ValueError
// naming the column's position when a cell is not its kind's text or the counts differ.
void RowFromText(const std::vector<ValueKind>& kinds,
                 const std::vector<std::optional<std::string>>& cells, dblog::v1::Row* row);

}  // namespace dblog::pgoutput
