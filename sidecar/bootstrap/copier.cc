// sidecar/bootstrap/copier.cc: copy workers and the binary COPY parser (see copier.h).
#include "bootstrap/copier.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

#include "common/quote.h"
#include "log/log.h"
#include "pg/connection.h"
#include "pgoutput/copy_text.h"

namespace dblog::bootstrap {
namespace {

constexpr char kSignature[] = "PGCOPY\n\377\r\n";  // + '\0': 11 bytes
constexpr std::size_t kBatchRows = 2000;
constexpr std::size_t kBatchBytes = 256 * 1024;

std::uint32_t ReadU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return std::uint32_t(u[0]) << 24 | std::uint32_t(u[1]) << 16 | std::uint32_t(u[2]) << 8 | u[3];
}

std::int16_t ReadI16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<std::int16_t>(std::uint16_t(u[0]) << 8 | u[1]);
}

}  // namespace

std::vector<Task> PlanTasks(
    const std::vector<Table>& tables,
    const std::vector<std::optional<std::pair<std::int64_t, std::int64_t>>>& bounds,
    std::int64_t rows_per_task) {
  std::vector<Task> tasks;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const auto& t = tables[i];
    const auto& b = i < bounds.size() ? bounds[i] : std::nullopt;
    const std::int64_t pieces =
        std::min<std::int64_t>(64, rows_per_task > 0 ? t.estimated_rows / rows_per_task : 1);
    if (!t.single_integer_key || !b || pieces < 2 || b->second <= b->first) {
      tasks.push_back({i, std::nullopt, std::nullopt});
      continue;
    }
    // Equal key ranges; the first and last stay open so no key can fall outside them.
    const long double span = static_cast<long double>(b->second) - b->first + 1;
    std::optional<std::int64_t> from;
    for (std::int64_t p = 1; p <= pieces; ++p) {
      std::optional<std::int64_t> to;
      if (p < pieces) to = b->first + static_cast<std::int64_t>(span * p / pieces);
      if (from && to && *to <= *from) continue;
      tasks.push_back({i, from, to});
      from = to;
    }
  }
  return tasks;
}

namespace {

// The table's storage as the snapshot knows it (pg_class read in the snapshot) against its
// storage now (pg_relation_filenode reads the syscache, which is never a snapshot's). A rewrite
// committed after the slot's snapshot (ALTER TABLE ... TYPE ... USING, ADD COLUMN with a
// volatile default, TRUNCATE) gives the table new storage whose rows carry the rewriting
// transaction's xid: COPY reads the new storage, the snapshot sees none of its rows
// (PostgreSQL's documented MVCC exception for rewrites), and the log has no change for them, so
// the table would be copied empty. A new relfilenode fails the copy instead (the bootstrap is
// redone from a new slot, whose snapshot comes after the rewrite). VACUUM FULL, CLUSTER,
// SET TABLESPACE and pg_repack keep the row versions but change the storage too, and cannot be
// told apart from a rewrite here: they redo the bootstrap as well. Call it with the table
// locked, so the storage cannot change after the check.
void RequireStorageUnchanged(pg::Connection& conn, const Table& t) {
  if (!StorageUnchangedSinceSnapshot(conn, t.oid))
    throw DefinitionChanged("the storage of " + t.qualified() +
                            " was rewritten or dropped after the slot's snapshot (a table "
                            "rewrite or TRUNCATE during the bootstrap; VACUUM FULL, CLUSTER and "
                            "SET TABLESPACE change the storage too): "
                            "its rows would be copied as the snapshot cannot see them; the "
                            "bootstrap is redone");
}

// The rows are encoded with the table's definition when its COPY runs (this transaction's
// lock on the table keeps it until the worker commits); the stream describes them with the
// definition read when the bootstrap was planned. DDL in between would make a consumer read
// them with the wrong columns: fail the bootstrap instead (it is redone from a new slot).
// `now` reads the catalog as it is now: the worker's own connection for Reader::kExtension
// (dblog.relation_info reads the syscache), a connection outside the snapshot for
// Reader::kCatalog (SQL on the catalog inside the snapshot would see the snapshot's).
void RequireDefinitionUnchanged(pg::Connection& now, const Table& t, Reader reader) {
  const dblog::v1::Relation current = reader == Reader::kCatalog
                                          ? DescribeTableFromCatalog(now, t.oid)
                                          : DescribeTable(now, t.oid);
  if (current.SerializeAsString() != t.relation.SerializeAsString())
    throw DefinitionChanged("the definition of " + t.qualified() +
                             " changed while it was copied (DDL during the bootstrap); the "
                             "bootstrap is redone");
}

}  // namespace

