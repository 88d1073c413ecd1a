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
    let outcomes = futures_util::stream::iter(event.records)
        .map(|message| {
            let id = message.message_id.clone();
            let outcome = handle(message);
            async move { (id, outcome.await) }
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
