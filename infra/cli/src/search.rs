//! `sluice search --knowledge-base ID "query" [--mode MODE] [--explain] [--top-k N]`: the
//! search `/rag/search` runs, over one base, as an operator (no caller's token: the base is
//! named, so no access decision is made). It prints the hits as the route answers them,
//! `explain` included, so a team can see why a passage came back without a token.

use sluice_search::{Mode, Query, search_bases};
use std::process::ExitCode;
use uuid::Uuid;

pub async fn run(kb_id: Uuid, text: String, mode: Mode, explain: bool, top_k: i64) -> ExitCode {
    let fail = |error: String| {
        eprintln!("{}", serde_json::json!({ "error": error }));
        ExitCode::FAILURE
    };
    if let Err(error) = sluice_embed::network::NetworkPolicy::from_env() {
        return fail(error.to_string());
    }
    let sdk = sluice_blob::sdk_config().await;
    let (config, db, base) = match crate::sync::operator_base(&sdk, kb_id).await {
        Ok(operator) => operator,
        Err(error) => return fail(error),
    };
    let state = sluice_search::State::new(config, db, &sdk);
    let query = Query { text, mode, top_k, filters: Default::default(), explain, by_document: false, rerank: None };
    // The operator's queries are cached as the base's owner's would be (this process's own cache).
    let tenant = base.org_id.unwrap_or(base.owner_id);
    match search_bases(&state, tenant, vec![base], &query).await {
        Ok(answer) => {
            println!("{}", answer.to_json());
            ExitCode::SUCCESS
        }
        Err(error) => fail(error.to_string()),
    }
}