void RequireOnlyVerifiedLocks(pg::Connection& conn, const std::vector<std::uint32_t>& verified,
                              const std::string& name) {
  std::string oids = "{";
  for (std::uint32_t oid : verified) oids += (oids.size() > 1 ? "," : "") + std::to_string(oid);
  oids += "}";
  pg::Result r = conn.ExecParams(
      "WITH v AS (SELECT c.oid FROM pg_catalog.pg_class c"
      "            WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])"
      "           UNION SELECT c.reltoastrelid FROM pg_catalog.pg_class c"
      "            WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]))"
      "SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks l"
      " WHERE l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()"
      "   AND l.locktype OPERATOR(pg_catalog.=) 'relation'"
      "   AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d"
      "        WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())"
      "   AND l.relation OPERATOR(pg_catalog.>=) 16384"
      "   AND l.relation OPERATOR(pg_catalog.<>) ALL (SELECT v.oid FROM v)"
      "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i"
      "                    WHERE i.indexrelid OPERATOR(pg_catalog.=) l.relation"
      "                      AND i.indrelid OPERATOR(pg_catalog.=) ANY (SELECT v.oid FROM v))",
      {oids});
  if (r.u64_value(0, 0) != 0)
    throw DefinitionChanged("relation " + name +
                            " was another table while it was read (its schema renamed or "
                            "replaced meanwhile)");
}

