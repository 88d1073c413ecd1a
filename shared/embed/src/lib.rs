//! Talking to OpenAI-compatible embedding endpoints: whose key pays (`credentials`), which
//! models an OpenRouter endpoint serves (asked when a base names one), and the address
//! rules that keep a caller-supplied URL from turning the service into a proxy for the
//! deployment's network.

pub mod client;
pub mod credentials;
pub mod in_process;
pub mod network;
pub mod target;
pub mod tokens;

use std::sync::OnceLock;
use std::time::Duration;

/// How long asking an endpoint for its models may take before it counts as unasked.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(5);
/// The most a model listing's answer may be.
pub const LISTING_BODY_CAP: usize = 1 << 20;
/// How long connecting to any endpoint may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTPS client: rustls over ring (the one TLS stack the AWS SDK already brings),
/// the platform's certificate store, no redirects (an allowed address cannot bounce a
/// request to one that is not), no proxy (which would resolve names where we cannot see),
/// and names resolved only to addresses the network policy permits.
pub fn http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            install_tls_provider();
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .dns_resolver(network::GuardedResolver(network::NetworkPolicy::current()))
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .unwrap_or_else(|error| panic!("the HTTPS client cannot be built: {error}"))
        })
        .clone()
}

/// Makes ring the process's TLS provider, which every `reqwest` client in a process that
/// links this crate needs before it is built. Installing twice is harmless.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Which addresses a base may name as its OpenRouter endpoint: `https://openrouter.ai` and
/// its subdomains (the regional `eu.openrouter.ai`), plus plain HTTP to a literal address
/// in a network the deployment allow-lists (the local stack's stand-ins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPolicy {
    pub networks: network::NetworkPolicy,
}

impl EndpointPolicy {
    /// The policy of `SLUICE_ALLOWED_PRIVATE_NETWORKS`; a bad value is refused.
    pub fn from_env() -> Result<Self, String> {
        Ok(Self { networks: network::NetworkPolicy::from_env()? })
    }

    /// Accepts an OpenRouter base URL, or says why not.
    pub fn check_openrouter(&self, base_url: &str) -> Result<(), String> {
        let url = network::plain_url(base_url).map_err(|why| format!("{base_url:?}: {why}"))?;
        let host = url.host_str().unwrap_or_default();
        let openrouter = url.scheme() == "https"
            && url.port().is_none()
            && (host == "openrouter.ai" || host.ends_with(".openrouter.ai"));
        let allow_listed =
            url.scheme() == "http" && network::literal_ip(&url).is_some_and(|ip| self.networks.allow_lists(ip));
        if openrouter || allow_listed {
            Ok(())
        } else {
            Err(format!("{base_url:?} is not an OpenRouter address (https://openrouter.ai or a subdomain of it)"))
        }
    }
}

/// What an endpoint said about the models it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    /// The model ids the endpoint lists.
    Served(Vec<String>),
    /// It could not be asked, or answered nothing readable: not a refusal.
    Unconfirmed,
}

#[derive(Debug, serde::Deserialize)]
struct ModelList {
    data: Vec<ListedModel>,
}

#[derive(Debug, serde::Deserialize)]
struct ListedModel {
    id: String,
}

/// Asks an OpenRouter endpoint which embedding models it serves
/// (`GET {base_url}/embeddings/models`).
pub async fn openrouter_models(client: &reqwest::Client, base_url: &str) -> Listing {
    let url = format!("{}/embeddings/models", base_url.trim_end_matches('/'));
    if let Err(why) = network::NetworkPolicy::current().check_url(&url) {
        tracing::warn!(why, "the endpoint's model listing was not asked");
        return Listing::Unconfirmed;
    }
    let answer = match client.get(&url).timeout(LISTING_TIMEOUT).send().await {
        Ok(answer) if answer.status().is_success() => answer,
        Ok(answer) => {
            tracing::warn!(status = answer.status().as_u16(), "the endpoint's model listing was refused");
            return Listing::Unconfirmed;
        }
        Err(error) => {
            tracing::warn!(error = %error, "the endpoint's model listing could not be asked");
            return Listing::Unconfirmed;
        }
    };
    let parsed = match read_capped(answer, LISTING_BODY_CAP).await {
        Some(body) => serde_json::from_slice::<ModelList>(&body).ok(),
        None => None,
    };
    match parsed {
        Some(list) => Listing::Served(list.data.into_iter().map(|m| m.id).collect()),
        None => {
            tracing::warn!("the endpoint's model listing was unreadable or too large");
            Listing::Unconfirmed
        }
    }
}

/// An answer's body if it is at most `cap` bytes; read as it arrives, so a service that
/// streams without end costs at most `cap`.
pub async fn read_capped(mut answer: reqwest::Response, cap: usize) -> Option<Vec<u8>> {
    if answer.content_length().is_some_and(|length| length > cap as u64) {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.ok()? {
        if body.len() + chunk.len() > cap {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_openrouter_addresses_pass_and_plain_http_only_to_an_allow_listed_address() {
        let strict = EndpointPolicy::default();
        let local = EndpointPolicy { networks: network::NetworkPolicy::parse("127.0.0.0/8").expect("policy") };
        for ok in ["https://openrouter.ai/api/v1", "https://eu.openrouter.ai/api/v1"] {
            assert_eq!(strict.check_openrouter(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://openrouter.ai/api/v1",
            "https://openrouter.ai.evil.example/api/v1",
            "https://evilopenrouter.ai/api/v1",
            "https://openrouter.ai:8443/api/v1",
            "https://user:pw@openrouter.ai/api/v1",
            "https://openrouter.ai/api/v1?",
            "https://169.254.169.254/latest",
            "http://127.0.0.1:9000/v1",
            "not a url",
        ] {
            assert!(strict.check_openrouter(bad).is_err(), "{bad}");
        }
        assert_eq!(local.check_openrouter("http://127.0.0.1:9000/v1"), Ok(()));
        assert!(local.check_openrouter("http://10.0.0.1:9000/v1").is_err());
        assert!(local.check_openrouter("http://localhost:9000/v1").is_err());
    }
}
