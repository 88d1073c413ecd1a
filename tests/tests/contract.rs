//! `docs/openapi.yaml` against what serves and what deploys: the routes the `upload`,
//! `knowledge` and `search` routers answer (their route tables, which the routers are held to in their
//! own unit tests) and the routes `template.yaml` gives API Gateway are exactly the
//! contract's operations, no route missing on either side; every operation is secured by
//! the bearer scheme and answers in a schema that compiles. The end-to-end tests check each
//! JSON answer they receive against it (`Stack::call_json`).

use sluice_e2e::contract::{contract, template_routes, template_routes_by_function};
use std::collections::BTreeSet;

#[test]
fn the_contract_the_routers_and_the_template_name_the_same_routes() {
    let documented = contract().routes();
    let routers: [(&str, &[&str]); 3] = [
        ("UploadFunction", sluice_upload::ROUTES),
        ("KnowledgeFunction", sluice_knowledge::ROUTES),
        ("SearchFunction", sluice_search::ROUTES),
    ];
    let served: BTreeSet<String> =
        routers.iter().flat_map(|(_, routes)| routes.iter()).map(|r| (*r).to_owned()).collect();
    let deployed: BTreeSet<String> = template_routes().into_iter().collect();
    assert_eq!(
        served.len(),
        routers.iter().map(|(_, routes)| routes.len()).sum::<usize>(),
        "no route is served by two functions"
    );
    let missing =
        |from: &BTreeSet<String>, in_: &BTreeSet<String>| -> Vec<String> { from.difference(in_).cloned().collect() };
    assert_eq!(missing(&served, &documented), Vec::<String>::new(), "served but not in docs/openapi.yaml");
    assert_eq!(missing(&documented, &served), Vec::<String>::new(), "in docs/openapi.yaml but served by no router");
    assert_eq!(missing(&deployed, &documented), Vec::<String>::new(), "deployed but not in docs/openapi.yaml");
    assert_eq!(missing(&documented, &deployed), Vec::<String>::new(), "in docs/openapi.yaml but not deployed");
    // Each route reaches, in the template, the function whose router serves it.
    let by_function = template_routes_by_function();
    for (function, routes) in routers {
        let given: BTreeSet<String> =
            by_function.iter().filter(|(f, _)| f == function).map(|(_, route)| route.clone()).collect();
        let served: BTreeSet<String> = routes.iter().map(|r| (*r).to_owned()).collect();
        assert_eq!(given, served, "{function}: the template's routes are not its router's");
    }
}

#[test]
fn every_operation_is_secured_and_each_json_answer_has_a_schema_that_compiles() {
    let document = contract().document();
    assert_eq!(document["openapi"].as_str().map(|v| v.starts_with("3.1")), Some(true));
    assert_eq!(document["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert_eq!(document["security"][0]["bearer"], serde_json::json!([]));
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            if method == "parameters" {
                continue;
            }
            let responses =
                operation["responses"].as_object().unwrap_or_else(|| panic!("{method} {path}: no responses"));
            assert!(responses.contains_key("default"), "{method} {path}: no default (error) answer");
            assert!(operation.get("security").is_none(), "{method} {path}: every route takes the bearer token");
            for code in responses.keys() {
                // A schema that cannot compile (a broken $ref, say) fails here, not in an e2e test.
                let status = code.parse::<u16>().unwrap_or(500);
                contract().validator(&method.to_uppercase(), path, status).unwrap_or_else(|e| panic!("{e}"));
            }
            let refusal =
                serde_json::json!({"error": {"code": "not_found", "message": "Document not found", "details": {}}});
            contract().check(&method.to_uppercase(), path, 404, &refusal).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