namespace {

// BindRelation, with the plan's name for the table in the error when it is gone (a rename
// since the plan fails the definition check after the copy).
std::string BindTable(pg::Connection& conn, const Table& t) {
  try {
    return BindRelation(conn, t.oid);
  } catch (const pg::Error& e) {
    if (e.sqlstate() != "42P01") throw;
    // the oid is gone (or no longer readable): say which table of the plan it was
    throw std::runtime_error("relation \"" + t.schema + "." + t.name +
                             "\" does not exist or may not be read any more (dropped or revoked "
                             "since the bootstrap was planned)");
  }
}

// The COPY of one task: the whole table, or its rows in [from, to) of its one integer key.
std::string CopyStatement(const Table& t, const std::string& name, const Task& task) {
  std::string sql = "COPY (SELECT dblog.encode_row(t.*) FROM ONLY " + name + " t";
  if (task.from || task.to) {
    sql += " WHERE ";
    if (task.from) sql += "t." + t.key_columns[0] + " OPERATOR(pg_catalog.>=) " + std::to_string(*task.from);
    if (task.from && task.to) sql += " AND ";
    if (task.to) sql += "t." + t.key_columns[0] + " OPERATOR(pg_catalog.<) " + std::to_string(*task.to);
  }
  sql += ") TO STDOUT (FORMAT binary)";
  return sql;
}

// A table's definition as the fields a Relation carries (type names aside): schema, name,
// replica identity, each column's attnum, name, type, typmod and NOT NULL, the key's attnums.
std::string DefinitionText(const dblog::v1::Relation& r) {
  std::string out = r.schema() + '\0' + r.name() + '\0' + r.replica_identity() + '\0';
  for (const auto& c : r.columns())
    out += std::to_string(c.attnum()) + ' ' + c.name() + '\0' + std::to_string(c.type_oid()) +
           ' ' + std::to_string(c.typmod()) + (c.not_null() ? " t" : " f") + '\0';
  out += "key";
  for (std::uint32_t k : r.key_columns())
    out += ' ' + (static_cast<int>(k) < r.columns_size()
                      ? std::to_string(r.columns(static_cast<int>(k)).attnum())
                      : std::string("?"));
  return out;
}

// dblog.relation_info reads the catalog as it is now, not as the exported snapshot sees it. A
// DDL committed between the slot's consistent point and this planning would make the copied
// rows (encoded with the new definition, correctly) and the log's first transactions (decoded
// with the old one) disagree: the stream would say new, old, new, and a consumer that follows
// DDL would drop and re-add what the flip touched. Inside the snapshot, read the same fields
// from the catalog as the snapshot sees it; any difference fails the plan (the bootstrap is
// redone from a new slot, whose consistent point comes after the DDL).
void RequireSnapshotDefinitions(pg::Connection& sql, const std::vector<Table>& tables) {
  if (tables.empty()) return;
  std::string oids = "{";
  for (const auto& t : tables) oids += (oids.size() > 1 ? "," : "") + std::to_string(t.oid);
  oids += "}";
  std::map<std::uint32_t, std::string> seen;
  pg::Result rels = sql.ExecParams(
      "SELECT c.oid, n.nspname, c.relname, c.relreplident::pg_catalog.text,"
      "       (SELECT pg_catalog.array_to_string("
      "                 (i.indkey::pg_catalog.int2[])[0:i.indnkeyatts - 1], ' ')"
      "          FROM pg_catalog.pg_index i"
      "         WHERE i.indrelid = c.oid"
      "           AND CASE c.relreplident WHEN 'i' THEN i.indisreplident"
      "                                   WHEN 'n' THEN false ELSE i.indisprimary END)"
      "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
      " WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])",
      {oids});
  std::map<std::uint32_t, std::string> keys;
  for (int i = 0; i < rels.ntuples(); ++i) {
    const auto oid = static_cast<std::uint32_t>(rels.u64_value(i, 0));
    seen[oid] = std::string(rels.value(i, 1)) + '\0' + std::string(rels.value(i, 2)) + '\0' +
                std::string(rels.value(i, 3)) + '\0';
    keys[oid] = rels.is_null(i, 4) ? "" : std::string(rels.value(i, 4));
  }
  pg::Result cols = sql.ExecParams(
      "SELECT a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull"
      "  FROM pg_catalog.pg_attribute a"
      " WHERE a.attrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])"
      "   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
      " ORDER BY a.attrelid, a.attnum",
      {oids});
  for (int i = 0; i < cols.ntuples(); ++i)
    seen[static_cast<std::uint32_t>(cols.u64_value(i, 0))] +=
        std::string(cols.value(i, 1)) + ' ' + std::string(cols.value(i, 2)) + '\0' +
        std::string(cols.value(i, 3)) + ' ' + std::string(cols.value(i, 4)) +
        (cols.bool_value(i, 5) ? " t" : " f") + '\0';
  for (const auto& t : tables) {
    const std::string key = keys[t.oid];
    std::string in_snapshot = seen[t.oid] + "key" + (key.empty() ? "" : " " + key);
    if (in_snapshot != DefinitionText(t.relation))
      throw DefinitionChanged("the definition of " + t.qualified() +
                              " changed after the slot's consistent point (DDL while the "
                              "bootstrap began); the bootstrap is redone");
  }
}

}  // namespace

Plan PlanInSnapshot(pg::Connection& sql, const std::string& snapshot_name,
                    const config::Scope& scope, std::int64_t rows_per_task, Reader reader) {
  Plan plan;
  std::vector<std::optional<std::pair<std::int64_t, std::int64_t>>> bounds;
  sql.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  sql.Exec("SET TRANSACTION SNAPSHOT " + sql.QuoteLiteral(snapshot_name));
  plan.tables = EnumerateScope(sql, scope, reader);
  RequireSnapshotDefinitions(sql, plan.tables);
  for (const auto& t : plan.tables) {
    std::optional<std::pair<std::int64_t, std::int64_t>> b;
    // (Reader::kCatalog copies each table whole: its COPY runs no query, see Copier)
    if (reader == Reader::kExtension && t.single_integer_key &&
        t.estimated_rows >= 2 * rows_per_task) {
      const std::string key = "t." + t.key_columns[0];
      const std::string name = BindTable(sql, t);
      pg::Result r = sql.Exec("SELECT pg_catalog.min(" + key + "), pg_catalog.max(" + key +
                              ") FROM ONLY " + name + " t");
      if (!r.is_null(0, 0)) b = std::make_pair(r.i64_value(0, 0), r.i64_value(0, 1));
    }
    bounds.push_back(b);
  }
  sql.Exec("COMMIT");
  plan.tasks = PlanTasks(plan.tables, bounds, rows_per_task);
  return plan;
}

