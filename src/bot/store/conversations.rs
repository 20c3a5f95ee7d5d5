//! Conversations and their messages: create, list, page through, append. Every statement
//! is shared by both backends. How long conversations are kept is `retention`'s business.

use super::backend::Sql;
use super::rows::{Bound, FromRow, RowRead};
use super::{
    Conversation, MessagePage, MessageQuery, Store, StoreError, no_such_conversation, now_rfc3339,
};
use crate::model::{Message, NewMessage, Role};

const CONVERSATION_SELECT: &str = "SELECT c.id, c.title, c.created_at, c.updated_at,
    (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) FROM conversations c";
const MESSAGE_SELECT: &str = "SELECT id, conversation_id, role, content, tool_calls, tool_call_id, name, created_at FROM messages";

/// Makes a message the conversation's newest activity; changes nothing when the
/// conversation is not there.
const TOUCH_CONVERSATION: &str = "UPDATE conversations SET updated_at = ?2 WHERE id = ?1";

const INSERT_MESSAGE: &str = "INSERT INTO messages (conversation_id, role, content, tool_calls, tool_call_id, name, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id";

/// How the id of a conversation started with admin rights begins (an `/mcp`
/// `send_message`, a task that runs as admin): its turns may hold what only an admin may
/// read, so the web surface, which answers without a token, neither lists nor opens it,
/// and a chat user's turn cannot continue it.
pub const ADMIN_CONVERSATION_PREFIX: &str = "admin-";

/// Whether conversation `id` was started with admin rights.
pub fn is_admin_conversation(id: &str) -> bool {
    id.starts_with(ADMIN_CONVERSATION_PREFIX)
}

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
        let now = now_rfc3339();
        let sql = Sql::fixed(
            "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
        );
        let title = self.for_storage(title);
        let values = vec![
            id.as_str().into(),
            title.as_ref().into(),
            now.as_str().into(),
        ];
        self.db.execute(sql, values).await?;
        self.count_created_conversation();
        Ok(Conversation {
            id,
            title: Some(title.to_string()),
            created_at: now.clone(),
            updated_at: now,
            message_count: 0,
        })
    }

    pub async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let sql = Sql::fixed(format!("{CONVERSATION_SELECT} WHERE c.id = ?1"));
        self.db.query_one(sql, vec![id.into()]).await
    }

    /// Conversations, most recently updated first.
    pub async fn list_conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        let sql = Sql::fixed(format!(
            "{CONVERSATION_SELECT} ORDER BY c.updated_at DESC, c.id LIMIT ?1"
        ));
        self.db.query(sql, vec![(limit as i64).into()]).await
    }

    /// The conversations a chat user may see: every one but those started with admin
    /// rights (see [`is_admin_conversation`]).
    pub async fn list_user_conversations(
        &self,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let sql = Sql::fixed(format!(
            "{CONVERSATION_SELECT} WHERE c.id NOT LIKE '{ADMIN_CONVERSATION_PREFIX}%' \
             ORDER BY c.updated_at DESC, c.id LIMIT ?1"
        ));
        self.db.query(sql, vec![(limit as i64).into()]).await
    }

    pub async fn set_conversation_title(&self, id: &str, title: &str) -> Result<(), StoreError> {
        let sql = Sql::fixed("UPDATE conversations SET title = ?2 WHERE id = ?1");
        let title = self.for_storage(title);
        self.db
            .execute(sql, vec![id.into(), title.as_ref().into()])
            .await?;
        Ok(())
    }

    /// Appends a message and bumps the conversation's `updated_at`, atomically.
    pub async fn append_message(
        &self,
        conversation_id: &str,
        message: NewMessage,
    ) -> Result<Message, StoreError> {
        let now = now_rfc3339();
        let touch = vec![conversation_id.into(), now.as_str().into()];
        let insert: Vec<Bound> = vec![
            conversation_id.into(),
            message.role.as_str().into(),
            self.for_storage(&message.content).as_ref().into(),
            self.tool_calls_for_storage(&message).into(),
            message
                .tool_call_id
                .as_deref()
                .map(|id| self.for_storage(id))
                .as_deref()
                .into(),
            message
                .name
                .as_deref()
                .map(|name| self.for_storage(name))
                .as_deref()
                .into(),
            now.as_str().into(),
        ];
        let inserted = self
            .db
            .insert_after(
                (Sql::fixed(TOUCH_CONVERSATION), touch),
                (Sql::fixed(INSERT_MESSAGE), insert),
            )
            .await?;
        let id = inserted.ok_or_else(|| no_such_conversation(conversation_id))?;
        // Nobody listening (no `/mcp`) is no error.
        let _ = self.conversation_changes.send(conversation_id.into());
        Ok(Message {
            id,
            conversation_id: conversation_id.to_string(),
            role: message.role,
            content: message.content,
            tool_calls: message.tool_calls,
            tool_call_id: message.tool_call_id,
            name: message.name,
            created_at: now,
        })
    }

    /// A page of a conversation's messages, oldest first. With `after`, the page starts
    /// just after that id; otherwise it ends just before `before` (or at the newest).
    pub async fn list_messages(
        &self,
        conversation_id: &str,
        query: MessageQuery,
    ) -> Result<MessagePage, StoreError> {
        let limit = query.limit.max(1);
        // Fetch one extra row to learn whether more exist.
        let fetch = (limit + 1) as i64;
        let before = query.before.unwrap_or(i64::MAX);
        let messages = if let Some(after) = query.after {
            let sql = Sql::fixed(format!(
                "{MESSAGE_SELECT} WHERE conversation_id = ?1 AND id > ?2 AND id < ?3 ORDER BY id ASC LIMIT ?4"
            ));
            let values = vec![
                conversation_id.into(),
                after.into(),
                before.into(),
                fetch.into(),
            ];
            self.db.query(sql, values).await?
        } else {
            let sql = Sql::fixed(format!(
                "{MESSAGE_SELECT} WHERE conversation_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
            ));
            let values = vec![conversation_id.into(), before.into(), fetch.into()];
            let mut rows: Vec<Message> = self.db.query(sql, values).await?;
            rows.reverse();
            rows
        };
        Ok(MessagePage::from_one_extra(
            messages,
            limit,
            query.after.is_some(),
        ))
    }

    /// Every message of a conversation, oldest first (the agent's context).
    pub async fn conversation_history(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<Message>, StoreError> {
        let sql = Sql::fixed(format!(
            "{MESSAGE_SELECT} WHERE conversation_id = ?1 ORDER BY id ASC"
        ));
        self.db.query(sql, vec![conversation_id.into()]).await
    }
}

impl FromRow for Conversation {
    fn from_row<R: RowRead>(r: &R) -> Result<Conversation, R::Error> {
        Ok(Conversation {
            id: r.text(0)?,
            title: r.optional_text(1)?,
            created_at: r.text(2)?,
            updated_at: r.text(3)?,
            message_count: r.int(4)?,
        })
    }
}

impl FromRow for Message {
    fn from_row<R: RowRead>(r: &R) -> Result<Message, R::Error> {
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
}
