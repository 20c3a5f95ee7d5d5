//! Conversations and their messages: create, list, page through, append. How long they
//! are kept is `retention`'s business.

use super::*;
use crate::model::{Message, NewMessage, Role};

pub(super) const CONVERSATION_SELECT: &str = "SELECT c.id, c.title, c.created_at, c.updated_at,
    (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) FROM conversations c";
pub(super) const MESSAGE_SELECT: &str = "SELECT id, conversation_id, role, content, tool_calls, tool_call_id, name, created_at FROM messages";

impl Store {
    pub async fn create_conversation(&self, title: &str) -> Result<Conversation, StoreError> {
        self.insert_conversation(uuid::Uuid::new_v4().to_string(), title)
            .await
    }

    /// Stores a new, empty conversation under `id` (and counts it for retention).
    pub(super) async fn insert_conversation(
        &self,
        id: String,
        title: &str,
    ) -> Result<Conversation, StoreError> {
        let conversation = if let Some(pg) = self.postgres() {
            pg.insert_conversation(id, title).await?
        } else {
            let title = title.to_string();
            self.call(move |c| {
                let now = now_rfc3339();
                c.prepare_cached(
                    "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
                )?
                .execute(params![id, title, now])?;
                Ok(Conversation {
                    id,
                    title,
                    created_at: now.clone(),
                    updated_at: now,
                    message_count: 0,
                })
            })
            .await?
        };
        self.count_created_conversation();
        Ok(conversation)
    }

    pub async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.get_conversation(id).await;
        }
        let id = id.to_string();
        self.call(move |c| {
            Ok(
                c.prepare_cached(&format!("{CONVERSATION_SELECT} WHERE c.id = ?1"))?
                    .query_row([id], |r| conversation_from_row(r))
                    .optional()?,
            )
        })
        .await
    }

    /// Conversations, most recently updated first.
    pub async fn list_conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.list_conversations(limit).await;
        }
        self.call(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "{CONVERSATION_SELECT} ORDER BY c.updated_at DESC, c.id LIMIT ?1"
            ))?;
            let rows = stmt.query_map([limit as i64], |r| conversation_from_row(r))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn set_conversation_title(&self, id: &str, title: &str) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.set_conversation_title(id, title).await;
        }
        let (id, title) = (id.to_string(), title.to_string());
        self.call(move |c| {
            c.execute(
                "UPDATE conversations SET title = ?2 WHERE id = ?1",
                params![id, title],
            )?;
            Ok(())
        })
        .await
    }

    /// Appends a message and bumps the conversation's `updated_at`, atomically.
    pub async fn append_message(
        &self,
        conversation_id: &str,
        message: NewMessage,
    ) -> Result<Message, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.append_message(conversation_id, message).await;
        }
        let conversation_id = conversation_id.to_string();
        self.call(move |c| {
            let tx = c.transaction()?;
            let now = now_rfc3339();
            // Cached statements here and above: every turn runs them (at least two
            // messages each), and the SQL need not be parsed anew each time.
            let updated = tx
                .prepare_cached("UPDATE conversations SET updated_at = ?2 WHERE id = ?1")?
                .execute(params![conversation_id, now])?;
            if updated == 0 {
                return Err(no_such_conversation(&conversation_id));
            }
            let tool_calls = message.tool_calls_json();
            tx.prepare_cached(
                "INSERT INTO messages (conversation_id, role, content, tool_calls, tool_call_id, name, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                    conversation_id,
                    message.role.as_str(),
                    message.content,
                    tool_calls,
                    message.tool_call_id,
                    message.name,
                    now
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(Message {
                id,
                conversation_id,
                role: message.role,
                content: message.content,
                tool_calls: message.tool_calls,
                tool_call_id: message.tool_call_id,
                name: message.name,
                created_at: now,
            })
        })
        .await
    }

    /// A page of a conversation's messages, oldest first. With `after`, the page starts
    /// just after that id; otherwise it ends just before `before` (or at the newest).
    pub async fn list_messages(
        &self,
        conversation_id: &str,
        query: MessageQuery,
    ) -> Result<MessagePage, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.list_messages(conversation_id, query).await;
        }
        let conversation_id = conversation_id.to_string();
        self.call(move |c| {
            let limit = query.limit.max(1);
            // Fetch one extra row to learn whether more exist.
            let fetch = (limit + 1) as i64;
            let messages = if let Some(after) = query.after {
                let mut stmt = c.prepare_cached(&format!(
                    "{MESSAGE_SELECT} WHERE conversation_id = ?1 AND id > ?2 AND id < ?3 ORDER BY id ASC LIMIT ?4"
                ))?;
                let before = query.before.unwrap_or(i64::MAX);
                stmt.query_map(params![conversation_id, after, before, fetch], |r| message_from_row(r))?
                    .collect::<Result<Vec<_>, _>>()?
            } else {
                let before = query.before.unwrap_or(i64::MAX);
                let mut stmt = c.prepare_cached(&format!(
                    "{MESSAGE_SELECT} WHERE conversation_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
                ))?;
                let mut rows = stmt
                    .query_map(params![conversation_id, before, fetch], |r| message_from_row(r))?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.reverse();
                rows
            };
            Ok(MessagePage::from_one_extra(
                messages,
                limit,
                query.after.is_some(),
            ))
        })
        .await
    }

    /// Every message of a conversation, oldest first (the agent's context).
    pub async fn conversation_history(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<Message>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.conversation_history(conversation_id).await;
        }
        let conversation_id = conversation_id.to_string();
        self.call(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "{MESSAGE_SELECT} WHERE conversation_id = ?1 ORDER BY id ASC"
            ))?;
            let rows = stmt.query_map([conversation_id], |r| message_from_row(r))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}

pub(super) fn conversation_from_row<R: RowRead>(r: &R) -> Result<Conversation, R::Error> {
    Ok(Conversation {
        id: r.text(0)?,
        title: r.text(1)?,
        created_at: r.text(2)?,
        updated_at: r.text(3)?,
        message_count: r.int(4)?,
    })
}

pub(super) fn message_from_row<R: RowRead>(r: &R) -> Result<Message, R::Error> {
    let tool_calls = r.optional_text(4)?;
    Ok(Message {
        id: r.int(0)?,
        conversation_id: r.text(1)?,
        role: Role::parse(&r.text(2)?),
        content: r.text(3)?,
        tool_calls: tool_calls.and_then(|t| serde_json::from_str(&t).ok()),
        tool_call_id: r.optional_text(5)?,
        name: r.optional_text(6)?,
        created_at: r.text(7)?,
    })
}
