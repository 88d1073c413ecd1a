//! The messages Sluice sends itself, and how they are sent: a job is written to the outbox
//! with the rows it concerns, sent after the commit, and marked sent; the sweep re-sends
//! what stayed unsent.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// "Work on this document": parse it (topic `parse-document`) or ingest it (`ingest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentJob {
    pub document_id: Uuid,
    /// How many times this job has let another tenant's document go first (in parse or ingest).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub yields: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// "Bytes landed under this upload's key and were never judged" (topic `landed`, the parse
/// queue): sent by the sweep for an expired upload whose object is there, because its S3
/// event was lost or went to the dead-letter queue. Parse handles it as it would the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandedJob {
    pub landed_key: String,
}

/// The topic of [`LandedJob`]s.
pub const LANDED_TOPIC: &str = "landed";

/// How many times one document lets other tenants go first in a stage before it takes its
/// turn regardless (their documents may be stuck; its tenant must still move).
pub const MAX_YIELDS: u32 = 30;

/// How long a yielded job waits before it is delivered again.
const YIELD_DELAY_SECS: i32 = 1;

/// How long a job that found its document claimed by another delivery waits before it is
/// delivered again: long enough not to spin, short enough that a failed attempt is retried soon.
const CLAIMED_DELAY_SECS: i32 = 30;

/// How long a document counts as in a stage after it started: the functions' own timeout,
/// after which a started attempt is dead.
pub const STAGE_LEASE: std::time::Duration = std::time::Duration::from_secs(900);

impl DocumentJob {
    /// Whether this delivery may still let another tenant go first (`MAX_YIELDS`).
    pub fn may_yield(&self) -> bool {
        self.yields < MAX_YIELDS
    }

    /// The job as it is sent again after yielding its turn.
    fn yielded(&self) -> serde_json::Value {
        serde_json::json!({"document_id": self.document_id, "yields": self.yields + 1})
    }
}

/// The topics and the queues they go to.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    sqs: aws_sdk_sqs::Client,
    routes: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("no queue is configured for topic {0}")]
    NoRoute(String),
    #[error("the queue did not take the message")]
    Send(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Dispatcher {
    /// `routes` pairs a topic with its queue URL.
    pub fn new(sqs: aws_sdk_sqs::Client, routes: Vec<(String, String)>) -> Self {
        Self { sqs, routes }
    }

    fn queue_of(&self, topic: &str) -> Result<&String, DispatchError> {
        self.routes
            .iter()
            .find(|(t, _)| t == topic)
            .map(|(_, url)| url)
            .ok_or_else(|| DispatchError::NoRoute(topic.to_owned()))
    }

    /// Sends many payloads to the queue of `topic`, ten to a request (SQS's batch limit).
    /// Any entry SQS did not take fails the call; the caller's outbox keeps them for a retry.
    pub async fn send_all(&self, topic: &str, payloads: &[serde_json::Value]) -> Result<(), DispatchError> {
        use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
        let url = self.queue_of(topic)?;
        for batch in payloads.chunks(10) {
            let entries = batch
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    SendMessageBatchRequestEntry::builder().id(i.to_string()).message_body(p.to_string()).build()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| DispatchError::Send(Box::new(e)))?;
            let sent = self
                .sqs
                .send_message_batch()
                .queue_url(url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| DispatchError::Send(Box::new(e)))?;
            if !sent.failed().is_empty() {
                return Err(DispatchError::Send(format!("{} messages not taken", sent.failed().len()).into()));
            }
        }
        Ok(())
    }

    /// Sends `payload` to the queue of `topic`.
    pub async fn send(&self, topic: &str, payload: &serde_json::Value) -> Result<(), DispatchError> {
        self.send_later(topic, payload, 0).await
    }

    /// Sends `job`, which yielded its turn to another tenant's document, to the back of the
    /// queue of `topic` (a new message: the yield counts against no delivery).
    pub async fn yield_turn(&self, topic: &str, job: &DocumentJob) -> Result<(), DispatchError> {
        self.send_later(topic, &job.yielded(), YIELD_DELAY_SECS).await?;
        tracing::info!(id = %job.document_id, yields = job.yields + 1, "another tenant's document goes first");
        Ok(())
    }

    /// Sends `job`, whose document another delivery is working on, to come back once that
    /// attempt has likely ended (the same job: waiting counts against no delivery or yield).
    pub async fn send_after_claim(&self, topic: &str, job: &DocumentJob) -> Result<(), DispatchError> {
        let payload = serde_json::to_value(job).map_err(|e| DispatchError::Send(Box::new(e)))?;
        self.send_later(topic, &payload, CLAIMED_DELAY_SECS).await?;
        tracing::info!(id = %job.document_id, "another delivery is ingesting the document; this one comes back later");
        Ok(())
    }

    /// Sends `payload` to the queue of `topic`, delivered no sooner than `delay_secs` from now
    /// (at most SQS's 900).
    pub async fn send_later(
        &self,
        topic: &str,
        payload: &serde_json::Value,
        delay_secs: i32,
    ) -> Result<(), DispatchError> {
        let url = self.queue_of(topic)?;
        let mut request = self.sqs.send_message().queue_url(url).message_body(payload.to_string());
        if delay_secs > 0 {
            request = request.delay_seconds(delay_secs.min(900));
        }
        request.send().await.map_err(|e| DispatchError::Send(Box::new(e)))?;
        Ok(())
    }
}

/// How many times SQS has delivered `message` (1 on the first delivery).
pub fn receive_count(message: &aws_lambda_events::event::sqs::SqsMessage) -> u32 {
    message.attributes.get("ApproximateReceiveCount").and_then(|v| v.parse().ok()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parse tries a body as a `LandedJob` first: only the sweep's own message may pass.
    #[test]
    fn only_the_sweeps_message_is_taken_for_a_landed_job() {
        let job = LandedJob { landed_key: "uploads/u/1_a.txt".to_owned() };
        let body = serde_json::to_string(&job).expect("json");
        assert_eq!(serde_json::from_str::<LandedJob>(&body).expect("its own body"), job);
        let document = serde_json::to_string(&DocumentJob { document_id: Uuid::nil(), yields: 0 }).expect("json");
        assert!(serde_json::from_str::<LandedJob>(&document).is_err());
        let s3 = r#"{"landed_key": "uploads/u/1_a.txt", "Records": []}"#;
        assert!(serde_json::from_str::<LandedJob>(s3).is_err(), "an unknown field is refused");
    }
}
