// tests/cpp/publish/layout_events.h: stream events the layout tests feed a Layout without
// dblogd (layout_test.cc, kafka_layout_test.cc, batch_test.cc, debezium_test.cc).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {

// A table's Relation: its columns by name, the first one its key.
inline dblog::v1::StreamEvent RelationEvent(std::uint32_t oid, const std::string& schema,
                                            const std::string& name,
                                            std::initializer_list<const char*> columns = {"id"}) {
  dblog::v1::StreamEvent e;
  auto* r = e.mutable_relation();
  r->set_oid(oid);
  r->set_schema(schema);
  r->set_name(name);
  for (const char* column : columns) r->add_columns()->set_name(column);
  r->add_key_columns(0);
  return e;
}

}  // namespace dblog::publish
