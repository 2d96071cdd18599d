/*-------------------------------------------------------------------------
 *
 * scope_match.c
 *		  The one scope matcher (see scope_match.h): parsing with errors that
 *		  say where and why, matching, canonical text.
 *
 * A part is kept as a glob string in which '*' is the wildcard and '\'
 * makes the next byte literal (a quoted '*' or a '\' in a name), so that
 * names may hold any byte but NUL.  Matching is byte-wise; a wildcard
 * matches any run of bytes, which keeps UTF-8 names intact because literal
 * runs are whole characters.
 *
 * IDENTIFICATION
 *		  plugin/scope_match.c
 *
 *-------------------------------------------------------------------------
 */
#include "scope_match.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ScopePattern
{
	bool		exclude;
	char	   *schema;			/* glob, see above */
	char	   *table;
} ScopePattern;

struct DblogScope
{
	int			n;
	ScopePattern *patterns;
};

/* A growing byte buffer; `failed` once an allocation failed. */
typedef struct Buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} Buf;

static void buf_put(Buf *b, char c);
static bool is_space(char c);
static bool is_plain(char c);
#ifdef __GNUC__
__attribute__((format(printf, 5, 6)))
#endif
static void set_error(char *err, size_t errlen, const char *text, const char *at,
					  const char *fmt,...);
static const char *skip_space(const char *p);
static const char *parse_quoted(const char *text, const char *p, Buf *out, char *err,
								size_t errlen);
static void put_unquoted(Buf *out, char c, int flags);
static const char *parse_part(const char *text, const char *p, int flags, Buf *out,
							  char *err, size_t errlen);
static bool reserve_pattern(DblogScope *scope, int *cap);
static void set_out_of_memory(char *err, size_t errlen);
static const char *parse_pattern(DblogScope *scope, const char *text, const char *p,
								 int flags, char *err, size_t errlen);
static bool glob_matches(const char *glob, const char *s);
static void format_part(Buf *out, const char *glob);
static void format_pattern(Buf *out, const ScopePattern *pattern);

static void
buf_put(Buf *b, char c)
{
	if (b->failed)
		return;
	if (b->len + 1 >= b->cap)
	{
		size_t		cap = b->cap == 0 ? 32 : b->cap * 2;
		char	   *data = realloc(b->data, cap);

		if (data == NULL)
		{
			b->failed = true;
			return;
		}
		b->data = data;
		b->cap = cap;
	}
	b->data[b->len++] = c;
	b->data[b->len] = '\0';
}

/* PostgreSQL's scanner_isspace */
static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* written unquoted in the canonical text */
static bool
is_plain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static void
set_error(char *err, size_t errlen, const char *text, const char *at, const char *fmt,...)
{
	va_list		args;
	int			n;

	if (errlen == 0)
		return;
	n = snprintf(err, errlen, "at character %d: ", (int) (at - text) + 1);
	if (n < 0 || (size_t) n >= errlen)
		return;
	va_start(args, fmt);
	vsnprintf(err + n, errlen - (size_t) n, fmt, args);
	va_end(args);
}

/* p after the white space there */
static const char *
skip_space(const char *p)
{
	while (is_space(*p))
		p++;
	return p;
}

/*
 * A quoted run at p (the opening quote): appends its bytes to out, '*' and
 * '\' made literal.  Returns where the run ends (after the closing quote), or
 * NULL after writing err.
 */
static const char *
parse_quoted(const char *text, const char *p, Buf *out, char *err, size_t errlen)
{
	const char *open = p;
	bool		empty = true;

	for (p++;; p++)
	{
		if (*p == '\0')
		{
			set_error(err, errlen, text, open, "unterminated quoted identifier");
			return NULL;
		}
		if (*p == '"')
		{
			if (p[1] != '"')
				break;
			p++;
		}
		if (*p == '*' || *p == '\\')
			buf_put(out, '\\');
		buf_put(out, *p);
		empty = false;
	}
	if (empty)
	{
		set_error(err, errlen, text, open, "zero-length quoted identifier");
		return NULL;
	}
	return p + 1;
}

