//! What a collection may be called: one function decides, for the API and the store alike.

/// Postgres keeps 63 bytes of an identifier; `rag_<name>$embedding` must fit whole.
pub const MAX_COLLECTION_NAME_CHARS: usize = 45;

/// Why a collection name is refused; `field` is the request field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CollectionNameError {
    pub message: String,
}

/// Accepts `name` as a collection name, or says why not. `schema_tables` are the tables the
/// migrations own (read from the schema, never listed by hand): a name whose `rag_` table
/// would be one of them is refused, so `documents` can never alias a tracking table.
pub fn validate_collection_name(name: &str, schema_tables: &[String]) -> Result<(), CollectionNameError> {
    let refuse = |message: String| Err(CollectionNameError { message });
    if name.is_empty() {
        return refuse("a collection name cannot be empty".to_owned());
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return refuse(format!(
            "{name:?} has upper case; collection names are lower case (Postgres folds identifiers)"
        ));
    }
    let mut chars = name.chars();
    let bare = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !bare {
        return refuse(format!(
            "{name:?} is not a bare identifier: a lower-case letter, then letters, digits and underscores"
        ));
    }
    if name.chars().count() > MAX_COLLECTION_NAME_CHARS {
        return refuse(format!("{name:?} is longer than {MAX_COLLECTION_NAME_CHARS} characters"));
    }
    if name == "all" {
        return refuse("\"all\" is reserved".to_owned());
    }
    let table = vector_table(name);
    if schema_tables.contains(&table) {
        return refuse(format!("{name:?} would name the table {table}, which Sluice's schema owns"));
    }
    Ok(())
}

/// The text search configuration a collection's words are read with unless its base says.
pub const DEFAULT_TEXT_SEARCH_LANGUAGE: &str = "english";

/// PostgreSQL's own text search configurations (the same in 16 and 17, and on Aurora):
/// `simple` folds case only, for a language with none of its own; the others stem and
/// drop their language's stop words.
pub const TEXT_SEARCH_LANGUAGES: &[&str] = &[
    "arabic",
    "armenian",
    "basque",
    "catalan",
    "danish",
    "dutch",
    "english",
    "finnish",
    "french",
    "german",
    "greek",
    "hindi",
    "hungarian",
    "indonesian",
    "irish",
    "italian",
    "lithuanian",
    "nepali",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "serbian",
    "simple",
    "spanish",
    "swedish",
    "tamil",
    "turkish",
    "yiddish",
];

/// The vector table of a collection.
pub fn vector_table(name: &str) -> String {
    format!("rag_{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned() -> Vec<String> {
        vec!["rag_documents".to_owned(), "knowledge_bases".to_owned()]
    }

    #[test]
    fn bare_lower_case_names_within_the_bound_are_accepted() {
        for name in ["handbook", "acme_handbook_d1fac1", "a", "documents_archive", &"x".repeat(45)] {
            assert_eq!(validate_collection_name(name, &owned()), Ok(()), "{name}");
        }
    }

    #[test]
    fn each_refusal_says_why() {
        let cases = [
            ("", "empty"),
            ("Handbook", "upper case"),
            ("foo-bar", "bare identifier"),
            ("2024_reports", "bare identifier"),
            ("a b", "bare identifier"),
            ("x'; drop", "bare identifier"),
            ("_private", "bare identifier"),
            (&"x".repeat(46), "longer than 45"),
            ("all", "reserved"),
            ("documents", "schema owns"),
        ];
        for (name, why) in cases {
            let error = validate_collection_name(name, &owned()).expect_err(name);
            assert!(error.message.contains(why), "{name:?}: {}", error.message);
        }
    }
}
