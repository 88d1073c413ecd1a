//! The local stack itself: the resources the provisioning step creates, through the real
//! SDK clients against the emulator.

use aws_sdk_sqs::types::QueueAttributeName;
use sluice_e2e::Stack;

#[tokio::test]
async fn every_queue_has_a_dead_letter_queue_and_a_redrive_policy() {
    let stack = Stack::from_env().await;
    let sdk = sluice_blob::sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    for name in ["sluice-parse", "sluice-ingest", "sluice-teardown"] {
        let url = sqs.get_queue_url().queue_name(name).send().await.expect("queue exists");
        let url = url.queue_url().expect("url");
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .expect("attributes");
        let attributes = attributes.attributes().expect("attributes");
        let redrive = attributes.get(&QueueAttributeName::RedrivePolicy).expect("a redrive policy");
        let redrive: serde_json::Value = serde_json::from_str(redrive).expect("json");
        assert!(redrive["deadLetterTargetArn"].as_str().expect("arn").ends_with(&format!("{name}-dlq")), "{name}");
        let visibility: u32 = attributes[&QueueAttributeName::VisibilityTimeout].parse().expect("number");
        // The test stack shortens redelivery on purpose; otherwise the deployed value holds.
        match std::env::var("SLUICE_LOCAL_VISIBILITY_TIMEOUT_SECS").ok().and_then(|v| v.parse::<u32>().ok()) {
            Some(shortened) => assert_eq!(visibility, shortened, "{name}"),
            None => assert!(visibility >= 180, "{name}: visibility timeout {visibility}s"),
        }
        let receives = &redrive["maxReceiveCount"];
        let receives = receives.as_u64().or_else(|| receives.as_str().and_then(|v| v.parse().ok())).unwrap_or(0);
        assert_eq!(receives, 5, "{name}: maxReceiveCount");
    }
    assert!(stack.s3.head_bucket().bucket(&stack.bucket).send().await.is_ok(), "the bucket exists");
}
