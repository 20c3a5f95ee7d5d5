//! The PostgreSQL statements of each record kind: conversations and messages (and their
//! retention), tasks,
//! memories, tool settings, ended sessions, log events and `/mcp` tasks. Each method
//! has the name, arguments and meaning of the `Store` method that calls it; rows are
//! read by the same `…_from_row` functions as on SQLite.

use serde_json::Value;

use super::super::conversations::{
    CONVERSATION_SELECT, MESSAGE_SELECT, conversation_from_row, message_from_row,
};
use super::super::ended_sessions::{PRUNE_ENDED_SESSIONS_BY_AGE, PRUNE_ENDED_SESSIONS_BY_COUNT};
use super::super::log_events::contains_pattern;
use super::super::retention::{PRUNE_BY_AGE_POSTGRES, PRUNE_BY_COUNT_POSTGRES};
use super::super::rows::numbered_for_postgres;
use super::super::tasks::{OPEN_RUN, TASK_COLUMNS, TASK_SELECT, task_from_row};
use super::super::{
    Conversation, MessagePage, MessageQuery, StoreError, StoredTaskRow, Task, no_such_conversation,
    now_rfc3339,
};
use super::{Postgres, cached, is_unique_violation};
use crate::model::{Message, NewMessage};

/// A fixed key for `pg_try_advisory_xact_lock`: one replica prunes conversations at a
/// time.
const RETENTION_LOCK: i64 = 0x7265_7465_6e74_696f; // "retentio"

/// Collects rows read by a `…_from_row` function.
fn read_all<T>(
    rows: &[tokio_postgres::Row],
    read: impl Fn(&tokio_postgres::Row) -> Result<T, tokio_postgres::Error>,
) -> Result<Vec<T>, StoreError> {
    Ok(rows.iter().map(read).collect::<Result<Vec<_>, _>>()?)
}

impl Postgres {
    pub(in super::super) async fn insert_conversation(
        &self,
        id: String,
        title: &str,
    ) -> Result<Conversation, StoreError> {
        let client = self.client().await?;
        let now = now_rfc3339();
        client
            .execute(
                &cached(&client, "INSERT INTO conversations (id, title, created_at, updated_at) VALUES ($1, $2, $3, $3)").await?,
                &[&id, &title, &now],
            )
            .await?;
        Ok(Conversation {
            id,
            title: title.to_string(),
            created_at: now.clone(),
            updated_at: now,
            message_count: 0,
        })
    }

