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
    /// `None` when `sub` is absent or empty: such a token names nobody. A `sub` that is a
    /// UUID (Cognito's) is the user's id as it is; any other (Auth0's `auth0|…`, Google's
    /// digits) names the user through a UUID derived from issuer and subject (`user_id_for`),
    /// the same on every request and never equal to another issuer's user.
    pub fn from_claims(claims: &HashMap<String, String>) -> Option<Self> {
        let subject = claims.get("sub").filter(|s| !s.trim().is_empty())?;
        let user_id = user_id_for(claims.get("iss").map_or("", String::as_str), subject);
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

/// The namespace of user ids derived from an issuer and a subject (UUID v5).
const SUBJECT_NAMESPACE: Uuid = Uuid::from_u128(0x5a1c_e000_7d2b_4c1e_9f3a_6b8d_0e21_c4f7);

/// The user id of `subject` at `issuer`: the subject itself when it is a UUID, else a
/// name-based UUID of both (so the rows keyed by user stay UUIDs).
pub fn user_id_for(issuer: &str, subject: &str) -> Uuid {
    Uuid::parse_str(subject)
        .unwrap_or_else(|_| Uuid::new_v5(&SUBJECT_NAMESPACE, format!("{issuer}\u{0}{subject}").as_bytes()))
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
    fn a_token_without_a_subject_names_nobody() {
        let claims: HashMap<String, String> = [("iss".to_owned(), "https://idp".to_owned())].into_iter().collect();
        assert!(Caller::from_claims(&claims).is_none());
        let empty: HashMap<String, String> = [("sub".to_owned(), String::new())].into_iter().collect();
        assert!(Caller::from_claims(&empty).is_none());
    }

    #[test]
    fn a_subject_that_is_not_a_uuid_is_a_caller_of_its_own() {
        let claims = |iss: &str, sub: &str| -> HashMap<String, String> {
            [("iss".to_owned(), iss.to_owned()), ("sub".to_owned(), sub.to_owned())].into_iter().collect()
        };
        let auth0 = Caller::from_claims(&claims("https://tenant.auth0.com/", "auth0|64f1c2")).expect("a caller");
        let again = Caller::from_claims(&claims("https://tenant.auth0.com/", "auth0|64f1c2")).expect("a caller");
        assert_eq!(auth0.user_id, again.user_id, "stable across requests");
        let other_user = Caller::from_claims(&claims("https://tenant.auth0.com/", "auth0|64f1c3")).expect("a caller");
        let other_issuer = Caller::from_claims(&claims("https://other.example/", "auth0|64f1c2")).expect("a caller");
        assert_ne!(auth0.user_id, other_user.user_id);
        assert_ne!(auth0.user_id, other_issuer.user_id);
        assert_eq!(auth0.user_id.get_version_num(), 5);
        assert!(Caller::from_claims(&claims("https://tenant.auth0.com/", " ")).is_none());
    }
}
