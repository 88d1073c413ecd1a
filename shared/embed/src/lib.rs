//! Talking to OpenAI-compatible embedding endpoints: whose key pays (`credentials`), which
//! models an OpenRouter endpoint serves (asked when a base names one), and the address
//! rules that keep a caller-supplied URL from turning the service into a proxy for the
//! deployment's network.

pub mod client;
pub mod credentials;
pub mod in_process;

use std::sync::OnceLock;
use std::time::Duration;

/// How long asking an endpoint for its models may take before it counts as unasked.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to any endpoint may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTPS client: rustls over ring (the one TLS stack the AWS SDK already brings),
/// the platform's certificate store, no redirects (an allowed address cannot bounce a
/// request to one that is not).
pub fn http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            install_tls_provider();
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
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
/// its subdomains (the regional `eu.openrouter.ai`), plus plain-HTTP loopback where the
/// deployment allows it (`SLUICE_ALLOW_LOOPBACK_ENDPOINTS=true`, the local stack only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointPolicy {
    pub allow_loopback: bool,
}

impl EndpointPolicy {
    pub fn from_env() -> Self {
        Self { allow_loopback: std::env::var("SLUICE_ALLOW_LOOPBACK_ENDPOINTS").is_ok_and(|v| v == "true" || v == "1") }
    }

    /// Accepts an OpenRouter base URL, or says why not.
    pub fn check_openrouter(&self, base_url: &str) -> Result<(), String> {
        let url = reqwest::Url::parse(base_url).map_err(|_| format!("{base_url:?} is not a URL"))?;
        if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
            return Err("an endpoint carries no credentials, query or fragment".to_owned());
        }
        let host = url.host_str().unwrap_or_default();
        let openrouter = url.scheme() == "https"
            && url.port().is_none()
            && (host == "openrouter.ai" || host.ends_with(".openrouter.ai"));
        let loopback = self.allow_loopback && url.scheme() == "http" && host == "127.0.0.1";
        if openrouter || loopback {
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
    match answer.json::<ModelList>().await {
        Ok(list) => Listing::Served(list.data.into_iter().map(|m| m.id).collect()),
        Err(error) => {
            tracing::warn!(error = %error, "the endpoint's model listing was unreadable");
            Listing::Unconfirmed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_openrouter_addresses_pass_and_loopback_only_when_allowed() {
        let strict = EndpointPolicy::default();
        let local = EndpointPolicy { allow_loopback: true };
        for ok in ["https://openrouter.ai/api/v1", "https://eu.openrouter.ai/api/v1"] {
            assert_eq!(strict.check_openrouter(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://openrouter.ai/api/v1",
            "https://openrouter.ai.evil.example/api/v1",
            "https://evilopenrouter.ai/api/v1",
            "https://openrouter.ai:8443/api/v1",
            "https://user:pw@openrouter.ai/api/v1",
            "https://169.254.169.254/latest",
            "http://127.0.0.1:9000/v1",
            "not a url",
        ] {
            assert!(strict.check_openrouter(bad).is_err(), "{bad}");
        }
        assert_eq!(local.check_openrouter("http://127.0.0.1:9000/v1"), Ok(()));
        assert!(local.check_openrouter("http://10.0.0.1:9000/v1").is_err());
    }
}
