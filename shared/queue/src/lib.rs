//! SQS for the queue functions: S3 event notifications decoded tolerantly, and the batch
//! contract of an SQS event source with `ReportBatchItemFailures` — every message judged on
//! its own, and only the ones that should be delivered again reported.

pub mod jobs;
pub mod s3;

pub use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};

use aws_lambda_events::event::sqs::BatchItemFailure;
use futures_util::StreamExt;
use std::future::Future;

/// Handles every message of `event`, at most `concurrency` at a time, and reports the ones
/// whose handler failed (and those without an id, which cannot be acknowledged alone) so
/// that SQS delivers only them again.
pub async fn run_batch<F, Fut, E>(event: SqsEvent, concurrency: usize, handle: F) -> SqsBatchResponse
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    run_batch_starting_by(event, concurrency, None, handle).await
}

/// [`run_batch`], but a message whose turn comes after `start_by` is not started: it is
/// reported, and delivered again to an invocation with the time to handle it, rather than
/// cut off by this one's timeout (which would send the whole batch back, handled or not).
pub async fn run_batch_starting_by<F, Fut, E>(
    event: SqsEvent,
    concurrency: usize,
    start_by: Option<std::time::Instant>,
    handle: F,
) -> SqsBatchResponse
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let handle = &handle;
    let outcomes = futures_util::stream::iter(event.records)
        .map(|message| {
            let id = message.message_id.clone();
            async move {
                if start_by.is_some_and(|start_by| std::time::Instant::now() > start_by) {
                    return (id, Err("not started: too little of the invocation was left for it".to_owned()));
                }
                (id, handle(message).await.map_err(|error| error.to_string()))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    let mut response = SqsBatchResponse::default();
    for (id, outcome) in outcomes {
        if let Err(error) = outcome {
            tracing::warn!(message_id = id.as_deref().unwrap_or("?"), error = %error, "message will be delivered again");
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id.unwrap_or_default();
            response.batch_item_failures.push(failure);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, body: &str) -> SqsMessage {
        let mut message = SqsMessage::default();
        message.message_id = Some(id.to_owned());
        message.body = Some(body.to_owned());
        message
    }

    #[tokio::test]
    async fn a_message_whose_turn_comes_after_the_start_limit_is_reported_unstarted() {
        let mut event = SqsEvent::default();
        event.records = vec![message("a", "slow"), message("b", "slow"), message("c", "slow")];
        let started = std::sync::Mutex::new(Vec::new());
        let start_by = std::time::Instant::now() + std::time::Duration::from_millis(100);
        // One at a time, 150 ms each: only the first starts before the limit.
        let response = run_batch_starting_by(event, 1, Some(start_by), |m| {
            started.lock().expect("lock").push(m.message_id.clone().unwrap_or_default());
            async {
                tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                Ok::<_, String>(())
            }
        })
        .await;
        assert_eq!(*started.lock().expect("lock"), ["a"]);
        let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        assert_eq!(failed, ["b", "c"]);
    }

    #[tokio::test]
    async fn only_the_failed_messages_are_reported() {
        let mut event = SqsEvent::default();
        event.records = vec![message("a", "ok"), message("b", "bad"), message("c", "ok")];
        let response =
            run_batch(
                event,
                2,
                |m| async move { if m.body.as_deref() == Some("ok") { Ok(()) } else { Err("broken") } },
            )
            .await;
        let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        assert_eq!(failed, ["b"]);
    }
}
