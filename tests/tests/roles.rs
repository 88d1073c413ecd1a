//! What the template lets the search and knowledge functions do with the deployment's key,
//! and which of them carries the model. AWS enforces the roles; the local emulator does
//! not, so the template itself is held to what each function's code does: knowledge seals
//! credentials and opens a sync source's key pair to check its bucket; search opens a
//! collection's key to embed a query, and embeds keyless queries with the model.

use std::collections::BTreeSet;
use yaml_serde::Value;

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).expect("template");
    yaml_serde::from_str(&text).expect("template.yaml is YAML")
}

/// The KMS actions a function's policies allow, each checked to be bound to a sealed
/// secret's encryption context.
fn kms_actions(template: &Value, function: &str) -> BTreeSet<String> {
    let policies = template["Resources"][function]["Properties"]["Policies"].as_sequence().expect("policies");
    let mut actions = BTreeSet::new();
    for statement in policies.iter().filter_map(|p| p["Statement"].as_sequence()).flatten() {
        let listed: Vec<String> = match &statement["Action"] {
            Value::String(one) => vec![one.clone()],
            Value::Sequence(many) => many.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        };
        let kms: Vec<String> = listed.into_iter().filter(|a| a.starts_with("kms:")).collect();
        if !kms.is_empty() {
            let bound = &statement["Condition"]["StringLike"]["kms:EncryptionContext:sluice:secret"];
            assert!(bound.as_str().is_some(), "{function}: {kms:?} without the sluice:secret context");
            actions.extend(kms);
        }
    }
    actions
}

fn layers(template: &Value, function: &str) -> Vec<String> {
    let layers = template["Resources"][function]["Properties"]["Layers"].as_sequence().expect("layers");
    layers
        .iter()
        .filter_map(|layer| match layer {
            Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[test]
fn each_function_may_open_only_what_its_code_opens_and_search_alone_of_the_two_holds_the_model() {
    let template = template();
    let set = |actions: &[&str]| actions.iter().map(|a| (*a).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(kms_actions(&template, "KnowledgeFunction"), set(&["kms:Decrypt", "kms:GenerateDataKey"]));
    assert_eq!(kms_actions(&template, "SearchFunction"), set(&["kms:Decrypt"]));
    assert!(layers(&template, "SearchFunction").contains(&"ModelLayer".to_owned()));
    assert!(!layers(&template, "KnowledgeFunction").contains(&"ModelLayer".to_owned()));
    let variables = |function: &str| template["Resources"][function]["Properties"]["Environment"]["Variables"].clone();
    assert_eq!(variables("SearchFunction")["SLUICE_MODEL_DIR"].as_str(), Some("/opt/minilm"));
    assert!(variables("KnowledgeFunction")["SLUICE_MODEL_DIR"].is_null());
    // The int8 model runs on ONNX Runtime: whoever holds the model or OCR holds the runtime,
    // and the precision is the deployment's one setting.
    for function in ["SearchFunction", "IngestFunction", "UploadFunction", "ParseFunction"] {
        assert!(layers(&template, function).contains(&"OnnxRuntimeLayer".to_owned()), "{function}");
    }
    for function in ["SearchFunction", "IngestFunction"] {
        assert!(layers(&template, function).contains(&"ModelLayer".to_owned()), "{function}");
        assert!(!variables(function)["SLUICE_EMBED_PRECISION"].is_null(), "{function}");
    }
}
