//! What the template grants each function, held to what its code does: AWS enforces the
//! roles and the local emulator does not, so only the template can say it. Which kinds of
//! sealed secret each role may open, which carries the model and the parsers, who invokes
//! the extract function (isolated per tenant, holding nothing), who assumes a source's role,
//! which functions allow their own loops, that a parse batch fits its timeout, what the
//! alarms watch and what the guide says they cost, and the migrate function's schedule.

use std::collections::BTreeSet;
use yaml_serde::Value;

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).expect("template");
    yaml_serde::from_str(&text).expect("template.yaml is YAML")
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
    // What each may open of the vault: each_role_opens_only_the_kinds_of_secret_its_code_opens.
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

#[test]
fn the_alarms_cover_every_function_and_the_deploy_guide_counts_their_metrics() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let of_type = |kind: &str| {
        resources
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(kind))
            .filter_map(|(id, r)| Some((id.as_str()?.to_owned(), r.clone())))
            .collect::<Vec<_>>()
    };
    let functions: BTreeSet<String> = of_type("AWS::Serverless::Function").into_iter().map(|(id, _)| id).collect();
    let alarms = of_type("AWS::CloudWatch::Alarm");
    let metrics_of = |alarm: &Value| match alarm["Properties"]["Metrics"].as_sequence() {
        Some(metrics) => metrics.iter().filter(|m| !m["MetricStat"].is_null()).count(),
        None => 1,
    };
    let named = |alarm: &Value| -> BTreeSet<String> {
        let metrics = alarm["Properties"]["Metrics"].as_sequence().expect("metrics");
        let dimensions = metrics.iter().filter_map(|m| m["MetricStat"]["Metric"]["Dimensions"].as_sequence()).flatten();
        dimensions
            .filter_map(|d| match &d["Value"] {
                Value::Tagged(tagged) => tagged.value.as_str().map(str::to_owned),
                _ => None,
            })
            .collect()
    };
    for id in ["FunctionErrorsAlarm", "FunctionThrottlesAlarm"] {
        let alarm = &alarms.iter().find(|(name, _)| name == id).expect(id).1;
        assert_eq!(named(alarm), functions, "{id} watches every function");
    }
    let metrics: usize = alarms.iter().map(|(_, alarm)| metrics_of(alarm)).sum();
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/deploying.md")).expect("guide");
    let line = format!("| CloudWatch alarms ({} alarms over {metrics} metrics, at $0.10 a metric) |", alarms.len());
    assert!(guide.contains(&line), "docs/deploying.md's cost table has no line {line:?}");
    let cost = format!("${:.2}", metrics as f64 * 0.10);
    assert!(guide.contains(&format!("{line} {cost} | {cost} |")), "the alarms cost {cost} a month");
}

#[test]
fn every_role_that_assumes_a_source_role_is_a_principal_the_guide_tells_it_to_trust() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    // The functions whose policies allow sts:AssumeRole on other accounts' roles.
    let mut assuming = BTreeSet::new();
    for (id, resource) in resources {
        let policies = resource["Properties"]["Policies"].as_sequence().into_iter().flatten();
        let statements = policies.filter_map(|p| p["Statement"].as_sequence()).flatten();
        let allows = statements
            .filter(|s| s["Effect"].as_str() == Some("Allow"))
            .any(|s| s["Action"].as_str() == Some("sts:AssumeRole"));
        if allows {
            assuming.insert(format!("{}Role", id.as_str().expect("id")));
        }
    }
    assert_eq!(assuming, BTreeSet::from(["ParseFunctionRole".to_owned(), "KnowledgeFunctionRole".to_owned()]));
    let output = serde_json::to_string(&template["Outputs"]["SyncSourceRolePrincipals"]["Value"]).expect("json");
    for role in &assuming {
        assert!(output.contains(role), "SyncSourceRolePrincipals does not name {role}: {output}");
    }
}

