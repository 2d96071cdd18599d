/*-------------------------------------------------------------------------
 *
 * messages.h
 *		  Writers for the events the dblog output plugin emits, in binary
 *		  (dblog.v1.Event inside a Batch) and in the readable text twin.
 *
 * The callbacks in dblog.c decide what to send; these functions only say
 * how it looks on the wire (as proto.c does for pgoutput).
 *
 * IDENTIFICATION
 *		  plugin/messages.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_MESSAGES_H
#define DBLOG_MESSAGES_H

#include "access/xlogdefs.h"
#include "replication/reorderbuffer.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "encoder.h"

/* What the writers need to know about a relation (cached in dblog.c). */
typedef struct RelInfo
{
	Oid			relid;
	char	   *schema;
	char	   *name;
	char		replident;		/* pg_class.relreplident */
	RowPlan    *plan;			/* keys filled in; nkeys == 0: keyless */
} RelInfo;

/* A transaction's coordinates, stamped on everything it contains. */
typedef struct TxnCoords
{
	uint64		xid;			/* epoch << 32 | xid */
	XLogRecPtr	commit_lsn;
	XLogRecPtr	end_lsn;
	TimestampTz commit_time;	/* PostgreSQL epoch; written as Unix micros */
	uint32		origin_id;
} TxnCoords;

typedef struct WriteFormat
{
	bool		text;			/* text twin instead of protobuf */
	bool		coordinates;	/* text only: show xids, LSNs, times, oids */
} WriteFormat;

typedef enum ChangeKind
{
	CHANGE_INSERT = 1,
	CHANGE_UPDATE = 2,
	CHANGE_DELETE = 3
} ChangeKind;

extern void build_rel_info(Relation rel, RelInfo *info, MemoryContext mcxt);

extern void write_begin(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn);
extern void write_relation(StringInfo out, const WriteFormat *fmt, Relation rel,
						   const RelInfo *info);
extern void write_change(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
						 uint32 seq, XLogRecPtr lsn, ChangeKind kind, Relation rel,
						 const RelInfo *info, HeapTuple newtuple, HeapTuple oldtuple);
extern void write_truncate(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
						   uint32 seq, XLogRecPtr lsn, int nrelations, RelInfo **infos,
						   bool cascade, bool restart_identity);
extern void write_message(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
						  uint32 seq, XLogRecPtr lsn, bool transactional,
						  const char *prefix, const char *content, Size size, Size omitted);
extern void write_commit(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
						 uint32 seq);

#endif							/* DBLOG_MESSAGES_H */
