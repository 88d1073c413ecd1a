//! The outbox: jobs written in the transaction of the rows they concern, sent after the
//! commit, marked sent, and found again by the sweep when a send did not happen.

use crate::{Db, StoreError};
use uuid::Uuid;

/// An outbox row not yet sent.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMessage {
    pub id: Uuid,
    pub topic: String,
    pub payload: serde_json::Value,
}

impl OutboxMessage {
    /// `messages` grouped by topic (in the order each topic first appears): each topic's
    /// payloads and row ids, to send with one call a topic.
    pub fn by_topic(messages: &[Self]) -> Vec<(&str, Vec<serde_json::Value>, Vec<Uuid>)> {
        let mut groups: Vec<(&str, Vec<serde_json::Value>, Vec<Uuid>)> = Vec::new();
        for message in messages {
            let at = match groups.iter().position(|(topic, _, _)| *topic == message.topic) {
                Some(at) => at,
                None => {
                    groups.push((&message.topic, Vec::new(), Vec::new()));
                    groups.len() - 1
                }
            };
            groups[at].1.push(message.payload.clone());
            groups[at].2.push(message.id);
        }
        groups
    }
}

impl Db {
    /// Outbox rows not sent `older_than` after they were written.
    pub async fn undispatched(&self, older_than: std::time::Duration) -> Result<Vec<OutboxMessage>, StoreError> {
        let client = self.client().await?;
        let seconds = older_than.as_secs_f64();
        let rows = client
            .query(
                "SELECT id, topic, payload FROM outbox WHERE dispatched_at IS NULL \
                 AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT 500",
                &[&seconds],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| OutboxMessage { id: r.get("id"), topic: r.get("topic"), payload: r.get("payload") })
            .collect())
    }

    pub async fn mark_all_dispatched(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE outbox SET dispatched_at = now() WHERE id = ANY($1)", &[&ids]).await?;
        Ok(())
    }

    pub async fn mark_dispatched(&self, id: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE outbox SET dispatched_at = now() WHERE id = $1", &[&id]).await?;
        Ok(())
    }
}
