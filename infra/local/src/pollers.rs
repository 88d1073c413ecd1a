//! SQS pollers with the semantics of Lambda's SQS event source: a batch of up to
//! `batch_size` messages goes to the handler as one `SqsEvent`; the messages the handler
//! does not report in `batchItemFailures` are deleted; the reported ones stay invisible
//! for the queue's visibility timeout, are delivered again, and the queue's redrive policy
//! moves them to the dead-letter queue after `maxReceiveCount` receives.

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use sluice_queue::{SqsBatchResponse, SqsEvent, SqsMessage};
use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

/// A queue to poll.
#[derive(Debug, Clone)]
pub struct Source {
    pub queue_url: String,
    pub queue_arn: String,
    pub batch_size: i32,
    pub region: String,
}

fn to_lambda_message(message: &Message, source: &Source) -> SqsMessage {
    let mut lambda = SqsMessage::default();
    lambda.message_id = message.message_id().map(str::to_owned);
    lambda.receipt_handle = message.receipt_handle().map(str::to_owned);
    lambda.body = message.body().map(str::to_owned);
    lambda.md5_of_body = message.md5_of_body().map(str::to_owned);
    lambda.attributes = message
        .attributes()
        .map(|a| a.iter().map(|(k, v)| (k.as_str().to_owned(), v.clone())).collect())
        .unwrap_or_default();
    lambda.event_source = Some("aws:sqs".to_owned());
    lambda.event_source_arn = Some(source.queue_arn.clone());
    lambda.aws_region = Some(source.region.clone());
    lambda
}

/// Polls `source` for ever, feeding batches to `handler`.
pub async fn poll<F, Fut>(sqs: aws_sdk_sqs::Client, source: Source, handler: F)
where
    F: Fn(SqsEvent) -> Fut,
    Fut: Future<Output = SqsBatchResponse>,
{
    loop {
        let messages = match receive(&sqs, &source).await {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(queue = %source.queue_url, error = ?error, "receive failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if messages.is_empty() {
            continue;
        }
        let messages = if crate::faults::active(crate::faults::LATE_DELIVERIES) {
            put_back_once(&sqs, &source, messages).await
        } else {
            messages
        };
        if messages.is_empty() {
            continue;
        }
        if crate::faults::active(crate::faults::DUPLICATE_DELIVERIES) {
            handler(event_of(&messages, &source)).await;
        }
        let response = handler(event_of(&messages, &source)).await;
        delete_handled(&sqs, &source, &messages, &response).await;
    }
}

/// The next batch of `source` (at most its batch size, waiting up to a second), with the
/// attributes Lambda's event source passes on.
pub async fn receive(
    sqs: &aws_sdk_sqs::Client,
    source: &Source,
) -> Result<Vec<Message>, aws_sdk_sqs::error::SdkError<aws_sdk_sqs::operation::receive_message::ReceiveMessageError>> {
    let received = sqs
        .receive_message()
        .queue_url(&source.queue_url)
        .max_number_of_messages(source.batch_size)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await?;
    Ok(received.messages.unwrap_or_default())
}

/// The event Lambda's SQS event source hands a function for `messages` of `source`.
pub fn event_of(messages: &[Message], source: &Source) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages.iter().map(|m| to_lambda_message(m, source)).collect();
    event
}

/// Deletes the messages of a batch that `response` does not report failed, as Lambda's SQS
/// event source does; the failed ones come back after the queue's visibility timeout.
pub async fn delete_handled(
    sqs: &aws_sdk_sqs::Client,
    source: &Source,
    messages: &[Message],
    response: &SqsBatchResponse,
) {
    let failed: HashSet<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    let done: Vec<DeleteMessageBatchRequestEntry> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.message_id().is_some_and(|id| !failed.contains(id)))
        .filter_map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .set_receipt_handle(m.receipt_handle().map(str::to_owned))
                .build()
                .ok()
        })
        .collect();
    if done.is_empty() {
        return;
    }
    if let Err(error) = sqs.delete_message_batch().queue_url(&source.queue_url).set_entries(Some(done)).send().await {
        tracing::warn!(queue = %source.queue_url, error = ?error, "could not delete handled messages");
    }
}

/// The soak's late deliveries: each message not put back before is made visible again in a
/// few seconds, unhandled, so later ones go first; the ones put back before are returned to
/// be handled now (once each: a receive counts toward the dead-letter queue).
async fn put_back_once(sqs: &aws_sdk_sqs::Client, source: &Source, messages: Vec<Message>) -> Vec<Message> {
    static PUT_BACK: std::sync::Mutex<Option<HashSet<String>>> = std::sync::Mutex::new(None);
    let mut now = Vec::new();
    for message in messages {
        let id = message.message_id().unwrap_or_default().to_owned();
        let first_time =
            PUT_BACK.lock().map(|mut seen| seen.get_or_insert_with(HashSet::new).insert(id)).unwrap_or(false);
        let Some(receipt) = message.receipt_handle().filter(|_| first_time) else {
            now.push(message);
            continue;
        };
        let delayed =
            sqs.change_message_visibility().queue_url(&source.queue_url).receipt_handle(receipt).visibility_timeout(3);
        if let Err(error) = delayed.send().await {
            tracing::warn!(queue = %source.queue_url, error = ?error, "could not put a message back");
        }
    }
    now
}
