//! Who may reach a knowledge base: one decision, used by every route. The base's row is the
//! authority; its scope sets what a caller's permissions allow, and an explicit grant on
//! that one base widens it, never narrows it.

use crate::Caller;
use uuid::Uuid;

/// Whose a knowledge base is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Its owner reads and writes.
    Personal,
    /// `collections:view` / `collections:edit` in its organization.
    Org,
    /// Everybody reads; only the deployment's `app_admin` writes.
    App,
}

impl Scope {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "personal" => Some(Self::Personal),
            "org" => Some(Self::Org),
            "app" => Some(Self::App),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Personal => "personal",
            Self::Org => "org",
            Self::App => "app",
        }
    }
}

/// What a caller may do with a base; ordered, so the wider of two is their `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    None,
    View,
    Edit,
}

/// The facts about a base the decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseOwnership {
    pub scope: Scope,
    pub owner_id: Uuid,
    pub org_id: Option<Uuid>,
}

/// What `caller` may do with `base`, given their explicit grant on it, if any.
pub fn decide(caller: &Caller, base: &BaseOwnership, grant: Option<Access>) -> Access {
    let by_scope = match base.scope {
        Scope::Personal if base.owner_id == caller.user_id => Access::Edit,
        Scope::Personal => Access::None,
        Scope::Org if base.org_id.is_some() && base.org_id == caller.org_id => {
            if caller.has_permission("collections:edit") {
                Access::Edit
            } else if caller.has_permission("collections:view") {
                Access::View
            } else {
                Access::None
            }
        }
        Scope::Org => Access::None,
        Scope::App if caller.app_admin => Access::Edit,
        Scope::App => Access::View,
    };
    by_scope.max(grant.unwrap_or(Access::None))
}

/// Whether `caller` manages `base` — grants and revokes access to it: its owner (personal),
/// its organization's collection editors (org), and the app admin (app bases, and any base
/// they reach). A grant never makes its holder a manager, so access cannot spread from one.
pub fn manages(caller: &Caller, base: &BaseOwnership, grant: Option<Access>) -> bool {
    decide(caller, base, None) == Access::Edit || (caller.app_admin && decide(caller, base, grant) != Access::None)
}

/// Which of the bases holding one collection name (`holders`, oldest first) a caller means,
/// if they reach it at `at_least`: their organization's own (their personal base in it
/// included), else the app's, else one granted to them — never a third tenant's.
pub fn resolve_named<T>(
    caller: &Caller,
    holders: impl IntoIterator<Item = (T, BaseOwnership, Option<Access>)>,
    at_least: Access,
) -> Option<(T, Access)> {
    let rank = |base: &BaseOwnership| match base.scope {
        Scope::App => 1,
        _ if base.org_id == caller.org_id => 0,
        _ => 2,
    };
    holders
        .into_iter()
        .filter_map(|(item, base, grant)| {
            let access = decide(caller, &base, grant);
            (access >= at_least && access != Access::None).then_some((rank(&base), item, access))
        })
        // Stable: within a rank the oldest stands first.
        .min_by_key(|(rank, _, _)| *rank)
        .map(|(_, item, access)| (item, access))
}

/// The facts about a stored credential the visibility decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretOwnership {
    pub owner_id: Uuid,
    pub org_id: Option<Uuid>,
    /// Shared with the organization, rather than private to its owner.
    pub shared_with_org: bool,
}

