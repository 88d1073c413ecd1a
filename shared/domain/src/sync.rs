//! The rules of S3 sync sources that need no I/O: what a source's configuration may say,
//! its schedule, the external id it assumes a role with, what a listed key is, and which
//! stored document a listed object corresponds to and what a run does with it.

use crate::safe_filename;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

/// How a run treats what it lists (the seed's three modes, one meaning for every path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// Ingest what is new or changed; skip what is unchanged.
    NewOnly,
    /// Re-ingest what changed; ignore what this base never held.
    UpdateOnly,
    /// Re-ingest everything listed, changed or not.
    Full,
}

impl SyncMode {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "new_only" => Some(Self::NewOnly),
            "update_only" => Some(Self::UpdateOnly),
            "full" => Some(Self::Full),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NewOnly => "new_only",
            Self::UpdateOnly => "update_only",
            Self::Full => "full",
        }
    }
}

/// Where a source's documents are. Never a credential: see `CREDENTIAL_FIELDS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Location {
    pub bucket: String,
    #[serde(default)]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// Field names that carry a credential: refused in a configuration, whatever their value.
pub const CREDENTIAL_FIELDS: &[&str] = &[
    "access_key_id",
    "aws_access_key_id",
    "secret_access_key",
    "aws_secret_access_key",
    "session_token",
    "aws_session_token",
    "credentials",
    "credential",
    "role_arn",
    "secret_id",
    "external_id",
    "password",
    "token",
];

/// A refusal naming the field it is about (`config.bucket`…).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub message: String,
}

fn refuse(field: &str, message: impl Into<String>) -> Refusal {
    Refusal { field: field.to_owned(), message: message.into() }
}

/// The longest key S3 stores, in bytes; a prefix is at most that.
pub const MAX_KEY_BYTES: usize = 1024;

impl S3Location {
    /// Reads and checks a source's `config` object: every refusal is rooted at `config.`.
    pub fn from_config(config: &serde_json::Value) -> Result<Self, Refusal> {
        let Some(object) = config.as_object() else {
            return Err(refuse("config", "config must be an object {bucket, prefix, region}"));
        };
        if let Some(field) = object.keys().find(|k| CREDENTIAL_FIELDS.contains(&k.to_ascii_lowercase().as_str())) {
            return Err(refuse(
                &format!("config.{field}"),
                "a credential does not go in a source's configuration: name a role_arn or a secret_id in credential",
            ));
        }
        if let Some(field) = object.keys().find(|k| !["bucket", "prefix", "region"].contains(&k.as_str())) {
            return Err(refuse(&format!("config.{field}"), format!("{field} is not a field of an S3 source's config")));
        }
        let text = |field: &str| match object.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(refuse(&format!("config.{field}"), format!("{field} must be a string"))),
        };
        let bucket = text("bucket")?.ok_or_else(|| refuse("config.bucket", "bucket is required"))?;
        check_bucket_name(&bucket).map_err(|why| refuse("config.bucket", why))?;
        let prefix = text("prefix")?.unwrap_or_default();
        if prefix.len() > MAX_KEY_BYTES || prefix.chars().any(char::is_control) {
            return Err(refuse("config.prefix", "a prefix is at most 1,024 bytes with no control characters"));
        }
        let region = text("region")?;
        if let Some(region) = &region {
            check_region(region).map_err(|why| refuse("config.region", why))?;
        }
        Ok(Self { bucket, prefix, region })
    }

    /// A listed or notified key belongs to this source when it is under its prefix.
    pub fn holds(&self, bucket: &str, key: &str) -> bool {
        bucket == self.bucket && key.starts_with(&self.prefix)
    }

    /// The address a document from `key` is tracked by.
    pub fn address(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }
}

