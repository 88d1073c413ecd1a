//! The local runner: it stands in for the AWS services that invoke Sluice's Lambdas. Its
//! HTTP front door validates the JWT as API Gateway's authorizer would, turns the request
//! into an API Gateway HTTP API (payload 2.0) event, and calls the same handler the Lambda
//! runs. It also creates the local bucket and KMS key the functions are configured with.

pub mod door;
pub mod event;
pub mod jwt;
pub mod resources;