/// Whether `caller` may see (and so bind) a credential: `secrets:view` (which
/// `secrets:edit` implies) in the credential's own organization, and either its owner or
/// a credential shared with that organization. Binding a key is lending it, so seeing it is
/// the bar, not writing the collection.
pub fn may_see_secret(caller: &Caller, secret: &SecretOwnership) -> bool {
    let may_view = caller.has_permission("secrets:view") || caller.has_permission("secrets:edit");
    may_view && secret.org_id == caller.org_id && (secret.owner_id == caller.user_id || secret.shared_with_org)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(user: Uuid, org: Option<Uuid>, permissions: &[&str], app_admin: bool) -> Caller {
        Caller {
            user_id: user,
            org_id: org,
            permissions: permissions.iter().map(|p| p.to_string()).collect(),
            app_admin,
        }
    }

    #[test]
    fn every_scope_permission_and_grant_decides_once() {
        let (owner, other) = (Uuid::new_v4(), Uuid::new_v4());
        let (org_a, org_b) = (Uuid::new_v4(), Uuid::new_v4());
        let personal = BaseOwnership { scope: Scope::Personal, owner_id: owner, org_id: Some(org_a) };
        let org = BaseOwnership { scope: Scope::Org, owner_id: owner, org_id: Some(org_a) };
        let app = BaseOwnership { scope: Scope::App, owner_id: owner, org_id: None };
        let viewer = caller(other, Some(org_a), &["collections:view"], false);
        let editor = caller(other, Some(org_a), &["collections:edit"], false);
        let outsider = caller(other, Some(org_b), &["collections:edit"], false);
        let plain = caller(other, Some(org_a), &[], false);
        let admin = caller(other, None, &[], true);
        let cases = [
            (&personal, caller(owner, None, &[], false), None, Access::Edit),
            (&personal, editor.clone(), None, Access::None),
            (&personal, admin.clone(), None, Access::None),
            (&personal, plain.clone(), Some(Access::View), Access::View),
            (&org, viewer.clone(), None, Access::View),
            (&org, editor.clone(), None, Access::Edit),
            (&org, plain.clone(), None, Access::None),
            (&org, outsider.clone(), None, Access::None),
            (&org, viewer.clone(), Some(Access::Edit), Access::Edit),
            (&org, editor.clone(), Some(Access::View), Access::Edit),
            (&org, outsider.clone(), Some(Access::View), Access::View),
            (&app, plain.clone(), None, Access::View),
            (&app, outsider.clone(), None, Access::View),
            (&app, admin.clone(), None, Access::Edit),
            (&app, editor.clone(), Some(Access::Edit), Access::Edit),
        ];
        for (i, (base, who, grant, expected)) in cases.iter().enumerate() {
            assert_eq!(decide(who, base, *grant), *expected, "case {i}: {:?} {:?} {grant:?}", base.scope, who);
        }
    }

    #[test]
    fn a_base_is_managed_by_its_owner_its_editors_and_the_app_admin_never_by_a_grant() {
        let (owner, other) = (Uuid::new_v4(), Uuid::new_v4());
        let org_a = Uuid::new_v4();
        let personal = BaseOwnership { scope: Scope::Personal, owner_id: owner, org_id: Some(org_a) };
        let org = BaseOwnership { scope: Scope::Org, owner_id: owner, org_id: Some(org_a) };
        let app = BaseOwnership { scope: Scope::App, owner_id: owner, org_id: None };
        let editor = caller(other, Some(org_a), &["collections:edit"], false);
        let viewer = caller(other, Some(org_a), &["collections:view"], false);
        let admin = caller(other, None, &[], true);
        let cases = [
            (&personal, caller(owner, Some(org_a), &[], false), None, true),
            (&personal, editor.clone(), Some(Access::Edit), false),
            (&personal, admin.clone(), None, false),
            (&personal, admin.clone(), Some(Access::View), true),
            (&org, editor.clone(), None, true),
            (&org, viewer.clone(), Some(Access::Edit), false),
            (&org, caller(owner, Some(org_a), &[], false), Some(Access::Edit), false),
            (&app, admin.clone(), None, true),
            (&app, editor.clone(), Some(Access::Edit), false),
        ];
        for (i, (base, who, grant, expected)) in cases.iter().enumerate() {
            assert_eq!(manages(who, base, *grant), *expected, "case {i}");
        }
    }

    #[test]
    fn a_secret_is_seen_in_its_own_organization_with_secrets_view() {
        let (owner, member) = (Uuid::new_v4(), Uuid::new_v4());
        let (org, other_org) = (Uuid::new_v4(), Uuid::new_v4());
        let private = SecretOwnership { owner_id: owner, org_id: Some(org), shared_with_org: false };
        let shared = SecretOwnership { shared_with_org: true, ..private };
        let cases = [
            (caller(owner, Some(org), &["secrets:view"], false), private, true),
            (caller(owner, Some(org), &[], false), private, false),
            (caller(member, Some(org), &["secrets:view"], false), private, false),
            (caller(member, Some(org), &["secrets:view"], false), shared, true),
            (caller(member, Some(org), &["secrets:edit"], false), shared, true),
            (caller(member, Some(other_org), &["secrets:view"], false), shared, false),
            (caller(owner, Some(other_org), &["secrets:view"], false), private, false),
            (caller(member, Some(org), &["collections:edit"], true), shared, false),
        ];
        for (i, (who, secret, expected)) in cases.iter().enumerate() {
            assert_eq!(may_see_secret(who, secret), *expected, "case {i}");
        }
    }
}
