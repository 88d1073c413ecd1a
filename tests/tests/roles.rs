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
    for function in ["SearchFunction", "IngestFunction", "ExtractFunction"] {
        assert!(layers(&template, function).contains(&"OnnxRuntimeLayer".to_owned()), "{function}");
    }
    // The parsers ship only with the extract function: upload and parse invoke it.
    for layer in ["PdfiumLayer", "OcrLayer", "OnnxRuntimeLayer"] {
        assert!(layers(&template, "ExtractFunction").contains(&layer.to_owned()), "{layer}");
        for function in ["UploadFunction", "ParseFunction"] {
            assert!(!layers(&template, function).contains(&layer.to_owned()), "{function} holds {layer}");
        }
    }
    // Upload and parse, and no other function, invoke it.
    for (name, resource) in template["Resources"].as_mapping().expect("resources") {
        let name = name.as_str().expect("a name");
        let invokes = resource["Properties"]["Policies"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(|p| p["Statement"].as_sequence())
            .flatten()
            .any(|statement| statement["Action"].as_str() == Some("lambda:InvokeFunction"));
        assert_eq!(invokes, ["UploadFunction", "ParseFunction"].contains(&name), "{name}");
        if invokes {
            let named = match &variables(name)["SLUICE_EXTRACT_FUNCTION"] {
                Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned),
                _ => None,
            };
            assert_eq!(named.as_deref(), Some("ExtractFunction"), "{name}");
        }
    }
    for function in ["SearchFunction", "IngestFunction"] {
        assert!(layers(&template, function).contains(&"ModelLayer".to_owned()), "{function}");
        assert!(!variables(function)["SLUICE_EMBED_PRECISION"].is_null(), "{function}");
    }
}

/// The extract function opens untrusted bytes: AWS must keep it in an environment per tenant
/// and give it nothing to reach with. Only the template can say so; this holds it to that.
#[test]
fn the_extract_function_is_isolated_per_tenant_and_holds_nothing() {
    let template = template();
    let resources = &template["Resources"];
    let function = &resources["ExtractFunction"]["Properties"];
    assert_eq!(function["TenancyConfig"]["TenantIsolationMode"].as_str(), Some("PER_TENANT"));
    // Its own role: its log group and the network interfaces Lambda makes for it, no more.
    let tagged_name =
        |value: &Value| match value {
            Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned).or_else(|| {
                tagged.value.as_sequence().and_then(|s| s.first()).and_then(|v| v.as_str()).map(str::to_owned)
            }),
            _ => None,
        };
    assert_eq!(tagged_name(&function["Role"]).as_deref(), Some("ExtractRole.Arn"));
    let role = &resources["ExtractRole"]["Properties"];
    assert!(role["ManagedPolicyArns"].is_null(), "no managed policy");
    let mut actions = BTreeSet::new();
    for policy in role["Policies"].as_sequence().expect("policies") {
        for statement in policy["PolicyDocument"]["Statement"].as_sequence().expect("statements") {
            assert_eq!(statement["Effect"].as_str(), Some("Allow"));
            for action in statement["Action"].as_sequence().expect("actions") {
                actions.insert(action.as_str().expect("an action").to_owned());
            }
        }
    }
    let allowed: BTreeSet<String> = [
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(actions, allowed);
    // Its own security group (HTTPS out only), never the other functions' (which reach the
    // database and the interface endpoints); no function takes its group from the globals.
    assert!(template["Globals"]["Function"]["VpcConfig"].is_null());
    let groups = function["VpcConfig"]["SecurityGroupIds"].as_sequence().expect("groups");
    assert_eq!(groups.iter().filter_map(tagged_name).collect::<Vec<_>>(), ["ExtractSecurityGroup"]);
    let egress = resources["ExtractSecurityGroup"]["Properties"]["SecurityGroupEgress"].as_sequence().expect("egress");
    assert_eq!(egress.len(), 1);
    assert_eq!((egress[0]["FromPort"].as_u64(), egress[0]["ToPort"].as_u64()), (Some(443), Some(443)));
    // Its subnets' route table has no route of its own: only the S3 gateway endpoint's.
    for (name, resource) in resources.as_mapping().expect("resources") {
        if resource["Type"].as_str() == Some("AWS::EC2::Route") {
            let table = tagged_name(&resource["Properties"]["RouteTableId"]);
            assert_ne!(table.as_deref(), Some("ExtractRouteTable"), "{name:?} routes the extract subnets");
        }
    }
    // Every other function is in the VPC with the functions' group.
    for (name, resource) in resources.as_mapping().expect("resources") {
        if resource["Type"].as_str() == Some("AWS::Serverless::Function") && name.as_str() != Some("ExtractFunction") {
            let groups = resource["Properties"]["VpcConfig"]["SecurityGroupIds"].as_sequence().expect("groups");
            assert_eq!(
                groups.iter().filter_map(tagged_name).collect::<Vec<_>>(),
                ["FunctionSecurityGroup"],
                "{name:?}"
            );
        }
    }
}

/// Lambda's recursive-loop detection stops a function that sends to the queue it is invoked
/// from after about 16 hops; every such function's loop is bounded by its code, and says so.
#[test]
fn a_function_that_sends_to_its_own_queue_allows_the_loop() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let mut self_senders = Vec::new();
    for (name, resource) in resources {
        let properties = &resource["Properties"];
        let Some(events) = properties["Events"].as_mapping() else { continue };
        let queues: Vec<String> = events
            .values()
            .filter(|event| event["Type"].as_str() == Some("SQS"))
            .filter_map(|event| match &event["Properties"]["Queue"] {
                Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned),
                _ => None,
            })
            .collect();
        let policies = properties["Policies"].as_sequence().into_iter().flatten();
        let sends_to_own = policies.filter_map(|p| p["Statement"].as_sequence()).flatten().any(|statement| {
            let sends = match &statement["Action"] {
                Value::String(one) => one == "sqs:SendMessage",
                Value::Sequence(many) => many.iter().any(|a| a.as_str() == Some("sqs:SendMessage")),
                _ => false,
            };
            let targets: Vec<String> = match &statement["Resource"] {
                Value::Sequence(many) => many.to_vec(),
                one => vec![one.clone()],
            }
            .iter()
            .filter_map(|r| match r {
                Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned),
                _ => None,
            })
            .collect();
            sends && targets.iter().any(|t| queues.contains(t))
        });
        if sends_to_own {
            let name = name.as_str().expect("a name").to_owned();
            assert_eq!(properties["RecursiveLoop"].as_str(), Some("Allow"), "{name}");
            self_senders.push(name);
        }
    }
    self_senders.sort();
    assert_eq!(self_senders, ["IngestFunction", "ParseFunction"]);
}
