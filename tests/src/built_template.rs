//! The functions of a built template (`sam build`'s `template.yaml`, in CloudFormation's
//! long form) as Lambda would run them: each one's code and layer directories, memory,
//! timeout, SQS batch size and exactly the environment the template gives it (`Globals`
//! then its own), with every intrinsic function resolved: parameters take their defaults,
//! conditions are evaluated, and each reference to a resource or attribute takes the value
//! the caller names for it. A reference the caller did not name is an error naming it, so
//! nothing the template passes is guessed.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One function as the template deploys it.
#[derive(Debug, Clone)]
pub struct BuiltFunction {
    pub logical_id: String,
    pub code: PathBuf,
    /// Its layers' logical ids and directories, in the template's order.
    pub layers: Vec<(String, PathBuf)>,
    pub memory_mb: u64,
    pub timeout_secs: u64,
    /// The batch size of its SQS event source, when it has one.
    pub sqs_batch_size: Option<i32>,
    pub environment: BTreeMap<String, String>,
}

/// What references resolve to: resources by logical id (`Ref`), attributes as
/// `Resource.Attribute` (`Fn::GetAtt`), pseudo parameters as `AWS::…`.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    pub refs: BTreeMap<String, String>,
    pub attributes: BTreeMap<String, String>,
}

struct Resolver<'a> {
    parameters: BTreeMap<String, Value>,
    conditions: &'a Map<String, Value>,
    bindings: &'a Bindings,
}