/* One byte of an unquoted run: folded to lower case unless KEEP_CASE. */
static void
put_unquoted(Buf *out, char c, int flags)
{
	if (c >= 'A' && c <= 'Z' && !(flags & DBLOG_SCOPE_KEEP_CASE))
		c = c - 'A' + 'a';
	if (c == '\\')
		buf_put(out, '\\');
	buf_put(out, c);
}

/*
 * One part (schema or table) starting at p, leading white space skipped by
 * the caller; appends its glob to out.  Returns where the part ends, or NULL
 * after writing err.
 */
static const char *
parse_part(const char *text, const char *p, int flags, Buf *out, char *err, size_t errlen)
{
	const char *start = p;

	for (;;)
	{
		if (*p == '*')
		{
			buf_put(out, '*');
			p++;
		}
		else if (*p == '"')
		{
			p = parse_quoted(text, p, out, err, errlen);
			if (p == NULL)
				return NULL;
		}
		else if (*p != '\0' && *p != '.' && *p != ',' && !is_space(*p))
			put_unquoted(out, *p++, flags);
		else
			break;
	}
	if (p == start)
	{
		if (*p == '\0')
			set_error(err, errlen, text, p, "expected a name or * at the end of the scope");
		else
			set_error(err, errlen, text, p, "expected a name or *, found '%c'", *p);
		return NULL;
	}
	return p;
}

/* Room for one more pattern, zeroed at patterns[n]; false when out of memory. */
static bool
reserve_pattern(DblogScope *scope, int *cap)
{
	if (scope->n == *cap)
	{
		ScopePattern *grown;

		*cap = *cap == 0 ? 4 : *cap * 2;
		grown = realloc(scope->patterns, sizeof(ScopePattern) * (size_t) *cap);
		if (grown == NULL)
			return false;
		scope->patterns = grown;
	}
	memset(&scope->patterns[scope->n], 0, sizeof(ScopePattern));
	return true;
}

static void
set_out_of_memory(char *err, size_t errlen)
{
	if (errlen > 0)
		snprintf(err, errlen, "out of memory");
}

/*
 * One pattern (`[!] schema . table`, white space around) at p, into the slot
 * reserve_pattern made.  Returns where the pattern and the white space after
 * it end, or NULL after writing err.
 */
static const char *
parse_pattern(DblogScope *scope, const char *text, const char *p, int flags,
			  char *err, size_t errlen)
{
	ScopePattern *pattern = &scope->patterns[scope->n];
	Buf			schema = {0},
				table = {0};

	p = skip_space(p);
	if (*p == '\0' || *p == ',')
	{
		set_error(err, errlen, text, p, scope->n == 0 && *p == '\0'
				  ? "empty scope: expected schema.table patterns separated by commas"
				  : "empty pattern: expected schema.table");
		return NULL;
	}
	if (*p == '!')
	{
		if (flags & DBLOG_SCOPE_NO_EXCLUSIONS)
		{
			set_error(err, errlen, text, p, "exclusions (!) are not allowed here");
			return NULL;
		}
		pattern->exclude = true;
		p = skip_space(p + 1);
	}
	/* owned by the scope from here on, so that dblog_scope_free frees them */
	scope->n++;
	p = parse_part(text, p, flags, &schema, err, errlen);
	pattern->schema = schema.data;
	if (p == NULL)
		return NULL;
	p = skip_space(p);
	if (*p != '.')
	{
		set_error(err, errlen, text, p, *p == '\0'
				  ? "expected '.' between schema and table, found the end of the scope"
				  : "expected '.' between schema and table, found '%c'", *p);
		return NULL;
	}
	p = parse_part(text, skip_space(p + 1), flags, &table, err, errlen);
	pattern->table = table.data;
	if (p == NULL)
		return NULL;
	if (schema.failed || table.failed)
	{
		set_out_of_memory(err, errlen);
		return NULL;
	}
	return skip_space(p);
}

