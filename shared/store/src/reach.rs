//! Which knowledge bases a caller reaches — by id, by collection name, or all of them —
//! each through the one access decision (`sluice_domain::access`). A base the caller cannot
//! reach is `None`, exactly like one that does not exist; each function words that its way.
//! The management function and the search function both ask here.

use crate::{Db, KnowledgeBase, StoreError};
use sluice_domain::Caller;
use sluice_domain::access::{self, Access};
use uuid::Uuid;

impl Db {
    /// The base `id` if `caller` reaches it at `at_least`, with their access.
    pub async fn reach_base(
        &self,
        caller: &Caller,
        id: Uuid,
        at_least: Access,
    ) -> Result<Option<(KnowledgeBase, Access)>, StoreError> {
        let Some(held) = self.knowledge_base(id, caller.user_id).await? else { return Ok(None) };
        let access = access::decide(caller, &held.base.ownership(), held.grant);
        Ok((access >= at_least && access != Access::None).then_some((held.base, access)))
    }

    /// The base a collection name means for `caller` at `at_least` (`access::resolve_named`):
    /// their organization's own, else the app's, else one granted to them.
    pub async fn reach_named(
        &self,
        caller: &Caller,
        name: &str,
        at_least: Access,
    ) -> Result<Option<(KnowledgeBase, Access)>, StoreError> {
        let holders = self.bases_named(name, caller.user_id).await?;
        let candidates = holders.into_iter().map(|held| {
            let ownership = held.base.ownership();
            (held.base, ownership, held.grant)
        });
        Ok(access::resolve_named(caller, candidates, at_least))
    }

    /// Every base `caller` can read, with their access, oldest first.
    pub async fn reachable_bases(&self, caller: &Caller) -> Result<Vec<(KnowledgeBase, Access)>, StoreError> {
        let candidates = self.candidate_knowledge_bases(caller.user_id, caller.org_id).await?;
        Ok(candidates
            .into_iter()
            .filter_map(|held| {
                let access = access::decide(caller, &held.base.ownership(), held.grant);
                (access != Access::None).then_some((held.base, access))
            })
            .collect())
    }
}
