// tests/fuzz/pgoutput_decoder_fuzz.cc: pgoutput::Decoder (sidecar/pgoutput/) on arbitrary
// payload sequences. Input: one byte of options (proto_version 1-4, streaming 'parallel'),
// then messages, each as a 2-byte big-endian length and that many bytes.
// Properties: a refused message leaves the decoder's state (in a transaction, in a streamed
// block) as it was; every value and message content it hands out lies inside its payload; two
// decoders fed the same sequence agree on every message and every error.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fuzz_util.h"
#include "pgoutput/decoder.h"

using dblog::fuzz::Check;
namespace po = dblog::pgoutput;

namespace {

bool Inside(std::string_view part, std::string_view whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

void CheckTuple(const po::Tuple& tuple, std::string_view payload) {
  for (const po::Datum& d : tuple) {
    Check(Inside(d.bytes, payload), "a value outside its payload");
    bool has_bytes = d.kind == po::Datum::Kind::kText || d.kind == po::Datum::Kind::kBinary;
    Check(has_bytes || d.bytes.empty(), "bytes on a null or unchanged value");
  }
}

std::string Outcome(po::Decoder& decoder, std::string_view payload) {
  const bool in_txn = decoder.in_transaction(), in_stream = decoder.in_stream();
  try {
    po::LogicalMessage m = decoder.Decode(payload);
    if (auto* i = std::get_if<po::Insert>(&m)) CheckTuple(i->new_tuple, payload);
    if (auto* u = std::get_if<po::Update>(&m)) {
      CheckTuple(u->new_tuple, payload);
      if (u->old_tuple) CheckTuple(*u->old_tuple, payload);
      Check(u->old_tuple.has_value() == (u->old_kind != 0), "old kind without old tuple");
    }
    if (auto* d = std::get_if<po::Delete>(&m)) CheckTuple(d->old_tuple, payload);
    if (auto* msg = std::get_if<po::Message>(&m)) {
      Check(Inside(msg->content, payload), "message content outside its payload");
    }
    if (auto* r = std::get_if<po::Relation>(&m)) {
      Check(decoder.FindRelation(r->oid) != nullptr, "a decoded Relation not remembered");
    }
    return po::MessageName(m);
  } catch (const po::DecodeError& e) {
    Check(decoder.in_transaction() == in_txn && decoder.in_stream() == in_stream,
          "a refused message changed the decoder's state");
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const int proto = 1 + data[0] % 4;
  const bool parallel = proto == 4 && (data[0] & 0x80);
  po::Decoder a({proto, parallel}), b({proto, parallel});
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (rest.size() >= 2) {
    std::size_t n = (static_cast<std::uint8_t>(rest[0]) << 8) | static_cast<std::uint8_t>(rest[1]);
    rest.remove_prefix(2);
    if (n > rest.size()) n = rest.size();
    // A copy of its own, so that ASan sees any read past the message's end.
    std::string payload(rest.substr(0, n));
    rest.remove_prefix(n);
    std::string other = payload;
    Check(Outcome(a, payload) == Outcome(b, other), "two decoders disagree");
  }
  return 0;
}
