//! Who is calling: read from the JWT claims the authorizer validated, never from a body.

use std::collections::HashMap;
use uuid::Uuid;

/// The authenticated caller of an HTTP route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: Uuid,
    pub org_id: Option<Uuid>,
    pub permissions: Vec<String>,
    pub app_admin: bool,
}

impl Caller {
    /// Builds the caller from API Gateway's flattened JWT claims (every value a string).
    /// `None` when `sub` is absent or not a UUID: such a token names nobody.
    pub fn from_claims(claims: &HashMap<String, String>) -> Option<Self> {
        let user_id = claims.get("sub").and_then(|s| Uuid::parse_str(s).ok())?;
        let org_id = claims.get("org_id").filter(|s| !s.is_empty()).and_then(|s| Uuid::parse_str(s).ok());
        let permissions = claims
            .get("permissions")
            .map(|s| {
                // The authorizer renders a JSON array claim as "[a b]"; accept both forms.
                s.trim_matches(|c| c == '[' || c == ']')
                    .split([' ', ','])
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let app_admin = claims.get("app_admin").is_some_and(|v| v == "true");
        Some(Self { user_id, org_id, permissions, app_admin })
    }

    pub fn has_permission(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flattened_claims() {
        let user = Uuid::new_v4();
        let claims: HashMap<String, String> = [
            ("sub".to_owned(), user.to_string()),
            ("permissions".to_owned(), "[collections:view collections:edit]".to_owned()),
            ("app_admin".to_owned(), "true".to_owned()),
        ]
        .into_iter()
        .collect();
        let caller = Caller::from_claims(&claims).expect("caller");
        assert_eq!(caller.user_id, user);
        assert!(caller.has_permission("collections:edit"));
        assert!(caller.app_admin);
        assert_eq!(caller.org_id, None);
    }

    #[test]
    fn a_token_without_a_uuid_subject_names_nobody() {
        let claims: HashMap<String, String> = [("sub".to_owned(), "root".to_owned())].into_iter().collect();
        assert!(Caller::from_claims(&claims).is_none());
    }
}