DblogScope *
dblog_scope_parse(const char *text, int flags, char *err, size_t errlen)
{
	DblogScope *scope = calloc(1, sizeof(DblogScope));
	const char *p = text;
	int			cap = 0;
	bool		positive = false;

	if (errlen > 0)
		err[0] = '\0';
	if (scope == NULL)
		goto oom;
	for (;;)
	{
		if (!reserve_pattern(scope, &cap))
			goto oom;
		p = parse_pattern(scope, text, p, flags, err, errlen);
		if (p == NULL)
			goto fail;
		positive = positive || !scope->patterns[scope->n - 1].exclude;
		if (*p == '\0')
			break;
		if (*p != ',')
		{
			set_error(err, errlen, text, p, *p == '.'
					  ? "expected ',' after schema.table, found '.' (quote a name that holds a dot)"
					  : "expected ',' after schema.table, found '%c'", *p);
			goto fail;
		}
		p++;
	}
	if (!positive)
	{
		set_error(err, errlen, text, text,
				  "a scope of exclusions only holds no table: add the tables to exclude from, such as *.*");
		goto fail;
	}
	return scope;

oom:
	set_out_of_memory(err, errlen);
fail:
	dblog_scope_free(scope);
	return NULL;
}

void
dblog_scope_free(DblogScope *scope)
{
	int			i;

	if (scope == NULL)
		return;
	for (i = 0; i < scope->n; i++)
	{
		free(scope->patterns[i].schema);
		free(scope->patterns[i].table);
	}
	free(scope->patterns);
	free(scope);
}

/* Iterative glob with backtracking to the last '*' (linear space, no recursion). */
static bool
glob_matches(const char *glob, const char *s)
{
	const char *star_glob = NULL;
	const char *star_s = NULL;

	while (*s != '\0')
	{
		if (*glob == '*')
		{
			star_glob = ++glob;
			star_s = s;
			continue;
		}
		else
		{
			const char *lit = *glob == '\\' ? glob + 1 : glob;

			if (*lit != '\0' && *lit == *s)
			{
				glob = lit + 1;
				s++;
				continue;
			}
		}
		if (star_glob == NULL)
			return false;
		glob = star_glob;
		s = ++star_s;
	}
	while (*glob == '*')
		glob++;
	return *glob == '\0';
}

bool
dblog_scope_holds(const DblogScope *scope, const char *schema, const char *table)
{
	bool		held = false;
	int			i;

	for (i = 0; i < scope->n; i++)
	{
		const ScopePattern *p = &scope->patterns[i];

		if ((p->exclude || !held) &&
			glob_matches(p->schema, schema) && glob_matches(p->table, table))
		{
			if (p->exclude)
				return false;
			held = true;
		}
	}
	return held;
}

int
dblog_scope_size(const DblogScope *scope)
{
	return scope->n;
}

static void
format_part(Buf *out, const char *glob)
{
	while (*glob != '\0')
	{
		const char *run = glob;
		const char *g;
		bool		plain = true;

		if (*glob == '*')
		{
			buf_put(out, '*');
			glob++;
			continue;
		}
		/* a literal run: up to the next wildcard */
		for (g = run; *g != '\0' && *g != '*'; g++)
		{
			if (*g == '\\')
				g++;
			plain = plain && is_plain(*g);
		}
		if (!plain)
			buf_put(out, '"');
		for (g = run; *g != '\0' && *g != '*'; g++)
		{
			if (*g == '\\')
				g++;
			if (*g == '"')
				buf_put(out, '"');
			buf_put(out, *g);
		}
		if (!plain)
			buf_put(out, '"');
		glob = g;
	}
}

static void
format_pattern(Buf *out, const ScopePattern *pattern)
{
	if (pattern->exclude)
		buf_put(out, '!');
	format_part(out, pattern->schema);
	buf_put(out, '.');
	format_part(out, pattern->table);
}

size_t
dblog_scope_format(const DblogScope *scope, int i, char *buf, size_t len)
{
	Buf			out = {0};
	size_t		n;
	int			j;

	if (i >= 0)
		format_pattern(&out, &scope->patterns[i]);
	else
		for (j = 0; j < scope->n; j++)
		{
			if (j > 0)
				buf_put(&out, ',');
			format_pattern(&out, &scope->patterns[j]);
		}
	if (out.failed)
	{
		free(out.data);
		if (len > 0)
			buf[0] = '\0';
		return 0;
	}
	n = out.len;
	if (len > 0)
	{
		size_t		copy = n < len - 1 ? n : len - 1;

		if (copy > 0)
			memcpy(buf, out.data, copy);
		buf[copy] = '\0';
	}
	free(out.data);
	return n;
}