    /// The PostgreSQL side of `Store::prune_conversations`: both limits in one
    /// transaction, under an advisory lock so replicas prune one at a time (a replica
    /// that finds it taken skips this round: another is pruning the same rows).
    pub(in super::super) async fn prune_conversations(
        &self,
        keep: Option<i64>,
        cutoff: Option<String>,
        held: Vec<String>,
    ) -> Result<usize, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let locked: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&RETENTION_LOCK])
            .await?
            .try_get(0)?;
        if !locked {
            return Ok(0);
        }
        let mut deleted = 0;
        if let Some(keep) = keep {
            deleted += tx
                .execute(
                    &tx.prepare_cached(PRUNE_BY_COUNT_POSTGRES).await?,
                    &[&keep, &held],
                )
                .await?;
        }
        if let Some(cutoff) = cutoff {
            deleted += tx
                .execute(
                    &tx.prepare_cached(PRUNE_BY_AGE_POSTGRES).await?,
                    &[&cutoff, &held],
                )
                .await?;
        }
        tx.commit().await?;
        Ok(deleted as usize)
    }

    pub(in super::super) async fn get_conversation(
        &self,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &cached(&client, &format!("{CONVERSATION_SELECT} WHERE c.id = $1")).await?,
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(conversation_from_row).transpose()?)
    }

    pub(in super::super) async fn list_conversations(
        &self,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &cached(
                    &client,
                    &format!("{CONVERSATION_SELECT} ORDER BY c.updated_at DESC, c.id LIMIT $1"),
                )
                .await?,
                &[&(limit as i64)],
            )
            .await?;
        read_all(&rows, conversation_from_row)
    }

    pub(in super::super) async fn set_conversation_title(
        &self,
        id: &str,
        title: &str,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &cached(&client, "UPDATE conversations SET title = $2 WHERE id = $1").await?,
                &[&id, &title],
            )
            .await?;
        Ok(())
    }

    pub(in super::super) async fn append_message(
        &self,
        conversation_id: &str,
        message: NewMessage,
    ) -> Result<Message, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let now = now_rfc3339();
        let updated = tx
            .execute(
                &tx.prepare_cached("UPDATE conversations SET updated_at = $2 WHERE id = $1")
                    .await?,
                &[&conversation_id, &now],
            )
            .await?;
        if updated == 0 {
            return Err(no_such_conversation(conversation_id));
        }
        let tool_calls = message.tool_calls_json();
        let row = tx
            .query_one(
                &tx.prepare_cached("INSERT INTO messages (conversation_id, role, content, tool_calls, tool_call_id, name, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id").await?,
                &[
                    &conversation_id,
                    &message.role.as_str(),
                    &message.content,
                    &tool_calls,
                    &message.tool_call_id,
                    &message.name,
                    &now,
                ],
            )
            .await?;
        tx.commit().await?;
        Ok(Message {
            id: row.try_get(0)?,
            conversation_id: conversation_id.to_string(),
            role: message.role,
            content: message.content,
            tool_calls: message.tool_calls,
            tool_call_id: message.tool_call_id,
            name: message.name,
            created_at: now,
        })
    }

    pub(in super::super) async fn list_messages(
        &self,
        conversation_id: &str,
        query: MessageQuery,
    ) -> Result<MessagePage, StoreError> {
        let client = self.client().await?;
        let limit = query.limit.max(1);
        let fetch = (limit + 1) as i64;
        let before = query.before.unwrap_or(i64::MAX);
        let messages = if let Some(after) = query.after {
            let rows = client
            .query(
                &cached(&client, &format!(
                        "{MESSAGE_SELECT} WHERE conversation_id = $1 AND id > $2 AND id < $3 ORDER BY id ASC LIMIT $4"
                    )).await?,
                    &[&conversation_id, &after, &before, &fetch],
                )
                .await?;
            read_all(&rows, message_from_row)?
        } else {
            let rows = client
            .query(
                &cached(&client, &format!(
                        "{MESSAGE_SELECT} WHERE conversation_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
                    )).await?,
                    &[&conversation_id, &before, &fetch],
                )
                .await?;
            let mut rows = read_all(&rows, message_from_row)?;
            rows.reverse();
            rows
        };
        Ok(MessagePage::from_one_extra(
            messages,
            limit,
            query.after.is_some(),
        ))
    }

    pub(in super::super) async fn conversation_history(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<Message>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &cached(
                    &client,
                    &format!("{MESSAGE_SELECT} WHERE conversation_id = $1 ORDER BY id ASC"),
                )
                .await?,
                &[&conversation_id],
            )
            .await?;
        read_all(&rows, message_from_row)
    }

    #[allow(clippy::too_many_arguments)]
    pub(in super::super) async fn create_task(
        &self,
        name: &str,
        description: &str,
        schedule: &str,
        action: &Value,
        next_run: Option<String>,
        run_as: &str,
    ) -> Result<Task, StoreError> {
        let client = self.client().await?;
        let inserted = client
            .query_one(
                &cached(&client, "INSERT INTO tasks (name, description, schedule, action, next_run, created_at, run_as)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id").await?,
                &[
                    &name,
                    &description,
                    &schedule,
                    &action.to_string(),
                    &next_run,
                    &now_rfc3339(),
                    &run_as,
                ],
            )
            .await;
        let id: i64 = match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "a task named `{name}` already exists; pick another name"
                )));
            }
            other => other?.try_get(0)?,
        };
        self.get_task(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {id} vanished after insert")))
    }

    pub(in super::super) async fn list_tasks(&self) -> Result<Vec<Task>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &cached(&client, &format!("{TASK_SELECT} ORDER BY id")).await?,
                &[],
            )
            .await?;
        read_all(&rows, task_from_row)
    }

    pub(in super::super) async fn count_tasks(&self) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let count: i64 = client
            .query_one(&cached(&client, "SELECT COUNT(*) FROM tasks").await?, &[])
            .await?
            .try_get(0)?;
        Ok(count as usize)
    }

    pub(in super::super) async fn get_task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &cached(&client, &format!("{TASK_SELECT} WHERE id = $1")).await?,
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(task_from_row).transpose()?)
    }

    pub(in super::super) async fn remember(
        &self,
        key: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &cached(&client, "INSERT INTO memories (key, value, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at").await?,
                &[&key, &value, &now_rfc3339()],
            )
            .await?;
        Ok(())
    }

    /// `ILIKE`: SQLite's `LIKE` ignores ASCII case, and so must this.
    pub(in super::super) async fn recall(
        &self,
        query: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &cached(
                    &client,
                    "SELECT key, value FROM memories
                 WHERE key ILIKE $1 ESCAPE '\\' OR value ILIKE $1 ESCAPE '\\'
                 ORDER BY updated_at DESC LIMIT 50",
                )
                .await?,
                &[&contains_pattern(query)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?)
    }

    pub(in super::super) async fn save_tool_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &cached(&client, "INSERT INTO tool_settings (name, enabled, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at").await?,
                &[&name, &i32::from(enabled), &now_rfc3339()],
            )
            .await?;
        Ok(())
    }

    pub(in super::super) async fn tool_settings(&self) -> Result<Vec<(String, bool)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &cached(
                    &client,
                    "SELECT name, enabled FROM tool_settings ORDER BY name",
                )
                .await?,
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get::<_, i32>(1)? != 0)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?)
    }

    pub(in super::super) async fn prune_ended_sessions(
        &self,
        minted_after_ms: i64,
        kept: i64,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            &tx.prepare_cached(&numbered_for_postgres(PRUNE_ENDED_SESSIONS_BY_AGE))
                .await?,
            &[&minted_after_ms],
        )
        .await?;
        tx.execute(
            &tx.prepare_cached(&numbered_for_postgres(PRUNE_ENDED_SESSIONS_BY_COUNT))
                .await?,
            &[&kept],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(in super::super) async fn ended_session_ids(&self) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &cached(&client, "SELECT id FROM mcp_ended_sessions").await?,
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<Vec<_>, _>>()?)
    }

    pub(in super::super) async fn record_ended_session(
        &self,
        id: &str,
        minted_ms: u64,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &cached(&client, "INSERT INTO mcp_ended_sessions (id, minted_ms) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING").await?,
                &[&id, &(minted_ms as i64)],
            )
            .await?;
        Ok(())
    }

    pub(in super::super) async fn append_log_events(
        &self,
        events: Vec<(i64, String, String)>,
        replica: &str,
        keep: usize,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let insert = tx
            .prepare_cached(
                "INSERT INTO log_events (time_us, level, record, replica) VALUES ($1, $2, $3, $4)",
            )
            .await?;
        for (time_us, level, record) in &events {
            tx.execute(&insert, &[time_us, level, record, &replica])
                .await?;
        }
        tx.execute(
            &tx.prepare_cached(
                "DELETE FROM log_events WHERE id <= (SELECT max(id) FROM log_events) - $1",
            )
            .await?,
            &[&(keep as i64)],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(in super::super) async fn log_events(
        &self,
        levels: Vec<String>,
        after_us: Option<i64>,
        contains: Option<String>,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let client = self.client().await?;
        let pattern = contains.as_deref().map(contains_pattern);
        let rows = client
            .query(
                &cached(
                    &client,
                    "SELECT record, replica FROM log_events WHERE time_us > $1
                 AND (cardinality($4::text[]) = 0 OR level = ANY($4))
                 AND ($2::text IS NULL OR record ILIKE $2 ESCAPE '\\')
                 ORDER BY id DESC LIMIT $3",
                )
                .await?,
                &[
                    &after_us.unwrap_or(i64::MIN),
                    &pattern,
                    &(limit as i64),
                    &levels,
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?)
    }

    pub(in super::super) async fn put_mcp_task(
        &self,
        row: StoredTaskRow,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &cached(&client, "INSERT INTO mcp_tasks (id, owner, session, finished, created_ms, expires_ms, record)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, session = excluded.session,
                   finished = excluded.finished, created_ms = excluded.created_ms,
                   expires_ms = excluded.expires_ms, record = excluded.record").await?,
                &[
                    &row.id,
                    &row.owner,
                    &row.session,
                    &i32::from(row.finished),
                    &row.created_ms,
                    &row.expires_ms,
                    &row.record,
                ],
            )
            .await?;
        Ok(())
    }

    /// One text column of the rows a query returns (the `/mcp` task records).
    async fn texts(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client.query(&cached(&client, sql).await?, params).await?;
        Ok(rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<Vec<_>, _>>()?)
    }

    pub(in super::super) async fn mcp_task(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .texts("SELECT record FROM mcp_tasks WHERE id = $1", &[&id])
            .await?
            .into_iter()
            .next())
    }

    pub(in super::super) async fn count_unfinished_mcp_tasks(
        &self,
        owner: &str,
    ) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let count: i64 = client
            .query_one(
                &cached(
                    &client,
                    "SELECT COUNT(*) FROM mcp_tasks WHERE owner = $1 AND finished = 0",
                )
                .await?,
                &[&owner],
            )
            .await?
            .try_get(0)?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    pub(in super::super) async fn mcp_tasks_of_session(
        &self,
        session: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.texts(
            "SELECT record FROM mcp_tasks WHERE session = $1 ORDER BY created_ms DESC LIMIT 1000",
            &[&session],
        )
        .await
    }

    pub(in super::super) async fn unfinished_mcp_tasks(&self) -> Result<Vec<String>, StoreError> {
        self.texts("SELECT record FROM mcp_tasks WHERE finished = 0", &[])
            .await
    }

    pub(in super::super) async fn purge_mcp_tasks(&self, now_ms: i64) -> Result<usize, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                &cached(&client, "DELETE FROM mcp_tasks WHERE expires_ms <= $1").await?,
                &[&now_ms],
            )
            .await? as usize)
    }

    /// Claims the due tasks: rows another replica is claiming at this moment are
    /// skipped (`SKIP LOCKED`), and a row it claimed just before no longer matches once
    /// its lock is released (PostgreSQL re-checks the condition on the newest version).
    pub(in super::super) async fn claim_due_tasks(
        &self,
        replica: &str,
        now: &str,
        lease_until_ms: i64,
    ) -> Result<Vec<Task>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let claim = tx
            .prepare_cached(&format!(
                "UPDATE tasks SET status = 'running', claimed_by = $1, lease_until_ms = $3 \
                     WHERE id IN (SELECT id FROM tasks WHERE enabled = 1 AND status <> 'running' \
                       AND next_run IS NOT NULL AND next_run <= $2 FOR UPDATE SKIP LOCKED) \
                     RETURNING {TASK_COLUMNS}"
            ))
            .await?;
        let rows = tx.query(&claim, &[&replica, &now, &lease_until_ms]).await?;
        let claimed = rows
            .iter()
            .map(task_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let open_run = tx.prepare_cached(&numbered_for_postgres(OPEN_RUN)).await?;
        for task in &claimed {
            tx.execute(
                &open_run,
                &[&task.id, &task.next_run, &replica, &now_rfc3339()],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(claimed)
    }
}