/// Reads the functions of the built template at `dir/template.yaml`.
pub fn functions(dir: &Path, bindings: &Bindings) -> Result<Vec<BuiltFunction>, String> {
    let path = dir.join("template.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let template: Value = yaml_serde::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    functions_of(&template, dir, bindings)
}

/// [`functions`] of a parsed template whose artefacts are under `dir`.
pub fn functions_of(template: &Value, dir: &Path, bindings: &Bindings) -> Result<Vec<BuiltFunction>, String> {
    let parameters = template["Parameters"]
        .as_object()
        .map(|p| p.iter().map(|(name, spec)| (name.clone(), spec["Default"].clone())).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let resolver = Resolver { parameters, conditions: template["Conditions"].as_object().unwrap_or(&empty), bindings };
    let globals = &template["Globals"]["Function"];
    let resources = template["Resources"].as_object().ok_or("the template has no Resources")?;
    let mut functions = Vec::new();
    for (id, resource) in resources {
        if resource["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let properties = &resource["Properties"];
        let setting = |name: &str| Some(&properties[name]).filter(|v| !v.is_null()).or(Some(&globals[name]));
        let number = |name: &str, default: u64| -> Result<u64, String> {
            match setting(name).filter(|v| !v.is_null()) {
                None => Ok(default),
                Some(value) => {
                    let text = resolver.string(value)?;
                    text.parse().map_err(|_| format!("{id}.{name} is not a number: {text}"))
                }
            }
        };
        let mut environment = BTreeMap::new();
        for scope in [&globals["Environment"]["Variables"], &properties["Environment"]["Variables"]] {
            for (name, value) in scope.as_object().into_iter().flatten() {
                let value = resolver.string(value).map_err(|e| format!("{id}: {name}: {e}"))?;
                environment.insert(name.clone(), value);
            }
        }
        let mut layers = Vec::new();
        for layer in properties["Layers"].as_array().into_iter().chain(globals["Layers"].as_array()).flatten() {
            let name = layer["Ref"].as_str().ok_or_else(|| format!("{id}: a layer that is not a Ref: {layer}"))?;
            let content = resources
                .get(name)
                .and_then(|l| l["Properties"]["ContentUri"].as_str())
                .ok_or_else(|| format!("{id}: layer {name} has no built content"))?;
            layers.push((name.to_owned(), dir.join(content)));
        }
        let sqs_batch_size = properties["Events"]
            .as_object()
            .into_iter()
            .flat_map(|events| events.values())
            .find(|event| event["Type"] == "SQS")
            .map(|event| event["Properties"]["BatchSize"].as_i64().unwrap_or(10) as i32);
        let code = properties["CodeUri"].as_str().ok_or_else(|| format!("{id} has no built code"))?;
        functions.push(BuiltFunction {
            logical_id: id.clone(),
            code: dir.join(code),
            layers,
            memory_mb: number("MemorySize", 128)?,
            timeout_secs: number("Timeout", 3)?,
            sqs_batch_size,
            environment,
        });
    }
    Ok(functions)
}

impl Resolver<'_> {
    fn string(&self, value: &Value) -> Result<String, String> {
        match self.resolve(value)? {
            Value::String(text) => Ok(text),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            other => Err(format!("not a string: {other}")),
        }
    }

    fn resolve(&self, value: &Value) -> Result<Value, String> {
        let Some((function, argument)) = value.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next())
        else {
            return match value {
                Value::Array(items) => {
                    items.iter().map(|i| self.resolve(i)).collect::<Result<_, _>>().map(Value::Array)
                }
                other => Ok(other.clone()),
            };
        };
        match function.as_str() {
            "Ref" => self.reference(argument.as_str().ok_or("Ref of a non-string")?),
            "Fn::GetAtt" => {
                let name = match argument {
                    Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("."),
                    Value::String(name) => name.clone(),
                    other => return Err(format!("Fn::GetAtt of {other}")),
                };
                self.bindings
                    .attributes
                    .get(&name)
                    .map(|v| Value::String(v.clone()))
                    .ok_or_else(|| format!("Fn::GetAtt {name}: no local value is bound to it"))
            }
            "Fn::If" => {
                let [condition, then, otherwise] = argument.as_array().map(Vec::as_slice).unwrap_or_default() else {
                    return Err(format!("Fn::If of {argument}"));
                };
                let chosen =
                    if self.condition(condition.as_str().ok_or("Fn::If condition")?)? { then } else { otherwise };
                self.resolve(chosen)
            }
            "Fn::Join" => {
                let [separator, items] = argument.as_array().map(Vec::as_slice).unwrap_or_default() else {
                    return Err(format!("Fn::Join of {argument}"));
                };
                let items = match self.resolve(items)? {
                    Value::Array(items) => items,
                    other => return Err(format!("Fn::Join of {other}")),
                };
                let texts: Vec<String> = items.iter().map(|i| self.string(i)).collect::<Result<_, _>>()?;
                Ok(Value::String(texts.join(separator.as_str().unwrap_or_default())))
            }
            "Fn::Split" => {
                let [separator, text] = argument.as_array().map(Vec::as_slice).unwrap_or_default() else {
                    return Err(format!("Fn::Split of {argument}"));
                };
                let text = self.string(text)?;
                let parts = text.split(separator.as_str().unwrap_or(",")).map(|p| Value::String(p.to_owned()));
                Ok(Value::Array(parts.collect()))
            }
            "Fn::Sub" => {
                let (text, variables) = match argument {
                    Value::String(text) => (text.clone(), Map::new()),
                    Value::Array(parts) if parts.len() == 2 => (
                        parts[0].as_str().ok_or("Fn::Sub text")?.to_owned(),
                        parts[1].as_object().cloned().unwrap_or_default(),
                    ),
                    other => return Err(format!("Fn::Sub of {other}")),
                };
                self.substitute(&text, &variables).map(Value::String)
            }
            _ if function.starts_with("Fn::") => Err(format!("{function} is not resolved here")),
            // A one-key mapping that is no function: plain data.
            _ => Ok(value.clone()),
        }
    }

    fn reference(&self, name: &str) -> Result<Value, String> {
        if let Some(value) = self.parameters.get(name) {
            return Ok(value.clone());
        }
        self.bindings
            .refs
            .get(name)
            .map(|v| Value::String(v.clone()))
            .ok_or_else(|| format!("Ref {name}: no local value is bound to it"))
    }

    fn substitute(&self, text: &str, variables: &Map<String, Value>) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').ok_or_else(|| format!("Fn::Sub: unclosed ${{ in {text}"))? + start;
            let name = &rest[start + 2..end];
            let value = match variables.get(name) {
                Some(value) => self.string(value)?,
                None if name.contains('.') => self.string(&serde_json::json!({"Fn::GetAtt": name}))?,
                None => self.string(&serde_json::json!({"Ref": name}))?,
            };
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn condition(&self, name: &str) -> Result<bool, String> {
        let definition = self.conditions.get(name).ok_or_else(|| format!("no condition {name}"))?;
        self.truth(definition)
    }

    fn truth(&self, value: &Value) -> Result<bool, String> {
        let Some((function, argument)) = value.as_object().and_then(|o| o.iter().next()) else {
            return Err(format!("not a condition: {value}"));
        };
        let operands = || argument.as_array().cloned().unwrap_or_default();
        match function.as_str() {
            "Condition" => self.condition(argument.as_str().ok_or("Condition of a non-string")?),
            "Fn::Equals" => {
                let [left, right] = operands().try_into().map_err(|_| "Fn::Equals takes two")?;
                Ok(self.string(&left)? == self.string(&right)?)
            }
            "Fn::Not" => Ok(!self.truth(operands().first().ok_or("Fn::Not takes one")?)?),
            "Fn::And" => operands().iter().try_fold(true, |all, c| Ok(all && self.truth(c)?)),
            "Fn::Or" => operands().iter().try_fold(false, |any, c| Ok(any || self.truth(c)?)),
            other => Err(format!("{other} is not a condition function")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template() -> Value {
        json!({
            "Parameters": {"Profile": {"Default": "small"}, "Size": {"Default": 2048}, "Subnets": {"Default": "a,b"}},
            "Conditions": {
                "Production": {"Fn::Equals": [{"Ref": "Profile"}, "production"]},
                "Small": {"Fn::Not": [{"Condition": "Production"}]},
            },
            "Globals": {"Function": {"MemorySize": 1024, "Timeout": 29,
                "Environment": {"Variables": {"BUCKET": {"Ref": "Files"}, "MODE": "global"}}}},
            "Resources": {
                "Files": {"Type": "AWS::S3::Bucket"},
                "Lib": {"Type": "AWS::Serverless::LayerVersion", "Properties": {"ContentUri": "Lib"}},
                "Work": {"Type": "AWS::Serverless::Function", "Properties": {
                    "CodeUri": "Work", "MemorySize": {"Ref": "Size"}, "Layers": [{"Ref": "Lib"}],
                    "Events": {"Jobs": {"Type": "SQS", "Properties": {"BatchSize": 5}}},
                    "Environment": {"Variables": {
                        "MODE": "own",
                        "HOST": {"Fn::If": ["Production", {"Fn::GetAtt": ["Proxy", "Endpoint"]}, {"Fn::GetAtt": ["Db", "Endpoint.Address"]}]},
                        "URL": {"Fn::Sub": "https://${Files}.s3.${AWS::Region}/x"},
                        "SUBNETS": {"Fn::Join": [";", {"Fn::Split": [",", {"Ref": "Subnets"}]}]},
                        "SMALL": {"Fn::If": ["Small", "yes", "no"]},
                    }},
                }},
            },
        })
    }

    fn bindings() -> Bindings {
        Bindings {
            refs: [("Files", "files-bucket"), ("AWS::Region", "us-east-1")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
            attributes: [("Db.Endpoint.Address".to_owned(), "127.0.0.1".to_owned())].into(),
        }
    }

    #[test]
    fn a_function_gets_the_globals_then_its_own_with_every_reference_resolved() {
        let functions = functions_of(&template(), Path::new("/build"), &bindings()).expect("resolved");
        let [work] = functions.as_slice() else { panic!("{functions:?}") };
        assert_eq!((work.memory_mb, work.timeout_secs, work.sqs_batch_size), (2048, 29, Some(5)));
        assert_eq!(work.code, Path::new("/build/Work"));
        assert_eq!(work.layers, [("Lib".to_owned(), PathBuf::from("/build/Lib"))]);
        let expected: BTreeMap<String, String> = [
            ("BUCKET", "files-bucket"),
            ("MODE", "own"),
            ("HOST", "127.0.0.1"),
            ("URL", "https://files-bucket.s3.us-east-1/x"),
            ("SUBNETS", "a;b"),
            ("SMALL", "yes"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
        assert_eq!(work.environment, expected);
    }

    #[test]
    fn a_reference_with_no_local_value_is_an_error_naming_it() {
        let mut unbound = bindings();
        unbound.attributes.clear();
        let error = functions_of(&template(), Path::new("/build"), &unbound).expect_err("unbound");
        assert!(error.contains("Fn::GetAtt Db.Endpoint.Address"), "{error}");
    }
}
