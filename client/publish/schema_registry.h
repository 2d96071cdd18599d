// client/publish/schema_registry.h: the Confluent Schema Registry client of `dblog publish
// --format debezium-avro` (`--schema-registry http://HOST:PORT`): registers a schema under a
// subject with POST /subjects/<subject>/versions {"schema": "..."} and reads the id of the
// answer {"id": N}, as Confluent's serializers do with auto.register.schemas=true (the
// registry answers with the existing id when the subject already holds that schema).
// Owns: the HTTP exchange only (HTTP/1.0 over Boost.Asio, no TLS, no authentication); the ids'
// cache is avro.h's ConfluentAvroEncoder.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "client/publish/avro.h"

namespace dblog::publish {

class HttpSchemaRegistry : public SchemaRegistry {
 public:
  // url: http://HOST:PORT[/PATH] (PATH: a prefix before /subjects). Throws
  // std::invalid_argument for anything else.
  explicit HttpSchemaRegistry(const std::string& url,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::int32_t Register(const std::string& subject, const std::string& avro_schema) override;

 private:
  std::string host_, port_, path_;
  std::chrono::milliseconds timeout_;
};

// The registry URL's parts, for the command line's check: throws std::invalid_argument.
void ParseRegistryUrl(const std::string& url, std::string& host, std::string& port,
                      std::string& path);

}  // namespace dblog::publish
