// tests/cpp/oracle_workload.cc: see oracle_workload.h.
#include "oracle_workload.h"

namespace dblog::test {

void CreateWorkloadTables(PgConn& db, const std::string& s) {
  db.exec("CREATE TABLE " + s + ".t_int (id int PRIMARY KEY, v int, s text, big text, n numeric)");
  db.exec("ALTER TABLE " + s + ".t_int ALTER COLUMN big SET STORAGE EXTERNAL");
  db.exec("CREATE TABLE " + s + ".t_comp (a text, b bigint, v jsonb, ts timestamptz, "
          "PRIMARY KEY (a, b))");
  db.exec("CREATE TABLE " + s + ".t_uuid (id uuid PRIMARY KEY, d date, f float8, nul text)");
}

void RandomTransaction(PgConn& db, const std::string& s, std::mt19937_64& rng,
                       const WorkloadOptions& options) {
  const int rows = rng() % 40 == 0 ? options.large_rows : 1 + static_cast<int>(rng() % 5);
  const bool rollback = rng() % 15 == 0;
  db.exec("BEGIN");
  for (int i = 0; i < rows; ++i) {
    const int id = static_cast<int>(rng() % 3000);
    const std::string ids = std::to_string(id);
    switch (rng() % 10) {
      case 0: case 1:
        db.exec("INSERT INTO " + s + ".t_int VALUES (" + ids + ", " + std::to_string(rng() % 100) +
                ", 'v" + ids + "', CASE WHEN " + ids + " % 10 = 0 THEN repeat('t', 4000) END, " +
                std::to_string(rng() % 1000) + ".25) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v");
        break;
      case 2:
        db.exec("UPDATE " + s + ".t_int SET v = v + 1, n = n * 2 WHERE id = " + ids);
        break;
      case 3:
        db.exec("UPDATE " + s + ".t_int SET s = NULL WHERE id = " + ids);  // keeps TOASTed big
        break;
      case 4:
        db.exec("DELETE FROM " + s + ".t_int WHERE id = " + ids);
        break;
      case 5:
        db.exec("UPDATE " + s + ".t_int SET id = id + 3000 WHERE id = " + ids +
                " AND NOT EXISTS (SELECT 1 FROM " + s + ".t_int WHERE id = " + ids + " + 3000)");
        break;
      case 6:
        db.exec("INSERT INTO " + s + ".t_comp VALUES ('k" + std::to_string(id % 30) + "', " + ids +
                ", '{\"x\": " + ids + "}', now()) ON CONFLICT (a, b) DO UPDATE SET v = "
                "jsonb_set(t_comp.v, '{y}', to_jsonb(" + ids + "))");
        break;
      case 7:
        db.exec("UPDATE " + s + ".t_comp SET b = b + 100000 WHERE a = 'k" +
                std::to_string(id % 30) + "' AND b = " + ids +
                (options.key_moves_avoid_collisions
                     ? " AND NOT EXISTS (SELECT 1 FROM " + s + ".t_comp WHERE a = 'k" +
                           std::to_string(id % 30) + "' AND b = " + ids + " + 100000)"
                     : std::string()));
        break;
      case 8:
        db.exec("INSERT INTO " + s + ".t_uuid VALUES (md5('" + ids + "')::uuid, date '2024-01-01' + " +
                ids + ", " + std::to_string(rng() % 1000) + " / 7.0, NULL) ON CONFLICT (id) DO "
                "UPDATE SET f = t_uuid.f + 1, nul = 'set'");
        break;
      case 9:
        if (rng() % 50 == 0)
          db.exec("TRUNCATE " + s + ".t_uuid" +
                  (options.truncate_two_tables ? ", " + s + ".t_comp" : std::string()));
        else
          db.exec("DELETE FROM " + s + ".t_uuid WHERE id = md5('" + ids + "')::uuid");
        break;
    }
  }
  db.exec(rollback ? "ROLLBACK" : "COMMIT");
}

}  // namespace dblog::test