void CopyRowParser::Feed(std::string_view data) {
  if (input_.empty()) {  // nothing left over: parse the caller's bytes in place
    input_ = data;
    buffered_ = false;
    return;
  }
  if (buffered_) {
    buffer_.erase(0, static_cast<std::size_t>(input_.data() - buffer_.data()));
  } else {
    buffer_.assign(input_.data(), input_.size());
  }
  buffer_.append(data.data(), data.size());
  input_ = buffer_;
  buffered_ = true;
}

bool CopyRowParser::Next(std::string_view* row) {
  const char* p = input_.data();
  const std::size_t n = input_.size();
  if (!header_done_) {
    if (n < 19) return false;
    if (std::memcmp(p, kSignature, 11) != 0) throw std::runtime_error("not a binary COPY stream");
    const std::uint32_t ext = ReadU32(p + 15);
    if (n < 19 + std::size_t{ext}) return false;
    input_.remove_prefix(19 + std::size_t{ext});
    header_done_ = true;
    return Next(row);
  }
  if (finished_ || n < 2) return false;
  const std::int16_t fields = ReadI16(p);
  if (fields == -1) {
    finished_ = true;
    input_.remove_prefix(2);
    return false;
  }
  if (fields != 1) throw std::runtime_error("binary COPY row with " + std::to_string(fields) +
                                            " fields, expected 1");
  if (n < 6) return false;
  const std::uint32_t len = ReadU32(p + 2);
  if (len == 0xffffffffu) throw std::runtime_error("NULL row from dblog.encode_row");
  if (len > (1u << 30)) throw std::runtime_error("binary COPY field too large");
  if (n < 6 + std::size_t{len}) return false;
  *row = std::string_view(p + 6, len);
  input_.remove_prefix(6 + std::size_t{len});
  return true;
}

std::vector<std::string_view> Copier::Batch::Rows() const {
  std::vector<std::string_view> rows;
  rows.reserve(ends.size());
  std::uint32_t begin = 0;
  for (std::uint32_t end : ends) {
    rows.emplace_back(data.data() + begin, end - begin);
    begin = end;
  }
  return rows;
}

Copier::Copier(std::string conninfo, std::string snapshot, std::vector<Table> tables,
               std::vector<Task> tasks, int workers, std::size_t max_queue_bytes,
               std::function<void()> notify, Reader reader)
    : conninfo_(std::move(conninfo)),
      snapshot_(std::move(snapshot)),
      tables_(std::move(tables)),
      max_queue_bytes_(max_queue_bytes),
      notify_(std::move(notify)),
      workers_(std::max(1, workers)),
      reader_(reader),
      tasks_(tasks.begin(), tasks.end()),
      copied_(new std::atomic<std::uint64_t>[std::max<std::size_t>(1, tables_.size())]) {
  for (std::size_t i = 0; i < std::max<std::size_t>(1, tables_.size()); ++i) copied_[i] = 0;
}

Copier::~Copier() {
  Cancel();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Copier::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = workers_;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this, i] { Work(i); });
}

bool Copier::WaitImported() {
  std::unique_lock<std::mutex> lock(mutex_);
  imported_.wait(lock, [this] { return imported_count_ == workers_ || error_ || cancelled_; });
  return imported_count_ == workers_ && !error_;
}

std::optional<Copier::Batch> Copier::Pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return std::nullopt;
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= b.footprint();
  space_.notify_all();
  return b;
}

bool Copier::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ == 0 && queue_.empty();
}

std::optional<std::string> Copier::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void Copier::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  space_.notify_all();
  imported_.notify_all();
}

