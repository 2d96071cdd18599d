/*-------------------------------------------------------------------------
 *
 * messages.h
 *		  The events the dblog output plugin emits, and the two writers that
 *		  give them their look: protobuf (proto.c: dblog.v1.Event inside a
 *		  Batch) and the readable text twin (text.c).
 *
 * The callbacks in dblog.c decide what to send and pick a writer once; the
 * writers only say how it looks on the wire (as proto.c does for pgoutput
 * and test_decoding prints).
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

#include "relation.h"

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
	ValuePieces *pieces;		/* protobuf only: NULL, or where a new row's long values go */
} WriteFormat;

typedef enum ChangeKind
{
	CHANGE_INSERT = 1,
	CHANGE_UPDATE = 2,
	CHANGE_DELETE = 3
} ChangeKind;

/* The rows of one INSERT, UPDATE or DELETE, deformed, as both writers send them. */
typedef struct ChangeRows
{
	Datum	   *newv;			/* the new row; NULL for a DELETE */
	bool	   *newn;
	Datum	   *oldv;			/* the old row or key; NULL when the WAL has none */
	bool	   *oldn;
	bool		full;			/* the old row is whole (REPLICA IDENTITY FULL) */
	Datum	   *keyv;			/* where the key columns are read (old, else new) */
	bool	   *keyn;
	bool		key_may_be_unchanged;	/* keyv is the new row: TOAST may be on disk */
} ChangeRows;

/*
 * One writer per format.  Protobuf: each function appends one `Batch.events`
 * entry (a dblog.v1.Event), so a plugin message is any run of them.  Text:
 * each appends one line without its newline; the text format sends one
 * event per message.
 */
typedef struct EventWriter
{
	/* BEGIN */
	void		(*begin) (StringInfo out, const WriteFormat *fmt, const TxnCoords *txn);
	/* RELATION: before a relation's first change, and after it changed */
	void		(*relation) (StringInfo out, const WriteFormat *fmt, Relation rel,
							 const RelInfo *info);
	/* INSERT, UPDATE, DELETE */
	void		(*change) (StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
						   uint32 seq, XLogRecPtr lsn, ChangeKind kind, Relation rel,
						   const RelInfo *info, const ChangeRows *rows);
	/* TRUNCATE */
	void		(*truncate) (StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
							 uint32 seq, XLogRecPtr lsn, int nrelations, RelInfo **infos,
							 bool cascade, bool restart_identity);
	/* MESSAGE: pg_logical_emit_message(); txn is NULL when non-transactional */
	void		(*message) (StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
							uint32 seq, XLogRecPtr lsn, bool transactional,
							const char *prefix, const char *content, Size size, Size omitted);
	/* COMMIT */
	void		(*commit) (StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
						   uint32 seq);
} EventWriter;

extern const EventWriter proto_writer;	/* proto.c */
extern const EventWriter text_writer;	/* text.c */

/* The body of a dblog.v1.Relation message, also for dblog.relation_info(). */
extern void proto_relation_body(StringInfo out, Relation rel, const RelInfo *info);

/* A Batch holding one dblog.v1.ValuePiece event: len (> 0) bytes of a split value. */
extern void proto_value_piece(StringInfo out, const char *data, Size len);

#endif							/* DBLOG_MESSAGES_H */
