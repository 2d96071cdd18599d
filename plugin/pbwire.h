/*-------------------------------------------------------------------------
 *
 * pbwire.h
 *		  Protocol-buffer wire primitives written straight into a StringInfo.
 *
 * The plugin writes proto/dblog/v1/change.proto messages by hand instead of
 * going through protobuf-c: no per-row message structs, no second pass to
 * size them, and one deterministic (canonical) encoding, which is what the
 * "one encoder" rule needs.  Nested messages reserve one length byte and are
 * shifted in the rare case their body needs more (see pb_end).
 *
 * Canonical means: fields in number order, minimal varints, packed repeated
 * scalars; singular proto3 fields at their default are omitted by the
 * pb_*_field helpers, while oneof members are always written (pb_*_always).
 *
 * IDENTIFICATION
 *		  plugin/pbwire.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_PBWIRE_H
#define DBLOG_PBWIRE_H

#include "lib/stringinfo.h"

#define PB_VARINT	0
#define PB_FIXED64	1
#define PB_LEN		2
#define PB_FIXED32	5

static inline int
pb_varint_size(uint64 v)
{
	int			n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static inline char *
pb_put_varint(char *p, uint64 v)
{
	while (v >= 0x80)
	{
		*p++ = (char) ((v & 0x7f) | 0x80);
		v >>= 7;
	}
	*p++ = (char) v;
	return p;
}

static inline void
pb_varint(StringInfo s, uint64 v)
{
	char	   *p;

	enlargeStringInfo(s, 10);
	p = pb_put_varint(s->data + s->len, v);
	s->len = p - s->data;
	s->data[s->len] = '\0';
}

static inline void
pb_tag(StringInfo s, int field, int wiretype)
{
	pb_varint(s, ((uint64) field << 3) | wiretype);
}

static inline uint64
pb_zigzag(int64 v)
{
	return ((uint64) v << 1) ^ (uint64) (v >> 63);
}

static inline void
pb_uint_always(StringInfo s, int field, uint64 v)
{
	pb_tag(s, field, PB_VARINT);
	pb_varint(s, v);
}

static inline void
pb_uint_field(StringInfo s, int field, uint64 v)
{
	if (v != 0)
		pb_uint_always(s, field, v);
}

static inline void
pb_sint_always(StringInfo s, int field, int64 v)
{
	pb_uint_always(s, field, pb_zigzag(v));
}

static inline void
pb_sint_field(StringInfo s, int field, int64 v)
{
	if (v != 0)
		pb_sint_always(s, field, v);
}

static inline void
pb_bool_field(StringInfo s, int field, bool v)
{
	if (v)
		pb_uint_always(s, field, 1);
}

static inline void
pb_fixed32_always(StringInfo s, int field, uint32 v)
{
	pb_tag(s, field, PB_FIXED32);
	enlargeStringInfo(s, 4);
	for (int i = 0; i < 4; i++)
		s->data[s->len++] = (char) (v >> (8 * i));
	s->data[s->len] = '\0';
}

static inline void
pb_fixed64_always(StringInfo s, int field, uint64 v)
{
	pb_tag(s, field, PB_FIXED64);
	enlargeStringInfo(s, 8);
	for (int i = 0; i < 8; i++)
		s->data[s->len++] = (char) (v >> (8 * i));
	s->data[s->len] = '\0';
}

static inline void
pb_bytes_always(StringInfo s, int field, const char *data, Size len)
{
	pb_tag(s, field, PB_LEN);
	pb_varint(s, len);
	appendBinaryStringInfo(s, data, len);
}

static inline void
pb_bytes_field(StringInfo s, int field, const char *data, Size len)
{
	if (len > 0)
		pb_bytes_always(s, field, data, len);
}

static inline void
pb_string_field(StringInfo s, int field, const char *str)
{
	if (str != NULL)
		pb_bytes_field(s, field, str, strlen(str));
}

/*
 * Start a nested message: writes the tag and one placeholder length byte and
 * returns the offset of that byte, for pb_end.
 */
static inline int
pb_begin(StringInfo s, int field)
{
	pb_tag(s, field, PB_LEN);
	appendStringInfoCharMacro(s, '\0');
	return s->len - 1;
}

static inline void
pb_end(StringInfo s, int lenpos)
{
	Size		len = s->len - lenpos - 1;
	int			extra = pb_varint_size(len) - 1;

	if (extra > 0)
	{
		enlargeStringInfo(s, extra);
		memmove(s->data + lenpos + 1 + extra, s->data + lenpos + 1, len);
		s->len += extra;
		s->data[s->len] = '\0';
	}
	pb_put_varint(s->data + lenpos, len);
}

/* A packed repeated uint32 field. */
static inline void
pb_packed_uint32(StringInfo s, int field, const uint32 *values, int n)
{
	int			pos;

	if (n == 0)
		return;
	pos = pb_begin(s, field);
	for (int i = 0; i < n; i++)
		pb_varint(s, values[i]);
	pb_end(s, pos);
}

#endif							/* DBLOG_PBWIRE_H */