void Copier::Fail(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = message;
    cancelled_ = true;
    space_.notify_all();
    imported_.notify_all();
  }
  notify_();
}

bool Copier::NextTask(Task* task) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_ || tasks_.empty()) return false;
  *task = tasks_.front();
  tasks_.pop_front();
  return true;
}

void Copier::PushCopied(Batch& batch) {
  copied_[batch.table] += batch.size();
  bytes_copied_ += batch.bytes();
  const std::size_t table = batch.table;
  Push(std::move(batch));
  batch = Batch{table, {}, {}};
}

void Copier::Push(Batch batch) {
  bool was_empty;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    space_.wait(lock, [this] { return cancelled_ || queued_bytes_ < max_queue_bytes_; });
    if (cancelled_) return;
    was_empty = queue_.empty();
    queued_bytes_ += batch.footprint();
    queue_.push_back(std::move(batch));
  }
  if (was_empty) notify_();
}

void Copier::Work(int worker) {
  try {
    pg::Connection conn = ImportSnapshot(worker);
    WorkerState state;
    state.worker = worker;
    Task task;
    while (NextTask(&task)) CopyTask(conn, state, task);
    conn.Exec("COMMIT");
  } catch (const std::exception& e) {
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled = cancelled_ && !error_;
    }
    if (!cancelled) {
      log::Error("bootstrap_worker_failed", {{"worker", worker}, {"error", e.what()}});
      Fail(e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
  }
  notify_();
}

pg::Connection Copier::ImportSnapshot(int worker) {
  pg::Connection conn = pg::Connection::Open(
      conninfo_, false, {{"application_name", "dblogd copy " + std::to_string(worker)}});
  conn.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  conn.Exec("SET TRANSACTION SNAPSHOT '" + snapshot_ + "'");
  if (reader_ == Reader::kCatalog) {
    // COPY's text is each column's output function's: under the settings pgoutput's values are
    // read with (pgoutput::kOutputSettings), the same text for the same datum.
    conn.Exec(pgoutput::SetLocalOutputSettings());
  } else {
    // The encoder pins its output settings itself; matching them here keeps it on its fast
    // path.
    conn.Exec(
        "SET LOCAL datestyle = 'ISO'; SET LOCAL intervalstyle = 'postgres';"
        "SET LOCAL extra_float_digits = 3; SET LOCAL bytea_output = 'hex';"
        "SET LOCAL timezone = 'UTC'");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++imported_count_;
    imported_.notify_all();
  }
  return conn;
}

pg::Connection& Copier::CatalogNow(WorkerState& state) {
  if (!state.now || !state.now->ok())
    state.now.emplace(pg::Connection::Open(
        conninfo_, false,
        {{"application_name", "dblogd copy " + std::to_string(state.worker) + " catalog"}}));
  return *state.now;
}

void Copier::CopyTextTask(pg::Connection& conn, WorkerState& state, const Task& task) {
  const Table& t = tables_[task.table];
  // Locked by the name the plan read, then checked, with the table locked (nothing can rename,
  // rewrite or alter it until this transaction ends), against the catalog as it is now: the
  // name must resolve to the planned oid (to_regclass reads the syscache, not the snapshot), its
  // storage must be the snapshot's, its columns the plan's. So the COPY below reads this table,
  // these columns by these names, and rows the snapshot can see. LOCK on a view locks only the
  // view (nothing of it runs); the name check refuses it.
  const std::string name = t.qualified();
  try {
    conn.Exec("LOCK TABLE ONLY " + name + " IN ACCESS SHARE MODE");
  } catch (const pg::Error& e) {  // renamed or dropped (or its schema), also while the lock waited
    if (e.sqlstate() != "42P01" && e.sqlstate() != "3F000") throw;
    throw DefinitionChanged("relation " + name + " does not exist any more (renamed or dropped "
                            "since the slot's snapshot); the bootstrap is redone");
  }
  pg::Result bound =
      conn.ExecParams("SELECT pg_catalog.to_regclass($1)::pg_catalog.oid", {name});
  if (bound.is_null(0, 0) || bound.u64_value(0, 0) != t.oid)
    throw DefinitionChanged("relation " + name +
                            " is not the table the bootstrap planned any more (renamed, "
                            "dropped or replaced since the slot's snapshot); the bootstrap is "
                            "redone");
  RequireStorageUnchanged(conn, t);
  RequireDefinitionUnchanged(CatalogNow(state), t, reader_);
  state.verified.push_back(t.oid);
  std::string columns;
  for (const auto& c : t.relation.columns())
    columns += (columns.empty() ? "" : ", ") + common::QuoteIdent(c.name());
  pg::CopyOut copy(conn, "COPY " + name + " (" + columns + ") TO STDOUT");
  pgoutput::CopyTextParser parser;
  pgoutput::Cells cells;
  Batch batch{task.table, {}, {}};
  dblog::v1::Row row;
  std::string bytes;
  auto push = [&] { PushCopied(batch); };
  pg::CopyBuffer chunk;
  while (copy.Next(&chunk)) {
    parser.Feed(chunk.view());
    chunk.reset();
    while (parser.Next(&cells)) {
      row.Clear();
      try {
        pgoutput::RowFromText(t.kinds, cells, &row);
      } catch (const pgoutput::ValueError& e) {
        throw std::runtime_error("a row of " + name + ": " + e.what());
      }
      bytes.clear();
      row.SerializeToString(&bytes);
      if (batch.data.empty())
        batch.data.reserve(std::min(kBatchBytes, bytes.size() * kBatchRows) + bytes.size());
      batch.Add(bytes);
      if (batch.size() >= kBatchRows || batch.bytes() >= kBatchBytes) push();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cancelled_) throw std::runtime_error("cancelled");
    }
  }
  if (parser.pending()) throw std::runtime_error("COPY of " + name + " ended inside a row");
  // The lock on the table holds its name, not its schema's: ALTER SCHEMA ... RENAME takes no
  // lock on the tables inside, so between the checks above and the COPY a schema's owner could
  // put another table under this name. COPY keeps a lock on what it read until this
  // transaction ends: any relation locked here that is not a table this worker verified (nor
  // one of their TOAST tables or indexes) is such an impostor.
  RequireOnlyVerifiedLocks(conn, state.verified, name);
  if (batch.size() > 0) push();
}