/// S3's bucket naming rules (general purpose buckets).
fn check_bucket_name(bucket: &str) -> Result<(), String> {
    let valid_chars = bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    let ends_ok = bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    let looks_like_ip = bucket.split('.').count() == 4 && bucket.split('.').all(|p| p.parse::<u8>().is_ok());
    if !(3..=63).contains(&bucket.len()) || !valid_chars || !ends_ok || bucket.contains("..") || looks_like_ip {
        return Err(format!(
            "{bucket:?} is not an S3 bucket name: 3 to 63 lowercase letters, digits, dots and hyphens, \
             starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// An AWS region code such as `eu-west-1` or `us-gov-west-1`.
fn check_region(region: &str) -> Result<(), String> {
    let parts: Vec<&str> = region.split('-').collect();
    let shaped = parts.len() >= 3
        && parts[..parts.len() - 1].iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        && parts[parts.len() - 1].parse::<u8>().is_ok();
    if shaped && region.len() <= 25 { Ok(()) } else { Err(format!("{region:?} is not an AWS region code")) }
}

/// Checks an IAM role ARN (`arn:aws:iam::123456789012:role/path/name`).
pub fn check_role_arn(arn: &str) -> Result<(), String> {
    let refused = || Err(format!("{arn:?} is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)"));
    let Some(rest) =
        ["arn:aws:iam::", "arn:aws-cn:iam::", "arn:aws-us-gov:iam::"].iter().find_map(|p| arn.strip_prefix(p))
    else {
        return refused();
    };
    let Some((account, role)) = rest.split_once(":role/") else { return refused() };
    let name_ok = !role.is_empty()
        && role.len() <= 512
        && role.chars().all(|c| c.is_ascii_alphanumeric() || "+=,.@_-/".contains(c))
        && !role.ends_with('/');
    if account.len() == 12 && account.chars().all(|c| c.is_ascii_digit()) && name_ok { Ok(()) } else { refused() }
}

/// A new external id for a source's role: 244 random bits (two version-4 UUIDs), made by
/// Sluice, never chosen by a caller, and one per source. A role's trust policy that requires
/// it trusts that one source, so no other source — of another tenant, or another member of
/// the same organization — can make Sluice assume the role.
pub fn new_external_id() -> String {
    format!("sluice-{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple())
}

/// Refuses a role in `deployment_account`: the account the functions run in is never a
/// tenant's, so no source may reach into it, whatever a role there trusts.
pub fn check_role_account(arn: &str, deployment_account: Option<&str>) -> Result<(), String> {
    let account = arn.split(':').nth(4).unwrap_or_default();
    match deployment_account {
        Some(own) if own == account => Err(format!(
            "{arn:?} is a role in this deployment's own account; name a role in the account that owns the bucket"
        )),
        _ => Ok(()),
    }
}

/// What a listed key is: a document's address and its label, or nothing to sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListedKey {
    /// A file: its basename, made safe, is only a label (`filename`); the key is its address.
    File { label: String },
    /// A directory marker (`folder/`) or a key whose last component is no name (`.`, `..`).
    NotAFile,
}

/// Reads a listed key. The key never reaches a path or a query: it is stored as the
/// document's address text and the label is `safe_filename` of its last component.
pub fn listed_key(key: &str) -> ListedKey {
    let last = key.rsplit('/').next().unwrap_or_default();
    if last.is_empty() || last == "." || last == ".." {
        return ListedKey::NotAFile;
    }
    ListedKey::File { label: safe_filename(last) }
}

/// A stored document an object may correspond to, as the one lookup answers it: its id and
/// its change signals come back together, facts about one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub id: Uuid,
    pub status: String,
    pub etag: Option<String>,
    pub size: i64,
    pub content_hash: Option<String>,
    /// Found by its address (rather than by a filename no address claims).
    pub addressed: bool,
}

/// What the listing says of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    pub key: String,
    pub size: i64,
    pub etag: Option<String>,
}

/// What a run does with one listed object, decided before any download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to fetch: unchanged, or new under `update_only`, or an attempt is running.
    Skip { claim: Option<Uuid> },
    /// Fetch and index it; `replaces` is the document it retires once indexed.
    Fetch { replaces: Option<Uuid> },
}

/// Decides what a run does with `listed`, given the stored document the lookup found.
/// An unchanged object (same ETag and size as recorded) costs nothing; a document with no
/// recorded ETag is fetched and compared by content hash after the download.
pub fn decide(mode: SyncMode, existing: Option<&Existing>, listed: &ListedObject) -> Decision {
    let Some(existing) = existing else {
        return match mode {
            SyncMode::UpdateOnly => Decision::Skip { claim: None },
            SyncMode::NewOnly | SyncMode::Full => Decision::Fetch { replaces: None },
        };
    };
    let same_object = existing.addressed
        && existing.size == listed.size
        && existing.etag.is_some()
        && existing.etag.as_deref() == listed.etag.as_deref();
    match existing.status.as_str() {
        // An attempt at this very object is under way: a second would race it.
        "processing" if same_object => Decision::Skip { claim: Some(existing.id) },
        "done" if same_object && mode != SyncMode::Full => Decision::Skip { claim: Some(existing.id) },
        // A failed attempt is retried (the next success retires its row); a changed or
        // unverified one is fetched and replaces what is stored.
        _ => Decision::Fetch { replaces: Some(existing.id) },
    }
}

/// Whether a run whose listing completed may remove `stale` of the `prior` documents its
/// source claimed before it began: not more than `max_percent` of them unless confirmed.
pub fn removal_allowed(stale: i64, prior: i64, max_percent: i32, confirmed: bool) -> bool {
    confirmed || stale == 0 || stale * 100 <= i64::from(max_percent) * prior.max(1)
}

/// When a source runs by itself: AWS's `rate(…)` and `cron(…)` expressions, as EventBridge
/// reads them (UTC; cron has six fields, minutes to year, `?` allowed, weekdays 1 = SUN).
#[derive(Debug, Clone)]
pub enum Schedule {
    Every(time::Duration),
    Cron(Box<croner::Cron>),
}

/// The shortest interval a schedule may ask for: the sweep that starts runs is itself
/// scheduled every 15 minutes.
pub const MIN_SCHEDULE_INTERVAL: time::Duration = time::Duration::minutes(15);

impl Schedule {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(inner) = text.strip_prefix("rate(").and_then(|t| t.strip_suffix(')')) {
            let (count, unit) = inner.trim().split_once(' ').ok_or("rate(…) is `rate(<n> <unit>)`")?;
            let count: i64 = count.parse().map_err(|_| format!("{count:?} is not a whole number"))?;
            let unit_seconds = match unit.trim() {
                "minute" | "minutes" => 60,
                "hour" | "hours" => 3600,
                "day" | "days" => 86_400,
                other => return Err(format!("{other:?} is not minutes, hours or days")),
            };
            let every = time::Duration::seconds(count.saturating_mul(unit_seconds));
            if every < MIN_SCHEDULE_INTERVAL {
                return Err("a source runs at most every 15 minutes".to_owned());
            }
            return Ok(Self::Every(every));
        }
        if let Some(inner) = text.strip_prefix("cron(").and_then(|t| t.strip_suffix(')')) {
            if inner.split_whitespace().count() != 6 {
                return Err("cron(…) has six fields: minutes hours day-of-month month day-of-week year".to_owned());
            }
            // AWS's fields have no seconds; croner reads them as seconds 0.
            let parser = croner::parser::CronParser::builder()
                .seconds(croner::parser::Seconds::Required)
                .year(croner::parser::Year::Required)
                .alternative_weekdays(true)
                .build();
            let cron = parser.parse(&format!("0 {inner}")).map_err(|e| format!("not a cron expression: {e}"))?;
            let schedule = Self::Cron(Box::new(cron));
            let now = OffsetDateTime::now_utc();
            if let Some(first) = schedule.next_after(now)
                && let Some(second) = schedule.next_after(first)
                && second - first < MIN_SCHEDULE_INTERVAL
            {
                return Err("a source runs at most every 15 minutes".to_owned());
            }
            return Ok(schedule);
        }
        Err("a schedule is rate(<n> <unit>) or cron(<six fields>)".to_owned())
    }

    /// The first time after `after` the schedule names (`None`: never again).
    pub fn next_after(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        match self {
            Self::Every(every) => Some(after + *every),
            Self::Cron(cron) => {
                let start = chrono::DateTime::from_timestamp(after.unix_timestamp(), 0)?;
                let next = cron.find_next_occurrence(&start, false).ok()?;
                OffsetDateTime::from_unix_timestamp(next.timestamp()).ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_names_the_field_it_refuses() {
        let refusal = |config: serde_json::Value| S3Location::from_config(&config).unwrap_err().field;
        assert_eq!(refusal(json!({"prefix": "a/"})), "config.bucket");
        assert_eq!(refusal(json!({"bucket": "Bad_Bucket"})), "config.bucket");
        assert_eq!(refusal(json!({"bucket": "192.168.1.1"})), "config.bucket");
        assert_eq!(refusal(json!({"bucket": "docs", "region": "moon"})), "config.region");
        assert_eq!(refusal(json!({"bucket": "docs", "colour": "blue"})), "config.colour");
        let credential = S3Location::from_config(&json!({"bucket": "docs", "aws_secret_access_key": "x"})).unwrap_err();
        assert_eq!(credential.field, "config.aws_secret_access_key");
        assert!(credential.message.contains("a credential does not go in a source's configuration"));
        let ok = S3Location::from_config(&json!({"bucket": "team.docs-1", "prefix": "hr/", "region": "eu-west-1"}))
            .expect("valid");
        assert_eq!(ok.address("hr/a.pdf"), "s3://team.docs-1/hr/a.pdf");
        assert!(ok.holds("team.docs-1", "hr/x") && !ok.holds("team.docs-1", "it/x") && !ok.holds("other", "hr/x"));
    }

    #[test]
    fn role_arns_are_checked() {
        assert!(check_role_arn("arn:aws:iam::123456789012:role/sluice-reader").is_ok());
        assert!(check_role_arn("arn:aws:iam::123456789012:role/path/to/reader").is_ok());
        assert!(check_role_arn("arn:aws:iam::12345:role/x").is_err());
        assert!(check_role_arn("arn:aws:iam::123456789012:user/x").is_err());
        assert!(check_role_arn("arn:aws:s3:::bucket").is_err());
    }

    #[test]
    fn each_external_id_is_new_random_and_fits_sts() {
        let (a, b) = (new_external_id(), new_external_id());
        assert_ne!(a, b);
        // STS takes 2 to 1,224 characters of [\w+=,.@:/-].
        assert_eq!(a.len(), "sluice-".len() + 64);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'), "{a}");
    }

    #[test]
    fn a_role_in_the_deployment_s_own_account_is_refused() {
        let own = Some("123456789012");
        assert!(check_role_account("arn:aws:iam::123456789012:role/hr-reader", own).is_err());
        assert!(check_role_account("arn:aws:iam::210987654321:role/hr-reader", own).is_ok());
        assert!(check_role_account("arn:aws:iam::123456789012:role/hr-reader", None).is_ok());
    }

    #[test]
    fn a_key_is_an_address_and_its_basename_a_label() {
        assert_eq!(listed_key("folder/"), ListedKey::NotAFile);
        assert_eq!(listed_key("a/.."), ListedKey::NotAFile);
        assert_eq!(listed_key("../../x.md"), ListedKey::File { label: "x.md".into() });
        assert_eq!(listed_key("%2e%2e/y.md"), ListedKey::File { label: "y.md".into() });
        assert_eq!(listed_key("a/.hidden.md"), ListedKey::File { label: "hidden.md".into() });
        let long = format!("{}.md", "k".repeat(1020));
        let ListedKey::File { label } = listed_key(&long) else { panic!("a file") };
        assert!(label.len() <= 120 && label.ends_with(".md"));
    }

    fn existing(status: &str, etag: &str, size: i64) -> Existing {
        Existing {
            id: Uuid::nil(),
            status: status.into(),
            etag: Some(etag.into()),
            size,
            content_hash: None,
            addressed: true,
        }
    }

    #[test]
    fn decisions_follow_the_mode_and_the_change_signal() {
        let listed = ListedObject { key: "a.md".into(), size: 5, etag: Some("e1".into()) };
        let nil = Some(Uuid::nil());
        assert_eq!(decide(SyncMode::NewOnly, None, &listed), Decision::Fetch { replaces: None });
        assert_eq!(decide(SyncMode::UpdateOnly, None, &listed), Decision::Skip { claim: None });
        let same = existing("done", "e1", 5);
        assert_eq!(decide(SyncMode::NewOnly, Some(&same), &listed), Decision::Skip { claim: nil });
        assert_eq!(decide(SyncMode::UpdateOnly, Some(&same), &listed), Decision::Skip { claim: nil });
        assert_eq!(decide(SyncMode::Full, Some(&same), &listed), Decision::Fetch { replaces: nil });
        let changed = existing("done", "e2", 5);
        assert_eq!(decide(SyncMode::UpdateOnly, Some(&changed), &listed), Decision::Fetch { replaces: nil });
        let resized = existing("done", "e1", 6);
        assert_eq!(decide(SyncMode::NewOnly, Some(&resized), &listed), Decision::Fetch { replaces: nil });
        let failed = existing("error", "e1", 5);
        assert_eq!(decide(SyncMode::NewOnly, Some(&failed), &listed), Decision::Fetch { replaces: nil });
        let running = existing("processing", "e1", 5);
        assert_eq!(decide(SyncMode::Full, Some(&running), &listed), Decision::Skip { claim: nil });
        // An upload of the same name has no ETag: fetched, compared by hash, replaced or kept.
        let upload = Existing { etag: None, addressed: false, ..same };
        assert_eq!(decide(SyncMode::NewOnly, Some(&upload), &listed), Decision::Fetch { replaces: nil });
    }

    #[test]
    fn removals_past_the_threshold_wait_for_confirmation() {
        assert!(removal_allowed(0, 0, 50, false));
        assert!(removal_allowed(5, 10, 50, false));
        assert!(!removal_allowed(6, 10, 50, false));
        assert!(removal_allowed(6, 10, 50, true));
        assert!(!removal_allowed(1, 10, 0, false));
        assert!(removal_allowed(10, 10, 100, false));
    }

    #[test]
    fn schedules_are_aws_expressions() {
        let at = OffsetDateTime::from_unix_timestamp(1_780_000_000).expect("time");
        let Schedule::Every(every) = Schedule::parse("rate(2 hours)").expect("rate") else { panic!("rate") };
        assert_eq!(every, time::Duration::hours(2));
        assert!(Schedule::parse("rate(5 minutes)").is_err());
        assert!(Schedule::parse("rate(1 fortnight)").is_err());
        assert!(Schedule::parse("every day").is_err());
        assert!(Schedule::parse("cron(* * * * ? *)").is_err(), "every minute is too often");
        // 03:00 UTC on Mondays (2 = MON in AWS's numbering).
        let weekly = Schedule::parse("cron(0 3 ? * 2 *)").expect("cron");
        let next = weekly.next_after(at).expect("next");
        assert_eq!((next.hour(), next.minute(), next.weekday()), (3, 0, time::Weekday::Monday));
        let named = Schedule::parse("cron(30 4 ? * MON-FRI *)").expect("names");
        assert!(named.next_after(at).expect("next").weekday() != time::Weekday::Sunday);
        assert!(Schedule::parse("cron(0 3 * *)").is_err());
    }
}
