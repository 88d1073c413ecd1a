//! The local runner: it stands in for the AWS services that invoke Sluice's Lambdas. Its
//! HTTP front door validates the JWT as API Gateway's authorizer would, turns the request
//! into an API Gateway HTTP API (payload 2.0) event, and calls the same handler the Lambda
//! runs. Its SQS pollers feed queue batches to the queue functions as Lambda's event source
//! would. Its Lambda API (`lambda`) serves `Invoke` for the extract function, one process
//! per tenant through a Lambda Runtime API (`runtime_api`). It also creates the local bucket (with the template's CORS rules), KMS key, queues
//! and bucket notifications.

pub mod cors;
pub mod door;
pub mod event;
pub mod faults;
pub mod jwt;
pub mod lambda;
pub mod pollers;
pub mod resources;
pub mod runtime_api;