void Copier::CopyTask(pg::Connection& conn, WorkerState& state, const Task& task) {
  if (reader_ == Reader::kCatalog) return CopyTextTask(conn, state, task);
  const Table& t = tables_[task.table];
  pg::CopyOut copy(conn, CopyStatement(t, BindTable(conn, t), task));
  CopyRowParser parser;
  Batch batch{task.table, {}, {}};
  auto push = [&] { PushCopied(batch); };
  pg::CopyBuffer chunk;
  while (copy.Next(&chunk)) {
    parser.Feed(chunk.view());
    std::string_view row;
    while (parser.Next(&row)) {
      // one allocation per batch, sized from its first row (narrow rows fill a batch
      // by count long before kBatchBytes)
      if (batch.data.empty())
        batch.data.reserve(std::min(kBatchBytes, row.size() * kBatchRows) + row.size());
      batch.Add(row);
      if (batch.size() >= kBatchRows || batch.bytes() >= kBatchBytes) push();
    }
    // The parser keeps what it has not handed out; nothing points into the chunk any more.
    parser.Feed({});
    chunk.reset();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cancelled_) throw std::runtime_error("cancelled");
    }
  }
  if (!parser.finished()) throw std::runtime_error("binary COPY ended without its trailer");
  RequireStorageUnchanged(conn, t);
  RequireDefinitionUnchanged(conn, t, reader_);
  if (batch.size() > 0) push();
}

bool StorageUnchangedSinceSnapshot(pg::Connection& conn, std::uint32_t oid) {
  pg::Result r = conn.ExecPrepared(
      "SELECT c.relfilenode OPERATOR(pg_catalog.=) pg_catalog.pg_relation_filenode(c.oid)"
      "  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
      {std::to_string(oid)});
  return r.ntuples() == 1 && !r.is_null(0, 0) && r.bool_value(0, 0);
}

}  // namespace dblog::bootstrap
