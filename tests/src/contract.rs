//! The HTTP contract, `docs/openapi.yaml`, as the tests hold the system to it: its routes
//! (against the routers and the deployment template, in `tests/contract.rs`) and the
//! schema of every JSON answer an end-to-end test receives through `Stack::call_json`.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

/// The contract, read once.
pub struct Contract {
    document: Value,
    /// `"METHOD /path/{param}"` of every operation.
    routes: Vec<String>,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

impl std::fmt::Debug for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contract").field("routes", &self.routes.len()).finish_non_exhaustive()
    }
}

const METHODS: &[&str] = &["get", "post", "put", "patch", "delete"];

/// The repository's `docs/openapi.yaml`.
pub fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml"))
            .expect("docs/openapi.yaml");
        let document: Value = yaml_serde::from_str(&text).expect("docs/openapi.yaml is YAML");
        let mut routes = Vec::new();
        for (path, item) in document["paths"].as_object().expect("paths") {
            for method in METHODS.iter().filter(|m| item.get(**m).is_some()) {
                routes.push(format!("{} {path}", method.to_uppercase()));
            }
        }
        Contract { document, routes, validators: Mutex::default() }
    })
}

/// One JSON Pointer reference token as a URI fragment may carry it.
fn escaped(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1").replace('{', "%7B").replace('}', "%7D")
}

impl Contract {
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Every operation, as `"METHOD /path/{param}"`.
    pub fn routes(&self) -> BTreeSet<String> {
        self.routes.iter().cloned().collect()
    }

    /// The pointer to the schema an answer of `status` to the operation must meet, if it
    /// has JSON content: its own response, else `default`; an answer to no operation that
    /// is a refusal meets the error schema.
    fn schema_pointer(&self, method: &str, path: &str, status: u16) -> Option<String> {
        let table: Vec<&str> = self.routes.iter().map(String::as_str).collect();
        let Some(route) = sluice_web::route_template(&table, method, path) else {
            return (status >= 400).then(|| "#/components/schemas/Error".to_owned());
        };
        let (method, template) = route.split_once(' ')?;
        let method = method.to_lowercase();
        let responses = &self.document["paths"][template][&method]["responses"];
        let code = [status.to_string(), "default".to_owned()].into_iter().find(|c| responses.get(c).is_some())?;
        let response = &responses[&code];
        let (base, response) = match response["$ref"].as_str() {
            Some(reference) => {
                let name = reference.rsplit('/').next()?;
                (format!("#/components/responses/{name}"), &self.document["components"]["responses"][name])
            }
            None => (format!("#/paths/{}/{method}/responses/{code}", escaped(template)), response),
        };
        response["content"].get("application/json")?;
        Some(format!("{base}/content/application~1json/schema"))
    }

    /// The validator for an answer of `status` to `method path`; `None` when the contract
    /// gives that answer no JSON body. `Err` names a schema that does not compile.
    pub fn validator(
        &self,
        method: &str,
        path: &str,
        status: u16,
    ) -> Result<Option<Arc<jsonschema::Validator>>, String> {
        let Some(pointer) = self.schema_pointer(method, path, status) else { return Ok(None) };
        let mut validators = self.validators.lock().expect("validators");
        if let Some(validator) = validators.get(&pointer) {
            return Ok(Some(validator.clone()));
        }
        // The whole document is the schema's resource, so `$ref`s resolve within it; its
        // OpenAPI keywords are ones JSON Schema ignores.
        let mut root = self.document.clone();
        root["$ref"] = Value::String(pointer.clone());
        let validator = Arc::new(jsonschema::validator_for(&root).map_err(|e| format!("{pointer}: {e}"))?);
        validators.insert(pointer, validator.clone());
        Ok(Some(validator))
    }

    /// Whether `body`, answered `status` to `method path` (no query), meets the contract;
    /// each violation named.
    pub fn check(&self, method: &str, path: &str, status: u16, body: &Value) -> Result<(), String> {
        let Some(validator) = self.validator(method, path, status)? else { return Ok(()) };
        let errors: Vec<String> =
            validator.iter_errors(body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("{method} {path} answered {status} outside docs/openapi.yaml: {}", errors.join("; ")))
        }
    }
}

/// The deployment template's HTTP routes, as `METHOD /path`.
pub fn template_routes() -> Vec<String> {
    template_routes_by_function().into_iter().map(|(_, route)| route).collect()
}

/// The deployment template's HTTP routes with the function each reaches (its logical id,
/// as `SearchFunction`).
pub fn template_routes_by_function() -> Vec<(String, String)> {
    let template = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).expect("template");
    let mut routes = Vec::new();
    let (mut function, mut method) = (String::new(), None);
    for line in template.lines() {
        // A resource is a key indented by two spaces.
        if let Some(key) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':'))
            && !key.starts_with(' ')
        {
            function = key.to_owned();
        }
        let line = line.trim();
        if let Some(m) = line.strip_prefix("Method: ") {
            method = Some(m.to_owned());
        } else if let (Some(path), Some(m)) = (line.strip_prefix("Path: /api/v1/"), method.take()) {
            routes.push((function.clone(), format!("{m} /api/v1/{path}")));
        }
    }
    routes
}
