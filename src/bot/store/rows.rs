//! What both backends share to run the facade's SQL: reading a result row the same way
//! ([`RowRead`], and [`FromRow`] for what a query returns), binding a parameter the same
//! way ([`Bound`]), and one statement text for both ([`numbered_for_postgres`]). So each
//! record kind has one `…_from_row` function instead of a SQLite twin and a PostgreSQL
//! twin.
//!
//! The two drivers type columns differently: SQLite hands back whatever integer width
//! was stored, PostgreSQL insists on the column's own width (`INTEGER` is `i32`,
//! `BIGINT` is `i64`). [`RowRead::int`] hides that difference.

use tokio_postgres::types::Type;

/// One result row, read by column position.
pub(super) trait RowRead {
    type Error;
    fn text(&self, index: usize) -> Result<String, Self::Error>;
    fn optional_text(&self, index: usize) -> Result<Option<String>, Self::Error>;
    fn optional_int(&self, index: usize) -> Result<Option<i64>, Self::Error>;

    fn int(&self, index: usize) -> Result<i64, Self::Error> {
        Ok(self.optional_int(index)?.unwrap_or(0))
    }

    /// A 0/1 flag column (both backends store flags as integers).
    fn flag(&self, index: usize) -> Result<bool, Self::Error> {
        Ok(self.int(index)? != 0)
    }
}

impl RowRead for rusqlite::Row<'_> {
    type Error = rusqlite::Error;

    fn text(&self, index: usize) -> rusqlite::Result<String> {
        self.get(index)
    }

    fn optional_text(&self, index: usize) -> rusqlite::Result<Option<String>> {
        self.get(index)
    }

    fn optional_int(&self, index: usize) -> rusqlite::Result<Option<i64>> {
        self.get(index)
    }
}

impl RowRead for tokio_postgres::Row {
    type Error = tokio_postgres::Error;

    fn text(&self, index: usize) -> Result<String, tokio_postgres::Error> {
        self.try_get(index)
    }

    fn optional_text(&self, index: usize) -> Result<Option<String>, tokio_postgres::Error> {
        self.try_get(index)
    }

    fn optional_int(&self, index: usize) -> Result<Option<i64>, tokio_postgres::Error> {
        let column_type = self.columns().get(index).map(|c| c.type_().clone());
        match column_type {
            Some(Type::INT2) => Ok(self.try_get::<_, Option<i16>>(index)?.map(i64::from)),
            Some(Type::INT4) => Ok(self.try_get::<_, Option<i32>>(index)?.map(i64::from)),
            Some(Type::BOOL) => Ok(self.try_get::<_, Option<bool>>(index)?.map(i64::from)),
            _ => self.try_get(index),
        }
    }
}

/// What one result row reads as: a record, or a tuple of its columns in order.
pub(super) trait FromRow: Sized + Send + 'static {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error>;
}

impl FromRow for String {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error> {
        row.text(0)
    }
}

impl FromRow for i64 {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error> {
        row.int(0)
    }
}

impl FromRow for (String, String) {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error> {
        Ok((row.text(0)?, row.text(1)?))
    }
}

impl FromRow for (String, bool) {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error> {
        Ok((row.text(0)?, row.flag(1)?))
    }
}

impl FromRow for (String, Option<String>) {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error> {
        Ok((row.text(0)?, row.optional_text(1)?))
    }
}

/// A statement parameter either driver can bind: the store's own statements only ever
/// bind integers, text and NULL.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Bound {
    Int(i64),
    Text(String),
    Null,
}

impl From<i64> for Bound {
    fn from(value: i64) -> Self {
        Bound::Int(value)
    }
}

impl From<String> for Bound {
    fn from(value: String) -> Self {
        Bound::Text(value)
    }
}

impl From<&str> for Bound {
    fn from(value: &str) -> Self {
        Bound::Text(value.to_string())
    }
}

impl<T: Into<Bound>> From<Option<T>> for Bound {
    fn from(value: Option<T>) -> Self {
        value.map_or(Bound::Null, Into::into)
    }
}

impl rusqlite::ToSql for Bound {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value, ValueRef};
        Ok(match self {
            Bound::Int(v) => ToSqlOutput::Owned(Value::Integer(*v)),
            Bound::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Bound::Null => ToSqlOutput::Owned(Value::Null),
        })
    }
}

impl tokio_postgres::types::ToSql for Bound {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            // PostgreSQL wants the column's own width: flags are INTEGER.
            Bound::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Bound::Int(v) => v.to_sql(ty, out),
            Bound::Text(s) => s.to_sql(ty, out),
            Bound::Null => Ok(tokio_postgres::types::IsNull::Yes),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::INT4, Type::INT8, Type::TEXT, Type::VARCHAR].contains(ty)
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A statement written with SQLite's placeholders — numbered `?N`, or anonymous `?`
/// counted in order — in PostgreSQL's `$N` form, so one statement text serves both
/// backends where their SQL agrees. The store's statements hold no `?` inside string
/// literals.
pub(super) fn numbered_for_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut anonymous = 0;
    while let Some(c) = chars.next() {
        if c != '?' {
            out.push(c);
        } else if chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            anonymous += 1;
            out.push_str(&format!("${anonymous}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_numbered() {
        assert_eq!(
            numbered_for_postgres("a = ?1 AND b = ?12"),
            "a = $1 AND b = $12"
        );
        assert_eq!(
            numbered_for_postgres("(x, y) < (?, ?) AND z = ?"),
            "(x, y) < ($1, $2) AND z = $3"
        );
    }
}