/// Each KMS grant of a function's policies on a sealed secret's data keys: the action and
/// the kinds it is bound to (`None`: any kind). A grant not bound to a secret must go through
/// S3 (`kms:ViaService`), where no secret is sealed.
fn secret_grants(template: &Value, function: &str) -> BTreeSet<(String, Option<Vec<String>>)> {
    let policies = template["Resources"][function]["Properties"]["Policies"].as_sequence().expect("policies");
    let mut grants = BTreeSet::new();
    for statement in policies.iter().filter_map(|p| p["Statement"].as_sequence()).flatten() {
        let listed: Vec<String> = match &statement["Action"] {
            Value::String(one) => vec![one.clone()],
            Value::Sequence(many) => many.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        };
        let kms: Vec<String> = listed.into_iter().filter(|a| a.starts_with("kms:")).collect();
        if kms.is_empty() || statement["Effect"].as_str() != Some("Allow") {
            continue;
        }
        let condition = &statement["Condition"];
        if condition["StringLike"]["kms:EncryptionContext:sluice:secret"].is_null() {
            let through_s3 =
                ["StringLike", "StringEquals"].iter().any(|op| !condition[*op]["kms:ViaService"].is_null());
            assert!(through_s3, "{function}: {kms:?} bound neither to a secret nor to S3");
            continue;
        }
        let kinds = match &condition["StringEquals"]["kms:EncryptionContext:sluice:kind"] {
            Value::String(one) => Some(vec![one.clone()]),
            Value::Sequence(many) => Some(many.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect()),
            _ => None,
        };
        grants.extend(kms.into_iter().map(|action| (action, kinds.clone())));
    }
    grants
}

#[test]
fn each_role_opens_only_the_kinds_of_secret_its_code_opens() {
    let template = template();
    let grant = |action: &str, kinds: &[&str]| {
        (action.to_owned(), Some(kinds.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>()))
    };
    let expected: [(&str, BTreeSet<_>); 6] = [
        // Seals both kinds; opens only a source's key pair to check its bucket.
        (
            "KnowledgeFunction",
            BTreeSet::from([
                grant("kms:GenerateDataKey", &["api_key", "aws_credentials"]),
                grant("kms:Decrypt", &["aws_credentials"]),
            ]),
        ),
        ("SearchFunction", BTreeSet::from([grant("kms:Decrypt", &["api_key"])])),
        ("IngestFunction", BTreeSet::from([grant("kms:Decrypt", &["api_key"])])),
        // A source's key pair, and a collection's vision or LlamaParse key.
        ("ParseFunction", BTreeSet::from([grant("kms:Decrypt", &["aws_credentials", "api_key"])])),
        ("UploadFunction", BTreeSet::new()),
        // Seals again, with its kind, what was sealed before kinds were bound: any kind.
        (
            "MigrateFunction",
            BTreeSet::from([("kms:Decrypt".to_owned(), None), ("kms:GenerateDataKey".to_owned(), None)]),
        ),
    ];
    for (function, grants) in expected {
        assert_eq!(secret_grants(&template, function), grants, "{function}");
    }
    for function in ["TeardownFunction", "SweepFunction"] {
        assert_eq!(secret_grants(&template, function), BTreeSet::new(), "{function}");
    }
}

#[test]
fn a_full_parse_batch_fits_its_function_s_timeout() {
    let template = template();
    let parse = &template["Resources"]["ParseFunction"]["Properties"];
    let globals = &template["Globals"]["Function"]["Environment"]["Variables"];
    let variable = |name: &str| {
        let own = &parse["Environment"]["Variables"][name];
        let value = if own.is_null() { &globals[name] } else { own };
        value.as_str().and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| panic!("{name}"))
    };
    let batch = parse["Events"]["ObjectEvents"]["Properties"]["BatchSize"].as_u64().expect("batch size");
    let timeout = parse["Timeout"].as_u64().expect("timeout");
    // Every message of a batch starts at once, and each may take a document's read and its
    // images' descriptions (each up to the document limit) with the margin parse keeps.
    assert!(variable("FILE_IO_MAX_WORKERS") >= batch, "a batch of {batch} runs in one round");
    let reserve = 2 * variable("SLUICE_DOCUMENT_PARSE_SECS") + 60;
    assert!(reserve <= timeout, "a message needs {reserve} s of a {timeout} s invocation");
}

#[test]
fn what_a_deploy_s_online_phase_leaves_is_resumed_on_a_schedule() {
    let template = template();
    let events = &template["Resources"]["MigrateFunction"]["Properties"]["Events"];
    let scheduled = events
        .as_mapping()
        .into_iter()
        .flat_map(|events| events.values())
        .find(|event| event["Type"].as_str() == Some("Schedule"))
        .expect("the migrate function runs on a schedule");
    assert!(scheduled["Properties"]["Schedule"].as_str().is_some_and(|s| s.starts_with("rate(")), "{scheduled:?}");
}
